"""Figures that leave the app keep their layout, in Chromium: an "Interactive HTML" download, the homework file and a
notebook's figure. Every tick label, axis title and figure title lies inside its figure, and no axis title sits on
its ticks. The figures are built in this process after Streamlit is imported, as in the app, where Streamlit's
plotly template (placeholders its page fills in) is the default."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import streamlit  # noqa: F401  (makes Streamlit's placeholder template plotly's default, as in the app's process)
from playwright.sync_api import sync_playwright

from transformer.checkpoint import SHIPPED_DIR, load
from ui.app.charts import standalone_html
from ui.figures.playground import query_bars
from ui.lessons.homework import homework_html
from ui.lessons.steps import STEPS
from ui.notebook import show

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from screenshots import launch_chromium  # noqa: E402

pytestmark = pytest.mark.browser

TEXT = "The cat sat on the mat."
# every drawn text that belongs to a figure's frame, with where it lies against its own figure (CSS pixels)
MEASURE = """() => [...document.querySelectorAll('.js-plotly-plot')].map(plot => {
  const frame = plot.querySelector('.main-svg').getBoundingClientRect();
  const box = (e, kind) => { const r = e.getBoundingClientRect();
    return {kind, text: e.textContent, left: r.left - frame.left, top: r.top - frame.top,
            right: r.right - frame.left, bottom: r.bottom - frame.top}; };
  const all = (selector, kind) => [...plot.querySelectorAll(selector)].filter(e => e.textContent.trim())
                                                                       .map(e => box(e, kind));
  return {width: frame.width, height: frame.height,
          ticks: [...all('.xtick text', 'x tick'), ...all('.ytick text', 'y tick')],
          titles: [...all('[class*="g-x"][class*="title"] text', 'x title'),
                   ...all('[class*="g-y"][class*="title"] text', 'y title'), ...all('.gtitle', 'title')]};
})"""


def problems(figure: dict) -> list[str]:
    """Texts drawn outside their figure (cut off), and axis titles on top of tick labels."""
    slack = 1.0  # anti-aliasing may spill a pixel
    found = [f"{t['kind']} {t['text']!r} runs out of the {figure['width']:.0f}x{figure['height']:.0f} figure "
             f"({t['left']:.0f}, {t['top']:.0f}, {t['right']:.0f}, {t['bottom']:.0f})"
             for t in figure["ticks"] + figure["titles"]
             if t["left"] < -slack or t["top"] < -slack or t["right"] > figure["width"] + slack
             or t["bottom"] > figure["height"] + slack]
    for title in (t for t in figure["titles"] if t["kind"] != "title"):
        for tick in figure["ticks"]:
            if tick["kind"][0] == title["kind"][0] and overlap(title, tick) > 2:
                found.append(f"{title['kind']} {title['text']!r} covers {tick['kind']} {tick['text']!r}")
    return found


def overlap(a: dict, b: dict) -> float:
    """The smaller side of two boxes' intersection, in pixels (0 when apart)."""
    return max(0.0, min(min(a["right"], b["right"]) - max(a["left"], b["left"]),
                        min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])))


def measure(path: Path, reveal: bool = False, shots: Path | None = None) -> list[dict]:
    """Open the file from disk in Chromium (nothing else may load) and measure every figure's texts."""
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        context = browser.new_context(viewport={"width": 1000, "height": 800})
        context.route(re.compile(r"^(?!file:).*"), lambda route: route.abort())
        page = context.new_page()
        page.set_default_timeout(120_000)  # plotly.js (4 MB) is parsed from the file itself
        page.goto(path.as_uri())
        if reveal:  # the homework file draws a step's figure when its answer is revealed
            for summary in page.locator("details.reveal summary").all():
                summary.click()
        page.wait_for_selector(".js-plotly-plot .main-svg", state="attached")
        page.wait_for_timeout(500)  # plotly's automargin redraws once it has measured the labels
        if shots is not None:
            page.screenshot(path=str(shots), full_page=True)
        figures = page.evaluate(MEASURE)
        browser.close()
    return figures


def test_the_check_finds_a_cut_tick_and_a_title_on_the_ticks():
    figure = {"width": 300, "height": 200, "titles": [
        {"kind": "y title", "text": "weight", "left": 2, "top": 40, "right": 20, "bottom": 120}],
        "ticks": [{"kind": "y tick", "text": "0.2", "left": -11, "top": 50, "right": 9, "bottom": 66},
                  {"kind": "x tick", "text": "0:T", "left": 30, "top": 180, "right": 50, "bottom": 197}]}
    found = problems(figure)
    assert any("'0.2' runs out" in problem for problem in found)
    assert any("'weight' covers y tick '0.2'" in problem for problem in found)
    assert not any("'0:T'" in problem for problem in found)


def test_an_interactive_html_download_keeps_its_ticks_and_titles_inside(tmp_path):
    weights = np.random.default_rng(0).dirichlet(np.ones(len(TEXT)))
    path = tmp_path / "query.html"
    path.write_text(standalone_html(query_bars(weights, list(TEXT), "m"), "query"), encoding="utf-8")
    (figure,) = measure(path, shots=tmp_path / "query.png")
    labels = {tick["text"] for tick in figure["ticks"]}
    assert {"0.2", "0.4", "0.6", "0.8"} <= labels  # whole, not "2", "4", "6", "8"
    assert not problems(figure), problems(figure)


def test_the_homework_files_figures_keep_their_ticks_and_titles_inside(tmp_path):
    steps = STEPS[:3]  # before attention (percentage ticks), a soft lookup, the five lines
    path = tmp_path / "lesson.html"
    path.write_text(homework_html(steps, [step.build() for step in steps]), encoding="utf-8")
    figures = measure(path, reveal=True, shots=tmp_path / "lesson.png")
    assert len(figures) == len(steps)
    percent = [tick["text"] for tick in figures[0]["ticks"] if tick["text"].endswith("%")]
    assert percent and all(re.fullmatch(r"\d+%", text) for text in percent), percent  # "40%", never a bare "%"
    found = [problem for figure in figures for problem in problems(figure)]
    assert not found, found


@pytest.mark.parametrize("draw", [lambda run: show.pattern(run, 3, 1), lambda run: show.grid(run, 2)],
                         ids=["one head", "one layer"])
def test_a_notebook_figure_saved_as_html_keeps_its_ticks_and_titles_inside(tmp_path, draw):
    model, meta = load(SHIPPED_DIR / "llama2-language")
    path = tmp_path / "notebook.html"
    draw(show.trace(model, TEXT, task=meta["task"])).write_html(path, include_plotlyjs=True)
    (figure,) = measure(path)
    assert figure["titles"]
    assert not problems(figure), problems(figure)
