"""The app in a real browser: `streamlit run app.py` in a subprocess, driven through Debian's Chromium.

Every page of the navigation (ui/app/navigation.py) opens without an exception; on the playground, changing an
axis in the sidebar changes the heatmaps the browser draws; the stepper's buttons and a shared link work.
Screenshots land in artifacts/screenshots/. Chromium must be installed (.ci/run installs it): without it these
tests fail.
"""
import sys
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from screenshots import (VIEWPORT, launch_chromium, page_paths, save_png,  # noqa: E402
                         serve_app, wait_until_ready)

ARTIFACTS = ROOT / "artifacts" / "screenshots"
EXCEPTION = '[data-testid="stException"]'
# every plotly figure's data on the page, typed arrays written out as lists
PLOT_DATA = """() => JSON.stringify(
    Array.from(document.querySelectorAll('.js-plotly-plot'), gd => (gd.data || []).map(t => t.z ?? t.y)),
    (key, value) => ArrayBuffer.isView(value) ? Array.from(value) : value)"""

pytestmark = [pytest.mark.timeout(600), pytest.mark.browser]


@pytest.fixture(scope="module")
def base_url():
    with serve_app() as base:
        yield base


@pytest.fixture(scope="module")
def page(base_url):
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        tab = browser.new_page(viewport=VIEWPORT)
        tab.set_default_timeout(90_000)
        yield tab
        browser.close()


@pytest.mark.parametrize("path, title, label, value", [
    ("masks?position=alibi", "Masks", "Position", "alibi"),  # the sidebar's state
    ("playground?preset=gpt2&n_layers=3&head=2", "Attention playground", "Head", "2 (kv head 2)"),  # the page's own
])
def test_a_shared_link_opens_inside_the_app_on_a_fresh_server(path, title, label, value):
    """The first request a new server gets is a page's own address (a link a teacher shared)."""
    with serve_app() as fresh, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        tab = browser.new_page(viewport=VIEWPORT)
        tab.set_default_timeout(90_000)
        open_path(tab, fresh, path)
        nav = tab.locator('[data-testid="stSidebarNav"]').inner_text()
        assert "The five axes" in nav and title in nav  # app.py's navigation, not a list of files
        assert tab.get_by_role("combobox", name=label, exact=True).input_value() == value
        assert tab.locator(EXCEPTION).count() == 0
        assert "/" + path.split("?")[0] in tab.url
        browser.close()


def open_path(page, base_url: str, path: str) -> None:
    page.goto(f"{base_url}/{path}")
    wait_until_ready(page)


def open_tab(page, label: str, shown: str) -> None:
    """Click a page's tab, as a reader would; the page reruns with it open (ui/app/tabs.py) until `shown` is drawn."""
    page.get_by_role("tab", name=label, exact=True).click()
    page.wait_for_function("text => document.body.innerText.includes(text)", arg=shown, polling=250)
    wait_until_ready(page)


def choose(page, label: str, option: str) -> None:
    """Pick an option of the selectbox with this label, as a user would."""
    box = page.get_by_role("combobox", name=label, exact=True)
    box.scroll_into_view_if_needed()
    box.click()
    box.fill(option)  # the list filters to the options that match what is typed
    page.locator('[role="listbox"] [role="option"]').get_by_text(option, exact=True).click()


@pytest.mark.parametrize("path", sorted(page_paths()))
def test_page_opens_without_an_exception(page, base_url, path):
    open_path(page, base_url, "" if path == "home" else path)
    assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).all_inner_texts()
    assert page.locator("h1").first.inner_text().strip()
    assert "/" + ("" if path == "home" else path) in page.url
    save_png(page, ARTIFACTS / f"{path}.png")


def test_playground_heatmaps_follow_the_position_axis(page, base_url):
    open_path(page, base_url, "playground?preset=gpt2&n_layers=3&text=hello+world")
    assert page.locator(EXCEPTION).count() == 0
    plots = page.locator(".js-plotly-plot")
    assert plots.count() == 1  # the first tab: the head grid; the other tabs are drawn when opened
    open_tab(page, "One head, stage by stage", "Head 0, stage by stage")
    before_count, before = plots.count(), page.evaluate(PLOT_DATA)
    assert before_count == 4 and '"hello"' not in before  # the four stages

    choose(page, "Position", "rope")
    page.wait_for_function(f"before => ({PLOT_DATA})() !== before", arg=before, polling=250)
    wait_until_ready(page)
    assert page.locator(EXCEPTION).count() == 0
    assert page.evaluate(PLOT_DATA) != before  # RoPE instead of learned positions: other scores, other weights
    assert plots.count() == before_count  # the stages' tab stays open
    assert "position=rope" in page.url
    open_tab(page, "Position, experts, the model", "Every recorded tensor by hook name")
    assert plots.count() == 1  # the RoPE angle heatmap
    save_png(page, ARTIFACTS / "playground_rope.png")


def test_a_shared_link_opens_the_same_view(page, base_url):
    open_path(page, base_url, "playground?preset=custom&position=alibi&n_heads=4&n_kv_heads=2&head=3&layer=1")
    assert page.locator(EXCEPTION).count() == 0
    assert page.get_by_role("combobox", name="Head", exact=True).input_value() == "3 (kv head 1)"
    open_tab(page, "One head, stage by stage", "Head 3, stage by stage")
    assert page.get_by_text("Head 3, stage by stage").count() == 1
    assert page.get_by_text("ALiBi bias").count() >= 1  # the bias panel's title inside the plot


def test_page_switches_keep_the_sidebar_and_the_page_controls(page, base_url):
    open_path(page, base_url, "playground?preset=gpt2&n_layers=3&text=hello+there&head=2")
    choose(page, "Position", "alibi")
    page.wait_for_function("() => location.search.includes('position=alibi')")
    wait_until_ready(page)
    page.get_by_role("link", name="Forward-pass stepper").click()
    page.wait_for_function("() => document.body.innerText.includes('Step 0 of')")
    wait_until_ready(page)
    assert page.get_by_role("combobox", name="Position", exact=True).input_value() == "alibi"
    page.get_by_role("link", name="Attention playground").click()
    page.wait_for_function("() => document.body.innerText.includes('stage by stage')")
    wait_until_ready(page)
    assert page.get_by_role("combobox", name="Head", exact=True).input_value() == "2 (kv head 2)"
    assert page.get_by_role("combobox", name="Position", exact=True).input_value() == "alibi"
    assert page.get_by_role("textbox", name="Input text").input_value() == "hello there"
    assert page.locator(EXCEPTION).count() == 0


def test_stepper_buttons_move_one_step(page, base_url):
    open_path(page, base_url, "stepper?step=0")
    assert page.get_by_text("Step 0 of").count() == 1
    page.get_by_role("button", name="Next ▶").click()
    page.wait_for_function("() => document.body.innerText.includes('Step 1 of')")
    wait_until_ready(page)
    assert "step=1" in page.url and page.locator(EXCEPTION).count() == 0
    page.get_by_role("button", name="◀ Previous").click()
    page.wait_for_function("() => document.body.innerText.includes('Step 0 of')")
    wait_until_ready(page)
    assert "step=0" in page.url
