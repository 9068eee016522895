"""Figure builders for indexer top-k attention (DeepSeek-V3.2, GLM-5): numpy in, plotly Figure out.

One query's dense weights beside the keys its indexer keeps, and the weight mass kept and the output's error as k
shrinks. Okabe-Ito colours, as ui/figures/axes.py.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui.figures.axes import OKABE_ITO, layout

KEPT, DROPPED = OKABE_ITO[0], "#BBBBBB"


def dense_beside_chosen(dense: np.ndarray, sparse: np.ndarray, scores: np.ndarray, chosen: np.ndarray,
                        labels: list[str], title: str) -> go.Figure:
    """Top: a query's dense weights per key (one head, (n,)), kept keys coloured, dropped ones grey, and its weights
    with the indexer (n,) as markers; bottom: the indexer's score of each key (n,)."""
    keys = [f"{i}: {label}" for i, label in enumerate(labels)]  # unique even where a token repeats
    colours = [KEPT if kept else DROPPED for kept in chosen]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4],
                        subplot_titles=("softmax weight: dense (bars) and with the indexer (diamonds)",
                                        "the indexer's score"))
    fig.add_trace(go.Bar(x=keys, y=dense, marker_color=colours, name="dense weight (kept: blue, dropped: grey)",
                         hovertemplate="key %{x}<br>dense weight %{y:.3f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=keys, y=sparse, mode="markers", marker=dict(symbol="diamond", size=11,
                                                                         color=OKABE_ITO[1]),
                             name="weight with the indexer", hovertemplate="key %{x}<br>sparse weight %{y:.3f}"
                                                                          "<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=keys, y=scores, marker_color=colours, name="indexer score", showlegend=False,
                         hovertemplate="key %{x}<br>score %{y:.3f}<extra></extra>"), row=2, col=1)
    fig = layout(fig, title, 520, "", "")
    fig.update_yaxes(title_text="weight", row=1, col=1)
    fig.update_yaxes(title_text="score", row=2, col=1)
    return fig


def kept_as_k_shrinks(ks: list[int], kept: dict[str, dict[str, list[float]]], chosen_k: int) -> go.Figure:
    """The dense weight mass the kept keys hold (solid, left) and the output's relative error (dotted, right)
    against k, one colour per way of choosing the keys."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for i, (name, lines) in enumerate(kept.items()):
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        fig.add_trace(go.Scatter(x=ks, y=lines["mass"], mode="lines+markers", name=f"{name}: mass kept",
                                 line=dict(color=colour, width=3),
                                 hovertemplate=f"{name}<br>k = %{{x}}: %{{y:.1%}} of the weight<extra></extra>"),
                      secondary_y=False)
        fig.add_trace(go.Scatter(x=ks, y=lines["error"], mode="lines", name=f"{name}: output error",
                                 line=dict(color=colour, width=2, dash="dot"),
                                 hovertemplate=f"{name}<br>k = %{{x}}: error %{{y:.3f}}<extra></extra>"),
                      secondary_y=True)
    fig.add_vline(x=chosen_k, line_dash="dash", annotation_text=f"k = {chosen_k}")
    fig = layout(fig, "what k keys keep of the dense attention", 440, "k (keys kept per query)", "")
    fig.update_yaxes(title_text="dense weight mass kept", range=[0, 1.05], tickformat=".0%", secondary_y=False)
    fig.update_yaxes(title_text="|z_k − z| / |z|", rangemode="tozero", secondary_y=True)
    return fig


def measured_mass_by_k(ks: list[int], curves: dict[str, list[float]], marked: int, title: str) -> go.Figure:
    """The share of the dense weights the k chosen keys hold (mean over queries, heads and layers) against k (log x),
    one line per way of choosing; a dashed line at the k a question asks about."""
    fig = go.Figure()
    for i, (name, mass) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(x=ks, y=mass, mode="lines+markers", name=name,
                                 line=dict(color=OKABE_ITO[i % len(OKABE_ITO)], width=3),
                                 hovertemplate=f"{name}<br>k = %{{x}}: %{{y:.1%}} of the weight<extra></extra>"))
    fig.add_vline(x=marked, line_dash="dash")
    # an annotation on a log axis is placed in log10 units: add_vline's own label at k would stretch it to 10^k
    fig.add_annotation(x=math.log10(marked), y=1, yref="paper", text=f" k = {marked}", showarrow=False,
                       xanchor="left", yanchor="top")
    fig = layout(fig, title, 380, "k (keys kept per query)", "dense weight the kept keys hold")
    fig.update_xaxes(type="log", range=[math.log10(min(ks)) - 0.05, math.log10(max(ks)) + 0.05])
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    return fig
