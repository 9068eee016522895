"""Charts' downloads in Chromium. A chart's standalone HTML file, opened from a file:// address with every network
request blocked: the heatmap draws, its toolbar's SVG button saves an SVG with the title, axis titles, token labels
and the colour scale (its gradient and its numbers), and the camera button saves a PNG. In the app: the camera button
saves a PNG, an SVG once the sidebar says so, and the button below a chart downloads its HTML file."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import sync_playwright

from ui.app.charts import standalone_html
from ui.figures.base import heatmap

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from screenshots import VIEWPORT, launch_chromium, serve_app, wait_until_ready  # noqa: E402

pytestmark = pytest.mark.browser

SVG_BUTTON = ".modebar-btn[data-title='Download plot as SVG']"
PNG_BUTTON = ".modebar-btn[data-title='Download plot as a PNG']"
CAMERA_BUTTON = ".modebar-btn[data-title^='Download plot']"  # plotly.js names the format only when it is PNG


def svg_texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def test_the_html_file_draws_offline_and_saves_its_chart_as_svg_and_png(tmp_path):
    fig = heatmap(np.linspace(0, 1, 20).reshape(4, 5), list("Hello"), list("worl"), "layer 0, head 1", zmin=0, zmax=1)
    path = tmp_path / "attention-lab-heads.html"
    path.write_text(standalone_html(fig, "attention-lab-heads"), encoding="utf-8")
    fetched, errors = [], []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        context = browser.new_context(viewport={"width": 1000, "height": 700}, accept_downloads=True)
        context.route(re.compile(r"^(?!file:).*"), lambda route: (fetched.append(route.request.url), route.abort()))
        page = context.new_page()
        page.set_default_timeout(120_000)  # plotly.js (4 MB) is parsed from the file itself
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(path.as_uri())
        page.wait_for_selector(".js-plotly-plot .heatmaplayer image", state="attached")  # the chart is drawn
        page.hover(".js-plotly-plot")  # the toolbar shows on hover

        with page.expect_download() as svg_download:
            page.click(SVG_BUTTON)
        assert svg_download.value.suggested_filename == "attention-lab-heads.svg"
        svg = Path(svg_download.value.path()).read_text(encoding="utf-8")

        with page.expect_download() as png_download:
            page.click(PNG_BUTTON)
        assert png_download.value.suggested_filename == "attention-lab-heads.png"
        png = Path(png_download.value.path()).read_bytes()
        browser.close()

    assert svg.startswith("<svg") and "heatmaplayer" in svg
    texts = set(svg_texts(svg))
    assert {"layer 0, head 1", "key", "query"} <= texts  # the title and both axis titles
    token_labels = {f"{i}:{c}" for labels in ("Hello", "worl") for i, c in enumerate(labels)}
    assert {t for t in texts if re.fullmatch(r"\d+:\w", t)} == token_labels  # every tick label on both axes
    colorbar = svg[svg.index('colorbar"'):]
    gradient_id = re.search(r"cbfill[^>]*url\('#([^']+)'\)", colorbar).group(1)  # the colour scale ...
    gradient = re.search(rf'<linearGradient[^>]*id="{gradient_id}">(.*?)</linearGradient>', svg).group(1)
    stops = re.findall(r'stop-color="([^"]+)"', gradient)
    assert stops[0] == "rgb(68, 1, 84)" and stops[-1] == "rgb(253, 231, 37)"  # Viridis, dark to yellow
    assert {"0", "0.2", "0.8", "1"} <= set(svg_texts(colorbar))  # ... and its numbers
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5_000
    assert errors == [] and fetched == []


def camera_download(page) -> tuple[str, bytes]:
    """Click the first chart's camera button: the file's name and bytes."""
    chart = page.locator(".js-plotly-plot").first
    chart.hover()  # the toolbar shows on hover
    with page.expect_download() as download:
        chart.locator(CAMERA_BUTTON).click()
    return download.value.suggested_filename, Path(download.value.path()).read_bytes()


def test_in_the_app_the_camera_saves_the_format_the_sidebar_chose_and_each_chart_downloads_as_html():
    with serve_app() as base, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_context(viewport=VIEWPORT, accept_downloads=True).new_page()
        page.set_default_timeout(90_000)
        page.goto(f"{base}/ffn")
        wait_until_ready(page)
        name, image = camera_download(page)
        assert name == "attention-lab-ffn-curves.png" and image.startswith(b"\x89PNG")

        page.locator('[data-testid="stSidebar"]').get_by_text("SVG", exact=True).click()
        wait_until_ready(page)
        name, image = camera_download(page)
        assert name == "attention-lab-ffn-curves.svg" and image.startswith(b"<svg")

        with page.expect_download() as download:
            page.get_by_role("button", name="Interactive HTML").first.click()
        name, document = download.value.suggested_filename, Path(download.value.path()).read_text(encoding="utf-8")
        browser.close()
    assert name == "attention-lab-ffn-curves.html"
    assert "Plotly.newPlot" in document and len(document) > 3_000_000 and "'svg'" in document
