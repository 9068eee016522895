"""Every chart of the app: drawn by plotly, saved as PNG or SVG, and as a standalone interactive HTML file.

Both exports run where plotly.js runs, so the server needs no browser engine of its own:
- the camera button of a chart in the app draws the image in the reader's browser. A plotly
  config is JSON, so it can say which one format that button saves, but it cannot add a second
  button; the format is one choice per session, in the sidebar's "Downloads" area;
- the HTML file inlines plotly.js (it opens from disk, with no network) and its toolbar has two
  buttons: the camera saves a PNG, a second button saves an SVG.

Pages call ``show_chart`` where they would call ``st.plotly_chart``.
"""
from __future__ import annotations

import json
import re

import streamlit as st

from ui.figures.standalone import standalone

IMAGE_FORMAT = "chart_image_format"  # session key: the format every chart's camera button saves
FORMAT_WIDGET = "chart_images"  # the sidebar radio's key, re-seeded from IMAGE_FORMAT on every run
# the choice a reader sees -> plotly.js's toImage options; a PNG at twice the pixels stays sharp on a slide
IMAGE_FORMATS = {"PNG": {"format": "png", "scale": 2}, "SVG": {"format": "svg", "scale": 1}}
DEFAULT_FORMAT = "PNG"
FILE_PREFIX = "attention-lab"

# Runs once the exported file has drawn its chart: the same config again, plus a toolbar button
# whose click asks plotly.js for an SVG (a click is a function, which a JSON config cannot hold).
SVG_BUTTON_SCRIPT = """
var chart = document.getElementById('{plot_id}');
var svgButton = {
    name: 'downloadSvg', title: 'Download plot as SVG', icon: Plotly.Icons.disk,
    click: function (gd) { Plotly.downloadImage(gd, {format: 'svg', filename: __FILENAME__}); }
};
return Plotly.react(chart, chart.data, chart.layout, Object.assign(__CONFIG__, {modeBarButtonsToAdd: [svgButton]}));
"""


def chart_filename(key: str | None, fig) -> str:
    """A download's name, without extension: the chart's key (else its title) in letters, digits and dashes."""
    title = getattr(getattr(getattr(fig, "layout", None), "title", None), "text", None)
    words = re.sub(r"[^A-Za-z0-9]+", "-", str(key or title or "chart")).strip("-").lower()[:60]
    return f"{FILE_PREFIX}-{words or 'chart'}"


def chart_config(image_format: str, filename: str) -> dict:
    """A chart's plotly config: its camera button saves ``image_format`` ("PNG" or "SVG") as ``filename``."""
    return {"toImageButtonOptions": {**IMAGE_FORMATS[image_format], "filename": filename}}


def standalone_html(fig, filename: str) -> str:
    """The chart as one HTML file: plotly.js inline, zoom and hover kept, a PNG and an SVG button in its toolbar.

    About 4 MB (plotly.js itself), so it is built only when someone clicks its download button.
    """
    # no plotly logo and no "Share chart" button: both lead to plotly's website, and the file is meant for offline use
    config = {**chart_config("PNG", filename), "displaylogo": False, "showSendToCloud": False}
    script = SVG_BUTTON_SCRIPT.replace("__FILENAME__", json.dumps(filename)).replace("__CONFIG__", json.dumps(config))
    # its own template: the app's theme does not travel with the file (ui/figures/standalone.py)
    return standalone(fig).to_html(include_plotlyjs=True, full_html=True, config=config, post_script=script)


def show_chart(fig, *, key: str | None = None, where=None, **plotly_chart_kwargs):
    """``st.plotly_chart(fig, key=key, ...)`` with the chart's downloads; ``where``: a column or placeholder to draw in.

    The camera button saves the session's chosen format; a small button below the chart saves it as an
    interactive HTML file. Nothing is serialised here beyond what st.plotly_chart sends anyway: the
    HTML is built by a callable Streamlit runs on click.
    """
    filename = chart_filename(key, fig)
    config = {**chart_config(st.session_state.get(IMAGE_FORMAT, DEFAULT_FORMAT), filename),
              **plotly_chart_kwargs.pop("config", {})}
    # inside a column or a placeholder, one container holds the chart and its button (st.empty keeps one element)
    place = st if where is None else where.container()
    drawn = place.plotly_chart(fig, key=key, config=config, **plotly_chart_kwargs)
    place.download_button("Interactive HTML", data=lambda: standalone_html(fig, filename),
                          file_name=f"{filename}.html", mime="text/html", on_click="ignore", type="tertiary",
                          icon=":material/download:", key=None if key is None else f"{key}_html",
                          help="This chart as one file that opens in any browser, offline: zoom and hover "
                               "work, and its toolbar saves a PNG or an SVG.")
    return drawn


def image_format_choice() -> None:
    """The sidebar's "Downloads" area: which format the camera button of every chart saves, for the session."""
    s = st.session_state
    s[FORMAT_WIDGET] = s.get(IMAGE_FORMAT, DEFAULT_FORMAT)  # Streamlit forgets widget keys across page switches
    st.markdown("**Downloads**")
    st.radio("Chart images (each chart's camera button)", list(IMAGE_FORMATS), key=FORMAT_WIDGET, horizontal=True,
             on_change=_keep_image_format,
             help="PNG for slides; SVG stays sharp at any size, for papers. Every chart also downloads as an "
                  "interactive HTML file (the button below it).")


def _keep_image_format() -> None:
    st.session_state[IMAGE_FORMAT] = st.session_state[FORMAT_WIDGET]
