"""What a person sees after a sidebar change: from the change to the last chart the browser draws, in Chromium.

    python -m benchmarks.browser_latency [--smoke] [--pages N] [--changes N] [--out browser_latency.json]

Starts ``streamlit run app.py`` on 127.0.0.1 and a free port and one headless Chromium (Debian's, through
playwright), one tab, on the same machine. For each of the first --pages pages of the navigation
(``ui.app.navigation.PAGES``, default 10) it opens the page with a seed of its own (so its changes miss the caches
the other pages filled) and makes the sidebar changes of ``benchmarks.app_latency`` -- position, FFN, norm, KV
heads, position, FFN, norm placement, seed -- each picking an option the widget does not hold and the page has not
set before.

One change is timed, with the page's own clock (``performance.now()``), from the input event that commits it (the
press on the chosen option of a select box, Enter in the seed's field) to the last change the browser made to any
plotly chart's drawing (a mutation inside a ``.js-plotly-plot``: plotly draws into the DOM, heatmaps included) --
on a page whose charts did not change, to the last change of the page's main area. The page is done once the
server's ``script_finished`` for a run that started after the change has reached the tab and nothing on the page
has changed for QUIET_MS. Every script run's own time on the server (``ui.app.server.logged_run``) is reported
beside it, so the browser's share shows.

Before the timed pages, one visit to each page warms the server's imports and the browser's caches. Targets over
every change: median <= 300 ms, max <= 800 ms.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from playwright.async_api import TimeoutError as BrowserTimeout

from benchmarks.app_latency import CHANGES
from benchmarks.load_test import (EXCEPTION, RunWatch, free_port, page_url, server_runs, start_server, stop_server,
                                  wait_healthy)
from ui.app.navigation import HOME, PAGES

CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1280, "height": 900}
TARGET_MEDIAN_MS, TARGET_MAX_MS = 300.0, 800.0
FULL = dict(pages=10, changes=len(CHANGES))
SMOKE = dict(pages=1, changes=1)
QUIET_MS = 800  # nothing redrawn for this long after the run finished: the page is done
RUN_TIMEOUT_S = 60.0  # a run that has not finished by then is a timeout
OPEN_TIMEOUT_MS = 120_000

# Installed in every page before its scripts run: records, in the page's clock, the first committing input after
# the benchmark arms it, and the last mutation inside any plotly chart and inside the main area.
WATCH_DRAWING = """
window.__armed = false;
window.__inputAt = null;
window.__lastChart = 0;
window.__lastMain = 0;
window.__lastAny = performance.now();
for (const type of ['pointerdown', 'keydown']) {
  document.addEventListener(type, event => {
    if (window.__armed && window.__inputAt === null && (type !== 'keydown' || event.key === 'Enter')) {
      window.__inputAt = event.timeStamp;
      window.__armed = false;
    }
  }, true);
}
new MutationObserver(records => {
  const now = performance.now();
  window.__lastAny = now;
  for (const r of records) {
    const node = r.target.nodeType === 1 ? r.target : r.target.parentElement;
    if (!node) continue;
    if (node.closest('.js-plotly-plot')) window.__lastChart = now;
    if (node.closest('[data-testid="stMain"]')) window.__lastMain = now;
  }
}).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
"""
# resolves once nothing on the page has changed for `quiet` ms
QUIET = """quiet => new Promise(resolve => {
  const check = () => {
    const idle = performance.now() - window.__lastAny;
    if (idle >= quiet) resolve(); else setTimeout(check, quiet - idle + 10);
  };
  check();
})"""
ARM = "() => { window.__armed = true; window.__inputAt = null; }"
READ = "() => ({input: window.__inputAt, chart: window.__lastChart, main: window.__lastMain})"


@dataclass
class PageResult:
    page: str
    changes: list[str] = field(default_factory=list)  # "key: old -> new"
    drawn_ms: list[float] = field(default_factory=list)  # change -> last chart drawn (or main area, if no chart moved)
    charts_redrawn: list[bool] = field(default_factory=list)  # whether a chart was redrawn after the change
    server_ms: list[float] = field(default_factory=list)  # the page's script runs during its changes, server wall time
    exceptions: int = 0
    timeouts: list[str] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


async def current_value(page, key: str) -> str:
    return await page.locator(f".st-key-{key} input").first.input_value()


async def open_options(page, key: str):
    """The options of the select box `key`, its list open. The box is scrolled into view first: react-aria closes
    an open list when the sidebar scrolls under it."""
    box = page.locator(f".st-key-{key}").first
    await box.scroll_into_view_if_needed()
    options = page.get_by_role("option")
    for _ in range(5):
        await box.locator('button[aria-label="Open"]').click()
        try:
            await options.first.wait_for(timeout=2_000)
            return options
        except BrowserTimeout:
            await page.keyboard.press("Escape")
    raise TimeoutError(f"the options of {key!r} did not open")


async def commit_option(page, key: str, candidates, used: set) -> str:
    """Open the select box `key` and press an option it does not hold (one this page has not set, if any is left)."""
    current = await current_value(page, key)
    options = await open_options(page, key)
    texts = [t.strip() for t in await options.all_inner_texts()]
    wanted = {str(c) for c in candidates}
    # the option whose text is a candidate value, or starts with one (KV heads read "2 · GQA")
    matching = [t for t in texts if t != current and (t in wanted or t.split(" ")[0] in wanted)]
    fresh = [t for t in matching if t not in used] or matching
    choice = fresh[0]
    await page.evaluate(ARM)
    await page.get_by_role("option", name=choice, exact=True).first.click()
    used.add(choice)
    return f"{key}: {current} -> {choice}"


async def commit_number(page, key: str, value: int) -> str:
    field_ = page.locator(f".st-key-{key} input").first
    current = await field_.input_value()
    await field_.fill(str(value))
    await page.evaluate(ARM)
    await field_.press("Enter")
    return f"{key}: {current} -> {value}"


async def time_change(page, runs: RunWatch, commit) -> tuple[str, float, bool]:
    """Make one change; (what changed, ms from its input event to the last drawing, whether a chart was redrawn)."""
    t0 = time.perf_counter()
    what = await commit()
    await runs.finished_after(t0, RUN_TIMEOUT_S)
    await asyncio.wait_for(page.evaluate(QUIET, QUIET_MS), RUN_TIMEOUT_S)
    marks = await page.evaluate(READ)
    if marks["input"] is None:
        raise RuntimeError(f"{what}: the page saw no committing input event")
    charted = marks["chart"] > marks["input"]
    end = marks["chart"] if charted else marks["main"]
    return what, end - marks["input"], charted


async def open_page(page, runs: RunWatch, url: str) -> None:
    t0 = time.perf_counter()
    await page.goto(url, wait_until="domcontentloaded", timeout=OPEN_TIMEOUT_MS)
    await runs.finished_after(t0, OPEN_TIMEOUT_MS / 1e3)
    await asyncio.wait_for(page.evaluate(QUIET, QUIET_MS), OPEN_TIMEOUT_MS / 1e3)


async def time_page(context, base: str, script: str, seed: int, n_changes: int, run_log: Path) -> PageResult:
    result = PageResult(script)
    page = await context.new_page()
    runs = RunWatch(page)
    try:
        await open_page(page, runs, page_url(base, script, HOME) + f"?seed={seed}")
        window_start, used = time.time(), {}
        for kind, key, candidates in CHANGES[:n_changes]:
            if kind == "number_input":  # the seed: one of this page's own
                commit = lambda: commit_number(page, key, seed + 1)  # noqa: E731
            else:
                commit = lambda: commit_option(page, key, candidates, used.setdefault(key, set()))  # noqa: E731
            try:
                what, ms, charted = await time_change(page, runs, commit)
            except (BrowserTimeout, TimeoutError, asyncio.TimeoutError) as exc:
                result.timeouts.append(f"{key}: {str(exc).splitlines()[0] if str(exc) else 'timed out'}")
                continue
            result.changes.append(what)
            result.drawn_ms.append(ms)
            result.charts_redrawn.append(charted)
            result.exceptions += await page.locator(EXCEPTION).count()
        result.server_ms = [r["wall_s"] * 1e3 for r in server_runs(run_log, (window_start, time.time()))]
    finally:
        await page.close()
    return result


async def measure(base: str, scripts: list[str], n_changes: int, run_log: Path) -> list[PageResult]:
    from playwright.async_api import async_playwright

    executable = shutil.which("chromium")
    if executable is None:
        raise RuntimeError("chromium is not installed (Debian: apt-get install chromium)")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(viewport=VIEWPORT)
            await context.add_init_script(WATCH_DRAWING)
            warm = await context.new_page()
            warm_runs = RunWatch(warm)
            for script in scripts:  # imports on the server, scripts and fonts in the browser
                await open_page(warm, warm_runs, page_url(base, script, HOME))
            await warm.close()
            return [await time_page(context, base, script, 1000 * (i + 1), n_changes, run_log)
                    for i, script in enumerate(scripts)]
        finally:
            await browser.close()


def summary(results: list[PageResult]) -> dict:
    every = [ms for r in results for ms in r.drawn_ms]
    timeouts = sum(len(r.timeouts) for r in results)
    exceptions = sum(r.exceptions for r in results)
    median, worst = percentile(every, 50), max(every, default=float("nan"))
    return dict(changes=len(every), median_ms=median, max_ms=worst, p95_ms=percentile(every, 95),
                server_median_ms=percentile([ms for r in results for ms in r.server_ms], 50),
                exceptions=exceptions, timeouts=timeouts,
                met=bool(median <= TARGET_MEDIAN_MS and worst <= TARGET_MAX_MS and not timeouts and not exceptions))


def markdown(results: list[PageResult]) -> str:
    lines = ["| page | changes | median | max | charts redrawn | server run median | exceptions | timeouts |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.page} | {len(r.drawn_ms)} | {percentile(r.drawn_ms, 50):.0f} ms "
                     f"| {max(r.drawn_ms, default=float('nan')):.0f} ms | {sum(r.charts_redrawn)} of {len(r.drawn_ms)} "
                     f"| {percentile(r.server_ms, 50):.0f} ms | {r.exceptions} | {len(r.timeouts)} |")
    s = summary(results)
    lines.append(f"| **all** | {s['changes']} | {s['median_ms']:.0f} ms | {s['max_ms']:.0f} ms | "
                 f"{sum(sum(r.charts_redrawn) for r in results)} of {s['changes']} | {s['server_median_ms']:.0f} ms "
                 f"| {s['exceptions']} | {s['timeouts']} |")
    lines.append(f"\nTargets: median <= {TARGET_MEDIAN_MS:.0f} ms, max <= {TARGET_MAX_MS:.0f} ms: "
                 f"{'met' if s['met'] else '**not met**'}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[PageResult]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one change on the first page")
    parser.add_argument("--pages", type=int, help="the first N pages of the navigation (default 10)")
    parser.add_argument("--changes", type=int, help=f"sidebar changes per page (default {len(CHANGES)})")
    parser.add_argument("--out", help="write every timing to this JSON file")
    args = parser.parse_args(argv)
    plan = SMOKE if args.smoke else FULL
    n_pages, n_changes = args.pages or plan["pages"], min(args.changes or plan["changes"], len(CHANGES))
    scripts = [page.script for page in PAGES][:n_pages]

    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="attention_lab_browser_latency_"))
    run_log = workdir / "runs.jsonl"
    load_start = os.getloadavg()[0]
    server = start_server(port, ttl_s=10, log_path=workdir / "server.log", run_log=run_log)
    try:
        wait_healthy(port, server)
        results = asyncio.run(measure(f"http://127.0.0.1:{port}", scripts, n_changes, run_log))
    finally:
        stop_server(server)
    print(f"{'SMOKE — ' if args.smoke else ''}change -> last chart drawn, one Chromium tab and the server on this "
          f"machine ({os.cpu_count()} cores); load average {load_start:.1f} at start, {os.getloadavg()[0]:.1f} at end\n")
    print(markdown(results))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(mode="smoke" if args.smoke else "full", cores=os.cpu_count(), summary=summary(results),
                           pages=[asdict(r) for r in results]), f, indent=1)
    return results


if __name__ == "__main__":
    main()
