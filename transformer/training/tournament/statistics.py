"""Reading the tournament's numbers: each entry's held-out bits over its seeds (`Stats`), whether two entries'
seeds are apart, and each comparison's verdict in one line, read from its JSON."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from .run import LENGTHS


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


def separated(a: Stats, b: Stats) -> bool:
    """Whether the two entries' seeds do not overlap: every seed of one below every seed of the other."""
    if not a.values or not b.values:
        return False
    return a.high < b.low or b.high < a.low


def difference(a: Stats, b: Stats) -> str:
    """b against a in one phrase: the mean difference, and whether it lies beyond the seeds' spread."""
    if not a.values or not b.values:
        return "cannot be compared (diverged)"
    delta = b.mean - a.mean
    return f"{delta:+.3f}" + (" (beyond the seeds' spread)" if separated(a, b) else " (within the seeds' spread)")


NO_DIFFERENCE = "no difference measured at this size"
STALL_MARGIN = 0.1  # bits/char: a mean this close to the unigram baseline (or above it) learned nothing more


def _by_choice(comparison: dict) -> dict[str, dict]:
    return {e["choice"]: e for e in comparison["entries"]}


def kv_verdict(comparison: dict) -> str:
    entries = _by_choice(comparison)
    names = list(entries)
    mha = entry_stats(entries[names[0]])
    others = [entry_stats(entries[n]) for n in names[1:]]
    if not mha.values:
        return "MHA diverged in every seed: nothing to compare against."
    ratio = {n: entries[n]["kv_bytes_per_token"] / entries[names[0]]["kv_bytes_per_token"] for n in names[1:]}
    parts = [f"{s.choice} ({ratio[s.choice]:.2g}× the cache) {difference(mha, s)}" for s in others]
    worse = [s for s in others if s.values and separated(mha, s) and s.mean > mha.mean]
    big = [s for s in worse if (s.mean - mha.mean) / mha.mean > comparison["recipe_small_loss"]]
    failed = [s for s in others if s.diverged]
    text = "; ".join(parts) + " bits/char against MHA."
    if failed:
        return f"Disagrees: {', '.join(s.choice for s in failed)} diverged. " + text
    if big:
        return (f"Disagrees: {', '.join(s.choice for s in big)} lost more than "
                f"{comparison['recipe_small_loss']:.0%} (beyond the seeds' spread). " + text)
    if worse:
        return f"Agrees: a small loss ({', '.join(s.choice for s in worse)}, under " \
               f"{comparison['recipe_small_loss']:.0%}, beyond the seeds' spread). " + text
    return f"Agrees: {NO_DIFFERENCE} for a cache up to {1 / min(ratio.values()):.3g}× smaller. " + text


def positions_verdict(comparison: dict) -> str:
    entries = _by_choice(comparison)
    holds, fails, lines = [], [], []
    for name, entry in entries.items():
        one = entry_stats(entry)
        if not one.values:
            lines.append(f"{name} diverged")
            continue
        reads = []
        for m in LENGTHS[1:]:
            longer = entry_stats(entry, f"{m}x")
            if not longer.values:
                reads.append(f"{m}× cannot read")
                continue
            tolerance = max(one.high - one.low, longer.high - longer.low)
            ok = longer.mean <= one.mean + tolerance
            reads.append(f"{m}× {longer.mean:.2f}")
            (holds if ok else fails).append((name, m))
        lines.append(f"{name} {one.mean:.2f} at 1×, " + ", ".join(reads))
    rope_fails = [m for n, m in fails if n == "RoPE"]
    held_to_4 = [n for n in entries if (n, LENGTHS[-1]) in holds]
    best = min((entry_stats(e) for e in entries.values() if entry_stats(e).values), key=lambda s: s.mean)
    summary = ("Disagrees: RoPE does not extrapolate here (worse at "
               + " and ".join(f"{m}×" for m in rope_fails) + " than at the trained length)") if rope_fails else \
        "Agrees: RoPE reads 2× and 4× no worse than the trained length"
    summary += f"; holds to {LENGTHS[-1]}×: {', '.join(held_to_4) or 'none'}; best at 1×: {best.choice}. "
    return summary + "; ".join(lines) + " (bits/char)."


def norms_verdict(comparison: dict) -> str:
    entries = comparison["entries"]
    depths = sorted({e["config"]["n_layers"] for e in entries})

    def find(placement: str, warm: bool, layers: int) -> Stats:
        for e in entries:
            if (e["config"]["norm_position"] == placement and e["warmup"] == warm
                    and e["config"]["n_layers"] == layers):
                return entry_stats(e)
        raise KeyError(placement)

    diverged = [f"{s.choice} ({s.diverged}/{s.runs})" for e in entries if (s := entry_stats(e)).diverged]
    pre_better, pre_worse, warm_needed, parts = [], [], [], []
    for layers in depths:
        pre, post = find("pre", True, layers), find("post", True, layers)
        cold = find("post", False, layers)
        parts.append(f"{_layers([layers])}: post − pre {difference(pre, post)}, post without warm-up − with "
                     f"{difference(post, cold) if cold.values else 'diverged'}")
        if pre.values and post.values and separated(pre, post):
            (pre_better if pre.mean < post.mean else pre_worse).append(layers)
        if cold.diverged or (cold.values and post.values and separated(post, cold) and cold.mean > post.mean):
            warm_needed.append(layers)
    claim_pre = (f"pre-norm beat post-norm at {_layers(pre_better)}" if pre_better and not pre_worse
                 else f"post-norm beat pre-norm at {_layers(pre_worse)}" if pre_worse
                 else f"pre vs post-norm (with warm-up): {NO_DIFFERENCE}")
    claim_warm = (f"post-norm needed warm-up at {_layers(warm_needed)}" if warm_needed
                  else "post-norm without warm-up did no worse than with it at any depth")
    holds = [bool(pre_better) and not pre_worse, bool(warm_needed)]
    contradicted = [bool(pre_worse), not warm_needed]
    head = "Agrees" if all(holds) else "Disagrees" if any(contradicted) and not any(holds) else "Partly"
    failed = f"Diverged: {', '.join(diverged)}." if diverged else "No run diverged."
    return f"{head}: {claim_pre}; {claim_warm}. {failed} " + "; ".join(parts) + " (bits/char)."


def _layers(depths: list[int]) -> str:
    return " and ".join(map(str, depths)) + (" layer" if depths == [1] else " layers")


def ffn_verdict(comparison: dict) -> str:
    entries = comparison["entries"]
    stats = {e["choice"]: entry_stats(e) for e in entries}
    relu, gelu, swiglu = stats["ReLU"], stats["GELU"], stats["SwiGLU"]
    active, total = [entry_stats(e) for e in entries[3:5]]
    best_plain = min((s for s in (relu, gelu) if s.values), key=lambda s: s.mean, default=relu)
    parts = [f"SwiGLU vs {best_plain.choice} {difference(best_plain, swiglu)}",
             f"MoE at equal active vs SwiGLU {difference(swiglu, active)}",
             f"MoE at equal total vs SwiGLU {difference(swiglu, total)}"]
    swiglu_pays = swiglu.values and best_plain.values and separated(best_plain, swiglu) and swiglu.mean < best_plain.mean
    swiglu_loses = swiglu.values and best_plain.values and separated(best_plain, swiglu) and swiglu.mean > best_plain.mean
    moe_pays = active.values and swiglu.values and separated(swiglu, active) and active.mean < swiglu.mean
    moe_loses = active.values and swiglu.values and separated(swiglu, active) and active.mean > swiglu.mean
    said = [("SwiGLU beat ReLU and GELU at equal parameters" if swiglu_pays else
             "SwiGLU lost to " + best_plain.choice if swiglu_loses else f"SwiGLU vs ReLU/GELU: {NO_DIFFERENCE}"),
            ("MoE beat the dense FFN at equal active parameters" if moe_pays else
             "MoE lost to the dense FFN at equal active parameters" if moe_loses else
             f"MoE at equal active parameters: {NO_DIFFERENCE}")]
    head = "Agrees" if swiglu_pays and moe_pays else "Disagrees" if swiglu_loses or moe_loses else \
        "Partly" if swiglu_pays or moe_pays else "Not shown"
    return f"{head}: {'; '.join(said)}. " + "; ".join(parts) + " (bits/char)."


def qk_verdict(comparison: dict) -> str:
    off, on, off_high, on_high = [entry_stats(e) for e in comparison["entries"]]
    parts = [f"At the recipe's rate QK-norm {difference(off, on)}",
             f"at the high rate: baseline {_brief(off_high)}, QK-norm {_brief(on_high)}"]
    if off_high.diverged and not on_high.diverged:
        head = "Agrees: the high rate broke the baseline and QK-norm survived it"
    elif off_high.diverged and on_high.diverged:
        head = "Disagrees: the high rate broke training with QK-norm too"
    elif on_high.values and off_high.values and separated(off_high, on_high):
        head = ("Partly: the high rate broke neither, but QK-norm trained better at it" if on_high.mean < off_high.mean
                else "Disagrees: the high rate broke neither, and QK-norm trained worse at it")
    else:
        head = f"Not shown: the high rate broke neither; {NO_DIFFERENCE}"
    return f"{head}. " + "; ".join(parts) + " (bits/char)."


def _brief(s: Stats) -> str:
    if not s.values:
        return f"diverged in every seed ({s.diverged}/{s.runs})"
    failed = f", diverged {s.diverged}/{s.runs}" if s.diverged else ""
    return f"{s.mean:.3f}" + (f" ({s.low:.3f}–{s.high:.3f})" if len(s.values) > 1 else "") + failed


def switch_verdict(comparison: dict, what: str) -> str:
    off, on = [entry_stats(e) for e in comparison["entries"]]
    if on.diverged > off.diverged:
        return f"Disagrees: with {what}, {on.diverged}/{on.runs} runs diverged (without: {off.diverged})."
    if not off.values or not on.values:
        return f"Both diverged: off {off.describe()}, {what} {on.describe()}."
    extra = ""
    if comparison.get("first_token"):
        share = {e["choice"]: [r["first_token_attention"] for r in e["runs"] if "first_token_attention" in r]
                 for e in comparison["entries"]}
        if all(share.values()):
            extra = (f" Attention on the first token: {statistics.fmean(share[off.choice]):.2f} without, "
                     f"{statistics.fmean(share[on.choice]):.2f} with.")
    if not separated(off, on):
        return f"Agrees: {NO_DIFFERENCE} ({what} {difference(off, on)} bits/char).{extra}"
    if on.mean < off.mean:
        return f"Agrees, and better: {what} {difference(off, on)} bits/char.{extra}"
    return f"Disagrees: {what} cost {difference(off, on)} bits/char.{extra}"
