"""Figure builders for the Flash attention page: numpy in, plotly Figure out.

Tile states and lines use the Okabe-Ito palette (safe with every common colour-vision
deficiency); matrices use the blue-orange diverging scale of ui/figures/base.py. Masked
scores (the most negative float32) and -inf are drawn as gaps, never as huge numbers.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from transformer.flash import Tile

from ui.figures.base import DIVERGING, FONT, SEQUENTIAL, masked_to_nan

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
GIB, MIB = 2 ** 30, 2 ** 20
GRID_PX = 480  # side of the tile grid's plot area

# tile state -> (code drawn in the grid, colour, label in the legend)
TILE_STATES = {
    "skipped": (0, "#FFFFFF", "skipped: never loaded"),
    "to do": (1, "#D9D9D9", "not yet loaded"),
    "done": (2, "#56B4E9", "done"),
    "current": (3, "#E69F00", "loaded now"),
}
METHOD_STYLE = {  # method -> (colour, dash, label)
    "explicit": (OKABE_ITO[5], "solid", "explicit five lines (T × T matrix)"),
    "sdpa": (OKABE_ITO[0], "solid", "scaled_dot_product_attention (fused kernel)"),
    "tiled": (OKABE_ITO[2], "solid", "tiled Python loop (this page)"),
}


def layout(fig: go.Figure, title: str, height: int, x_title: str | None = None, y_title: str | None = None) -> go.Figure:
    """The shared look: title, projector-size font, legend below; axis titles when given."""
    fig.update_layout(title=title, height=height, font=FONT, margin=dict(l=10, r=10, t=60 if title else 10, b=10),
                      legend=dict(orientation="h", y=-0.2))
    if x_title is not None:
        fig.update_layout(xaxis_title=x_title, yaxis_title=y_title)
    return fig


def _discrete_scale(colours: list[str]) -> list[list]:
    """A colour scale with one flat band per integer code 0..n-1 (zmin=-0.5, zmax=n-0.5)."""
    n = len(colours)
    return [[edge, colour] for i, colour in enumerate(colours) for edge in (i / n, (i + 1) / n)]


# --- the tile grid ------------------------------------------------------------------------


def tile_states(tiles: list[Tile], current: int) -> np.ndarray:
    """(query blocks, key blocks) state codes (TILE_STATES) when step `current` is being computed."""
    grid = np.zeros((tiles[-1].q_block + 1, tiles[-1].k_block + 1), dtype=int)
    for step, tile in enumerate(tiles):
        state = "skipped" if tile.skipped else "current" if step == current else "done" if step < current else "to do"
        grid[tile.q_block, tile.k_block] = TILE_STATES[state][0]
    return grid


def _edges(tiles: list[Tile], axis: str) -> list[int]:
    starts = sorted({getattr(t, f"{axis}_start") for t in tiles})
    return starts + [max(getattr(t, f"{axis}_stop") for t in tiles)]


def tile_grid(tiles: list[Tile], current: int, allowed: np.ndarray | None = None, title: str = "") -> go.Figure:
    """The (T_q, T_kv) matrix cut into tiles, each coloured by its state at step `current`.

    Cells are drawn at their true size in token positions, so a last block that is
    shorter (block size not dividing T) looks shorter. With `allowed` (T_q, T_kv) bool,
    masked pairs inside computed tiles get a cross: computed, then thrown away.
    """
    states = tile_states(tiles, current)
    steps = np.full(states.shape, "", dtype=object)
    for step, tile in enumerate(tiles):
        steps[tile.q_block, tile.k_block] = "skip" if tile.skipped else str(step)
    q_edges, k_edges = _edges(tiles, "q"), _edges(tiles, "k")
    colours = [colour for _, colour, _ in TILE_STATES.values()]
    cell_px = GRID_PX / max(states.shape)  # the step numbers shrink with the cells, never below legible
    fig = go.Figure(go.Heatmap(
        z=states, x=k_edges, y=q_edges, zmin=-0.5, zmax=len(colours) - 0.5, colorscale=_discrete_scale(colours),
        showscale=False, text=steps, texttemplate="<b>%{text}</b>", customdata=steps,
        textfont=dict(size=int(min(16, max(9, cell_px / 3)))),
        hovertemplate="queries from %{y}, keys from %{x}<br>step %{customdata}<extra></extra>"))
    # tile borders as one line trace: None breaks the line between segments
    xs, ys = [], []
    for k in k_edges:
        xs += [k, k, None]
        ys += [q_edges[0], q_edges[-1], None]
    for q in q_edges:
        xs += [k_edges[0], k_edges[-1], None]
        ys += [q, q, None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color="#404040", width=1), hoverinfo="skip",
                             showlegend=False))
    if allowed is not None:
        computed = np.zeros(allowed.shape, dtype=bool)
        for tile in tiles:
            if not tile.skipped:
                computed[tile.q_start:tile.q_stop, tile.k_start:tile.k_stop] = True
        q_masked, k_masked = np.nonzero(computed & ~allowed)
        fig.add_trace(go.Scatter(x=k_masked + 0.5, y=q_masked + 0.5, mode="markers", name="masked pair in a computed tile",
                                 marker=dict(symbol="x-thin", size=5, line=dict(width=1, color="#7f7f7f")),
                                 hovertemplate="query %{y:.0f}, key %{x:.0f}: masked<extra></extra>"))
    for state, (_, colour, label) in TILE_STATES.items():  # legend entries for the discrete colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=label,
                                 marker=dict(symbol="square", size=14, color=colour, line=dict(color="#404040", width=1))))
    now = tiles[current]
    fig.add_shape(type="rect", x0=now.k_start, x1=now.k_stop, y0=now.q_start, y1=now.q_stop,
                  line=dict(color=OKABE_ITO[5], width=4))  # the step shown, skipped or not
    fig.update_xaxes(range=[k_edges[0], k_edges[-1]], constrain="domain")
    fig.update_yaxes(range=[q_edges[-1], q_edges[0]], scaleanchor="x", constrain="domain")  # query 0 on top, square cells
    return layout(fig, title, GRID_PX + 160, "key position (columns of K and V)", "query position (rows of Q)")


# --- the current tile -----------------------------------------------------------------------


def tile_matrices(scores: np.ndarray, probs: np.ndarray, q_rows: tuple[int, int], k_cols: tuple[int, int],
                  title: str = "") -> go.Figure:
    """Left: the tile's scores S (masked cells blank); right: P = exp(S - m_new), the tile's unnormalised weights."""
    ys, xs = np.arange(*q_rows), np.arange(*k_cols)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.2, shared_yaxes=True,
                        subplot_titles=("scores S = Q_i K_jᵀ / √d + mask", "P = exp(S − m_new)"))
    fig.add_trace(go.Heatmap(z=masked_to_nan(scores), x=xs, y=ys, coloraxis="coloraxis", hoverongaps=False,
                             hovertemplate="query %{y}, key %{x}<br>S = %{z:.4g}<extra></extra>"), 1, 1)
    fig.add_trace(go.Heatmap(z=np.asarray(probs, dtype=float), x=xs, y=ys, coloraxis="coloraxis2",
                             hovertemplate="query %{y}, key %{x}<br>P = %{z:.4g}<extra></extra>"), 1, 2)
    bound = np.nanmax(np.abs(masked_to_nan(scores))) if np.isfinite(masked_to_nan(scores)).any() else 1.0
    fig.update_layout(coloraxis=dict(colorscale=DIVERGING, cmin=-bound, cmax=bound,
                                     colorbar=dict(title="S", x=0.42, len=0.9, thickness=14)),
                      coloraxis2=dict(colorscale=SEQUENTIAL, cmin=0, cmax=1, colorbar=dict(title="P", len=0.9, thickness=14)))
    fig.update_yaxes(autorange="reversed", dtick=1 if len(ys) <= 16 else None)
    fig.update_yaxes(title="query position", row=1, col=1)
    fig.update_xaxes(title="key position", dtick=1 if len(xs) <= 16 else None)
    return layout(fig, title, max(320, min(560, 22 * len(ys) + 180)))


def _finite(values: np.ndarray) -> np.ndarray:
    """-inf (nothing seen yet) and masked-only maxima become gaps instead of bars of -3e38."""
    return masked_to_nan(values)


def running_stats(rows: np.ndarray, m_before: np.ndarray, m_after: np.ndarray, l_before: np.ndarray,
                  l_after: np.ndarray, title: str = "") -> go.Figure:
    """Per query row of the block: the running max m and running sum l before and after this tile."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("running max m (largest score so far)", "running sum l = Σ exp(s − m)"))
    for col, before, after in ((1, m_before, m_after), (2, l_before, l_after)):
        for when, values, colour in (("before this tile", before, OKABE_ITO[4]), ("after this tile", after, OKABE_ITO[0])):
            fig.add_trace(go.Bar(x=rows, y=_finite(values), name=when, marker_color=colour, showlegend=col == 1,
                                 legendgroup=when, hovertemplate=f"query %{{x}}<br>{when}: %{{y:.4g}}<extra></extra>"),
                          1, col)
    fig.update_xaxes(title="query position", dtick=1 if len(rows) <= 16 else None)
    fig.update_yaxes(title="m", row=1, col=1)
    fig.update_yaxes(title="l", row=1, col=2)
    fig.update_layout(barmode="group")
    return layout(fig, title, 360)


def rescale_and_output(rows: np.ndarray, rescale: np.ndarray, out_so_far: np.ndarray, title: str = "") -> go.Figure:
    """Left: exp(m_old - m_new) per row (1 = the max did not move); right: acc / l, the block's output so far."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, column_widths=[0.4, 0.6],
                        subplot_titles=("rescale factor exp(m_old − m_new)", "partial output acc / l (rows × d_head)"))
    fig.add_trace(go.Bar(x=rows, y=np.asarray(rescale, dtype=float), marker_color=OKABE_ITO[1], showlegend=False,
                         hovertemplate="query %{x}<br>old sums × %{y:.4g}<extra></extra>"), 1, 1)
    bound = float(np.abs(out_so_far).max()) or 1.0
    fig.add_trace(go.Heatmap(z=np.asarray(out_so_far, dtype=float), x=np.arange(out_so_far.shape[1]), y=rows,
                             colorscale=DIVERGING, zmin=-bound, zmax=bound, colorbar=dict(title="value"),
                             hovertemplate="query %{y}, dim %{x}<br>%{z:.4g}<extra></extra>"), 1, 2)
    fig.update_xaxes(title="query position", dtick=1 if len(rows) <= 16 else None, row=1, col=1)
    fig.update_yaxes(title="factor", range=[0, 1.05], row=1, col=1)
    fig.update_xaxes(title="dimension of d_head", row=1, col=2)
    fig.update_yaxes(title="query position", autorange="reversed", row=1, col=2)
    return layout(fig, title, 360)


# --- the result ------------------------------------------------------------------------------


def result_comparison(tiled: np.ndarray, explicit: np.ndarray, title: str = "") -> go.Figure:
    """Tiled output, explicit output (T × d_head each, one scale) and their difference on its own scale."""
    difference = np.asarray(tiled, dtype=float) - np.asarray(explicit, dtype=float)
    bound = float(max(np.abs(tiled).max(), np.abs(explicit).max())) or 1.0
    diff_bound = float(np.abs(difference).max()) or 1e-12
    positions, dims = np.arange(tiled.shape[0]), np.arange(tiled.shape[1])
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.13, shared_yaxes=True,
                        subplot_titles=("tiled (online softmax)", "explicit softmax(S) @ V", "tiled − explicit"))
    for col, values, axis in ((1, tiled, "coloraxis"), (2, explicit, "coloraxis"), (3, difference, "coloraxis2")):
        fig.add_trace(go.Heatmap(z=np.asarray(values, dtype=float), x=dims, y=positions, coloraxis=axis,
                                 hovertemplate="query %{y}, dim %{x}<br>%{z:.3g}<extra></extra>"), 1, col)
    fig.update_layout(coloraxis=dict(colorscale=DIVERGING, cmin=-bound, cmax=bound,
                                     colorbar=dict(title="output", x=0.64, len=0.9, thickness=14)),
                      coloraxis2=dict(colorscale=DIVERGING, cmin=-diff_bound, cmax=diff_bound,
                                      colorbar=dict(title="difference", exponentformat="e", len=0.9, thickness=14)))
    fig.update_xaxes(title="dimension of d_head")
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title="query position", row=1, col=1)
    return layout(fig, title, max(360, min(600, 8 * len(positions) + 200)))


# --- memory and time ----------------------------------------------------------------------------


def _binary_unit(n_bytes: float) -> str:
    for unit, size in (("TiB", 2 ** 40), ("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if n_bytes >= size:
            return f"{n_bytes / size:g} {unit}"
    return f"{n_bytes:g} B"


def _log_axes(fig: go.Figure, lengths, values) -> None:
    """Log-log axes ticked at the lengths drawn (512, 1k, ...) and at every power of 16 bytes in range."""
    fig.update_xaxes(type="log", tickvals=list(lengths),
                     ticktext=[f"{n // 1024}k" if n >= 1024 else str(n) for n in lengths])
    positive = [v for v in values if v > 0]
    powers = range(int(np.floor(np.log2(min(positive)) / 4)), int(np.ceil(np.log2(max(positive)) / 4)) + 1)
    ticks = [16.0 ** p for p in powers]
    fig.update_yaxes(type="log", tickvals=ticks, ticktext=[_binary_unit(t) for t in ticks])


def memory_formula(lengths: np.ndarray, full_bytes: np.ndarray, tiled_bytes: np.ndarray, title: str = "") -> go.Figure:
    """Bytes held beyond q, k, v and the output, by the T × T approach and by tiles, against T (log-log)."""
    fig = go.Figure()
    for values, (colour, _, _), label in ((full_bytes, METHOD_STYLE["explicit"], "full T × T scores and weights: O(T²)"),
                                          (tiled_bytes, METHOD_STYLE["tiled"], "tiled: m and l per row + one tile: O(T)")):
        fig.add_trace(go.Scatter(x=lengths, y=np.asarray(values, dtype=float), mode="lines+markers", name=label,
                                 line=dict(color=colour, width=3), customdata=[_binary_unit(v) for v in values],
                                 hovertemplate="T = %{x}<br>%{customdata}<extra></extra>"))
    _log_axes(fig, [int(n) for n in lengths], [*full_bytes, *tiled_bytes])
    return layout(fig, title, 420, "sequence length T (tokens, log scale)", "memory held (log scale)")


def measured_curves(rows: list[dict], unit: str, title: str = "", formula: dict[str, list[float]] | None = None,
                    log_y: bool = True) -> go.Figure:
    """One line per method from measurement rows {T, method, value} (value in bytes or seconds), log T axis.

    unit "MiB" or "ms" sets the y axis. formula maps a method to predicted bytes at the same
    lengths, drawn dashed next to its measurement. A linear y axis (log_y=False) keeps a
    measured 0 (less than one 4 KiB page) visible.
    """
    scale = {"MiB": MIB, "ms": 1e-3}[unit]
    fig = go.Figure()
    for method, (colour, _, label) in METHOD_STYLE.items():
        mine = [row for row in rows if row["method"] == method]
        if not mine:
            continue
        lengths = [row["T"] for row in mine]
        fig.add_trace(go.Scatter(x=lengths, y=[row["value"] / scale for row in mine], mode="lines+markers", name=label,
                                 line=dict(color=colour, width=3),
                                 hovertemplate=f"T = %{{x}}<br>%{{y:.4g}} {unit}<extra></extra>"))
        if formula and method in formula:
            fig.add_trace(go.Scatter(x=lengths, y=np.asarray(formula[method], dtype=float) / scale, mode="lines",
                                     name=f"{method}: formula", line=dict(color=colour, width=2, dash="dash"),
                                     hovertemplate=f"formula, T = %{{x}}<br>%{{y:.4g}} {unit}<extra></extra>"))
    lengths = sorted({row["T"] for row in rows})
    fig.update_xaxes(type="log", tickvals=lengths, ticktext=[str(n) for n in lengths])
    fig.update_yaxes(type="log" if log_y else "linear")
    what = "peak memory added by one call" if unit == "MiB" else "time per call"
    scale_note = ", log scale" if log_y else ""
    return layout(fig, title, 420, "sequence length T (tokens, log scale)", f"{what} ({unit}{scale_note})")
