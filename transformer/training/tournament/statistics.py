"""Reading the tournament's numbers: each entry's held-out bits over its seeds (`Stats`): mean, lowest and highest
seed, runs that diverged. The verdicts are verdict.py's rule, applied in judgement.py."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

@dataclass(frozen=True)
class Stats:
    choice: str
    values: tuple[float, ...]  # finite held-out bits of the runs that did not diverge
    diverged: int
    runs: int

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def low(self) -> float | None:
        return min(self.values) if self.values else None

    @property
    def high(self) -> float | None:
        return max(self.values) if self.values else None

    def describe(self) -> str:
        if not self.values:
            return f"{self.choice}: diverged in every seed ({self.diverged}/{self.runs})"
        spread = f" ({self.low:.3f}–{self.high:.3f})" if len(self.values) > 1 else ""
        failed = f", diverged {self.diverged}/{self.runs}" if self.diverged else ""
        return f"{self.choice} {self.mean:.3f}{spread}{failed}"


def entry_stats(entry: dict, key: str = "1x") -> Stats:
    """The held-out bits of an entry's runs (at a length multiple for the positions comparison)."""
    values = []
    for run in entry["runs"]:
        value = (run.get("held_out_bits_per_char_by_length") or {}).get(key) if key != "1x" else \
            run.get("held_out_bits_per_char")
        if not run.get("diverged") and value is not None:
            values.append(float(value))
    return Stats(entry["choice"], tuple(values), sum(bool(r.get("diverged")) for r in entry["runs"]),
                 len(entry["runs"]))


STALL_MARGIN = 0.1  # bits/char: a seed this close to the unigram baseline (or above it) learned nothing more
