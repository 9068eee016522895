""""Why this prediction?" in Chromium: the lens draws in the first tab, a lens cell's hover lists its top tokens, the
patching tab draws both patchings, a ready-made pair chosen in the browser goes into the address with the open tab,
and the address opens the same view.

The screenshot lands in artifacts/screenshots/ and refreshes docs/screenshots/interpret.png. Chromium must be
installed (.ci/run installs it).
"""
import shutil
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from screenshots import SHOTS, VIEWPORT, launch_chromium, save_png, serve_app, wait_until_ready  # noqa: E402

ARTIFACTS = ROOT / "artifacts" / "screenshots"
EXCEPTION = '[data-testid="stException"]'
# only the open tab is drawn (ui/app/tabs.py): the lens in the first, both patchings in the third
LENS = "document.querySelectorAll('.js-plotly-plot').length === 1"
TWO_PATCHINGS = ("document.querySelectorAll('.js-plotly-plot').length === 2 && "
                 "document.body.innerText.includes('Activation patching: which layer')")

pytestmark = [pytest.mark.timeout(600), pytest.mark.browser]


def test_the_page_draws_hovers_and_keeps_its_view_in_the_address():
    with serve_app() as base, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        tab = browser.new_page(viewport=VIEWPORT)
        tab.set_default_timeout(90_000)
        tab.goto(f"{base}/interpret")
        wait_until_ready(tab)
        assert tab.locator(EXCEPTION).count() == 0, tab.locator(EXCEPTION).all_inner_texts()
        tab.wait_for_function(LENS)
        save_png(tab, ARTIFACTS / "interpret.png")
        SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ARTIFACTS / "interpret.png", SHOTS / "interpret.png")

        lens = tab.locator(".js-plotly-plot").first
        lens.scroll_into_view_if_needed()
        box = lens.locator(".nsewdrag").first.bounding_box()  # the heatmap's plotting area
        tab.mouse.move(box["x"] + box["width"] * 0.97, box["y"] + box["height"] * 0.9)  # the output row, last position
        tab.wait_for_selector(".hoverlayer .hovertext", timeout=10_000)
        assert "top tokens" in lens.locator(".hoverlayer").text_content()

        tab.get_by_role("tab", name="Activation patching", exact=True).click()
        tab.wait_for_function(TWO_PATCHINGS, polling=250)
        wait_until_ready(tab)
        assert tab.locator(EXCEPTION).count() == 0
        prompts = tab.get_by_role("combobox", name="Prompts", exact=True)
        prompts.scroll_into_view_if_needed()
        prompts.click()
        tab.locator('[role="listbox"] [role="option"]').get_by_text("a number changed", exact=True).click()
        tab.wait_for_timeout(300)
        wait_until_ready(tab)
        assert tab.locator(EXCEPTION).count() == 0
        query = parse_qs(urlsplit(tab.url).query)
        assert query["pair"] == ["a number changed"] and query["clean"] == ["The code is 4719. The code is 47"]
        assert query["why_tab"] == ["Activation patching"]

        shared = browser.new_page(viewport=VIEWPORT)  # the address, opened elsewhere, shows the same prompts
        shared.set_default_timeout(90_000)
        shared.goto(tab.url)
        wait_until_ready(shared)
        expect(shared.get_by_label("Clean prompt")).to_have_value("The code is 4719. The code is 47")
        shared.wait_for_function(TWO_PATCHINGS)
        browser.close()
