"""Figure builders for the lecture's opening and closing chapters: before attention, what a model costs,
how models grow. Numbers in, plotly Figure out, as in the other figure modules.

Lines and bars use the Okabe-Ito palette (distinguishable with every common colour-vision deficiency);
the alignment matrix uses the same Viridis scale as every other attention weight.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ui.figures.axes import OKABE_ITO, grid_heatmap, look

BOTTLENECK, ATTENTION, FIT, MEASURED = OKABE_ITO[5], OKABE_ITO[0], "#555555", OKABE_ITO[2]
PART_COLOURS = dict(zip(("embedding", "attention", "ffn", "norms", "head"), OKABE_ITO))
GB = 1e9


# --- before attention ------------------------------------------------------------------------


def accuracy_by_length(curves: dict[str, dict[int, float]], title: str = "") -> go.Figure:
    """Share of letters copied right against the source's length, one line per model (bottleneck dashed)."""
    fig = go.Figure(layout=look(title, 420, "letters in the source", "letters copied right"))
    for i, (label, accuracy) in enumerate(curves.items()):
        lengths = sorted(accuracy)
        colour, dash = (BOTTLENECK, "dash") if "vector" in label else (ATTENTION, "solid")
        fig.add_trace(go.Scatter(x=lengths, y=[accuracy[n] for n in lengths], mode="lines+markers", name=label,
                                 line=dict(color=colour, width=3, dash=dash),
                                 marker=dict(size=8, symbol=("square", "circle")[i % 2]),
                                 hovertemplate=f"{label}<br>%{{x}} letters: %{{y:.1%}} right<extra></extra>"))
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%")
    return fig


def alignment(weights: np.ndarray, source: list[str], output: list[str], title: str = "") -> go.Figure:
    """(T_out, S) additive-attention weights: which source letter each output letter read."""
    return grid_heatmap(weights, [f"{i}:{c}" for i, c in enumerate(source)],
                        [f"{i}:{c}" for i, c in enumerate(output)], title, "source letter (encoder state)",
                        "output letter (decoder step)", zmin=0.0, zmax=1.0, height=max(360, 28 * len(output) + 140))


# --- what a model costs ----------------------------------------------------------------------


def parameter_shares(rows: list[dict], title: str = "") -> go.Figure:
    """One horizontal bar per model, split by part as a share of its parameters; the total at the end.

    rows: {"model": name, "total": count, part: count for each part}.
    """
    models = [row["model"] for row in rows]
    fig = go.Figure(layout=look(title, 140 + 42 * len(rows), "share of the parameters", ""))
    for part, colour in PART_COLOURS.items():
        shares = [row.get(part, 0) / row["total"] for row in rows]
        fig.add_trace(go.Bar(y=models, x=shares, name=part, orientation="h", marker_color=colour,
                             customdata=[row.get(part, 0) for row in rows],
                             hovertemplate=f"%{{y}}<br>{part}: %{{x:.1%}} (%{{customdata:,}})<extra></extra>"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(range=[0, 1], tickformat=".0%")
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


def memory_bars(training: dict[str, float], generation: dict[str, float], title: str = "") -> go.Figure:
    """Two stacked bars in GB: what training holds (weights, gradients, optimiser, activations) and what
    generation holds (weights, KV cache)."""
    fig = go.Figure(layout=look(title, 400, "", "memory (GB)"))
    parts = list(dict.fromkeys([*training, *generation]))
    for i, part in enumerate(parts):
        values = [training.get(part, 0) / GB, generation.get(part, 0) / GB]
        fig.add_trace(go.Bar(x=["training", "generation"], y=values, name=part.replace("_", " "),
                             marker_color=OKABE_ITO[i % len(OKABE_ITO)],
                             hovertemplate=f"{part.replace('_', ' ')}: %{{y:,.3g}} GB<extra>%{{x}}</extra>"))
    fig.update_layout(barmode="stack")
    return fig


# --- how models grow -------------------------------------------------------------------------


def loss_against_compute(budgets: np.ndarray, losses: np.ndarray, runs: list[dict], marked: dict | None = None,
                         title: str = "") -> go.Figure:
    """The fitted loss of compute-optimal models against training FLOPs (log x), published runs as points
    at the fit's loss for their own size and tokens, and the budget asked about as a star."""
    fig = go.Figure(layout=look(title, 460, "training compute (FLOPs)", "fitted loss (nats per token)"))
    fig.add_trace(go.Scatter(x=budgets, y=losses, mode="lines", name="compute-optimal models (the fit)",
                             line=dict(color=FIT, width=3),
                             hovertemplate="%{x:.2e} FLOPs: loss %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[r["flops"] for r in runs], y=[r["loss"] for r in runs], mode="markers+text",
                             name="published runs", text=[r["name"] for r in runs], textposition="top left",
                             marker=dict(color=ATTENTION, size=12, symbol="circle"),
                             hovertemplate="%{text}: %{x:.2e} FLOPs, fitted loss %{y:.3f}<extra></extra>"))
    if marked:
        fig.add_trace(go.Scatter(x=[marked["flops"]], y=[marked["loss"]], mode="markers", name="your budget",
                                 marker=dict(color=BOTTLENECK, size=18, symbol="star"),
                                 hovertemplate="your budget: %{x:.2e} FLOPs, loss %{y:.3f}<extra></extra>"))
    fig.update_xaxes(type="log", exponentformat="power")
    return fig


def loss_against_size(runs: list[dict], optimal_params: float | None = None, title: str = "") -> go.Figure:
    """Measured held-out loss against parameters (log x) for models that spent one FLOP budget; the rule of
    thumb's compute-optimal size for that budget as a dashed line."""
    fig = go.Figure(layout=look(title, 420, "parameters", "held-out loss (bits per character)"))
    fig.add_trace(go.Scatter(x=[r["params"] for r in runs], y=[r["bits_per_char"] for r in runs],
                             mode="lines+markers+text", name="measured here", text=[f"d {r['d_model']}" for r in runs],
                             textposition="top center", line=dict(color=MEASURED, width=3), marker=dict(size=11),
                             customdata=[[r["tokens"], r["steps"]] for r in runs],
                             hovertemplate="%{x:,} parameters<br>%{customdata[0]:,} tokens in %{customdata[1]:,} "
                                           "steps<br>%{y:.3f} bits per character<extra></extra>"))
    if optimal_params:
        fig.add_vline(x=optimal_params, line_dash="dash", line_color=FIT)
        # an annotation on a log axis is placed in log10 units (add_vline's own label would stretch the axis)
        fig.add_annotation(x=math.log10(optimal_params), y=1, yref="paper", showarrow=False, yanchor="bottom",
                           text=f"20 tokens per parameter: {optimal_params:,.0f}", font=dict(color=FIT))
    fig.update_xaxes(type="log")
    return fig
