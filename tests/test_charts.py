"""Every chart's downloads: the camera button's config (PNG or SVG, a named file), the standalone interactive HTML
file (plotly.js inline, the figure whole: axis titles, token labels, colour scale), and no page drawing a chart
without them. In the app (AppTest): every chart carries the config, the sidebar's choice changes it on every chart
and on the next page too, and every chart has its HTML download, built only on click."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

from apptest_helpers import assert_clean, open_page, values
from ui.app.charts import FORMAT_WIDGET, IMAGE_FORMATS, chart_config, chart_filename, standalone_html
from ui.figures.base import heatmap

ROOT = Path(__file__).resolve().parent.parent
HTML_LABEL = "Interactive HTML"


def attention_heatmap():
    rng = np.random.default_rng(0)
    weights = rng.random((4, 5))
    return heatmap(weights / weights.sum(1, keepdims=True), list("Hello"), list("worl"), "layer 0, head 1",
                   zmin=0, zmax=1), weights


def drawn_figure(document: str) -> tuple[list, dict, dict]:
    """The data, layout and config the file hands Plotly.newPlot, read back as JSON."""
    decoder = json.JSONDecoder()
    at = document.index("Plotly.newPlot(")
    at = document.index(",", at) + 1  # past the div's id
    parts = []
    for _ in range(3):
        while document[at] in " \n,":
            at += 1
        part, at = decoder.raw_decode(document, at)
        parts.append(part)
    return tuple(parts)


def test_a_heatmaps_html_file_is_standalone_and_keeps_its_titles_labels_and_colour_scale():
    fig, weights = attention_heatmap()
    document = standalone_html(fig, "attention-lab-heads")
    assert document.startswith("<!doctype html>") and len(document) > 3_000_000  # plotly.js itself is inside ...
    assert not re.search(r"<script[^>]+src=", document)  # ... and nothing is fetched
    data, layout, config = drawn_figure(document)
    trace = data[0]
    assert trace["type"] == "heatmap" and trace.get("showscale", True)  # the colour bar is drawn
    assert trace["colorscale"] == [list(stop) for stop in fig.data[0].colorscale]  # the figure's own scale, Viridis
    assert fig.data[0].colorscale[0][1] == "#440154" and (trace["zmin"], trace["zmax"]) == (0, 1)
    assert [label.split(":", 1)[1] for label in trace["x"]] == list("Hello")  # the token labels on the axes
    assert [label.split(":", 1)[1] for label in trace["y"]] == list("worl")
    np.testing.assert_allclose(values(trace["z"]), weights / weights.sum(1, keepdims=True))
    assert layout["xaxis"]["title"]["text"] == "key" and layout["yaxis"]["title"]["text"] == "query"
    assert layout["title"]["text"] == "layer 0, head 1"
    assert config["toImageButtonOptions"] == {"format": "png", "scale": 2, "filename": "attention-lab-heads"}
    # the second toolbar button saves the same chart as an SVG, under the same name
    assert "Plotly.downloadImage(gd, {format: 'svg', filename: \"attention-lab-heads\"})" in document


@pytest.mark.parametrize("choice", list(IMAGE_FORMATS))
def test_the_camera_button_saves_the_chosen_format_under_the_charts_name(choice):
    options = chart_config(choice, "attention-lab-ffn-gate")["toImageButtonOptions"]
    assert options["format"] == choice.lower() and options["filename"] == "attention-lab-ffn-gate"
    assert options["scale"] == (2 if choice == "PNG" else 1)  # a PNG at twice the pixels; an SVG has no pixels


def test_a_downloads_name_comes_from_the_charts_key_else_its_title():
    fig, _ = attention_heatmap()
    assert chart_filename("loss_final", fig) == "attention-lab-loss-final"
    assert chart_filename(None, fig) == "attention-lab-layer-0-head-1"
    assert chart_filename(None, None) == "attention-lab-chart"


def test_no_page_draws_a_chart_without_its_downloads():
    """st.plotly_chart alone offers a PNG only; show_chart adds the SVG and the HTML file."""
    sources = [*ROOT.glob("pages/*.py"), *ROOT.glob("ui/**/*.py")]
    direct = {str(path.relative_to(ROOT)) for path in sources if re.search(r"\.plotly_chart\(", path.read_text())}
    assert direct == {"ui/app/charts.py"}  # show_chart's own call
    assert len(sources) > 40 and "pages/playground.py" in {str(p.relative_to(ROOT)) for p in sources}


def chart_exports(at) -> dict[str, tuple[dict, object]]:
    """Each chart's key -> (its camera button's options, its HTML download button)."""
    buttons = {button.proto.id: button for button in at.get("download_button") if button.proto.label == HTML_LABEL}
    exports = {}
    for chart in at.get("plotly_chart"):
        key = chart.proto.id.rsplit("-", 1)[-1]
        html_button = next(b for b in buttons.values() if b.proto.id.endswith(f"-{key}_html"))
        exports[key] = json.loads(chart.proto.config)["toImageButtonOptions"], html_button
    assert len(buttons) == len(exports)  # one HTML download per chart, no more
    return exports


@pytest.mark.parametrize("page, other_page, query, n_charts", [
    ("pages/ffn.py", "pages/positions.py", {}, 3),
    ("pages/compare.py", "pages/scores.py", {"cmp_tab": "Next-token distributions"}, 2)])  # the tab the link opens
def test_every_chart_saves_png_or_svg_as_the_sidebar_says_and_downloads_as_html(page, other_page, query, n_charts):
    at = assert_clean(open_page(page, preset="mixtral", **query))  # MoE: the FFN page draws its routing charts too
    exports = chart_exports(at)
    assert len(exports) >= n_charts
    for key, (options, html_button) in exports.items():
        assert options == {"format": "png", "scale": 2, "filename": chart_filename(key, None)}
        assert html_button.proto.deferred_file_id and not html_button.proto.url  # built on click only

    at.sidebar.radio(key=FORMAT_WIDGET).set_value("SVG").run()
    assert_clean(at)
    exports = chart_exports(at)
    assert {options["format"] for options, _ in exports.values()} == {"svg"}
    assert all(options["filename"] == chart_filename(key, None) for key, (options, _) in exports.items())

    at.switch_page(other_page).run()  # the choice holds for the whole session
    assert_clean(at)
    assert at.sidebar.radio(key=FORMAT_WIDGET).value == "SVG"
    other = chart_exports(at)
    assert len(other) >= 2 and {options["format"] for options, _ in other.values()} == {"svg"}
