"""Load test: many browser sessions against one real server, on loopback only.

    python -m benchmarks.load_test [--smoke] [--sessions N] [--changes N] [--think LO,HI] [--ttl S] [--out F.json]

Starts ``streamlit run app.py`` on 127.0.0.1 and a free port, warms it up with one
session that visits every page, then opens N sessions at once in one headless
Chromium (one browser, one context per session). Each session starts on its own
page (one joins every --join seconds) and makes `changes` sidebar changes -- a seed of its own, then the position
axis, alternately -- moving to the next page every third change, and pausing 1-3 s
(--think) before each, as a person reading the page would. Every change is a
configuration no one asked for before (a cache miss: a model is built and traced).

Latency of a change: from the change (the key press or the click on the option)
until the server's message that the run it caused has finished (``script_finished``,
after a ``new_session`` that came after the change) reaches the browser's websocket;
the next action then waits until the page no longer shows a script running. Both are
waited for on events, never by polling. The server also logs every script run's own
wall-clock and CPU time (``ui.app.server.logged_run``), reported beside it.
Errors: exception elements on the page, console errors, page errors, timeouts.
Server memory: RSS of the server process at the start (after the warm-up), its peak
(sampled every 0.2 s), after every session closed, and after the disconnected-session
TTL (``server.disconnectedSessionTTL``, set by --ttl): Streamlit keeps a closed
session's state that long so a reconnecting tab can resume it, and drops expired
ones lazily, when another session disconnects -- so one probe session is opened and
closed after the TTL.

Bounded: a hard overall timeout stops everything, and the server is always killed.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from google.protobuf.message import DecodeError
from playwright.async_api import Error as BrowserError
from playwright.async_api import TimeoutError as BrowserTimeout

from benchmarks.app_latency import ROOT, app_pages
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from ui.app.server import RUN_LOG_ENV

FULL = dict(sessions=20, changes=10, pages=None, ttl_s=10, timeout_s=420, think_s=(1.0, 3.0), join_s=1.0)  # pages=None: all
SMOKE = dict(sessions=2, changes=2, pages=2, ttl_s=3, timeout_s=150, think_s=(0.0, 0.0), join_s=0.25)
TARGETS = dict(errors=0, p95_s=1.5, rss_growth_mb=150, rss_left_after_ttl_mb=50)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CHANGE_TIMEOUT_MS = 60_000  # a rerun that takes longer counts as a timeout
ACTION_TIMEOUT_MS = 60_000  # finding a widget, a click, a key press (in a browser that yields to the server)
OPEN_TIMEOUT_MS = 120_000  # opening the app: every tab parses the same scripts on these same cores
POSITIONS = ["rope", "alibi", "sinusoidal", "none", "learned"]

# records every change of the app root's script state (the attribute behind the "running" indicator) and wakes
# whoever waits; a run too short to be drawn may never show "running" here, so runs are counted on the websocket
WATCH_SCRIPT_STATE = """
window.__scriptStates = [];
window.__stateWaiters = [];
new MutationObserver(records => {
  for (const r of records) {
    window.__scriptStates.push({state: r.target.getAttribute('data-test-script-state'), t: performance.now()});
  }
  const waiters = window.__stateWaiters;
  window.__stateWaiters = [];
  waiters.forEach(wake => wake());
}).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-test-script-state']});
"""
# resolves, without polling, once the page shows no script running
APP_SETTLED = """() => new Promise(resolve => {
  const check = () => {
    const s = window.__scriptStates;
    if (!s.length || s[s.length - 1].state === 'notRunning') resolve();
    else window.__stateWaiters.push(check);
  };
  check();
})"""
SMALL_FRAME = 16_384  # the start and end of a run are small messages; element deltas (figures) are not decoded
BASE_PATH_PROBES = ("/_stcore/health", "/_stcore/host-config")
EXCEPTION = '[data-testid="stException"]'


@dataclass
class SessionResult:
    index: int
    change_s: list[float] = field(default_factory=list)  # latency of each sidebar change
    switch_s: list[float] = field(default_factory=list)  # latency of each page switch
    exceptions: int = 0  # changes after which an exception element was on the page
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    timeouts: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # any other browser error (an element that never came)
    base_path_probes: int = 0  # Streamlit's own 404s when a page is opened by its URL (not errors of the app)


# --- the server ------------------------------------------------------------------------------

def low_priority(executable: str, idle: bool) -> str:
    """A launcher that starts the browser under the idle scheduling class (its tabs inherit it).

    The browsers stand in for the students' own laptops. Here they share the server's two
    cores, and twenty tabs drawing plotly figures would otherwise take most of the CPU from
    the server they are measuring. A nice value does not hold: Chromium sets its own
    processes' priorities. SCHED_IDLE (``chrt --idle``) is a scheduling class, which it
    leaves alone: the browser runs whenever the server does not need the CPU.
    """
    chrt = shutil.which("chrt")
    if not idle or chrt is None:
        return executable
    launcher = Path(tempfile.mkdtemp(prefix="attention_lab_browser_")) / "chromium"
    launcher.write_text(f'#!/bin/sh\nexec "{chrt}" --idle 0 "{executable}" "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, ttl_s: int, log_path: Path, run_log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
               "--server.address", "127.0.0.1", "--server.port", str(port),
               "--server.disconnectedSessionTTL", str(ttl_s), "--browser.gatherUsageStats", "false"]
    log = open(log_path, "w")
    env = {**os.environ, RUN_LOG_ENV: str(run_log)}  # the app appends each script run's time there
    # its own process group, so stopping it stops everything it started
    return subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)


def wait_healthy(port: int, server: subprocess.Popen, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with code {server.returncode} before answering")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.read() == b"ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"the server did not answer /_stcore/health within {timeout_s:.0f} s")


def stop_server(server: subprocess.Popen) -> None:
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(10)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise ValueError(f"/proc/{pid}/status has no VmRSS line")


def process_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds it has used) for every process on the machine."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
            except OSError:
                continue  # it ended while we looked
            table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
    return table


def descendants(table: dict[int, tuple[int, float]], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def process_kind(pid: int, server_pid: int) -> str:
    """server, harness (this process), browser (Chromium's processes) or driver (playwright's, the rest)."""
    if pid == server_pid:
        return "server"
    if pid == os.getpid():
        return "harness"
    try:
        with open(f"/proc/{pid}/comm") as f:
            name = f.read()
    except OSError:
        return "driver"
    return "browser" if "chrom" in name else "driver"


class Sampler(threading.Thread):
    """Every `interval_s`: the server's RSS, and the CPU time of the server, the browser and the test itself.

    One machine runs them all, so their shares of the CPU say how much of a change's latency
    the browser and the test caused.
    """

    def __init__(self, server_pid: int, interval_s: float = 0.25):
        super().__init__(daemon=True)
        self.server_pid, self.interval_s = server_pid, interval_s
        self.rss: list[tuple[float, float]] = []  # (seconds since start, MB)
        self.cpu_first: dict[int, float] = {}
        self.cpu_last: dict[int, float] = {}
        self.kinds: dict[int, str] = {}
        self._stop_event = threading.Event()

    def sample_cpu(self, first: bool) -> None:
        table = process_table()
        ours = descendants(table, os.getpid()) | {os.getpid()}  # the server, the browser, its driver, this test
        for pid in ours:
            cpu = table[pid][1]
            self.kinds.setdefault(pid, process_kind(pid, self.server_pid))
            # a process born after the first sample started from zero
            self.cpu_first.setdefault(pid, cpu if first else 0.0)
            self.cpu_last[pid] = cpu

    def run(self) -> None:
        start = time.monotonic()
        self.sample_cpu(first=True)
        while not self._stop_event.wait(self.interval_s):
            try:
                self.rss.append((time.monotonic() - start, rss_mb(self.server_pid)))
            except (OSError, ValueError):
                return  # the server is gone
            self.sample_cpu(first=False)

    def stop(self) -> dict:
        """Stop; the CPU seconds each kind of process used while sampling."""
        self._stop_event.set()
        self.join(10)
        used = {kind: 0.0 for kind in ("server", "browser", "driver", "harness")}
        for pid, last in self.cpu_last.items():
            used[self.kinds[pid]] += last - self.cpu_first[pid]
        return {f"{kind}_cpu_s": seconds for kind, seconds in used.items()}


# --- the sessions ----------------------------------------------------------------------------

def page_url(base: str, script: str, default_script: str) -> str:
    """st.Page serves a script at /<its file name without .py>; the default page at /."""
    return base + "/" if script == default_script else f"{base}/{Path(script).stem}"


class RunWatch:
    """Script runs of one page, read off its websocket as the server sends them.

    Streamlit sends ``new_session`` when a run starts and ``script_finished`` when it ends
    (or ends early because another run replaces it). Times are time.perf_counter() when the
    message reached this process; waiting needs no polling.
    """

    def __init__(self, page):
        self.started: list[float] = []
        self.finished: list[float] = []  # runs that ended for good, not replaced by a newer run
        self._changed = asyncio.Event()
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        if isinstance(payload, str) or len(payload) > SMALL_FRAME:
            return
        try:
            message = ForwardMsg.FromString(payload)
        except DecodeError:
            return
        kind = message.WhichOneof("type")
        if kind == "new_session":
            self.started.append(time.perf_counter())
        elif kind == "script_finished" and message.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
            self.finished.append(time.perf_counter())
        self._changed.set()

    def _finished_after(self, t0: float) -> float | None:
        start = next((t for t in self.started if t >= t0), None)
        return None if start is None else next((t for t in self.finished if t >= start), None)

    async def finished_after(self, t0: float, timeout_s: float) -> float:
        """When the first run that started after t0 finished."""
        deadline = time.perf_counter() + timeout_s
        while (end := self._finished_after(t0)) is None:
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(deadline - time.perf_counter(), 0.001))
            except asyncio.TimeoutError:
                raise BrowserTimeout(f"no script run started after the action finished within {timeout_s:.0f} s") from None
        return end


async def settled(page, timeout_ms: float) -> None:
    """Until the page shows no script running (a page that reruns itself settles before the next action)."""
    try:
        await asyncio.wait_for(page.evaluate(APP_SETTLED), timeout_ms / 1e3)
    except asyncio.TimeoutError:
        raise BrowserTimeout(f"the page still showed a script running after {timeout_ms / 1e3:.0f} s") from None


async def open_page(page, runs: RunWatch, url: str) -> None:
    """Load `url` and wait until the app's first run has finished."""
    t0 = time.perf_counter()
    await page.goto(url, wait_until="domcontentloaded", timeout=OPEN_TIMEOUT_MS)
    await runs.finished_after(t0, OPEN_TIMEOUT_MS / 1e3)
    await settled(page, OPEN_TIMEOUT_MS)


async def timed(page, runs: RunWatch, action) -> float:
    """Seconds from the start of `action` (finding the widget, the key press or the click) until the
    server's message that the run it caused has finished arrived."""
    before = time.perf_counter()
    await action()
    end = await runs.finished_after(before, CHANGE_TIMEOUT_MS / 1e3)
    await settled(page, CHANGE_TIMEOUT_MS)
    return end - before


async def change_seed(page, value: int) -> None:
    field_ = page.locator(".st-key-seed input")
    await field_.fill(str(value))
    await field_.press("Enter")


async def change_position(page, turn: int) -> None:
    """Pick a position other than the current one (the same value would not rerun), varied by `turn`."""
    current = await page.locator(".st-key-position input").input_value()
    others = [p for p in POSITIONS if p != current]
    await page.locator('.st-key-position button[aria-label="Open"]').click()
    await page.get_by_role("option", name=others[turn % len(others)], exact=True).click()


def record_console_error(result: SessionResult, msg) -> None:
    if msg.type != "error":
        return
    url = msg.location.get("url", "")
    if url.endswith(BASE_PATH_PROBES) and url.rsplit("/_stcore/", 1)[0].count("/") > 2:
        # opened at /<page>, the frontend first asks /<page>/_stcore/... in case the app is served under that path
        result.base_path_probes += 1
    else:
        result.console_errors.append(f"{msg.text} ({url})")


async def new_page(browser, result: SessionResult):
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    await context.add_init_script(WATCH_SCRIPT_STATE)
    page = await context.new_page()
    page.on("console", lambda msg: record_console_error(result, msg))
    page.on("pageerror", lambda exc: result.page_errors.append(str(exc)))
    return context, page, RunWatch(page)


async def run_session(browser, base: str, scripts: list[str], result: SessionResult, n_changes: int,
                      think_s: tuple[float, float], join_s: float) -> None:
    """Open a page, then make sidebar changes, moving to the next page before every third one.

    Before each action the session waits a time drawn from `think_s` (seconds, uniform, seeded by the
    session's index): a person reads the page before the next click.
    """
    index = result.index
    rng = random.Random(index)
    think = lambda: asyncio.sleep(rng.uniform(*think_s))  # noqa: E731
    await asyncio.sleep(join_s * index)
    context, page, runs = await new_page(browser, result)
    try:
        where = index % len(scripts)
        await open_page(page, runs, page_url(base, scripts[where], scripts[0]))
        for i in range(n_changes):
            try:
                if i and i % 3 == 0 or await page.locator(EXCEPTION).count():  # on a crashed page, move on
                    where = (where + 1) % len(scripts)
                    href = page_url(base, scripts[where], scripts[0])
                    await think()
                    result.switch_s.append(await timed(page, runs, page.locator(f'[data-testid="stSidebarNavLink"][href="{href}"]').click))
                if i % 2 == 0:  # a seed of this session's own: nobody built this model yet
                    action = lambda: change_seed(page, 1000 * (index + 1) + i)  # noqa: E731
                else:
                    action = lambda: change_position(page, index + i)  # noqa: E731
                await think()
                result.change_s.append(await timed(page, runs, action))
            except BrowserTimeout as exc:
                result.timeouts.append(f"change {i} on {scripts[where]}: {str(exc).splitlines()[0]}")
            except BrowserError as exc:
                result.failures.append(f"change {i} on {scripts[where]}: {str(exc).splitlines()[0]}")
            if await page.locator(EXCEPTION).count():
                result.exceptions += 1
    except BrowserError as exc:  # the first page never finished loading
        result.failures.append(f"opening {scripts[index % len(scripts)]}: {str(exc).splitlines()[0]}")
    finally:
        await context.close()


async def visit_pages(browser, base: str, scripts: list[str], result: SessionResult) -> None:
    """One session loads each page once (errors go to `result`)."""
    context, page, runs = await new_page(browser, result)
    try:
        for script in scripts:
            try:
                await open_page(page, runs, page_url(base, script, scripts[0]))
            except BrowserError as exc:
                result.failures.append(f"opening {script}: {str(exc).splitlines()[0]}")
            if await page.locator(EXCEPTION).count():
                result.exceptions += 1
    finally:
        await context.close()


async def load(port: int, server: subprocess.Popen, scripts: list[str], n_sessions: int, n_changes: int,
               ttl_s: int, think_s: tuple[float, float], join_s: float, idle: bool, deadline: float) -> dict:
    """Warm up, run the sessions until `deadline` (time.monotonic()), then watch memory through the TTL."""
    from playwright.async_api import async_playwright

    base = f"http://127.0.0.1:{port}"
    chromium = shutil.which("chromium")
    warm_up, probe = SessionResult(-1), SessionResult(-2)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=low_priority(chromium or pw.chromium.executable_path, idle))
        try:
            started = time.monotonic()
            await visit_pages(browser, base, scripts, warm_up)  # imports, and the default model in the caches
            warm_up_s = time.monotonic() - started
            await asyncio.sleep(1)
            memory = dict(start_mb=rss_mb(server.pid))
            sampler = Sampler(server.pid)
            sampler.start()
            started, window_start = time.monotonic(), time.time()
            results = [SessionResult(i) for i in range(n_sessions)]
            # what is left of the time, less what the memory checks after the sessions need
            budget = deadline - time.monotonic() - (ttl_s + 30)
            try:
                await asyncio.wait_for(asyncio.gather(*(run_session(browser, base, scripts, r, n_changes, think_s, join_s)
                                                        for r in results)), max(budget, 1))
            except asyncio.TimeoutError:
                for r in results:
                    if len(r.change_s) + len(r.timeouts) + len(r.failures) < n_changes:
                        r.timeouts.append(f"stopped by the overall time limit after {len(r.change_s)} changes")
            sessions_s, window = time.monotonic() - started, (window_start, time.time())
            cpu, rss_samples = sampler.stop(), sampler.rss
            sampler = Sampler(server.pid)  # memory only, from here on
            sampler.start()
            await asyncio.sleep(2)
            memory["after_close_mb"] = rss_mb(server.pid)
            await asyncio.sleep(ttl_s + 2)
            await visit_pages(browser, base, scripts[:1], probe)  # its disconnect makes the server drop expired sessions
            await asyncio.sleep(3)
            memory["after_ttl_mb"] = rss_mb(server.pid)
            sampler.stop()
            memory["peak_mb"] = max([mb for _, mb in rss_samples + sampler.rss] + [memory["start_mb"]])
        finally:
            await browser.close()
    return dict(results=results, warm_up=warm_up, probe=probe, memory=memory, warm_up_s=warm_up_s,
                sessions_s=sessions_s, window=window, cpu=cpu, rss_samples=rss_samples + sampler.rss)


# --- report -----------------------------------------------------------------------------------

def server_runs(run_log: Path, window: tuple[float, float]) -> list[dict]:
    """The script runs the app logged (ui.app.server.logged_run) that ended while the sessions ran."""
    if not run_log.exists():
        return []
    runs = [json.loads(line) for line in run_log.read_text().splitlines() if line.strip()]
    return [r for r in runs if window[0] <= r["end"] <= window[1]]


def summarise(outcome: dict, n_sessions: int, n_changes: int, think_s: tuple[float, float], join_s: float,
              idle: bool, runs: list[dict]) -> dict:
    results: list[SessionResult] = outcome["results"]
    run_wall = [r["wall_s"] for r in runs]
    changes = [t for r in results for t in r.change_s]
    switches = [t for r in results for t in r.switch_s]
    memory = outcome["memory"]
    everyone = [*results, outcome["warm_up"], outcome["probe"]]  # errors count wherever they happen
    errors = dict(exceptions=sum(r.exceptions for r in everyone),
                  console_errors=sum(len(r.console_errors) for r in everyone),
                  page_errors=sum(len(r.page_errors) for r in everyone),
                  timeouts=sum(len(r.timeouts) for r in everyone),
                  failures=sum(len(r.failures) for r in everyone))
    messages = sorted({m for r in everyone for m in (*r.console_errors, *r.page_errors, *r.timeouts, *r.failures)})
    p95 = float(np.percentile(changes, 95)) if changes else float("nan")
    # every session's first page, its changes and its page switches: each one a script run on the server
    reruns = len(results) + len(changes) + len(switches)
    growth = memory["peak_mb"] - memory["start_mb"]
    left = memory["after_ttl_mb"] - memory["start_mb"]
    return dict(
        sessions=n_sessions, changes_per_session=n_changes, think_s=list(think_s), join_s=join_s, browser_idle=idle,
        changes_done=len(changes),
        page_switches=len(switches),
        change_p50_s=float(np.percentile(changes, 50)) if changes else float("nan"), change_p95_s=p95,
        change_max_s=max(changes, default=float("nan")),
        switch_p50_s=float(np.percentile(switches, 50)) if switches else float("nan"),
        switch_p95_s=float(np.percentile(switches, 95)) if switches else float("nan"),
        errors=errors, error_messages=messages, memory=memory, rss_growth_mb=growth, rss_left_after_ttl_mb=left,
        warm_up_s=outcome["warm_up_s"], sessions_wall_s=outcome["sessions_s"], cpu=outcome["cpu"],
        server_cpu_per_rerun_s=outcome["cpu"]["server_cpu_s"] / reruns,
        server_runs=len(runs), server_run_p50_s=float(np.percentile(run_wall, 50)) if runs else float("nan"),
        server_run_p95_s=float(np.percentile(run_wall, 95)) if runs else float("nan"),
        server_run_cpu_mean_s=float(np.mean([r["cpu_s"] for r in runs])) if runs else float("nan"),
        met=dict(errors=sum(errors.values()) == TARGETS["errors"], p95=p95 <= TARGETS["p95_s"],
                 rss_growth=growth <= TARGETS["rss_growth_mb"], back_near_start=left <= TARGETS["rss_left_after_ttl_mb"]),
    )


def markdown(s: dict) -> str:
    yes = lambda ok: "yes" if ok else "**no**"  # noqa: E731
    m, e, cpu, cores = s["memory"], s["errors"], s["cpu"], os.cpu_count()
    messages = [f"- {message}" for message in s["error_messages"][:10]]
    return "\n".join([
        "| measure | value | target | met? |", "|---|---|---|---|",
        f"| sessions x sidebar changes | {s['sessions']} x {s['changes_per_session']} ({s['changes_done']} done, "
        f"plus {s['page_switches']} page switches, {s['sessions_wall_s']:.0f} s; warm-up {s['warm_up_s']:.0f} s) | | |",
        f"| sessions join / pause before each change or switch (a person reading) | one every {s['join_s']:g} s / "
        f"{s['think_s'][0]:g}-{s['think_s'][1]:g} s, uniform | | |",
        f"| browser CPU priority | {'idle class (SCHED_IDLE): the server first' if s['browser_idle'] else 'normal, as the server'} | | |",
        f"| change latency p50 / p95 / max | {s['change_p50_s']:.2f} / {s['change_p95_s']:.2f} / {s['change_max_s']:.2f} s "
        f"| p95 <= {TARGETS['p95_s']} s | {yes(s['met']['p95'])} |",
        f"| page switch latency p50 / p95 | {s['switch_p50_s']:.2f} / {s['switch_p95_s']:.2f} s | | |",
        f"| server side: script run p50 / p95 (wall), mean CPU per run | {s['server_run_p50_s']:.2f} / "
        f"{s['server_run_p95_s']:.2f} s, {s['server_run_cpu_mean_s']:.3f} s over {s['server_runs']} runs | | |",
        f"| CPU used during the sessions: server / browser / browser driver / this test | {cpu['server_cpu_s']:.0f} / "
        f"{cpu['browser_cpu_s']:.0f} / {cpu['driver_cpu_s']:.0f} / {cpu['harness_cpu_s']:.0f} s "
        f"of {cores * s['sessions_wall_s']:.0f} core-seconds | | |",
        f"| server CPU per script run (first pages, changes, switches) | {s['server_cpu_per_rerun_s']:.2f} s: "
        f"{cores / s['server_cpu_per_rerun_s']:.1f} runs/s on {cores} cores given to the server alone | | |",
        f"| errors: exceptions, console, page, timeouts, other | {e['exceptions']}, {e['console_errors']}, "
        f"{e['page_errors']}, {e['timeouts']}, {e['failures']} | 0 | {yes(s['met']['errors'])} |",
        f"| server RSS start / peak | {m['start_mb']:.0f} / {m['peak_mb']:.0f} MB (+{s['rss_growth_mb']:.0f}) "
        f"| growth <= {TARGETS['rss_growth_mb']} MB | {yes(s['met']['rss_growth'])} |",
        f"| server RSS after all closed / after the TTL | {m['after_close_mb']:.0f} / {m['after_ttl_mb']:.0f} MB "
        f"({s['rss_left_after_ttl_mb']:+.0f} vs start) | <= start + {TARGETS['rss_left_after_ttl_mb']} MB "
        f"| {yes(s['met']['back_near_start'])} |",
        *(["", "Errors (distinct, first 10):", *messages] if messages else []),
    ])


def think_range(text: str) -> tuple[float, float]:
    """'1,3' -> (1.0, 3.0); '2' -> (2.0, 2.0)."""
    try:
        low, high = (float(x) for x in (text.split(",") if "," in text else (text, text)))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--think wants LO,HI in seconds (like 1,3) or one number, not {text!r}") from None
    if not 0 <= low <= high:
        raise argparse.ArgumentTypeError(f"--think {text}: need 0 <= LO <= HI")
    return low, high


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="2 sessions x 2 changes")
    parser.add_argument("--sessions", type=int, help="concurrent browser sessions (default 20)")
    parser.add_argument("--changes", type=int, help="sidebar changes per session (default 10)")
    parser.add_argument("--ttl", type=int, help="server.disconnectedSessionTTL in seconds (default 10, smoke 3)")
    parser.add_argument("--timeout", type=float, help="hard limit for the whole run in seconds")
    parser.add_argument("--browser-priority", choices=["idle", "normal"], default="idle",
                        help="idle (default): the browser gets the CPU only when the server does not need it")
    parser.add_argument("--join", type=float, help="seconds between one session opening and the next (default 1)")
    parser.add_argument("--think", type=think_range, metavar="LO,HI",
                        help="seconds a session pauses before each action, uniform in [LO, HI] (default 1,3; 0 for none)")
    parser.add_argument("--out", help="write the summary and every latency to this JSON file")
    args = parser.parse_args(argv)
    plan = SMOKE if args.smoke else FULL
    n_sessions, n_changes = args.sessions or plan["sessions"], args.changes or plan["changes"]
    timeout_s, ttl_s = args.timeout or plan["timeout_s"], args.ttl or plan["ttl_s"]
    think_s = args.think if args.think is not None else plan["think_s"]
    join_s = args.join if args.join is not None else plan["join_s"]
    idle = args.browser_priority == "idle" and shutil.which("chrt") is not None
    scripts = [script for script, _title in app_pages()][: plan["pages"]]
    if n_sessions < 1 or n_changes < 1:
        parser.error(f"--sessions={n_sessions} and --changes={n_changes} must both be at least 1")

    port = free_port()
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"attention_lab_load_test_{port}.log"
    run_log = log_path.with_suffix(".runs.jsonl")
    started = time.monotonic()
    server = start_server(port, ttl_s, log_path, run_log)
    # a last resort if the browser hangs where asyncio cannot interrupt it: kill the server, leave
    watchdog = threading.Timer(timeout_s + 60, lambda: (stop_server(server), os._exit(3)))
    watchdog.daemon = True
    watchdog.start()
    try:
        wait_healthy(port, server)
        outcome = asyncio.run(asyncio.wait_for(
            load(port, server, scripts, n_sessions, n_changes, ttl_s, think_s, join_s, idle,
                 deadline=started + timeout_s), timeout_s + 30))
    finally:
        stop_server(server)
        watchdog.cancel()
    summary = summarise(outcome, n_sessions, n_changes, think_s, join_s, idle, server_runs(run_log, outcome["window"]))
    print(f"{'SMOKE — ' if args.smoke else ''}load test: one server and one Chromium on this machine "
          f"({os.cpu_count()} cores), loopback, {len(scripts)} pages, server.disconnectedSessionTTL={ttl_s} s; "
          f"load average {os.getloadavg()[0]:.1f} at end; server log {log_path}\n")
    print(markdown(summary))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(mode="smoke" if args.smoke else "full", summary=summary,
                           sessions=[asdict(r) for r in (*outcome["results"], outcome["warm_up"], outcome["probe"])],
                           rss_samples=outcome["rss_samples"]),
                      f, indent=1)
    return summary


if __name__ == "__main__":
    main()
