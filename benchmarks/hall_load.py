"""How many students a lecture hall of two replicas holds: real Streamlit sessions through the proxy, class by class.

    python -m benchmarks.hall_load [--smoke] [--levels 25,50,100] [--run-dir DIR] [--out hall_load.json]

The hall is scripts/hall.py's: PostgreSQL, two Streamlit replicas, nginx in front with sticky cookies
and WebSocket upgrades. The benchmark starts one in a temporary folder on free ports and stops it at
the end, or, with --run-dir, uses the hall already running there. Before anything is timed, each
replica runs the lesson's first two steps once (its model loaded, its caches filled).

The sessions are benchmarks/streamlit_client.Tab, all in this process: each speaks Streamlit's own
protocol over the WebSocket, through the proxy, and runs the Lessons page and its 2-second poll
exactly as a browser asks the server to, without a browser (no scripts, styles or drawing: those
run on the students' own laptops). For each class size N of --levels:

1. A teacher opens /lessons?step=1 and presses "Start a class poll"; the code is read off the page.
2. N students open the class link /lessons?step=1&class=CODE at moments spread over --open seconds.
3. Each picks an answer and presses "Send my answer" (two script runs) at a moment of its own over
   the next --answer seconds; meanwhile every page polls the class every 2 s, as the page does.
4. Once the teacher's screen counts N answers (or 60 s after the last was sent), the teacher
   presses "Reveal the answer" and then "Next ▶"; each student's page shows the figure, then the
   next step, at its next poll (reveal and step arrival, so up to one poll interval).
5. The sessions stay --hold seconds more, then the teacher ends the poll and every tab closes.

Page latency: a student's open, pick and send, from the request until the server's `script_finished`
for that run. Target per level: page p95 <= 1.5 s, no exception, no timeout, every answer counted
on the teacher's screen; the capacity is the largest N that meets it. The levels stop after one
whose p95 is over twice the target. Also reported: the polls' latency, the reveal and step
arrival, how the students split over the replicas, and the CPU seconds the hall (replicas, nginx,
PostgreSQL), this client and everything else on the machine used.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

from websockets.exceptions import WebSocketException

from benchmarks.load_test import CLOCK_TICKS, descendants, process_table, rss_mb
from benchmarks.poll import pct, table
from benchmarks.streamlit_client import Tab
from scripts import hall

FULL = dict(levels=(25, 50, 100, 150, 200, 300), open_s=10.0, answer_s=10.0, hold_s=10.0)
SMOKE = dict(levels=(3,), open_s=1.0, answer_s=1.0, hold_s=0.0)
TARGET_PAGE_P95_S = 1.5
WAIT_S = 60.0  # for the teacher's count, a reveal or a step to arrive
CODE = re.compile(r"Class code: \*\*(\w+)\*\*")
ANSWERED = re.compile(r"(\d+) of (\d+) students answered")
FAILURES = (TimeoutError, ValueError, OSError, WebSocketException)  # a slow run, a missing widget, a lost connection


async def start_class(base: str) -> tuple[Tab, str]:
    teacher = Tab(base)
    await teacher.open("lessons", "step=1")
    await teacher.click("Start a class poll")
    found = CODE.search(teacher.text())
    if found is None:
        raise RuntimeError(f"the teacher's page shows no class code after starting a poll:\n{teacher.text()[:2000]}")
    return teacher, found.group(1)


def answered(teacher: Tab) -> int:
    found = ANSWERED.search(teacher.text())
    return int(found.group(1)) if found else 0


def failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"


async def student(tab: Tab, code: str, open_at: float, answer_at: float, choice: int, errors: list[str]) -> None:
    """Open the class link at open_at, answer at answer_at (seconds from now); errors go to `errors`."""
    started = time.perf_counter()
    try:
        await asyncio.sleep(open_at)
        await tab.open("lessons", f"step=1&class={code}")
        await asyncio.sleep(max(started + answer_at - time.perf_counter(), 0))
        await tab.choose("Your answer", choice)
        await tab.click("Send my answer")
    except FAILURES as exc:
        errors.append(failure(exc))


async def arrivals(tabs: list[Tab], predicate, since: float, errors: list[str]) -> list[float]:
    """Seconds from `since` until each tab's page satisfies `predicate`."""
    async def one(tab: Tab) -> float | None:
        try:
            return await tab.wait_for(predicate, WAIT_S) - since
        except TimeoutError as exc:
            errors.append(failure(exc))
            return None
    return [s for s in await asyncio.gather(*(one(tab) for tab in tabs)) if s is not None]


def cpu_with_reaped_children(pid: int) -> float:
    """CPU seconds of a process and of its children that have ended (a PostgreSQL backend, when it closes)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    except OSError:
        return 0.0  # it ended meanwhile: its time went to its parent
    return sum(int(v) for v in fields[11:15]) / CLOCK_TICKS  # utime, stime, cutime, cstime


def cpu_seconds(roots: list[int]) -> tuple[float, float, float]:
    """CPU seconds used so far: by the hall's processes and all their children, by this process, by the whole machine.

    Other work on the same cores (another test, a training run) is the machine's less the first two.
    """
    table = process_table()
    pids = set(roots).union(*(descendants(table, root) for root in roots))
    with open("/proc/stat") as f:  # cpu  user nice system idle iowait irq softirq steal ...
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in f.readline().split()[1:9])
    machine = (user + nice + system + irq + softirq + steal) / CLOCK_TICKS
    return sum(cpu_with_reaped_children(p) for p in pids), table[os.getpid()][1], machine


async def level(base: str, n: int, plan: dict, hall_pids: list[int], replica_pids: list[int]) -> dict:
    rng = random.Random(n)
    errors: list[str] = []
    cpu_before, wall_before = cpu_seconds(hall_pids), time.perf_counter()
    teacher, code = await start_class(base)
    tabs = [Tab(base) for _ in range(n)]
    counted, reveal_s, step_s = 0, [], []
    try:
        await asyncio.gather(*(student(tab, code, rng.uniform(0, plan["open_s"]),
                                       plan["open_s"] + rng.uniform(0, plan["answer_s"]), i % 2, errors)
                               for i, tab in enumerate(tabs)))
        try:
            await teacher.wait_for(lambda t: answered(t) >= n, WAIT_S)
        except TimeoutError:
            errors.append(f"the teacher's screen counted {answered(teacher)} of {n} answers after {WAIT_S:.0f} s")
        counted = answered(teacher)
        since = time.perf_counter()
        await teacher.click("Reveal the answer")
        reveal_s = await arrivals(tabs, lambda t: t.has("plotly_chart"), since, errors)
        since = time.perf_counter()
        await teacher.click("Next ▶")
        step_s = await arrivals(tabs, lambda t: re.search(r"step 2 of \d+", t.text()) is not None, since, errors)
        await asyncio.sleep(plan["hold_s"])
        await teacher.click("End the poll")
    except FAILURES as exc:
        errors.append(f"the teacher's page: {failure(exc)}")
    finally:
        await asyncio.gather(teacher.close(), *(tab.close() for tab in tabs))
    hall_cpu, client_cpu, machine_cpu = (after - before for before, after in zip(cpu_before, cpu_seconds(hall_pids)))
    wall = time.perf_counter() - wall_before
    page = [s for tab in tabs for s in (*tab.open_s, *tab.action_s)]
    polls = [s for tab in tabs for s in tab.poll_s]
    exceptions = [e for tab in (teacher, *tabs) for e in tab.exceptions]
    errors += [f for tab in (teacher, *tabs) for f in tab.poll_failures]
    row = dict(students=n, page_runs=len(page), page_p50_s=pct(page, 50), page_p95_s=pct(page, 95),
               page_max_s=max(page, default=float("nan")), polls=len(polls), poll_p50_s=pct(polls, 50),
               poll_p95_s=pct(polls, 95), reveal_p95_s=pct(reveal_s, 95), step_p95_s=pct(step_s, 95),
               answers_counted=counted, exceptions=len(exceptions), errors=len(errors),
               error_messages=sorted(set(errors + exceptions))[:10], students_per_replica=dict(Counter(tab.replica or "?" for tab in tabs)),
               wall_s=wall, hall_cpu_s=hall_cpu, client_cpu_s=client_cpu,
               other_cpu_s=machine_cpu - hall_cpu - client_cpu,
               replica_rss_mb=[round(rss_mb(pid)) for pid in replica_pids])
    row["met"] = bool(row["page_p95_s"] <= TARGET_PAGE_P95_S and not exceptions and not errors and counted == n)
    return row


async def warm_up(base: str, replicas: int) -> None:
    """Each replica runs the lesson's two steps once (the model loaded, its caches filled) before anything is timed."""
    warm: set[str | None] = set()
    for _ in range(50):  # a new browser lands on a replica at random: a few tries reach them all
        if len(warm) == replicas:
            return
        tab = Tab(base)
        await tab.open("lessons", "step=1")
        if tab.replica not in warm:
            await tab.click("Next ▶")
            warm.add(tab.replica)
        await tab.close()
    raise RuntimeError(f"50 new sessions reached only {len(warm)} of the {replicas} replicas: is the proxy sticky "
                       "by something other than its cookie?")


async def ramp(base: str, plan: dict, hall_pids: list[int], replica_pids: list[int]) -> list[dict]:
    await warm_up(base, len(replica_pids))
    rows = []
    for n in plan["levels"]:
        rows.append(await level(base, n, plan, hall_pids, replica_pids))
        r = rows[-1]
        print(f"  {n} students: page p95 {r['page_p95_s']:.2f} s, polls p95 {r['poll_p95_s']:.2f} s, "
              f"{r['answers_counted']} answers counted, {r['errors'] + r['exceptions']} errors", flush=True)
        if not r["page_p95_s"] <= 2 * TARGET_PAGE_P95_S:
            break  # far past the target: a larger class would only queue longer
    return rows


def capacity(rows: list[dict]) -> int:
    """The largest class size that met the target, with every smaller one measured meeting it too (0: none)."""
    held = 0
    for r in rows:
        if not r["met"]:
            break
        held = r["students"]
    return held


def markdown(rows: list[dict], cores: int) -> str:
    held = capacity(rows)
    return table(["students", "page p50 / p95 / max", "polls p50 / p95", "reveal / next step arrive, p95",
                  "answers counted", "errors", "per replica", "CPU: hall / client / other work", "replicas' RSS", "met?"],
                 [[r["students"], f"{r['page_p50_s']:.2f} / {r['page_p95_s']:.2f} / {r['page_max_s']:.2f} s",
                   f"{r['poll_p50_s']:.2f} / {r['poll_p95_s']:.2f} s", f"{r['reveal_p95_s']:.1f} / {r['step_p95_s']:.1f} s",
                   r["answers_counted"], r["errors"] + r["exceptions"],
                   " / ".join(str(count) for _, count in sorted(r["students_per_replica"].items())),
                   f"{r['hall_cpu_s']:.0f} / {r['client_cpu_s']:.0f} / {r['other_cpu_s']:.0f} s "
                   f"of {cores * r['wall_s']:.0f} core-s",
                   " / ".join(f"{mb} MB" for mb in r["replica_rss_mb"]), "yes" if r["met"] else "**no**"]
                  for r in rows]) + \
        (f"\n\nCapacity: {held} concurrent students with page p95 <= {TARGET_PAGE_P95_S} s." if held else
         f"\n\nCapacity: fewer than {rows[0]['students']} students with page p95 <= {TARGET_PAGE_P95_S} s.")


def levels_arg(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--levels wants class sizes like 25,50,100, not {text!r}") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"--levels {text}: every class size must be at least 1")
    return levels


def hall_processes(run_dir: Path) -> tuple[str, list[int], list[int]]:
    """(the proxy's URL, every part's pid, the replicas' pids) of the hall running from run_dir."""
    rows = hall.status(run_dir)
    if not rows or not all(up for _, _, up, _ in rows):
        raise SystemExit(f"no hall answers from {run_dir}: start one with `python3 scripts/hall.py start`")
    state = hall.read_state(run_dir.resolve())
    return state["proxy_url"], [pid for _, pid, _, _ in rows], [r["pid"] for r in state["replicas"]]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one class of 3 students: proves it runs")
    parser.add_argument("--levels", type=levels_arg, help="class sizes, in order (default 25,50,100,150,200,300)")
    parser.add_argument("--open", type=float, help="seconds over which a class opens the link (default 10)")
    parser.add_argument("--answer", type=float, help="seconds over which the class answers (default 10)")
    parser.add_argument("--hold", type=float, help="seconds the sessions stay after the next step (default 10)")
    parser.add_argument("--run-dir", type=Path, help="use the hall running from this folder (scripts/hall.py start)")
    parser.add_argument("--out", help="write every level's figures to this JSON file")
    args = parser.parse_args(argv)
    plan = dict(SMOKE if args.smoke else FULL)
    for key, value in (("levels", args.levels), ("open_s", args.open), ("answer_s", args.answer),
                       ("hold_s", args.hold)):
        if value is not None:
            plan[key] = value

    own_hall = args.run_dir is None
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="attention-lab-hall-load-"))
    if own_hall:
        try:
            hall.start(run_dir, replicas=2, port=hall.free_ports(3), listen="127.0.0.1", db_port=hall.free_ports(1),
                       database=None)
        except hall.HallError as exc:
            raise SystemExit(f"the hall did not start: {exc}") from None
    try:
        base, hall_pids, replica_pids = hall_processes(run_dir)
        load_start = os.getloadavg()[0]
        rows = asyncio.run(ramp(base, plan, hall_pids, replica_pids))
    finally:
        if own_hall:
            hall.stop(run_dir)
            shutil.rmtree(run_dir, ignore_errors=True)
    cores = os.cpu_count() or 1
    print(f"{'SMOKE — ' if args.smoke else ''}a lecture hall through its proxy: {len(replica_pids)} replicas, "
          f"PostgreSQL and nginx on {cores} cores, the students' sessions (Streamlit's protocol, no browser) in "
          f"one client process on the same cores; a class opens the link within {plan['open_s']:g} s and answers "
          f"within {plan['answer_s']:g} s; load average {load_start:.1f} at start, {os.getloadavg()[0]:.1f} at end\n")
    print(markdown(rows, cores))
    if args.out:
        Path(args.out).write_text(json.dumps(dict(mode="smoke" if args.smoke else "full", plan=plan, cores=cores,
                                                  levels=rows), indent=1))
    return rows


if __name__ == "__main__":
    main()
