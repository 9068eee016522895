"""Figure builders only the Lessons page needs, and the projector look every lesson figure gets.

numpy (or plain rows) in, plotly Figure out, like the other figure modules; colours from the same
Okabe-Ito palette and Viridis scale.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ui.figures.axes import OKABE_ITO, look
from ui.figures.base import FONT, subplot_grid

PROJECTOR_FONT = 22  # px: readable from the back of a room at 1920 x 1080
PROJECTOR_MIN_FONT = 20  # no text of a figure in presenter mode is smaller than this
PROJECTOR_HEIGHT = 540
CORRECT, OTHER = OKABE_ITO[2], "#9e9e9e"


def for_projector(fig: go.Figure, height: int = PROJECTOR_HEIGHT) -> go.Figure:
    """Every text of the figure at PROJECTOR_MIN_FONT px or more, and tall enough to fill a screen.

    The builders set some fonts explicitly (subplot titles, tick labels, text inside cells), so
    each of those is raised too, not only the layout's default font.
    """
    big = PROJECTOR_FONT
    fig.update_layout(font=dict(size=big), title_font_size=big + 4, legend_font_size=big - 2,
                      hoverlabel_font_size=big - 2, height=max(height, int(fig.layout.height or 0)))
    fig.update_annotations(font_size=big)
    fig.update_xaxes(tickfont_size=big - 2, title_font_size=big)
    fig.update_yaxes(tickfont_size=big - 2, title_font_size=big)
    for trace in fig.data:
        if "textfont" in trace:
            trace.textfont.size = max(PROJECTOR_MIN_FONT, trace.textfont.size or 0)
        if trace.type == "table":
            trace.header.font.size, trace.cells.font.size = big, big - 2
            trace.cells.height, trace.header.height = 40, 44
        if "colorbar" in trace:
            trace.colorbar.tickfont.size = big - 2
            trace.colorbar.title.font.size = big - 2
    fig.update_coloraxes(colorbar_tickfont_size=big - 2, colorbar_title_font_size=big - 2)
    return fig


def answer_bars(choices: list[str], counts: list[int], correct: int | None = None, title: str = "") -> go.Figure:
    """How many students chose each answer; once revealed, the correct one in green."""
    letters = [f"{chr(65 + i)}" for i in range(len(choices))]
    colours = [CORRECT if i == correct else (OKABE_ITO[0] if correct is None else OTHER) for i in range(len(choices))]
    fig = go.Figure(go.Bar(x=counts, y=[f"{letter}: {text}" for letter, text in zip(letters, choices)], orientation="h",
                           marker_color=colours, text=[str(n) for n in counts], textposition="outside",
                           hovertemplate="%{y}<br>%{x} students<extra></extra>"),
                    look(title, 120 + 70 * len(choices), "students", ""))
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(range=[0, max(max(counts, default=0), 1) * 1.25], dtick=max(1, max(counts, default=0) // 5 or 1))
    return fig


def image_as_tokens(image: np.ndarray, patches: np.ndarray, patch: int) -> go.Figure:
    """Left: the image with its patch grid and each patch's number; right: the patches as a sequence of tokens.

    image: (H, W) pixel values; patches: (N, patch * patch) the same pixels, one row per patch in
    reading order -- what the transformer reads, like the rows of a sentence's embeddings.
    """
    side = image.shape[0]
    n, area = patches.shape
    cells, grid = subplot_grid([f"{side}×{side} image, cut into {patch}×{patch} patches",
                                f"the same pixels as {n} tokens of {area} values"], cols=2, gap_x=0.12, widths=[1, 1])
    traces = [
        go.Heatmap(z=image, colorscale="Greys", showscale=False, **cells[0],
                   hovertemplate="row %{y}, column %{x}<br>pixel %{z:.2g}<extra></extra>"),
        go.Heatmap(z=patches, x=list(range(area)), y=[f"token {i}" for i in range(n)], coloraxis=None,
                   colorscale="Greys", showscale=False, **cells[1], xgap=1, ygap=1,
                   hovertemplate="%{y}, value %{x}<br>pixel %{z:.2g}<extra></extra>"),
    ]
    rows = side // patch
    labels = [dict(x=c * patch + (patch - 1) / 2, y=r * patch + (patch - 1) / 2, text=str(r * rows + c),
                   xref=cells[0]["xaxis"], yref=cells[0]["yaxis"], showarrow=False,
                   font=dict(color=OKABE_ITO[5], size=FONT["size"] + 3))
              for r in range(rows) for c in range(rows)]
    shapes = [dict(type="line", xref=cells[0]["xaxis"], yref=cells[0]["yaxis"], x0=k - 0.5, x1=k - 0.5, y0=-0.5,
                   y1=side - 0.5, line=dict(color=OKABE_ITO[0], width=3)) for k in range(0, side + 1, patch)]
    shapes += [dict(type="line", xref=cells[0]["xaxis"], yref=cells[0]["yaxis"], y0=k - 0.5, y1=k - 0.5, x0=-0.5,
                    x1=side - 0.5, line=dict(color=OKABE_ITO[0], width=3)) for k in range(0, side + 1, patch)]
    grid["yaxis"].update(autorange="reversed", scaleanchor="x", title=dict(text="pixel row"))
    grid["xaxis"].update(title=dict(text="pixel column"))
    grid["yaxis2"].update(autorange="reversed", title=dict(text="token (patch number)"))
    grid["xaxis2"].update(title=dict(text="value inside the patch"))
    return go.Figure(traces, dict(grid, annotations=[*grid["annotations"], *labels], shapes=shapes, font=FONT,
                                  height=460, margin=dict(l=10, r=10, t=60, b=10)))


def model_table(rows: list[dict[str, str]], highlight: str | None = None) -> go.Figure:
    """Real models as rows of their choices on the five axes; the row named `highlight` is shaded."""
    columns = list(rows[0])
    fill = [["#fde7a9" if row[columns[0]] == highlight else "#ffffff" for row in rows]] * len(columns)
    fig = go.Figure(go.Table(
        header=dict(values=[f"<b>{c}</b>" for c in columns], fill_color="#e8eef7", align="left", font=FONT),
        cells=dict(values=[[row[c] for row in rows] for c in columns], align="left", fill_color=fill, font=FONT,
                   height=30)))
    fig.update_layout(margin=dict(l=10, r=10, t=10, b=10), height=60 + 32 * (len(rows) + 1), font=FONT)
    return fig



def labelled_bars(labels: list[str], values: list[float], title: str, x_title: str, y_title: str,
                  texts: list[str] | None = None) -> go.Figure:
    """A few named bars, each with its value written above it."""
    fig = go.Figure(go.Bar(x=labels, y=values, marker_color=[OKABE_ITO[i % 8] for i in range(len(labels))],
                           text=texts, textposition="outside", hovertemplate="%{x}: %{y:.4g}<extra></extra>"),
                    look(title, 420, x_title, y_title))
    fig.update_yaxes(range=[0, max(values) * 1.2])
    return fig
