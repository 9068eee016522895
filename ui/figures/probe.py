"""Figure builders for the "Why it works" pages (scaling, permutation): numpy in, plotly Figure out.

Lines and bars use the Okabe-Ito palette, matrices Viridis (weights) and the blue-orange
diverging scale (differences), as on the other pages.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ui.figures.axes import OKABE_ITO, layout, look
from ui.figures.base import DIVERGING, FONT, SEQUENTIAL, subplot_grid

UNSCALED, SCALED, THEORY, LIVE = OKABE_ITO[5], OKABE_ITO[0], "#555555", OKABE_ITO[2]
LOG_FLOOR = 1e-18  # a difference of exactly 0 is drawn here on a log axis (and labelled "0")


# --- why divide by sqrt(d) ------------------------------------------------------------------


def _live_markers(fig: go.Figure, d_head: int, unscaled: list[float], scaled: list[float], what: str) -> None:
    """The live model's heads as markers at its own d_head: hollow = unscaled, filled = scaled."""
    heads = [f"head {h}" for h in range(len(scaled))]
    for values, name, symbol in ((unscaled, "live model, unscaled", "diamond-open"),
                                 (scaled, "live model, scaled (what it computes)", "diamond")):
        fig.add_trace(go.Scatter(x=[d_head] * len(values), y=values, mode="markers", name=name, text=heads,
                                 marker=dict(color=LIVE, size=13, symbol=symbol, line=dict(width=2, color=LIVE)),
                                 hovertemplate=f"%{{text}}, d_head = %{{x}}<br>{what} %{{y:.4g}}<extra>{name}</extra>"))


def score_variance(d_heads: np.ndarray, var_unscaled: np.ndarray, var_scaled: np.ndarray,
                   live: dict | None = None) -> go.Figure:
    """Variance of the scores against d_head (log-log): q . k follows the line y = d_head, q . k / sqrt(d) stays at 1.

    live: {"d_head", "var_unscaled", "var_scaled"} (lists over heads) draws the live model's heads as markers.
    """
    d = np.asarray(d_heads, dtype=float)
    fig = go.Figure([
        go.Scatter(x=d, y=d, mode="lines", name="theory: d_head", line=dict(color=THEORY, dash="dash", width=2),
                   hoverinfo="skip"),
        go.Scatter(x=d, y=np.ones_like(d), mode="lines", name="theory: 1", line=dict(color=THEORY, dash="dot", width=2),
                   hoverinfo="skip"),
        *_unscaled_and_scaled(d, var_unscaled, var_scaled, ("q · k (unscaled)", "q · k / √d_head (scaled)"),
                              "variance %{y:.4g}"),
    ], look("variance of the scores (log–log)", 420, "d_head", "variance of the scores"))
    if live:
        _live_markers(fig, live["d_head"], live["var_unscaled"], live["var_scaled"], "variance")
    fig.update_xaxes(type="log", tickvals=list(d_heads), ticktext=[str(int(v)) for v in d_heads])
    fig.update_yaxes(type="log", exponentformat="power")
    return fig


def _unscaled_and_scaled(d: np.ndarray, unscaled, scaled, names: tuple[str, str], value: str) -> list[go.Scatter]:
    """The two measured curves, unscaled (circles) and scaled by 1/√d_head (squares)."""
    return [go.Scatter(x=d, y=y, mode="lines+markers", name=name, line=dict(color=color, width=3),
                       marker=dict(size=9, symbol=symbol), hovertemplate=f"d_head = %{{x}}<br>{value}<extra>{kind}</extra>")
            for y, name, color, symbol, kind in ((unscaled, names[0], UNSCALED, "circle", "unscaled"),
                                                 (scaled, names[1], SCALED, "square", "scaled"))]


def score_entropy(d_heads: np.ndarray, entropy_unscaled: np.ndarray, entropy_scaled: np.ndarray,
                  max_entropy: float) -> go.Figure:
    """Mean entropy of a softmax row against d_head: unscaled it collapses towards 0 (one key takes all)."""
    d = np.asarray(d_heads, dtype=float)
    fig = go.Figure([
        go.Scatter(x=d, y=np.full_like(d, max_entropy), mode="lines", name=f"uniform: log T = {max_entropy:.3g}",
                   line=dict(color=THEORY, dash="dash", width=2), hoverinfo="skip"),
        *_unscaled_and_scaled(d, entropy_unscaled, entropy_scaled, ("softmax(q · k)", "softmax(q · k / √d_head)"),
                              "entropy %{y:.3f} nats"),
    ], look("entropy of a row of weights (0 = one key takes all)", 420, "d_head", "mean entropy (nats)"))
    fig.update_xaxes(type="log", tickvals=list(d_heads), ticktext=[str(int(v)) for v in d_heads])
    fig.update_yaxes(range=[0, max_entropy * 1.08])
    return fig


def softmax_rows(unscaled: np.ndarray, scaled: np.ndarray, d_head: int) -> go.Figure:
    """One query's weights over its keys, with and without the scale, side by side per key."""
    keys = [f"key {j}" for j in range(len(unscaled))]
    fig = go.Figure([
        go.Bar(x=keys, y=unscaled, name=f"softmax(q · k), max {float(np.max(unscaled)):.3f}", marker_color=UNSCALED,
               hovertemplate="%{x}: weight %{y:.4f}<extra>unscaled</extra>"),
        go.Bar(x=keys, y=scaled, name=f"softmax(q · k / √{d_head}), max {float(np.max(scaled)):.3f}",
               marker_color=SCALED, marker_pattern_shape="/",
               hovertemplate="%{x}: weight %{y:.4f}<extra>scaled</extra>"),
    ])
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 1])
    return layout(fig, f"one query over {len(unscaled)} random keys, d_head = {d_head}", 360, "key", "softmax weight")


def live_entropy(entropy_unscaled: list[float], entropy_scaled: list[float], n_keys: int, d_head: int) -> go.Figure:
    """Per head of the live model: the entropy of its rows as computed (scaled) and as it would be unscaled."""
    heads = [f"head {h}" for h in range(len(entropy_scaled))]
    fig = go.Figure([
        go.Bar(x=heads, y=entropy_unscaled, name="softmax(q · k)", marker_color=UNSCALED,
               hovertemplate="%{x}: %{y:.3f} nats<extra>unscaled</extra>"),
        go.Bar(x=heads, y=entropy_scaled, name=f"softmax(q · k / √{d_head}) (what it computes)", marker_color=SCALED,
               marker_pattern_shape="/", hovertemplate="%{x}: %{y:.3f} nats<extra>scaled</extra>"),
    ])
    top = math.log(n_keys) if n_keys > 1 else 1.0
    fig.add_hline(y=top, line_dash="dash", line_color=THEORY, annotation_text=f"uniform: log T = {top:.3g}",
                  annotation_position="top left")
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, top * 1.15])
    return layout(fig, f"the live model: entropy of a row of {n_keys} keys, per head", 380, "query head",
                  "mean entropy (nats)")


# --- why positions -------------------------------------------------------------------------


def _log_label(value: float) -> str:
    return "0" if value == 0 else f"{value:.1e}"


def equivariance_bars(labels: list[str], outputs: np.ndarray, patterns: np.ndarray, tolerance: float | None = None,
                      title: str = "") -> go.Figure:
    """Max |difference| after un-shuffling, one pair of bars per model (log scale; an exact 0 is drawn at the floor)."""
    fig = go.Figure()
    for values, name, colour, shape in ((outputs, "outputs (logits)", OKABE_ITO[0], ""),
                                        (patterns, "attention weights", OKABE_ITO[1], "/")):
        values = np.asarray(values, dtype=float)
        fig.add_trace(go.Bar(x=labels, y=np.maximum(values, LOG_FLOOR), name=name, marker_color=colour,
                             marker_pattern_shape=shape, text=[_log_label(v) for v in values], textposition="outside",
                             customdata=values, hovertemplate="%{x}<br>max |difference| %{customdata:.3g}<extra>"
                                                              f"{name}</extra>"))
    if tolerance is not None:
        fig.add_trace(go.Scatter(x=labels, y=[tolerance] * len(labels), mode="lines", name=f"float rounding ({tolerance:.0e})",
                                 line=dict(color=THEORY, dash="dash", width=2), hoverinfo="skip"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(type="log", range=[math.log10(LOG_FLOOR), 3], exponentformat="power")
    return layout(fig, title or "max |difference| after un-shuffling (log scale)", 420, "model",
                  "max |difference|")


def unshuffled_patterns(original: np.ndarray, back: np.ndarray, labels: list[str], title: str = "") -> go.Figure:
    """(T, T) weights of the text, the shuffled text's weights with rows and columns put back, and their difference.

    Both weight panels share one Viridis scale from 0 to their largest weight; the difference has its own
    symmetric blue-orange scale (white = 0).
    """
    original, back = np.asarray(original, dtype=float), np.asarray(back, dtype=float)
    diff = back - original
    bound = float(np.abs(diff).max()) or 1e-12  # all white when the difference is exactly 0
    top = float(max(original.max(), back.max())) or 1.0
    titles = ["weights on the text", "on the shuffled text, put back", f"difference (max {float(np.abs(diff).max()):.1e})"]
    cells, grid = subplot_grid(titles, 3, gap_x=0.1)
    ticks = [f"{i}:{t}" for i, t in enumerate(labels)]
    traces = [go.Heatmap(z=z, x=ticks, y=ticks, coloraxis=axis, **cell,
                         hovertemplate="query %{y}<br>key %{x}<br>%{z:.3g}<extra></extra>")
              for cell, z, axis in zip(cells, (original, back, diff), ("coloraxis", "coloraxis", "coloraxis2"))]
    for name, axis in grid.items():
        if name.startswith("yaxis"):
            first = name == "yaxis"
            axis.update(autorange="reversed", showticklabels=first, title=dict(text="query" if first else ""))
        elif name.startswith("xaxis"):
            axis.update(title=dict(text="key"), tickfont=dict(size=10))
    weights_bar_x = grid["xaxis2"]["domain"][1] + 0.01  # right of the second panel, in the gap before the third
    return go.Figure(traces, dict(grid, title=dict(text=title), font=FONT, height=440, margin=dict(l=10, r=10, t=70, b=10),
                                  coloraxis=dict(colorscale=SEQUENTIAL, cmin=0, cmax=top,
                                                 colorbar=dict(x=weights_bar_x, xanchor="left", len=0.8, thickness=12,
                                                               title=dict(text="weight"))),
                                  coloraxis2=dict(colorscale=DIVERGING, cmin=-bound, cmax=bound,
                                                  colorbar=dict(x=1.0, xanchor="left", len=0.8, thickness=12,
                                                                title=dict(text="Δ")))))


def position_differences(per_layer_position: np.ndarray, labels: list[str], title: str = "") -> go.Figure:
    """(L, T) max |difference| of each token's residual stream after each block, log-coloured (an exact 0 at the floor)."""
    values = np.asarray(per_layer_position, dtype=float)
    logged = np.log10(np.maximum(values, LOG_FLOOR))
    ticks = [f"{i}:{t}" for i, t in enumerate(labels)]
    layers = [f"after block {i}" for i in range(values.shape[0])]
    shape = look(title or "each token's residual stream: max |difference| after un-shuffling", 160 + 45 * len(layers),
                 "token (original position)", "layer")
    shape["yaxis"]["autorange"] = "reversed"
    return go.Figure(go.Heatmap(z=logged, x=ticks, y=layers, customdata=values, zmin=math.log10(LOG_FLOOR), zmax=1,
                                colorscale=SEQUENTIAL, colorbar=dict(title=dict(text="log10 |Δ|")),
                                hovertemplate="%{y}, token %{x}<br>max |difference| %{customdata:.3g}<extra></extra>"),
                     shape)
