"""The verdict rule (verdict.py) applied to one comparison of the tournament's JSON: each entry's seed-paired
difference against its reference, its interval and verdict; the claim's status and why; the one-line summary
the page and the README show; and which entries want another seed."""
from __future__ import annotations

import statistics

from .comparisons import COMPARISONS, Comparison
from .verdict import (MAX_SEEDS, Expectation, claim_status, did_not_learn, judge, margin_for,
                      needs_more_seeds, paired, rule)


def seed_bits(entry: dict, length: str = "1x") -> dict[int, float]:
    """Seed -> held-out bits of an entry's runs that trained (at a length multiple: its by-length figure)."""
    out = {}
    for run in entry["runs"]:
        value = run.get("held_out_bits_per_char") if length == "1x" else \
            (run.get("held_out_bits_per_char_by_length") or {}).get(length)
        if not run.get("diverged") and value is not None:
            out[int(run["seed"])] = float(value)
    return out


def _measure(reference: dict[int, float], entry: dict[int, float], against: str, learned: bool) -> dict:
    """The JSON of one paired measurement: against what, the mean difference, its interval and the verdict
    (None where the comparison measured nothing)."""
    difference = paired(reference, entry)
    margin = margin_for(reference)
    interval = difference.interval
    # no seed pairs at all (a learned table cannot read 2x): nothing to decide, and more seeds would not help
    verdict = judge(difference, margin) if learned and margin and difference.seeds else None
    return {"against": against, "verdict": verdict,
            "difference": None if difference.mean is None else round(difference.mean, 4),
            "interval": None if interval is None else [round(interval[0], 4), round(interval[1], 4)],
            "margin": None if margin is None else round(margin, 4), "pairs": len(difference.seeds)}


def judge_comparison(comp: dict, bigram: float, spec: Comparison | None = None) -> dict:
    """Fill in `comp` (its JSON, runs in place): rule, each entry's verdict, difference and interval (and at 2x and
    4x under "longer"), the claim's status and why, the verdict line, and the seeds still wanted."""
    spec = spec or COMPARISONS[comp["key"]]
    entries = {e["choice"]: e for e in comp["entries"]}
    # an entry there to show a failure ("stress") may fail to learn: that is what it measures
    means = {c: (statistics.fmean(v.values()) if (v := seed_bits(e)) else None) for c, e in entries.items()
             if not e.get("stress")}
    not_learned = did_not_learn(means, bigram)
    learned = not not_learned
    comp["rule"] = rule()
    comp["measured_nothing"] = not_learned
    expectations = []
    for choice, entry in entries.items():
        reference = entry.get("against")
        measured = ({"against": None, "verdict": "reference", "difference": None, "interval": None, "margin": None,
                     "pairs": 0} if reference is None else
                    _measure(seed_bits(entries[reference]), seed_bits(entry), reference, learned))
        entry.update(measured)
        longer = {}
        for m in comp.get("lengths", [1])[1:]:
            key = f"{m}x"
            if spec.longer_against == "self":  # the same runs at the trained length
                base, against = _by_length(entry, "1x"), f"{choice} at 1×"
            elif reference is None:
                continue
            else:
                base, against = _by_length(entries[reference], key), f"{reference} at {m}×"
            longer[key] = _measure(base, _by_length(entry, key), against, learned)
        if longer:
            entry["longer"] = longer
        for length, predicted in (entry.get("predicted") or {}).items():
            found = entry if length == "1x" else longer.get(length, {})
            label = choice if length == "1x" else f"{choice} at {length.replace('x', '×')}"
            expectations.append(Expectation(label, found.get("verdict"), tuple(predicted)))
    out_of_reach = spec.out_of_reach(comp) if spec.out_of_reach and learned else None
    status, why = claim_status(expectations, not_learned, bigram, out_of_reach)
    comp["claim_status"], comp["claim_why"] = status, why
    comp["verdict"] = f"{status[0].upper()}{status[1:]}: {why}. {_entries_line(comp)}"
    return comp


def _by_length(entry: dict, key: str) -> dict[int, float]:
    """Seed -> held-out bits at a length multiple, read from the run's by-length figures (1x included)."""
    out = {}
    for run in entry["runs"]:
        value = (run.get("held_out_bits_per_char_by_length") or {}).get(key)
        if not run.get("diverged") and value is not None:
            out[int(run["seed"])] = float(value)
    return out


def _describe(m: dict) -> str:
    if m["difference"] is None:
        return "no seed pairs"
    interval = "" if m["interval"] is None else f" (95% {m['interval'][0]:+.3f} to {m['interval'][1]:+.3f})"
    return f"{m['difference']:+.3f}{interval}" + (f" {m['verdict']}" if m["verdict"] else "")


def _entries_line(comp: dict) -> str:
    """Every measured entry in a phrase: its difference against its reference, interval and verdict."""
    parts = []
    for entry in comp["entries"]:
        if entry["against"] is not None:
            parts.append(f"{entry['choice']} vs {entry['against']} {_describe(entry)}")
        for key, m in (entry.get("longer") or {}).items():
            parts.append(f"{entry['choice']} at {key.replace('x', '×')} vs {m['against']} {_describe(m)}")
    margin = next((e["margin"] for e in comp["entries"] if e.get("margin")), None)
    tail = f" (bits/char; margin ±{margin:.3f})" if margin else " (bits/char)"
    return "; ".join(parts) + tail + "." if parts else ""


def seeds_wanted(comp: dict) -> dict[str, int]:
    """Choice -> the next seed count for each entry whose verdict (or a verdict at a longer length) is undecided
    after MIN_SEEDS seeds, and for what it is measured against, up to MAX_SEEDS."""
    entries = {e["choice"]: e for e in comp["entries"]}
    wanted = {}
    for choice, entry in entries.items():
        seeds = len({r["seed"] for r in entry["runs"]})
        undecided = [entry.get("verdict")] + [m["verdict"] for m in (entry.get("longer") or {}).values()]
        if any(needs_more_seeds(v, seeds) for v in undecided):
            wanted[choice] = seeds + 1
            if entry.get("against") in entries:
                wanted[entry["against"]] = max(wanted.get(entry["against"], 0), seeds + 1)
    return {c: min(n, MAX_SEEDS) for c, n in wanted.items() if n > len({r["seed"] for r in entries[c]["runs"]})}
