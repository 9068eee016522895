"""Figure builders for the KV-heads, masks and positions pages: numpy in, plotly Figure out.

Lines use the Okabe-Ito palette (distinguishable with every common colour-vision deficiency);
matrices use the same Viridis and blue-orange scales as ui/figures/base.py.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui.figures.base import DIVERGING, FONT, SEQUENTIAL, subplot_grid

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
MASKED_GREY = "#bdbdbd"
GIB = 2 ** 30
# Viridis, except that exactly 0 is white: a weight of 0.0 stands out from a merely small one
ZERO_WHITE = [[0.0, "#ffffff"], [1e-9, "#440154"], [0.25, "#3b528b"], [0.5, "#21918c"], [0.75, "#5ec962"], [1.0, "#fde725"]]


def look(title: str, height: int, x_title: str, y_title: str) -> dict:
    """The shared look as a layout dict: title, projector-size font, axis titles, legend below."""
    return dict(title=dict(text=title), height=height, font=FONT, margin=dict(l=10, r=10, t=50 if title else 10, b=10),
                xaxis=dict(title=dict(text=x_title)), yaxis=dict(title=dict(text=y_title)),
                legend=dict(orientation="h", y=-0.25))


def layout(fig: go.Figure, title: str, height: int, x_title: str, y_title: str) -> go.Figure:
    """Apply the shared look to a figure built trace by trace."""
    fig.update_layout(look(title, height, x_title, y_title))
    return fig


def grid_heatmap(z: np.ndarray, x: list, y: list, title: str, x_title: str, y_title: str, *, signed: bool = False,
                 zmin: float | None = None, zmax: float | None = None, height: int = 460,
                 colorscale=None) -> go.Figure:
    """A matrix on numbered (or already unique) axes: positions, dimensions, hidden units."""
    values = np.asarray(z, dtype=float)
    if signed:
        bound = float(np.nanmax(np.abs(values))) or 1.0
        zmin, zmax = -bound, bound
    shape = look(title, height, x_title, y_title)
    shape["yaxis"]["autorange"] = "reversed"
    return go.Figure(go.Heatmap(z=values, x=x, y=y, zmin=zmin, zmax=zmax,
                                colorscale=colorscale or (DIVERGING if signed else SEQUENTIAL),
                                hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>value %{{z:.4g}}<extra></extra>"),
                     shape)  # built with its layout in one go: a later update_layout costs several times more


# --- KV heads -------------------------------------------------------------------------


def kv_sharing(n_heads: int, n_kv_heads: int) -> go.Figure:
    """Query heads on top, kv heads below, a line from each query head to the kv head it reads."""
    group = n_heads // n_kv_heads
    q_x = np.arange(n_heads, dtype=float)
    kv_x = np.array([g * group + (group - 1) / 2 for g in range(n_kv_heads)])  # each kv head under its group
    fig = go.Figure()
    for h in range(n_heads):
        g = h // group
        fig.add_trace(go.Scatter(x=[q_x[h], kv_x[g]], y=[1, 0], mode="lines", showlegend=False, hoverinfo="skip",
                                 line=dict(color=OKABE_ITO[g % len(OKABE_ITO)], width=3)))
    fig.add_trace(go.Scatter(x=q_x, y=np.ones(n_heads), mode="markers+text", name="query heads (H)",
                             text=[f"q{h}" for h in range(n_heads)], textposition="top center",
                             marker=dict(size=22, symbol="circle",
                                         color=[OKABE_ITO[(h // group) % 8] for h in range(n_heads)]),
                             hovertext=[f"query head {h} reads kv head {h // group}" for h in range(n_heads)],
                             hoverinfo="text"))
    fig.add_trace(go.Scatter(x=kv_x, y=np.zeros(n_kv_heads), mode="markers+text", name="kv heads (G)",
                             text=[f"kv{g}" for g in range(n_kv_heads)], textposition="bottom center",
                             marker=dict(size=30, symbol="square", color=[OKABE_ITO[g % 8] for g in range(n_kv_heads)]),
                             hovertext=[f"kv head {g}: K and V for query heads {g * group}..{(g + 1) * group - 1}"
                                        for g in range(n_kv_heads)], hoverinfo="text"))
    fig.update_yaxes(range=[-0.6, 1.6], tickvals=[0, 1], ticktext=["K, V", "Q"], title="projection")
    fig.update_xaxes(showticklabels=False, title="head", zeroline=False)
    return layout(fig, f"H={n_heads} query heads share G={n_kv_heads} kv heads ({group} per group)", 320,
                  "head", "projection")


def kv_cache_growth(contexts: np.ndarray, bytes_per_token: dict[str, int], title: str = "") -> go.Figure:
    """KV-cache size (GiB, one sequence) against context length, one line per variant."""
    fig = go.Figure()
    for i, (label, per_token) in enumerate(bytes_per_token.items()):
        fig.add_trace(go.Scatter(x=contexts, y=np.asarray(contexts, dtype=float) * per_token / GIB, mode="lines",
                                 name=label, line=dict(color=OKABE_ITO[i % 8], width=3),
                                 hovertemplate=f"{label}<br>%{{x}} tokens: %{{y:.2f}} GiB<extra></extra>"))
    return layout(fig, title, 380, "context length (tokens)", "KV cache (GiB, one sequence)")


def cache_bytes_by_step(n_bytes: list[int]) -> go.Figure:
    fig = go.Figure(go.Bar(x=list(range(len(n_bytes))), y=np.asarray(n_bytes) / 1024, marker_color=OKABE_ITO[0],
                           hovertemplate="step %{x}: %{y:.1f} KiB<extra></extra>"))
    return layout(fig, "", 260, "generation step (0 = prompt)", "cache size (KiB)")


# --- masks ----------------------------------------------------------------------------


def mask_and_weights(additive_mask: np.ndarray, weights: np.ndarray, x_labels: list[str], y_labels: list[str],
                     title: str = "") -> go.Figure:
    """Left: which cells the mask allows; right: the softmax weights, white where exactly 0."""
    allowed = (additive_mask == 0).astype(float)  # 0 = masked (the most negative float), 1 = allowed
    xs = [f"{i}:{t}" for i, t in enumerate(x_labels)]
    ys = [f"{i}:{t}" for i, t in enumerate(y_labels)]
    (left, right), layout = subplot_grid(["mask: allowed / masked", "softmax weights"], cols=2, gap_x=0.12)
    traces = [
        go.Heatmap(z=allowed, x=xs, y=ys, zmin=0, zmax=1, showscale=False,
                   colorscale=[[0, MASKED_GREY], [0.5, MASKED_GREY], [0.5, "#21918c"], [1, "#21918c"]],
                   customdata=additive_mask, xgap=1, ygap=1,
                   hovertemplate="query %{y}<br>key %{x}<br>mask %{customdata:.3g}<extra></extra>", **left),
        go.Heatmap(z=weights, x=xs, y=ys, zmin=0, zmax=float(weights.max()) or 1.0, colorscale=ZERO_WHITE,
                   xgap=1, ygap=1, colorbar=dict(title="weight"),
                   hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.4g}<extra></extra>", **right),
    ]
    for name in ("xaxis", "xaxis2"):
        layout[name].update(title=dict(text="key"))
    layout["yaxis"].update(autorange="reversed", title=dict(text="query"))
    layout["yaxis2"].update(autorange="reversed")
    layout["annotations"].append(dict(text="white = exactly 0", xref="paper", yref="paper", x=1.0, y=1.0, showarrow=False,
                                      xanchor="right", yanchor="bottom", yshift=22, font=dict(size=12)))
    size = max(320, min(560, 18 * len(y_labels) + 140))
    return go.Figure(traces, dict(layout, title=title, height=size, font=FONT, margin=dict(l=10, r=10, t=70, b=10)))


# --- positions ------------------------------------------------------------------------


def position_table(table: np.ndarray, title: str) -> go.Figure:
    """(P, d) position vectors: position down, dimension across."""
    n, d = table.shape
    return grid_heatmap(table, list(range(d)), list(range(n)), title, "dimension", "position", signed=True)


def position_similarity(similarity: np.ndarray, title: str) -> go.Figure:
    n = similarity.shape[0]
    return grid_heatmap(similarity, list(range(n)), list(range(n)), title, "position n", "position m", signed=True)


def rope_angles(angles: np.ndarray, inv_freq: np.ndarray) -> go.Figure:
    """Rotation angle (radians, log scale) of every pair of dimensions against position."""
    positions = np.arange(angles.shape[0])
    fig = go.Figure()
    for i in range(angles.shape[1]):
        fig.add_trace(go.Scatter(x=positions[1:], y=angles[1:, i], mode="lines", name=f"pair {i}",
                                 line=dict(color=OKABE_ITO[i % 8], width=2, dash="solid" if i < 8 else "dot"),
                                 hovertemplate=f"pair {i} (freq {inv_freq[i]:.3g} rad/position)<br>position %{{x}}: "
                                               "%{y:.3g} rad<extra></extra>"))
    fig.add_hline(y=2 * math.pi, line_dash="dash", line_color="#555555", annotation_text="one full turn (2π)")
    shown = angles[1:][angles[1:] > 0]
    fig.update_yaxes(type="log", range=[math.log10(shown.min()) - 0.2, math.log10(max(shown.max(), 2 * math.pi)) + 0.3])
    return layout(fig, "angle = position × frequency, one line per pair of dimensions", 400,
                   "position", "rotation angle (radians, log scale)")


def rope_vectors(pairs: np.ndarray, position: int, max_pairs: int = 8) -> go.Figure:
    """Each 2-D pair of q at `position` (arrow from the origin), on the circle it travels, with the positions so far."""
    n_pairs = min(pairs.shape[1], max_pairs)
    cols = min(4, n_pairs)
    rows = math.ceil(n_pairs / cols)
    cells, layout = subplot_grid([f"pair {i}" for i in range(n_pairs)], cols)
    turn = np.linspace(0, 2 * math.pi, 121)
    traces = []
    for i, cell in enumerate(cells):
        row, col = divmod(i, cols)
        path = pairs[:, i]  # (P, 2)
        radius = float(np.linalg.norm(path[0])) or 1.0
        x, y = path[position]
        traces += [
            go.Scatter(x=radius * np.cos(turn), y=radius * np.sin(turn), mode="lines", hoverinfo="skip",
                       line=dict(color=MASKED_GREY, width=1), showlegend=False, **cell),
            go.Scatter(x=path[: position + 1, 0], y=path[: position + 1, 1], mode="markers", showlegend=False,
                       marker=dict(size=6, color=OKABE_ITO[4]),
                       hovertemplate=f"pair {i}<br>(%{{x:.3f}}, %{{y:.3f}})<extra></extra>", **cell),
            go.Scatter(x=[0, x], y=[0, y], mode="lines+markers", line=dict(color=OKABE_ITO[5], width=4), showlegend=False,
                       marker=dict(size=[0, 12], color=OKABE_ITO[5]),
                       hovertemplate=f"pair {i} at position {position}<br>(%{{x:.3f}}, %{{y:.3f}})<extra></extra>", **cell),
        ]
        span = [-1.25 * radius, 1.25 * radius]
        x_axis, y_axis = "xaxis" + cell["xaxis"][1:], "yaxis" + cell["yaxis"][1:]
        layout[x_axis].update(range=span, showticklabels=False, zeroline=True,
                              title=dict(text="dim i" if row == rows - 1 else None))
        layout[y_axis].update(range=span, showticklabels=False, zeroline=True, scaleanchor=cell["xaxis"], scaleratio=1,
                              title=dict(text="dim i + d_head/2" if col == 0 else None))
    return go.Figure(traces, dict(
        layout, title=f"q's pairs at position {position} (arrow) and at the positions before it (dots)",
        height=230 * rows + 80, font=FONT, margin=dict(l=10, r=10, t=80, b=10)))


def rope_scores(scores: np.ndarray, title: str) -> go.Figure:
    """score[m, n] of a fixed q content at position m and k content at position n."""
    n = scores.shape[0]
    return grid_heatmap(scores, list(range(n)), list(range(n)), title, "key position n", "query position m",
                        signed=True)


def diagonal_spread(offsets: np.ndarray, spread: np.ndarray, scale: float) -> go.Figure:
    """max - min along each diagonal m - n = offset, next to the size of the scores themselves."""
    fig = go.Figure(go.Bar(x=offsets, y=spread, marker_color=OKABE_ITO[0],
                           hovertemplate="m - n = %{x}: spread %{y:.2e}<extra></extra>"))
    fig.add_hline(y=scale, line_dash="dash", line_color=OKABE_ITO[5],
                  annotation_text=f"largest |score| = {scale:.3g}", annotation_position="top left")
    fig.update_yaxes(type="log")
    return layout(fig, "spread along each diagonal (max − min, log scale)", 320, "distance m − n",
                   "max − min along the diagonal")


def score_by_distance(distances: np.ndarray, scores: dict[str, np.ndarray]) -> go.Figure:
    """q · k against the distance between them, one line per rotating scheme."""
    fig = go.Figure()
    for i, (name, values) in enumerate(scores.items()):
        fig.add_trace(go.Scatter(x=distances, y=values, mode="lines", name=name,
                                 line=dict(color=OKABE_ITO[i % len(OKABE_ITO)], width=2),
                                 hovertemplate=f"{name}<br>distance %{{x}}: q · k = %{{y:.3g}}<extra></extra>"))
    return layout(fig, "the same q and k, turned to each distance", 340, "distance (query position − key position)",
                  "q · k")


def pair_decay(distances: np.ndarray, decay: np.ndarray, max_pairs: int = 8) -> go.Figure:
    """(pairs, D) factors that multiply each pair's share of q · k at each distance, a line per pair (fast first)."""
    fig = go.Figure()
    shown = np.unique(np.linspace(0, decay.shape[0] - 1, min(max_pairs, decay.shape[0])).round().astype(int))
    for i, pair in enumerate(shown):
        fig.add_trace(go.Scatter(x=distances, y=decay[pair], mode="lines", name=f"pair {pair}",
                                 line=dict(color=OKABE_ITO[i % len(OKABE_ITO)], width=2),
                                 hovertemplate=f"pair {pair}<br>distance %{{x}}: × %{{y:.3f}}<extra></extra>"))
    return layout(fig, "xPos: what each pair keeps, by distance", 340,
                  "distance (query position − key position)", "factor on the pair's share of q · k")


def alibi_slopes(slopes: np.ndarray) -> go.Figure:
    fig = go.Figure(go.Bar(x=[f"head {h}" for h in range(len(slopes))], y=slopes, marker_color=OKABE_ITO[2],
                           hovertemplate="%{x}: slope %{y:.4g}<extra></extra>"))
    return layout(fig, "slope m_h per head", 300, "head", "slope m_h")


def alibi_biases(bias: np.ndarray, max_heads: int = 8) -> go.Figure:
    """(H, T, T) biases, -slope * |i - j|, one panel per head on a shared scale."""
    n = min(bias.shape[0], max_heads)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"head {h}" for h in range(n)],
                        horizontal_spacing=0.04, vertical_spacing=0.1)
    for h in range(n):
        fig.add_trace(go.Heatmap(z=bias[h], coloraxis="coloraxis",
                                 hovertemplate=f"head {h}<br>query %{{y}}<br>key %{{x}}<br>bias %{{z:.3g}}<extra></extra>"),
                      h // cols + 1, h % cols + 1)
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="key", row=rows)
    fig.update_yaxes(title_text="query", col=1)
    for col in range(2, cols + 1):
        fig.update_yaxes(showticklabels=False, col=col)
    fig.update_layout(coloraxis=dict(colorscale=SEQUENTIAL, colorbar=dict(title="bias")), font=FONT,
                      height=240 * rows + 60, margin=dict(l=10, r=10, t=60, b=10),
                      title="bias −m_h · |i − j| per head")
    return fig


def bucket_edges(distances: np.ndarray, buckets: np.ndarray) -> np.ndarray:
    """The distances where a new bucket starts: each one differs from the bucket of the distance before it."""
    return distances[1:][np.diff(buckets) != 0]


def relative_bias(distances: np.ndarray, buckets: np.ndarray, bias: np.ndarray, max_heads: int = 8) -> go.Figure:
    """T5's learned bias against distance (key − query), one line per head, each bucket's first distance marked.

    distances (D,), buckets (D,) the bucket of each, bias (H, D) = table[bucket, h]: flat wherever distances share a
    bucket, so the plateaus widen logarithmically with distance, and everything past the maximum distance is one.
    """
    fig = go.Figure()
    for edge in bucket_edges(distances, buckets):
        fig.add_vline(x=float(edge) - 0.5, line=dict(color=MASKED_GREY, width=1, dash="dot"))
    for h in range(min(bias.shape[0], max_heads)):
        fig.add_trace(go.Scatter(x=distances, y=bias[h], mode="lines", name=f"head {h}", line_shape="hv",
                                 line=dict(color=OKABE_ITO[h % len(OKABE_ITO)], width=2),
                                 customdata=buckets,
                                 hovertemplate=f"head {h}<br>distance %{{x}}: bucket %{{customdata}}, "
                                               "bias %{y:.3g}<extra></extra>"))
    return layout(fig, "T5: learned bias per head against distance (dotted: where a new bucket starts)", 360,
                  "distance j − i (key position − query position)", "bias added to the score")


def length_extrapolation(rows: list[dict]) -> go.Figure:
    """Held-out bits per character against input length (a multiple of the trained context), one line per
    position scheme. rows: {"position", "model", "lengths": {"1x": bpc, "2x": bpc, ...}, "context": trained length}."""
    fig = go.Figure()
    for i, row in enumerate(rows):
        multiples = list(row["lengths"])
        fig.add_trace(go.Scatter(x=multiples, y=[row["lengths"][m] for m in multiples], mode="lines+markers",
                                 name=f"{row['position']} ({row['model']})",
                                 line=dict(color=OKABE_ITO[i % len(OKABE_ITO)], width=3),
                                 hovertemplate=f"{row['position']}<br>%{{x}} the trained {row.get('context', 256)} characters<br>"
                                               "%{y:.2f} bits per character<extra></extra>"))
    return layout(fig, "held-out bits per character, by input length", 360, "input length (× the length each model trained on)",
                  "bits per character (lower is better)")
