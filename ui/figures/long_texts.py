"""Figures of a long text's summaries: per-head strips along the text, where the weight goes by distance, the head
atlas, and one head's exact weights in a window. Plain functions from numpy to a plotly Figure."""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ui.figures.base import FONT, SEQUENTIAL

MAX_BINS = 600  # a strip is averaged into at most this many stretches of text: a browser draws 600, not 32,000
ROLE_COLOURS = {"previous-token": "#0072b2", "sink": "#d55e00", "broad": "#bbbbbb", "local": "#009e73",
                "distant": "#cc79a7", "mixed": "#f0e442"}  # Okabe-Ito: colour-blind safe


def binned(values: np.ndarray, bins: int = MAX_BINS) -> tuple[np.ndarray, np.ndarray]:
    """(rows, T) averaged over consecutive stretches of tokens: (rows, n) and each stretch's first token (n,)."""
    T = values.shape[-1]
    size = max(1, math.ceil(T / bins))
    starts = np.arange(0, T, size)
    sums = np.add.reduceat(values, starts, axis=-1)
    counts = np.diff(np.append(starts, T))
    return sums / counts, starts


def head_strips(values: np.ndarray, row_labels: list[str], what: str, trained_length: int | None = None,
                title: str = "") -> go.Figure:
    """One row per head (rows, T): a figure along the text, each cell the mean over a stretch of tokens; a line
    marks the longest text the model trained on."""
    means, starts = binned(np.asarray(values, dtype=np.float64))
    size = int(starts[1] - starts[0]) if len(starts) > 1 else 1
    fig = go.Figure(go.Heatmap(
        z=means, x=starts, y=row_labels, colorscale=SEQUENTIAL, colorbar=dict(title=dict(text=what, side="right")),
        hovertemplate=f"%{{y}}<br>tokens %{{x}}–%{{x}}+{size - 1}<br>{what}: %{{z:.3g}}<extra></extra>"),
        dict(title=dict(text=title), height=max(260, 22 * len(row_labels) + 120), font=FONT,
             margin=dict(l=10, r=10, t=50 if title else 10, b=10),
             xaxis=dict(title=dict(text=f"token position (each cell: {size} tokens)")),
             yaxis=dict(autorange="reversed", title=dict(text="layer.head"))))
    if trained_length is not None and trained_length < values.shape[-1]:
        fig.add_vline(x=trained_length, line=dict(color="white", dash="dash", width=2),
                      annotation=dict(text="trained length", font=dict(color="white")))
    return fig


def distance_profile(mass: np.ndarray, edges: np.ndarray, row_labels: list[str], random_mass: np.ndarray | None,
                     title: str = "") -> go.Figure:
    """Weight by distance, log-spaced buckets (rows, buckets), a line per head; random-init weights as a band."""
    centres = [f"{int(lo)}" if hi - lo == 1 else f"{int(lo)}–{int(hi) - 1}" for lo, hi in zip(edges[:-1], edges[1:])]
    fig = go.Figure(layout=dict(title=dict(text=title), height=420, font=FONT, margin=dict(l=10, r=10, t=50, b=10),
                                xaxis=dict(title=dict(text="distance from the query (tokens)")),
                                yaxis=dict(title=dict(text="mean weight at that distance"), rangemode="tozero"),
                                legend=dict(font=dict(size=12))))
    if random_mass is not None:
        fig.add_trace(go.Scatter(x=centres, y=random_mass.max(0), mode="lines", line=dict(width=0), showlegend=False,
                                 hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=centres, y=random_mass.min(0), mode="lines", line=dict(width=0), fill="tonexty",
                                 fillcolor="rgba(150,150,150,0.35)", name="random-init weights (all heads)"))
    for label, row in zip(row_labels, mass):
        fig.add_trace(go.Scatter(x=centres, y=row, mode="lines+markers", name=label,
                                 hovertemplate=f"{label}<br>distance %{{x}}<br>weight %{{y:.3f}}<extra></extra>"))
    return fig


def head_atlas(roles: list[list[str]], layer_labels: list[str], scores: dict[str, np.ndarray],
               title: str = "") -> go.Figure:
    """Layers x heads, each cell coloured by its role; the hover gives every score that decided it."""
    names = list(ROLE_COLOURS)
    codes = np.array([[names.index(role) for role in layer] for layer in roles], dtype=float)  # (layers, heads)
    scale = [[i / len(names) + edge / len(names), colour] for i, colour in enumerate(ROLE_COLOURS.values())
             for edge in (0.0, 1.0)]
    text = [[f"{role}<br>" + "<br>".join(f"{name}: {scores[name][l][h]:.2f}" for name in scores)
             for h, role in enumerate(layer)] for l, layer in enumerate(roles)]
    labels = [dict(x=f"head {h}", y=layer_labels[l], text=role, showarrow=False, font=dict(size=14, color="#111111"))
              for l, layer in enumerate(roles) for h, role in enumerate(layer)]  # in the layout at once: one validation
    return go.Figure(go.Heatmap(
        z=codes + 0.5, x=[f"head {h}" for h in range(codes.shape[1])], y=layer_labels, zmin=0, zmax=len(names),
        colorscale=scale, text=text, hovertemplate="%{y}, %{x}<br>%{text}<extra></extra>", showscale=False,
        xgap=3, ygap=3),
        dict(title=dict(text=title), height=max(220, 46 * len(layer_labels) + 110), font=FONT, annotations=labels,
             margin=dict(l=10, r=10, t=50 if title else 10, b=10), yaxis=dict(autorange="reversed")))


def window_weights(weights: np.ndarray, start: int, labels: list[str], title: str = "") -> go.Figure:
    """One head's exact weights for the queries of a window (R, T) against the keys of the same window; how much
    each query gives to keys outside it is in the hover."""
    R = weights.shape[0]
    weights = np.asarray(weights, dtype=np.float32)  # plotly packs float32 as it is; float64 takes it 20x longer
    inside = weights[:, start:start + R]
    outside = weights.sum(-1) - inside.sum(-1)
    shown = [f"{start + i}:{label}" for i, label in enumerate(labels)]
    beside = np.repeat(outside[:, None], R, axis=1)  # (R, R) numbers, sent packed: strings would be 16k of them
    return go.Figure(go.Heatmap(
        z=inside, x=shown, y=shown, colorscale=SEQUENTIAL, zmin=0, customdata=beside,
        hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.4f}<br>outside this window: %{customdata:.3f}"
                      "<extra></extra>"),
        dict(title=dict(text=title), height=560, font=FONT, margin=dict(l=10, r=10, t=50 if title else 10, b=10),
             xaxis=dict(title=dict(text="key"), showticklabels=R <= 64),
             yaxis=dict(title=dict(text="query"), autorange="reversed", showticklabels=R <= 64)))
