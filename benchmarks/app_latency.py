"""Server-side time of a page rerun after a sidebar widget change, for every page of the app.

    python -m benchmarks.app_latency [--smoke] [--out app_latency.json]

For each page of the navigation (``ui.app.navigation``) whose script exists: a fresh session
(AppTest) opens the page with the app's default preset and sets a seed of its own (the warm-up, not timed),
then makes a series of sidebar changes -- position, FFN, norm, KV heads, norm placement,
seed -- and times each ``at.run()``. Each change sets a value the widget does not hold
and the page has not set before, so every timed rerun meets a configuration no earlier
change produced: it builds a model and records its trace, the cache-miss case, the slow
one. Target: p95 <= 300 ms on two cores.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from ui.app.navigation import existing_pages

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
TARGET_P95_MS = 300.0

POSITIONS, FFNS = ("alibi", "sinusoidal", "rope", "learned"), ("gelu", "relu", "swiglu")
# (widget kind, key, candidate values), in order; None: the page's seed + 1
CHANGES = [
    ("selectbox", "position", POSITIONS),
    ("selectbox", "ffn", FFNS),
    ("selectbox", "norm", ("layernorm", "rmsnorm")),
    ("selectbox", "n_kv_heads", (1, 4, 2)),
    ("selectbox", "position", POSITIONS),
    ("selectbox", "ffn", FFNS),
    ("selectbox", "norm_position", ("post", "pre")),
    ("number_input", "seed", None),
]
FULL_CHANGES, SMOKE_CHANGES = len(CHANGES), 1


def app_pages() -> list[tuple[str, str]]:
    """(script, title) of every page of the navigation whose script exists."""
    return [(page.script, page.title) for page in existing_pages()]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def pick(current, candidates, used: set) -> object:
    """The first candidate that differs from the widget's value and that this page has not set yet."""
    fresh = [v for v in candidates if v != current and v not in used]
    return (fresh or [v for v in candidates if v != current])[0]


def time_page(script: str, n_changes: int, seed: int) -> dict:
    from streamlit.logger import set_log_level
    from streamlit.testing.v1 import AppTest

    set_log_level("error")  # AppTest's bare-mode warnings would drown the table

    at = AppTest.from_file(str(APP), default_timeout=120)
    at.switch_page(script).run()  # warm-up: the page's first run in this session
    at.sidebar.number_input(key="seed").set_value(seed)
    at.run()  # a seed of its own, so this page's changes miss the caches other pages filled
    exceptions, errors = len(at.exception), [e.value for e in at.error]
    times_ms, changes, used = [], [], {}
    for kind, key, candidates in CHANGES[:n_changes]:
        widget = getattr(at.sidebar, kind)(key=key)
        value = seed + 1 if candidates is None else pick(widget.value, candidates, used.setdefault(key, set()))
        used.setdefault(key, set()).add(value)
        changes.append(f"{key}: {widget.value} -> {value}")
        widget.set_value(value)
        start = time.perf_counter()
        at.run()
        times_ms.append((time.perf_counter() - start) * 1e3)
        exceptions += len(at.exception)
        errors += [e.value for e in at.error]  # a page that stops on an error would look fast: show it
    return dict(page=script, changes=changes,
                times_ms=times_ms, p50_ms=percentile(times_ms, 50), p95_ms=percentile(times_ms, 95),
                max_ms=max(times_ms), exceptions=exceptions, errors=errors)


def markdown(results: list[dict]) -> str:
    lines = ["| page | reruns | p50 | p95 | max | exceptions | st.error shown | target p95 | met? |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        met = r["p95_ms"] <= TARGET_P95_MS and r["exceptions"] == 0 and not r["errors"]
        lines.append(f"| {r['page']} | {len(r['times_ms'])} | {r['p50_ms']:.0f} ms | {r['p95_ms']:.0f} ms "
                     f"| {r['max_ms']:.0f} ms | {r['exceptions']} | {len(r['errors'])} | <= {TARGET_P95_MS:.0f} ms "
                     f"| {'yes' if met else '**no**'} |")
    every = [t for r in results for t in r["times_ms"]]
    n_exceptions, n_errors = sum(r["exceptions"] for r in results), sum(len(r["errors"]) for r in results)
    met = percentile(every, 95) <= TARGET_P95_MS and n_exceptions == 0 and n_errors == 0
    lines.append(f"| **all pages** | {len(every)} | {percentile(every, 50):.0f} ms | {percentile(every, 95):.0f} ms "
                 f"| {max(every):.0f} ms | {n_exceptions} | {n_errors} | <= {TARGET_P95_MS:.0f} ms "
                 f"| {'yes' if met else '**no**'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_CHANGES} change per page instead of {FULL_CHANGES}")
    parser.add_argument("--out", help="write every timing to this JSON file")
    args = parser.parse_args(argv)
    n_changes = SMOKE_CHANGES if args.smoke else FULL_CHANGES
    load_start = os.getloadavg()[0]
    results = [time_page(script, n_changes, seed=1000 * (i + 1)) for i, (script, _title) in enumerate(app_pages())]
    print(f"{'SMOKE — ' if args.smoke else ''}server-side rerun after a sidebar change (AppTest), default preset, "
          f"{os.cpu_count()} cores; load average {load_start:.1f} at start, {os.getloadavg()[0]:.1f} at end\n")
    print(markdown(results))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(mode="smoke" if args.smoke else "full", cores=os.cpu_count(), pages=results), f, indent=1)
    return results


if __name__ == "__main__":
    main()
