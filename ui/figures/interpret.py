"""What the "Why this prediction?" page draws: the logit-lens grid, patching heatmaps, attribution bars.

numpy in, plotly Figure out, like the other figure modules; Viridis for probabilities, the blue-orange
diverging scale for signed effects (both colour-blind safe).
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ui.figures.axes import OKABE_ITO, look
from ui.figures.base import DIVERGING, SEQUENTIAL, subplot_grid


def lens_grid(top_labels: np.ndarray, top_probs: np.ndarray, answer_probs: np.ndarray, row_labels: list[str],
              column_labels: list[str], title: str = "") -> go.Figure:
    """Rows: where the stream is read; columns: input positions. Each cell names its top token with its
    probability (hover: the top k); the colour is the probability of the model's final answer there.

    top_labels (R, P, k) str and top_probs (R, P, k), most likely first; answer_probs (R, P) in 0..1;
    column_labels unique ("12:a").
    """
    text = np.char.add(np.char.add(top_labels[..., 0].astype(str), "<br>"), np.char.mod("%.2f", top_probs[..., 0]))
    hover = np.array([["<br>".join(f"{t} {p:.3f}" for t, p in zip(cell_labels, cell_probs))
                       for cell_labels, cell_probs in zip(labels_of_row, probs_of_row)]
                      for labels_of_row, probs_of_row in zip(top_labels, top_probs)], dtype=object)  # (R, P)
    shape = look(title, 140 + 62 * len(row_labels), "input token (each cell predicts the token after it)",
                 "read from")
    shape["yaxis"]["autorange"] = "reversed"
    return go.Figure(go.Heatmap(
        z=answer_probs, x=column_labels, y=row_labels, zmin=0, zmax=1, colorscale=SEQUENTIAL,
        text=text, texttemplate="%{text}", textfont=dict(size=12), customdata=hover,
        colorbar=dict(title=dict(text="p(final<br>answer)")),
        hovertemplate="%{y}, after %{x}<br>top tokens:<br>%{customdata}<br>p(final answer) %{z:.3f}<extra></extra>"),
        shape)


def effect_heatmaps(panels: list[tuple[str, np.ndarray]], x_labels: list[str], y_labels: list[str], x_title: str,
                    y_title: str, gap: float, title: str = "") -> go.Figure:
    """One or more (title, matrix) panels of patching effects on one diverging scale.

    Each value is the patched run's metric minus the corrupted run's; `gap` is the clean run's minus the
    corrupted run's, so a cell at `gap` brings the whole clean behaviour back (hover: its share). Labels
    must be unique (plotly merges equal ones): "12:a", "head 3".
    """
    bound = max([abs(gap)] + [float(np.nanmax(np.abs(m))) for _, m in panels]) or 1.0
    cells, layout = subplot_grid([t for t, _ in panels], cols=len(panels), gap_x=0.08)
    traces = [go.Heatmap(z=matrix, x=x_labels, y=y_labels, coloraxis="coloraxis",
                         customdata=matrix / gap if gap else np.zeros_like(matrix), **cell,
                         hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>effect %{{z:.3f}} "
                                       "(%{customdata:.0%} of the clean gap)<extra></extra>")
              for (_, matrix), cell in zip(panels, cells)]
    for name, axis in layout.items():
        if name.startswith("xaxis"):
            axis.update(title=dict(text=x_title))
        elif name.startswith("yaxis"):
            axis.update(title=dict(text=y_title), autorange="reversed")
    shape = look(title, max(320, 200 + 44 * len(y_labels)), "", "")
    del shape["xaxis"], shape["yaxis"]
    return go.Figure(traces, dict(shape, **layout, coloraxis=dict(
        colorscale=DIVERGING, cmin=-bound, cmax=bound, colorbar=dict(title=dict(text="effect")))))


def attribution_bars(labels: list[str], values: np.ndarray, title: str = "") -> go.Figure:
    """Each part's direct effect on the logit: towards the token (orange) or away from it (blue)."""
    values = np.asarray(values, dtype=float)
    colours = [OKABE_ITO[5] if v >= 0 else OKABE_ITO[0] for v in values]
    return go.Figure(go.Bar(x=labels, y=values, marker_color=colours,
                            hovertemplate="%{x}: %{y:+.3f}<extra></extra>"),
                     look(title, 360, "part of the model", "direct effect on the logit"))
