"""The tournament's verdict rule, written once: every comparison is judged by it.

1. Did every entry learn? An entry whose mean held-out bits/char does not end at least `LEARNED_BITS` under the
   bigram baseline (a model that knows only character pairs) learned nothing a comparison could read: its
   comparison "measured nothing" and draws no verdict. An entry put there to show a failure (a "stress" entry: a
   rate chosen to break training, tied embeddings under deep post-norm) is exempt: its failing is what it measures.
2. Each entry against its reference, seed by seed: the difference of the two runs that share a seed (entry minus
   reference, bits/char), their mean, and its 95% t-interval over the seed pairs.
3. A margin stated before any run: ±`MARGIN_SHARE` of the reference's mean bits/char. The entry is
   - "equivalent" when the whole interval lies inside the margin,
   - "better" when the whole interval lies below 0 (fewer bits), "worse" when it lies above 0,
   - "undecided" otherwise (too few seeds, or an interval that crosses 0 and a margin's edge).
4. The claim names the verdicts it predicts for some entries. It "agrees" when every one of them is as predicted,
   "disagrees" when any is decided otherwise, is "undecided" while any is undecided, and is "not tested at this
   size" when the comparison measured nothing or cannot reach what the claim is about (the reason is said).

Undecided after `MIN_SEEDS` seeds, an entry (and its reference) gets more seeds, up to `MAX_SEEDS`.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

MARGIN_SHARE = 0.01  # the equivalence margin: ±1% of the reference's mean bits/char, fixed before any run
LEARNED_BITS = 0.3  # an entry must end this far under the bigram baseline for its comparison to measure anything
MIN_SEEDS, MAX_SEEDS = 3, 5  # seeds every entry gets; at most this many where a verdict stays undecided
VERDICTS = ("better", "worse", "equivalent", "undecided")
CLAIM_STATUSES = ("agrees", "disagrees", "not tested at this size", "undecided")

# Student's t at 0.975 for 1 to 30 degrees of freedom (a published table): the 95% two-sided interval's width
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z_975 = 1.959964  # the normal's quantile, which t approaches with many degrees of freedom

RULE_TEXT = (f"Each entry is compared with its reference seed by seed (the two runs that share a seed), and the mean "
             f"of those differences is given with its 95% t-interval over the seed pairs. The margin, fixed before "
             f"any run, is ±{MARGIN_SHARE:.0%} of the reference's bits/char: an interval wholly inside it reads "
             f"**equivalent**, wholly below 0 **better**, wholly above 0 **worse**, anything else **undecided** (an "
             f"undecided entry gets more seeds, up to {MAX_SEEDS}). A comparison where an entry did not end at least "
             f"{LEARNED_BITS:g} bits/char under the bigram baseline (a model that knows only which character follows "
             f"which) **measured nothing**, and draws no verdict; an entry put there to show a failure (a rate chosen to "
             f"break training, tied embeddings under deep post-norm) is exempt, its failing being what it measures. "
             f"The claim then **agrees**, **disagrees**, is "
             f"**undecided**, or is **not tested at this size**, with the reason.")


def rule() -> dict:
    """The rule as the JSON states it, beside each comparison."""
    return {"margin_share": MARGIN_SHARE, "margin": f"±{MARGIN_SHARE:.0%} of the reference's mean bits/char",
            "interval": "95% Student t-interval of the seed-paired differences (entry − reference)",
            "seeds": MIN_SEEDS, "max_seeds": MAX_SEEDS, "learned_bits": LEARNED_BITS,
            "learned": f"every entry's mean at least {LEARNED_BITS:g} bits/char under the bigram baseline"}


def t_quantile(df: int) -> float:
    """Student's t at 0.975 with `df` degrees of freedom (the table, then a Cornish-Fisher step past 30)."""
    if df < 1:
        raise ValueError(f"a t-interval needs at least 2 seed pairs (1 degree of freedom), got {df} degrees")
    if df <= len(T_975):
        return T_975[df - 1]
    z = Z_975
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


@dataclass(frozen=True)
class Paired:
    """Entry minus reference over the seeds both trained: their mean and its 95% interval (None under 2 pairs)."""
    seeds: tuple[int, ...]
    differences: tuple[float, ...]

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.differences) if self.differences else None

    @property
    def interval(self) -> tuple[float, float] | None:
        n = len(self.differences)
        if n < 2:
            return None
        half = t_quantile(n - 1) * statistics.stdev(self.differences) / math.sqrt(n)
        return self.mean - half, self.mean + half


def paired(reference: dict[int, float], entry: dict[int, float]) -> Paired:
    """Seed -> bits of a reference and an entry (runs that diverged left out), paired on the seeds both have."""
    seeds = tuple(sorted(set(reference) & set(entry)))
    return Paired(seeds, tuple(entry[s] - reference[s] for s in seeds))


def judge(difference: Paired, margin: float) -> str:
    """The entry's verdict from its paired difference and the margin (bits/char, > 0)."""
    if not margin > 0:
        raise ValueError(f"margin {margin!r}: the equivalence margin must be greater than 0 bits/char")
    interval = difference.interval
    if interval is None:
        return "undecided"
    low, high = interval
    if -margin <= low and high <= margin:
        return "equivalent"
    if high < 0:
        return "better"
    if low > 0:
        return "worse"
    return "undecided"


def margin_for(reference: dict[int, float]) -> float | None:
    """The margin in bits/char: MARGIN_SHARE of the reference's mean (None when no reference run trained)."""
    return MARGIN_SHARE * statistics.fmean(reference.values()) if reference else None


def did_not_learn(means: dict[str, float | None], bigram: float) -> list[str]:
    """The entries (choice -> mean held-out bits, None when every run diverged) that did not end LEARNED_BITS under
    the bigram baseline, each with its number."""
    limit = bigram - LEARNED_BITS
    return [f"{choice} ({'diverged in every seed' if mean is None else f'{mean:.3f}'})"
            for choice, mean in means.items() if mean is None or mean > limit]


@dataclass(frozen=True)
class Expectation:
    """What the claim predicts for one measured verdict: `label` names it ("GQA (2 groups)", "RoPE at 4×")."""
    label: str
    verdict: str | None  # the measured verdict; None where that entry has none
    predicted: tuple[str, ...]  # the verdicts that agree with the claim


def claim_status(expectations: list[Expectation], measured_nothing: list[str], bigram: float,
                 out_of_reach: str | None = None) -> tuple[str, str]:
    """(status, why): how the measurement reads the claim."""
    if measured_nothing:
        return ("not tested at this size",
                f"measured nothing: {', '.join(measured_nothing)} did not end {LEARNED_BITS:g} bits/char under the "
                f"bigram baseline ({bigram:.3f}), so no verdict is drawn")
    if out_of_reach:
        return "not tested at this size", out_of_reach
    if not expectations:
        raise ValueError("a claim needs at least one expectation to be read against a measurement")
    contrary = [e for e in expectations if e.verdict not in (*e.predicted, "undecided", None)]
    if contrary:
        return "disagrees", "; ".join(f"{e.label} {e.verdict} (the claim predicts {' or '.join(e.predicted)})"
                                      for e in contrary)
    open_ = [e for e in expectations if e.verdict in ("undecided", None)]
    if open_:
        return "undecided", "; ".join(f"{e.label}: its interval is too wide to decide" for e in open_)
    return "agrees", "; ".join(f"{e.label} {e.verdict}" for e in expectations)


def needs_more_seeds(verdict: str | None, seeds: int) -> bool:
    """Whether the runner gives an entry (and its reference) another seed: undecided, under MAX_SEEDS."""
    return verdict == "undecided" and MIN_SEEDS <= seeds < MAX_SEEDS
