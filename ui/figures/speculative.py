"""Figures of speculative decoding: which of the draft's tokens the target accepted, round by round, and what each
draft length k costs in target passes against plain greedy decoding.

Plain functions from numbers and labels to a plotly Figure, testable without a server; Okabe-Ito colours.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ui.figures.axes import OKABE_ITO, look

# what a cell of the rounds grid holds: its code and colour (accepted green, the target's own token blue, a
# proposal thrown away grey); cells past a round's end stay empty
CELL_KINDS = {"accepted": (0, OKABE_ITO[2]), "target": (1, OKABE_ITO[0]), "discarded": (2, "#d0d0d0")}


def round_cells(proposed: list[list[str]], accepted: list[int], target: list[str]) -> tuple[np.ndarray, list[list[str]]]:
    """(rounds, k + 1) codes of CELL_KINDS (NaN = empty) and the label of each cell.

    In a round, proposals 0 .. accepted-1 were kept; at place `accepted` the target put its own token (where it
    differs from the proposal there, the label says both); the proposals after it were never looked at.
    """
    width = max(len(p) for p in proposed) + 1
    codes = np.full((len(proposed), width), np.nan)  # (rounds, k + 1)
    labels = [[""] * width for _ in proposed]
    for row, (guesses, kept, own) in enumerate(zip(proposed, accepted, target)):
        for place, guess in enumerate(guesses):
            codes[row, place] = CELL_KINDS["accepted" if place < kept else "discarded"][0]
            labels[row][place] = guess
        codes[row, kept] = CELL_KINDS["target"][0]
        labels[row][kept] = own if kept == len(guesses) else f"{own} (not {guesses[kept]})"
    return codes, labels


def accepted_rounds(proposed: list[list[str]], accepted: list[int], target: list[str], title: str = "") -> go.Figure:
    """One row per round: the draft's proposals, green where the target accepted them, then the target's own token
    in blue; grey proposals came after the first disagreement and were thrown away."""
    codes, labels = round_cells(proposed, accepted, target)
    n = len(CELL_KINDS)
    scale = [[edge, colour] for code, colour in sorted(CELL_KINDS.values()) for edge in (code / n, (code + 1) / n)]
    shape = look(title, 120 + 34 * len(proposed), "place in the round (the draft's proposals, then the target's token)",
                 "round")
    shape["yaxis"].update(autorange="reversed", dtick=1)
    shape["xaxis"].update(dtick=1)
    fig = go.Figure(go.Heatmap(z=codes, x=list(range(1, codes.shape[1] + 1)), y=list(range(1, len(proposed) + 1)),
                               zmin=-0.5, zmax=n - 0.5, colorscale=scale, showscale=False, xgap=2, ygap=2,
                               text=labels, texttemplate="%{text}", hovertemplate="round %{y}, place %{x}: "
                               "%{text}<extra></extra>"), shape)
    for kind, (_, colour) in CELL_KINDS.items():  # a legend for the three colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", marker=dict(size=14, color=colour, symbol="square"),
                                 name={"accepted": "proposed and accepted", "target": "the target's own token",
                                       "discarded": "proposed, thrown away"}[kind]))
    return fig


def acceptance_by_k(ks: list[int], acceptance: list[float], target_forwards: list[int], greedy_forwards: int,
                    title: str = "") -> go.Figure:
    """Target passes per k (bars) against plain greedy's one per token (dashed), and the acceptance rate (line,
    right axis): a longer draft saves passes while it is accepted, and wastes the draft's work when it is not."""
    shape = look(title, 420, "k (tokens the draft proposes a round)", "target forward passes")
    shape.update(yaxis2=dict(title=dict(text="acceptance rate"), overlaying="y", side="right", range=[0, 1.05],
                             tickvals=[0, 0.25, 0.5, 0.75, 1], tickformat=".0%", showgrid=False))  # no tick past 100%
    shape["xaxis"].update(dtick=1)
    fig = go.Figure([
        go.Bar(x=ks, y=target_forwards, name="target passes, speculative", marker_color=OKABE_ITO[0],
               text=[str(n) for n in target_forwards], textposition="outside"),
        go.Scatter(x=ks, y=acceptance, name="acceptance rate", yaxis="y2", mode="lines+markers",
                   line=dict(color=OKABE_ITO[1], width=3)),
    ], shape)
    fig.add_hline(y=greedy_forwards, line_dash="dash", line_color=OKABE_ITO[5],
                  annotation_text=f"plain greedy: {greedy_forwards} passes", annotation_position="top left")
    return fig
