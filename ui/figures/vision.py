"""Figure builders for the vision page: a digit cut into patches, where [CLS] looks, the class probabilities, and
the patch stem's kernels.

numpy in, plotly Figure out. The digit is drawn dark on white; attention uses Viridis as on
every other page, with the digit's outline drawn over it so the two line up; the bars use
the Okabe-Ito palette.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ui.figures.axes import OKABE_ITO, look
from ui.figures.base import FONT, SEQUENTIAL, subplot_grid

INK = [[0.0, "#ffffff"], [1.0, "#000000"]]  # 0 = paper, 1 = full ink
GRID_LINE = OKABE_ITO[1]
OUTLINE = "#ffffff"
OUTLINE_LEVEL = 0.4  # the digit's outline: where the ink reaches 40%
OTHER_CLASS, RIGHT, WRONG, TRUTH = "#bbbbbb", OKABE_ITO[0], OKABE_ITO[5], OKABE_ITO[2]


def _grid_lines(image_size: int, patch_size: int) -> list[dict]:
    """Shapes: the image's frame and the borders between patches, on pixel coordinates (pixel i spans i ± 0.5)."""
    edges = [k * patch_size - 0.5 for k in range(1, image_size // patch_size)]
    lo, hi = -0.5, image_size - 0.5
    line = dict(color=GRID_LINE, width=2)
    return ([dict(type="rect", x0=lo, x1=hi, y0=lo, y1=hi, line=line)]
            + [dict(type="line", x0=e, x1=e, y0=lo, y1=hi, line=line) for e in edges]
            + [dict(type="line", x0=lo, x1=hi, y0=e, y1=e, line=line) for e in edges])


def _image_axes(image_size: int, x_anchor: str = "x") -> tuple[dict, dict]:
    """x and y axis settings for a square image: row 0 at the top, square pixels, no ticks."""
    span = [-0.5, image_size - 0.5]
    plain = dict(showticklabels=False, showgrid=False, zeroline=False, constrain="domain")
    return dict(plain, range=span), dict(plain, range=span[::-1], scaleanchor=x_anchor)


def digit_patches(image: np.ndarray, patch_size: int, title: str = "") -> go.Figure:
    """The (S, S) image in 0..1 with its patch borders and each patch's token number (1 .. N; 0 is [CLS])."""
    image = np.asarray(image, dtype=float)
    side = image.shape[0]
    rows = side // patch_size
    corners = [(r * patch_size - 0.5, c * patch_size - 0.5) for r in range(rows) for c in range(rows)]  # top left
    labels = go.Scatter(x=[c for _, c in corners], y=[r for r, _ in corners], mode="text",
                        text=[str(i + 1) for i in range(len(corners))], textposition="bottom right",
                        textfont=dict(color=GRID_LINE, size=12), hoverinfo="skip", showlegend=False)
    pixels = go.Heatmap(z=image, colorscale=INK, zmin=0, zmax=1, showscale=False,
                        hovertemplate="row %{y}, column %{x}<br>ink %{z:.2f}<extra></extra>")
    x_axis, y_axis = _image_axes(side)
    shape = dict(title=dict(text=title or f"{rows * rows} patches of {patch_size}×{patch_size} pixels"), font=FONT,
                 height=380, margin=dict(l=10, r=10, t=50, b=10), xaxis=x_axis, yaxis=y_axis,
                 shapes=_grid_lines(side, patch_size), plot_bgcolor="#ffffff")
    return go.Figure([pixels, labels], shape)


def upsample(per_patch: np.ndarray, patch_size: int) -> np.ndarray:
    """(rows, cols) one value per patch -> (rows * p, cols * p): each value fills its patch's pixels."""
    return np.kron(np.asarray(per_patch, dtype=float), np.ones((patch_size, patch_size)))


def cls_attention(maps: np.ndarray, image: np.ndarray, patch_size: int, cls_self: np.ndarray | None = None,
                  title: str = "", highlight: int | None = None) -> go.Figure:
    """(H, rows, cols) [CLS]'s weight on each patch, one panel per head, laid over the image with the digit's outline.

    All panels share one Viridis scale from 0 to the largest weight shown. cls_self (H,): the weight [CLS]
    keeps on itself, named in each panel's title (the patch weights sum to 1 minus it).
    `highlight` puts a marker on that head's title.
    """
    maps = np.asarray(maps, dtype=float)
    image = np.asarray(image, dtype=float)
    n_heads, side = maps.shape[0], image.shape[0]
    titles = [("▶ " if h == highlight else "") + f"head {h}"
              + (f" · [CLS] itself {float(cls_self[h]):.2f}" if cls_self is not None else "") for h in range(n_heads)]
    cols = min(n_heads, 4)
    rows = math.ceil(n_heads / cols)
    cells, layout = subplot_grid(titles, cols, gap_x=0.05, gap_y=0.12)
    top = float(maps.max()) or 1.0
    traces = []
    for h, cell in enumerate(cells):
        weights = upsample(maps[h], patch_size)  # (S, S)
        patch = np.kron(np.arange(maps[h].size).reshape(maps[h].shape) + 1, np.ones((patch_size, patch_size)))
        traces.append(go.Heatmap(z=weights, customdata=patch, coloraxis="coloraxis", **cell,
                                 hovertemplate=f"head {h}<br>patch %{{customdata:.0f}}<br>weight %{{z:.3f}}<extra></extra>"))
        traces.append(go.Contour(z=image, showscale=False, hoverinfo="skip", **cell,
                                 contours=dict(start=OUTLINE_LEVEL, end=OUTLINE_LEVEL, size=1, coloring="lines"),
                                 colorscale=[[0, OUTLINE], [1, OUTLINE]], line=dict(width=2.5)))
    for name, axis in layout.items():
        if name.startswith(("xaxis", "yaxis")):  # keep the grid's domain and anchor, add the image's look
            x_look, y_look = _image_axes(side, axis["anchor"])
            axis.update(x_look if name.startswith("xaxis") else y_look)
    return go.Figure(traces, dict(layout, title=dict(text=title or "where [CLS] looks, per head"), font=FONT,
                                  height=max(320, 300 * rows), margin=dict(l=10, r=10, t=70, b=10),
                                  coloraxis=dict(colorscale=SEQUENTIAL, cmin=0, cmax=top,
                                                 colorbar=dict(title=dict(text="weight"), thickness=12))))


def class_probabilities(probabilities: np.ndarray, true_label: int | None = None, title: str = "") -> go.Figure:
    """(n_classes,) softmax of the class logits as bars: the prediction coloured (blue right, vermilion wrong),
    the true class outlined in green and labelled."""
    p = np.asarray(probabilities, dtype=float)
    predicted = int(p.argmax())
    right = true_label is None or predicted == true_label
    colours = [(RIGHT if right else WRONG) if k == predicted else OTHER_CLASS for k in range(len(p))]
    outline = [4 if k == true_label else 0 for k in range(len(p))]
    text = [("true · " if k == true_label else "") + f"{v:.2f}" if v >= 0.005 or k in (predicted, true_label) else ""
            for k, v in enumerate(p)]
    fig = go.Figure(go.Bar(x=[str(k) for k in range(len(p))], y=p, text=text, textposition="outside",
                           marker=dict(color=colours, line=dict(color=TRUTH, width=outline)),
                           hovertemplate="class %{x}<br>probability %{y:.4f}<extra></extra>"),
                    look(title or f"prediction: {predicted}" + ("" if true_label is None else f" · true: {true_label}"),
                         380, "class", "probability"))
    fig.update_yaxes(range=[0, 1.15])
    fig.update_xaxes(type="category")
    return fig


def stem_kernels(kernels: np.ndarray, columns: int = 8, title: str = "") -> go.Figure:
    """(d_model, p, p) kernels, one p x p tile per feature, `columns` to a row with a blank pixel between tiles.

    The same numbers are the linear stem's rows and the convolution's kernels; diverging colours centred on 0:
    which pixels of a patch push a feature up, which push it down.
    """
    kernels = np.asarray(kernels, dtype=float)
    count, p, _ = kernels.shape
    rows = math.ceil(count / columns)
    tiled = np.full((rows * (p + 1) - 1, columns * (p + 1) - 1), np.nan)  # NaN: the gaps between tiles
    feature = np.full(tiled.shape, -1)  # which feature each pixel of the picture belongs to, for the hover
    for i, kernel in enumerate(kernels):
        top, left = divmod(i, columns)
        tile = np.s_[top * (p + 1):top * (p + 1) + p, left * (p + 1):left * (p + 1) + p]
        tiled[tile], feature[tile] = kernel, i
    bound = float(np.nanmax(np.abs(tiled))) or 1.0
    heat = go.Heatmap(z=tiled, customdata=feature, colorscale="RdBu", zmid=0, zmin=-bound, zmax=bound,
                      hovertemplate="feature %{customdata}<br>weight %{z:.3f}<extra></extra>",
                      colorbar=dict(title="weight"))
    plain = dict(showticklabels=False, showgrid=False, zeroline=False)
    return go.Figure([heat], dict(title=dict(text=title or f"{count} kernels of {p}×{p}"), font=FONT,
                                  height=120 + 60 * rows, margin=dict(l=10, r=10, t=50, b=10), xaxis=plain,
                                  yaxis=dict(plain, autorange="reversed", scaleanchor="x"), plot_bgcolor="#ffffff"))
