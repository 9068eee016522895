"""The Chromium latency benchmark keeps working: its smoke mode opens the first page in Debian's Chromium,
makes one sidebar change and reports a finite time from the change to the page's last drawing.

No time is asserted: speed is read from ``python -m benchmarks.browser_latency`` by people.
"""
import json
import math

import pytest

from benchmarks import app_latency, browser_latency
from ui.app.navigation import PAGES

pytestmark = [pytest.mark.timeout(600), pytest.mark.browser]


def test_browser_latency_smoke_times_one_change_on_the_first_page(tmp_path, capsys):
    out = tmp_path / "browser.json"
    results = browser_latency.main(["--smoke", "--out", str(out)])
    assert [r.page for r in results] == [PAGES[0].script]
    (page,) = results
    assert page.timeouts == [] and page.exceptions == 0
    assert len(page.drawn_ms) == 1 and math.isfinite(page.drawn_ms[0]) and page.drawn_ms[0] > 0
    key = app_latency.CHANGES[0][1]
    assert page.changes[0].startswith(f"{key}: ")  # the change the server-side benchmark makes first
    old, new = page.changes[0].split(": ", 1)[1].split(" -> ")
    assert old != new
    assert page.server_ms and all(ms > 0 for ms in page.server_ms)  # the server logged the run the change caused
    saved = json.loads(out.read_text())
    assert saved["mode"] == "smoke" and saved["pages"][0]["drawn_ms"] == page.drawn_ms
    assert f"| {PAGES[0].script} | 1 |" in capsys.readouterr().out


def test_percentiles_of_no_changes_are_not_numbers_and_the_summary_says_not_met():
    empty = browser_latency.PageResult("pages/home.py")
    assert math.isnan(browser_latency.percentile(empty.drawn_ms, 50))
    assert browser_latency.summary([empty])["met"] is False
