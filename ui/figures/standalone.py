"""The look a figure carries with it when it leaves the app: an HTML download, the homework file, a notebook.

In the app's process Streamlit makes its own plotly template the default, and that template is only placeholders
(colours #000001, #000002 ...) that Streamlit's page replaces, with the room around the plot left to it. Drawn by
plotly.js anywhere else, such a figure keeps its 10 px margins with nothing to widen them: the y ticks 0.2 … 0.8
lose their "0." off the left edge, the x labels fall off the bottom, and the axis titles sit on the ticks.
``standalone(fig)`` gives a copy of the figure a template of its own that draws it as the app does: white, the
app's colours and font, and margins that grow to hold every tick label, axis title, colour bar and legend.
"""
from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

from ui.figures.base import FONT

# Streamlit's light theme: its categorical colours, in its order, and its font (a sans-serif wherever it is missing)
APP_COLOURS = ["#0068c9", "#83c9ff", "#ff2b2b", "#ffabab", "#29b09d", "#7defa1", "#ff8700", "#ffd16a", "#6d3fc0",
               "#d5dae5"]
APP_FONT = '"Source Sans Pro", "Source Sans 3", "Helvetica Neue", Arial, sans-serif'


def _template() -> go.layout.Template:
    # plotly_white: white paper and plot, light grid lines, and automargin on every axis, so the margins grow to fit
    template = go.layout.Template(pio.templates["plotly_white"])
    template.layout.update(colorway=APP_COLOURS, font=dict(FONT, family=APP_FONT, color="#31333f"),
                           xaxis=dict(automargin=True, title=dict(standoff=8)),
                           yaxis=dict(automargin=True, title=dict(standoff=8)))
    return template


STANDALONE_TEMPLATE = _template()


def standalone(fig: go.Figure) -> go.Figure:
    """A copy of `fig` that draws outside the app as it does inside it (the original is left as it is)."""
    return go.Figure(fig).update_layout(template=STANDALONE_TEMPLATE)
