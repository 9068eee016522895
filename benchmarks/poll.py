"""The class poll's store: answers per second with a class answering at once, and how soon the teacher sees an answer.

    python -m benchmarks.poll [--smoke] [--postgres URL] [--students N] [--rounds N] [--hall-students N]
                              [--out poll.json]

Databases: SQLite (a new file in a temporary folder, with the store's own settings: WAL,
synchronous=NORMAL) and, when --postgres URL or $ATTENTION_LAB_DB (postgresql://...) names a
server, PostgreSQL (new sessions in that database; the tables are created if missing).

Writers, for each database:
  threads    one app server: 40 students are 40 threads of this process sharing one store
             (and its pool of connections);
  processes  four app servers: 4 processes x 10 threads, each process with a store of its own.

Throughput. The teacher (the main process) moves the class to a new step; the students,
released together by a barrier, each answer it once; the round's time runs from the first
answer call's start to the last one's return. answers/s = all answers / the sum of the round
times; each answer call is timed too. After each round the teacher's `counts` must add up to
the class size: any shortfall is reported as lost answers. One untimed round first (connections
opened, tables warm).

Visibility. One student answers every 10-30 ms while the teacher's screen polls `counts` in a
loop (1 ms apart) from another thread of the same server (threads) or from another process with
its own store (processes): the latency of an answer is the time from the start of its `answer`
call until a poll first shows it. The time of one `counts` call is reported as well.

A lecture hall. 300 students (--hall-students) on two app servers (2 processes, as the hall's
two replicas, each with a store of its own) join a class, then each answers once at a moment of
their own, drawn uniformly over 10 seconds, from a thread of their own (Streamlit runs each
session's script in a thread); the teacher's screen reads `counts` every 2 s meanwhile, as the
page does. Answers in = the teacher's count at the end; lost = students - answers in (an answer
call that raised is lost too); each answer call is timed. Point --postgres at the hall's own
database (`python3 scripts/hall.py status` prints its URL) to measure the store the replicas use.

Targets, for a class of 40: a burst of 40 answers done within 1 s (p95 over rounds), an answer
on the teacher's screen within 0.5 s (p95; the page polls every second or two), no answer lost;
for the hall, no answer lost and an answer stored within 0.5 s (p95), a third of the page's 1.5 s.
--smoke runs 4 students, 2 rounds, 2 processes and 3 visibility samples, and a hall of 20
students answering within 1 s: its numbers mean nothing, it only proves the benchmark runs.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import queue
import random
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from polls import URL_ENV, open_store

FULL = dict(students=40, processes=4, rounds=20, visible_samples=100, hall_students=300, hall_window_s=10.0)
SMOKE = dict(students=4, processes=2, rounds=2, visible_samples=3, hall_students=20, hall_window_s=1.0)
TARGETS = dict(burst_p95_ms=1000.0, visible_p95_ms=500.0, lost_answers=0, hall_answer_p95_ms=500.0)
HALL_SERVERS = 2  # the hall's replicas (scripts/hall.py starts two by default)
TEACHER_POLL_S = 2.0  # how often the teacher's page reads the counts (ui/lessons/classroom.py)
CHOICES = "ABCD"


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def in_threads(student, n: int) -> None:
    """student(k) for each k < n, each in a thread of its own, as Streamlit runs each session's script; until all end."""
    threads = [threading.Thread(target=student, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# --- throughput: students answering at once ---------------------------------------------------------

def _students(url: str, code: str, n: int, first: int, rounds: int, start, done, results) -> None:
    """n students of one app server: they join, then answer each round's step together (released by `start`).

    Puts [(round, student, start_s, end_s) ...] and the error texts on `results` (a list or a queue).
    """
    store = open_store(url)
    ids = [store.join(code) for _ in range(n)]
    samples: list[tuple[int, int, float, float]] = []
    errors: list[str] = []
    lock = threading.Lock()

    def student(k: int) -> None:
        rng = random.Random(first + k)
        for r in range(rounds + 1):  # round 0: the untimed warm-up
            start.wait(120)
            t0 = time.monotonic()
            try:
                store.answer(code, ids[k], r + 1, rng.choice(CHOICES))
            except Exception as e:  # noqa: BLE001 - reported, and the round shows a lost answer
                with lock:
                    errors.append(repr(e))
            t1 = time.monotonic()
            with lock:
                samples.append((r, first + k, t0, t1))
            done.wait(120)

    in_threads(student, n)
    store.close()
    results.put((samples, errors)) if hasattr(results, "put") else results.append((samples, errors))


def throughput(url: str, writers: str, students: int, processes: int, rounds: int) -> dict:
    teacher = open_store(url)
    new = teacher.create_session()
    code, key = new.code, new.teacher_key
    teacher.set_step(code, key, 1)
    if writers == "threads":
        start, done, results = threading.Barrier(students + 1), threading.Barrier(students + 1), []
        workers = [threading.Thread(target=_students, args=(url, code, students, 0, rounds, start, done, results))]
    else:
        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter each, as a separate server would be
        start, done, results = ctx.Barrier(students + 1), ctx.Barrier(students + 1), ctx.Queue()
        per = students // processes
        workers = [ctx.Process(target=_students, args=(url, code, per, p * per, rounds, start, done, results))
                   for p in range(processes)]
    for w in workers:
        w.start()
    lost = []
    try:
        for r in range(rounds + 1):
            teacher.set_step(code, key, r + 1)
            start.wait(120)
            done.wait(120)
            lost.append(students - sum(teacher.counts(code, r + 1, key).values()))
        collected = [results.get(timeout=120) for _ in workers] if hasattr(results, "get") else None
    finally:
        for w in workers:
            w.join(60)
        teacher.close()
    if collected is None:  # threads: the worker has put its results once joined
        collected = results
    samples = [s for batch, _ in collected for s in batch]
    errors = [e for _, batch in collected for e in batch]
    timed = [s for s in samples if s[0] > 0]
    bursts = [max(t1 for r_, _, _, t1 in timed if r_ == r) - min(t0 for r_, _, t0, _ in timed if r_ == r)
              for r in range(1, rounds + 1)]
    calls = [t1 - t0 for _, _, t0, t1 in timed]
    return dict(answers=len(timed), answers_per_s=len(timed) / sum(bursts),
                burst_p50_ms=pct(bursts, 50) * 1e3, burst_p95_ms=pct(bursts, 95) * 1e3,
                answer_p50_ms=pct(calls, 50) * 1e3, answer_p95_ms=pct(calls, 95) * 1e3,
                lost_answers=int(sum(lost[1:])), lost_in_warm_up=int(lost[0]), errors=errors[:5],
                bursts_s=bursts)


# --- visibility: an answer on the teacher's screen -------------------------------------------------

def _teacher_polls(url: str, code: str, key: str, step: int, total: int, ready, results) -> None:
    """Poll counts() until `total` answers show; put [(total seen, first time seen)], [call durations]."""
    store = open_store(url)
    store.counts(code, step, key)  # a connection ready before the first answer
    seen, calls, last = [], [], 0
    ready.set()
    deadline = time.monotonic() + 120
    while last < total and time.monotonic() < deadline:
        t0 = time.monotonic()
        now = sum(store.counts(code, step, key).values())
        t1 = time.monotonic()
        calls.append(t1 - t0)
        if now > last:
            seen.append((now, t1))
            last = now
        time.sleep(0.001)
    store.close()
    results.put((seen, calls)) if hasattr(results, "put") else results.append((seen, calls))


def visibility(url: str, writers: str, samples: int) -> dict:
    student_store = open_store(url)
    new = student_store.create_session()
    code, key = new.code, new.teacher_key
    student_store.set_step(code, key, 1)
    ids = [student_store.join(code) for _ in range(samples)]
    if writers == "threads":
        ready, results = threading.Event(), []
        reader = threading.Thread(target=_teacher_polls, args=(url, code, key, 1, samples, ready, results))
    else:
        ctx = multiprocessing.get_context("spawn")
        ready, results = ctx.Event(), ctx.Queue()
        reader = ctx.Process(target=_teacher_polls, args=(url, code, key, 1, samples, ready, results))
    reader.start()
    ready.wait(120)
    rng, started = random.Random(0), []
    try:
        for i, sid in enumerate(ids):
            time.sleep(rng.uniform(0.010, 0.030))
            started.append(time.monotonic())
            student_store.answer(code, sid, 1, CHOICES[i % len(CHOICES)])
        if hasattr(results, "get"):
            seen, calls = results.get(timeout=150)
        else:
            reader.join(150)
            seen, calls = results[0]
    finally:
        reader.join(30)
        student_store.close()
    latencies = []
    for i, t0 in enumerate(started):  # answer i makes the total i + 1; a poll may have seen two at once
        shown = [t for total, t in seen if total >= i + 1]
        latencies.append(min(shown) - t0 if shown else float("inf"))
    return dict(visible_p50_ms=pct(latencies, 50) * 1e3, visible_p95_ms=pct(latencies, 95) * 1e3,
                visible_max_ms=max(latencies) * 1e3, counts_p50_ms=pct(calls, 50) * 1e3,
                counts_p95_ms=pct(calls, 95) * 1e3, polls=len(calls))


# --- a lecture hall: a large class answering within a few seconds, on several servers ----------------

def _hall_students(url: str, code: str, n: int, first: int, window_s: float, start, results) -> None:
    """n students of one app server: they join, then each answers once at its own moment of the window.

    Puts ([(seconds into the window when the call started, its duration)], [error texts]) on `results`.
    """
    store = open_store(url)
    tokens = [store.join(code) for _ in range(n)]
    rng = random.Random(first)
    moments = sorted(rng.uniform(0, window_s) for _ in range(n))
    samples: list[tuple[float, float]] = []
    errors: list[str] = []
    lock = threading.Lock()
    start.wait(120)
    opened = time.monotonic()

    def student(k: int) -> None:
        time.sleep(max(opened + moments[k] - time.monotonic(), 0))
        t0 = time.monotonic()
        try:
            store.answer(code, tokens[k], 1, CHOICES[(first + k) % len(CHOICES)])
        except Exception as e:  # noqa: BLE001 - reported, and the answer counts as lost
            with lock:
                errors.append(repr(e))
            return
        with lock:
            samples.append((t0 - opened, time.monotonic() - t0))

    in_threads(student, n)
    store.close()
    results.put((samples, errors))


def hall(backend: str, url: str, students: int, window_s: float, servers: int = HALL_SERVERS) -> dict:
    teacher = open_store(url)
    new = teacher.create_session()
    code, key = new.code, new.teacher_key
    teacher.set_step(code, key, 1)
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter each, as a replica is
    start, results = ctx.Barrier(servers + 1), ctx.Queue()
    shares = [students // servers + (s < students % servers) for s in range(servers)]
    workers = [ctx.Process(target=_hall_students, args=(url, code, shares[s], sum(shares[:s]), window_s, start, results))
               for s in range(servers)]
    for w in workers:
        w.start()
    counts_s, collected = [], []
    try:
        start.wait(300)  # every student has joined: the window opens
        deadline = time.monotonic() + window_s + 300
        while len(collected) < servers:  # the teacher's screen reads the counts meanwhile, as the page does
            t0 = time.monotonic()
            if t0 > deadline:
                raise TimeoutError(f"the students' servers did not finish within {window_s + 300:.0f} s")
            teacher.counts(code, 1, key)
            counts_s.append(time.monotonic() - t0)
            try:
                while len(collected) < servers:
                    collected.append(results.get(timeout=max(t0 + TEACHER_POLL_S - time.monotonic(), 0.001)))
            except queue.Empty:
                pass
        answers_in = sum(teacher.counts(code, 1, key).values())
    finally:
        for w in workers:
            w.join(60)
        teacher.close()
    samples = [s for batch, _ in collected for s in batch]
    errors = [e for _, batch in collected for e in batch]
    calls = [duration for _, duration in samples]
    row = dict(backend=backend, students=students, servers=servers, window_s=window_s, answers_in=answers_in,
               lost_answers=students - answers_in, errors=errors[:5], n_errors=len(errors),
               answer_p50_ms=pct(calls, 50) * 1e3, answer_p95_ms=pct(calls, 95) * 1e3,
               answer_max_ms=max(calls, default=float("nan")) * 1e3,
               last_answer_done_s=max((t + d for t, d in samples), default=float("nan")),
               counts_p95_ms=pct(counts_s, 95) * 1e3, teacher_polls=len(counts_s))
    row["met"] = bool(row["lost_answers"] == TARGETS["lost_answers"] and not errors
                      and row["answer_p95_ms"] <= TARGETS["hall_answer_p95_ms"])
    print(f"  {backend} / hall: {answers_in} of {students} answers in, answer p95 {row['answer_p95_ms']:.1f} ms",
          file=sys.stderr, flush=True)
    return row


def hall_markdown(rows: list[dict]) -> str:
    return table(["database", "students, servers", "answering within", "answers in", "lost",
                  "one answer: p50 / p95 / max", "last answer stored at", "teacher's counts(): p95", "met?"],
                 [[r["backend"], f"{r['students']}, {r['servers']}", f"{r['window_s']:g} s", r["answers_in"],
                   r["lost_answers"], f"{r['answer_p50_ms']:.1f} / {r['answer_p95_ms']:.1f} / {r['answer_max_ms']:.1f} ms",
                   f"{r['last_answer_done_s']:.2f} s", f"{r['counts_p95_ms']:.2f} ms", "yes" if r["met"] else "**no**"]
                  for r in rows])


# --- the run --------------------------------------------------------------------------------------------

def measure(backend: str, url: str, sizes: dict) -> list[dict]:
    rows = []
    for writers in ("threads", "processes"):
        row = dict(backend=backend, writers=writers, students=sizes["students"],
                   servers=1 if writers == "threads" else sizes["processes"], rounds=sizes["rounds"])
        row.update(throughput(url, writers, sizes["students"], sizes["processes"], sizes["rounds"]))
        row.update(visibility(url, writers, sizes["visible_samples"]))
        row["met"] = bool(row["lost_answers"] == TARGETS["lost_answers"] and not row["errors"]
                          and row["burst_p95_ms"] <= TARGETS["burst_p95_ms"]
                          and row["visible_p95_ms"] <= TARGETS["visible_p95_ms"])
        rows.append(row)
        print(f"  {backend} / {writers}: {row['answers_per_s']:.0f} answers/s, "
              f"visible p95 {row['visible_p95_ms']:.1f} ms", file=sys.stderr, flush=True)
    return rows


def table(columns: list[str], rows: list[list]) -> str:
    """A markdown table."""
    return "\n".join(["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
                      *("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)])


def markdown(rows: list[dict]) -> str:
    return table(["database", "writers", "answers/s", "burst of N: p50 / p95", "one answer: p50 / p95",
                  "answer visible: p50 / p95", "counts(): p50", "lost", "met?"],
                 [[r["backend"], r["writers"], f"{r['answers_per_s']:.0f}",
                   f"{r['burst_p50_ms']:.1f} / {r['burst_p95_ms']:.1f} ms (N = {r['students']}, {r['servers']} "
                   f"server{'s' if r['servers'] > 1 else ''})", f"{r['answer_p50_ms']:.2f} / {r['answer_p95_ms']:.2f} ms",
                   f"{r['visible_p50_ms']:.1f} / {r['visible_p95_ms']:.1f} ms", f"{r['counts_p50_ms']:.2f} ms",
                   r["lost_answers"], "yes" if r["met"] else "**no**"]
                  for r in rows])


def postgres_version(url: str) -> str | None:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute("SHOW server_version").fetchone()[0]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="4 students, 2 rounds: proves it runs")
    parser.add_argument("--postgres", metavar="URL", default=None,
                        help=f"a PostgreSQL database to measure too (default: ${URL_ENV} if it is postgresql://...)")
    parser.add_argument("--students", type=int, help=f"class size (default {FULL['students']})")
    parser.add_argument("--rounds", type=int, help=f"timed rounds of answers (default {FULL['rounds']})")
    parser.add_argument("--hall-students", type=int,
                        help=f"students of the lecture hall, on {HALL_SERVERS} servers (default {FULL['hall_students']})")
    parser.add_argument("--out", help="write every sample and the machine to this JSON file")
    args = parser.parse_args(argv)

    sizes = dict(SMOKE if args.smoke else FULL)
    if args.students:
        sizes["students"] = args.students
    if args.rounds:
        sizes["rounds"] = args.rounds
    if args.hall_students:
        sizes["hall_students"] = args.hall_students
    if sizes["students"] % sizes["processes"]:
        parser.error(f"--students {sizes['students']} does not split over {sizes['processes']} processes")
    env_url = os.environ.get(URL_ENV, "")
    pg_url = args.postgres or (env_url if env_url.startswith(("postgresql://", "postgres://")) else None)

    machine = dict(python=platform.python_version(), sqlite=sqlite3.sqlite_version, cpus=os.cpu_count(),
                   platform=platform.platform(), load_at_start=os.getloadavg())
    rows, halls = [], []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="attention-lab-poll-") as folder:
        rows += measure("sqlite", str(Path(folder) / "poll.sqlite3"), sizes)
        halls.append(hall("sqlite", str(Path(folder) / "hall.sqlite3"), sizes["hall_students"], sizes["hall_window_s"]))
    if pg_url:
        machine["postgresql"] = postgres_version(pg_url)
        rows += measure("postgresql", pg_url, sizes)
        halls.append(hall("postgresql", pg_url, sizes["hall_students"], sizes["hall_window_s"]))
    machine["load_at_end"] = os.getloadavg()

    print(f"{'SMOKE — ' if args.smoke else ''}class poll store: {sizes['students']} students, "
          f"{sizes['rounds']} rounds, {sizes['visible_samples']} visibility samples; "
          f"{time.monotonic() - started:.0f} s; load average {machine['load_at_start'][0]:.1f} -> "
          f"{machine['load_at_end'][0]:.1f}" + ("" if pg_url else "; no PostgreSQL URL given (--postgres)"))
    print(markdown(rows))
    print(f"\nA lecture hall: {sizes['hall_students']} students on {HALL_SERVERS} servers, each answering once "
          f"within {sizes['hall_window_s']:g} s\n")
    print(hall_markdown(halls))
    if args.out:
        Path(args.out).write_text(json.dumps(dict(mode="smoke" if args.smoke else "full", sizes=sizes,
                                                  targets=TARGETS, machine=machine, rows=rows, hall=halls), indent=1))
    return rows


if __name__ == "__main__":
    main()
