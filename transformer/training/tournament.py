"""Trade-offs, measured: every claim the lecture makes about an axis, trained and read with error bars.

One recipe (the same width, steps, tokens and batch for every entry of a comparison), several seeds per
entry, held-out bits per character on the English corpus the language checkpoints use:

    from transformer.training import tournament
    recipe = tournament.Recipe()                         # d_model 64, 2 layers, 4 heads, crops of 128, batch 16
    run = tournament.train_run(tournament.base_config(recipe), recipe, seed=0)
    run["held_out_bits_per_char"], run["curve"], run["processor_seconds"], run["diverged"]

    python -m scripts.tournament                          # every comparison; writes assets/measurements/tournament.json

Each comparison is data (`COMPARISONS`): its axis, the lecture's claim, its entries (config changes, and a
learning rate or warm-up of their own where the comparison is about those), the cost it is plotted against,
and a function that reads the measured numbers into a one-line verdict. The JSON is the only thing the page
and the README read; `readme_table` renders the README's table from it.
"""
from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch

from ..config import TransformerConfig
from ..costs import kv_cache_bytes_per_token, param_counts
from ..model import Transformer
from . import language

ROOT = Path(__file__).resolve().parents[2]
TOURNAMENT_PATH = ROOT / "assets" / "measurements" / "tournament.json"
COMMAND = "python -m scripts.tournament"
MIN_SEEDS = 3
LENGTHS = (1, 2, 4)  # the positions comparison reads held-out text at these multiples of the trained length
SCALE_NOTE = ("Every model here has about a hundred thousand parameters and trained for minutes on one CPU thread; "
              "the lecture's claims are about models thousands to millions of times larger, trained for weeks. "
              "A difference measured here is a fact about this size; one not measured here may still appear at scale.")


@dataclass(frozen=True)
class Recipe:
    """What every run of the tournament shares. A comparison changes one thing at a time against this."""
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    deep_layers: int = 6  # the norms comparison's second depth
    context: int = 128  # characters per training crop
    batch_size: int = 16
    steps: int = 500
    lr: float = 3e-3
    warmup: int = 50  # linear warm-up steps, then a cosine to a tenth of the peak (train.learning_rate)
    high_lr_factor: float = 10.0  # the QK-norm comparison's "several times higher" rate
    kv_rank: int = 32  # MLA's latent width
    mla_rope_dim: int = 8  # MLA's decoupled RoPE key width (of d_head 16)
    n_experts: int = 4
    top_k: int = 2
    attn_softcap: float = 50.0  # Gemma 2's caps
    logit_softcap: float = 30.0
    eval_windows: int = 256  # held-out windows of `context` characters (fewer and longer at 2x and 4x: same characters)
    corpus: str = "english"
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    blowup_bits: float = 1.0  # a 10-step mean training loss this far above its lowest earlier one: diverged
    small_loss: float = 0.02  # a loss beyond the seeds' spread but under this share of the baseline counts as "almost none"

    def to_dict(self) -> dict:
        return {**asdict(self), "optimizer": "AdamW (betas 0.9, 0.98), linear warm-up then cosine to 0.1 x peak, "
                                              "gradient clip at grad_clip; transformer.training.train.train",
                "task": f"next character of crops of {self.context} characters (no repeated spans), "
                        f"{'WordNet English' if self.corpus == 'english' else self.corpus}; held-out split",
                "tokens_per_run": self.tokens}

    @property
    def tokens(self) -> int:
        """Characters each run reads: steps x batch x (context + 1)."""
        return self.steps * self.batch_size * (self.context + 1)

    @property
    def high_lr(self) -> float:
        return self.lr * self.high_lr_factor


TINY = Recipe(d_model=16, n_layers=1, deep_layers=2, context=16, batch_size=2, steps=6, warmup=2, kv_rank=8,
              mla_rope_dim=2, eval_windows=4, corpus="python-docs")


def base_config(recipe: Recipe, **changes) -> TransformerConfig:
    """The recipe's model: LLaMA's axes (RoPE, RMSNorm before each sublayer, SwiGLU with d_ff sized so the FFN
    has the parameters of a 4 x d_model MLP), a decoder reading characters, max_len 4 x the trained context."""
    vocab = len(language.VOCAB)
    base = dict(arch="decoder", vocab_size=vocab, d_model=recipe.d_model, n_heads=recipe.n_heads,
                n_layers=recipe.n_layers, max_len=LENGTHS[-1] * recipe.context + 1, position="rope", norm="rmsnorm",
                norm_position="pre", ffn="swiglu")
    cfg = TransformerConfig(**base)
    cfg = cfg.replace(d_ff=width_for_params(cfg, _mlp_params(cfg), "total"))
    return cfg.replace(**changes) if changes else cfg


def _mlp_params(cfg: TransformerConfig) -> int:
    """Parameters of the recipe's ReLU MLP (4 x d_model wide): the budget every FFN entry matches."""
    return param_counts(cfg.replace(ffn="relu", d_ff=4 * cfg.d_model))["total"]


def width_for_params(cfg: TransformerConfig, target: int, count: str = "total", field_name: str = "d_ff") -> int:
    """The FFN (or expert) width whose model has the parameters closest to `target` (transformer.costs)."""
    best, best_gap = 1, None
    for width in range(1, 8 * cfg.d_model + 1):
        gap = abs(param_counts(cfg.replace(**{field_name: width}))[count] - target)
        if best_gap is None or gap < best_gap:
            best, best_gap = width, gap
    return best


# --- one run ----------------------------------------------------------------------------------------


def _window_means(losses: list[float], window: int) -> list[float]:
    """The mean of each `window` steps (NaN where any is not finite)."""
    means = []
    for start in range(0, len(losses), window):
        chunk = losses[start:start + window]
        means.append(sum(chunk) / len(chunk) if all(math.isfinite(x) for x in chunk) else math.nan)
    return means


def diverged_at(losses: list[float], blowup_bits: float = 1.0, window: int = 10) -> int | None:
    """The step where training diverged, or None: the first loss that is not finite, or a blow-up that never came
    back: from some `window`-step mean on, every mean stays more than `blowup_bits` above the lowest one before
    it, to the end of the run (bits per character). A spike the run recovers from is not divergence
    (`spikes` finds those)."""
    for step, x in enumerate(losses):
        if not math.isfinite(x):
            return step
    means = _window_means(losses, window)
    lowest, blown_from = math.inf, None
    for i, mean in enumerate(means):
        if mean > lowest + blowup_bits:
            blown_from = i if blown_from is None else blown_from
        else:
            blown_from = None
            lowest = min(lowest, mean)
    return None if blown_from is None else blown_from * window


def spikes(losses: list[float], blowup_bits: float = 1.0, window: int = 10) -> list[int]:
    """Steps where a `window`-step mean of the loss jumped more than `blowup_bits` above the lowest one before it
    (the first window of each jump), whether or not the run came back."""
    found, lowest, above = [], math.inf, False
    for i, mean in enumerate(_window_means(losses, window)):
        if not math.isfinite(mean):
            break
        if mean > lowest + blowup_bits:
            if not above:
                found.append(i * window)
            above = True
        else:
            above = False
            lowest = min(lowest, mean)
    return found


def curve(losses: list[float], points: int = 50) -> list[list[float]]:
    """[[step, mean training bits per character over the steps up to it], ...]: about `points` points; a
    window with a non-finite loss reads None."""
    every = max(1, len(losses) // points)
    out = []
    for start in range(0, len(losses), every):
        chunk = losses[start:start + every]
        value = sum(chunk) / len(chunk) if all(math.isfinite(x) for x in chunk) else None
        out.append([start + len(chunk) - 1, None if value is None else round(value, 4)])
    return out


def held_out_bits(model: Transformer, recipe: Recipe, multiple: int = 1) -> float | None:
    """Held-out bits per character read in windows of multiple x the trained context (the same characters at
    every multiple); None when the result is not finite."""
    context = multiple * recipe.context
    bits = language.bits_per_char(model, context=context, limit=max(1, recipe.eval_windows // multiple),
                                  corpus=recipe.corpus)
    return round(bits, 4) if math.isfinite(bits) else None


def can_read(cfg: TransformerConfig, length: int) -> bool:
    """Whether the model has positions for `length` tokens (a learned table has only the rows it trained)."""
    return cfg.max_len >= length


@torch.no_grad()
def forward_ms(cfg: TransformerConfig, recipe: Recipe, repeats: int = 5) -> float:
    """Median milliseconds of one forward pass over a training batch (batch x (1 + context)), untrained weights."""
    model = Transformer(cfg, device="cpu").eval()
    ids = torch.randint(cfg.vocab_size, (recipe.batch_size, 1 + recipe.context),
                        generator=torch.Generator().manual_seed(0))
    for _ in range(2):
        model(ids)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model(ids)
        times.append(time.perf_counter() - start)
    return round(1000 * statistics.median(times), 3)


def train_run(cfg: TransformerConfig, recipe: Recipe, seed: int, *, lr: float | None = None,
              warmup: int | None = None, lengths: tuple[int, ...] = LENGTHS, first_token: bool = True,
              should_stop: Callable[[], bool] | None = None) -> dict:
    """Train `cfg` on the recipe's text for recipe.steps steps (train.train: AdamW, warm-up then cosine) and read
    it on held-out text. Returns the run's JSON: seed, steps, tokens, lr, warmup, held-out bits per character
    (None when diverged), the training curve (bits per character), diverged (and the step), processor and
    wall seconds; with lengths (1, 2, 4) the held-out figure at each multiple of the trained length (None where
    the model cannot read that far); with first_token, the share of attention that goes to <bos>."""
    from .tasks import Language
    from .train import train

    lr = recipe.lr if lr is None else lr
    warmup = recipe.warmup if warmup is None else warmup
    if lr <= 0:
        raise ValueError(f"lr={lr} must be greater than 0")
    if not 0 <= warmup <= recipe.steps:
        raise ValueError(f"warmup={warmup} must be between 0 and the run's {recipe.steps} steps")
    task = Language(corpus=recipe.corpus, context=recipe.context, repeat_rate=0.0)
    losses: list[float] = []

    def record(step: int, metrics: dict, model) -> None:
        losses.append(metrics["loss"] / math.log(2))

    def stop() -> bool:  # a loss that is not finite stays so: the rest of the run would only burn time
        return bool(losses and not math.isfinite(losses[-1])) or (should_stop is not None and should_stop())

    wall, cpu = time.perf_counter(), time.process_time()
    model, history = train(cfg, task, recipe.steps, batch_size=recipe.batch_size, lr=lr, warmup=warmup,
                           weight_decay=recipe.weight_decay, grad_clip=recipe.grad_clip, seed=seed, device="cpu",
                           callback=record, callback_every=1, should_stop=stop, progress=False)
    train_cpu = history[-1]["cpu_seconds"] if history else 0.0
    failed = diverged_at(losses, recipe.blowup_bits)
    run = {"seed": seed, "steps": recipe.steps, "tokens": recipe.tokens, "lr": lr, "warmup": warmup,
           "steps_run": len(losses)}
    by_length = {}
    for multiple in lengths:
        length = multiple * recipe.context + 1
        by_length[f"{multiple}x"] = held_out_bits(model, recipe, multiple) if can_read(cfg, length) else None
    bits = by_length.get("1x")
    if failed is None and bits is None:  # finite training loss, but held-out text reads as infinite
        failed = len(losses)
    run.update(held_out_bits_per_char=None if failed is not None else bits,
               diverged=failed is not None, diverged_at_step=failed,
               final_training_bits_per_char=round(losses[-1], 4) if losses and math.isfinite(losses[-1]) else None,
               loss_spikes=spikes(losses, recipe.blowup_bits), curve=curve(losses))
    if len(lengths) > 1:
        run["held_out_bits_per_char_by_length"] = by_length if failed is None else {k: None for k in by_length}
    if first_token and failed is None:
        run["first_token_attention"] = round(first_token_attention(model, recipe), 4)
    run.update(processor_seconds=round(train_cpu, 2), evaluation_processor_seconds=round(time.process_time() - cpu
                                                                                          - train_cpu, 2),
               wall_seconds=round(time.perf_counter() - wall, 2))
    return run


@torch.no_grad()
def first_token_attention(model: Transformer, recipe: Recipe, windows: int = 8) -> float:
    """The mean attention weight on <bos> from the queries of the second half of held-out windows, all layers and
    heads: where a head with nothing to read puts its weight when it has no sink."""
    from ..hooks import hook_name

    ids = language.held_out_windows(recipe.context, windows, recipe.corpus)[:, :-1]
    names = [hook_name(i, "attn.hook_pattern") for i in range(model.cfg.n_layers)]
    _, trace = model.run_with_trace(ids, names=names)
    half = ids.shape[1] // 2
    return float(torch.stack([trace[n][..., half:, 0].float().mean() for n in names]).mean())


# --- the comparisons ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    choice: str
    changes: dict = field(default_factory=dict)  # config fields changed from the recipe's base config
    lr_factor: float = 1.0  # times the recipe's learning rate
    warmup: bool = True  # the recipe's warm-up, or none


@dataclass(frozen=True)
class Comparison:
    key: str  # the --comparison name
    axis: str
    group: str  # the heading it belongs to
    claim: str
    cost_axis: str  # kv_bytes_per_token | parameters | forward_ms
    cannot_test: str
    entries: Callable[[Recipe], list[Entry]]
    verdict: Callable[[dict], str]
    lengths: tuple[int, ...] = (1,)
    first_token: bool = False


def _kv_entries(r: Recipe) -> list[Entry]:
    return [Entry("MHA"), Entry("GQA (2 groups)", {"n_kv_heads": 2}), Entry("MQA", {"n_kv_heads": 1}),
            Entry("MLA", {"kv_rank": r.kv_rank, "rope_dim": r.mla_rope_dim})]


def _position_entries(r: Recipe) -> list[Entry]:
    return [Entry("none", {"position": "none"}), Entry("sinusoidal", {"position": "sinusoidal"}),
            Entry("learned", {"position": "learned", "max_len": r.context + 1}),  # only the rows it trains
            Entry("RoPE"), Entry("ALiBi", {"position": "alibi"})]


def _norm_entries(r: Recipe) -> list[Entry]:
    entries = []
    for layers in (r.n_layers, r.deep_layers):
        for placement in ("pre", "post", "sandwich"):
            for warm in (True, False):
                entries.append(Entry(f"{placement}, {'warm-up' if warm else 'no warm-up'}, {layers} layers",
                                     {"norm_position": placement, "n_layers": layers}, warmup=warm))
    return entries


def _ffn_entries(r: Recipe) -> list[Entry]:
    base = base_config(r)
    mlp = _mlp_params(base)
    moe = base.replace(ffn="moe", n_experts=r.n_experts, top_k=r.top_k)
    return [Entry("ReLU", {"ffn": "relu", "d_ff": 4 * r.d_model}),
            Entry("GELU", {"ffn": "gelu", "d_ff": 4 * r.d_model}),
            Entry("SwiGLU"),
            Entry(f"MoE, equal active ({r.top_k} of {r.n_experts} experts)",
                  {"ffn": "moe", "n_experts": r.n_experts, "top_k": r.top_k,
                   "d_ff": width_for_params(moe, mlp, "active")}),
            Entry(f"MoE, equal total ({r.top_k} of {r.n_experts} experts)",
                  {"ffn": "moe", "n_experts": r.n_experts, "top_k": r.top_k,
                   "d_ff": width_for_params(moe, mlp, "total")})]


def _qk_entries(r: Recipe) -> list[Entry]:
    high = f"{r.high_lr_factor:g}x lr"
    return [Entry("off"), Entry("QK-norm", {"qk_norm": "head"}),
            Entry(f"off, {high}", lr_factor=r.high_lr_factor),
            Entry(f"QK-norm, {high}", {"qk_norm": "head"}, lr_factor=r.high_lr_factor)]


def _sink_entries(r: Recipe) -> list[Entry]:
    return [Entry("off"), Entry("sinks", {"sinks": True})]


def _softcap_entries(r: Recipe) -> list[Entry]:
    return [Entry("off"), Entry(f"soft-cap (scores {r.attn_softcap:g}, logits {r.logit_softcap:g})",
                                {"attn_softcap": r.attn_softcap, "logit_softcap": r.logit_softcap})]


# --- reading the numbers --------------------------------------------------------------------------------


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


def _switch_verdict(comparison: dict, what: str) -> str:
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


COMPARISONS: dict[str, Comparison] = {c.key: c for c in (
    Comparison("kv-heads", "KV heads", "KV heads",
               "GQA and MQA shrink the KV cache with almost no quality loss (MLA too, with a latent instead of heads).",
               "kv_bytes_per_token",
               "Quality at long context and large batch, where the cache matters; heads 128 wide, hundreds of heads. "
               "At 4 heads of 16, MQA's one head is a large share of MHA's.", _kv_entries, kv_verdict),
    Comparison("positions", "Positions", "Positions",
               "RoPE extrapolates: a model trained at one length reads longer text.",
               "parameters",
               "Contexts of thousands of tokens and the scaled RoPE variants (YaRN, LLaMA 3) that were made because "
               "plain RoPE does not extrapolate; a learned table cannot read past the rows it trained.",
               _position_entries, positions_verdict, lengths=LENGTHS),
    Comparison("norms", "Norms", "Norms",
               "Pre-norm trains better than post-norm, and post-norm needs learning-rate warm-up.",
               "parameters",
               "Depths of 24 to 100 layers, where post-norm's gradients at the bottom shrink most; the gradient clip "
               "at 1.0 this recipe shares may hide an instability an unclipped run would show.",
               _norm_entries, norms_verdict),
    Comparison("ffn", "FFN", "FFN",
               "SwiGLU is worth its third matrix; a mixture of experts buys quality at the same active compute.",
               "parameters",
               "MoE's gains come with many experts (8 to 256) and billions of tokens; 4 experts in 2 layers of 64 "
               "for minutes test the mechanism, not the scale.", _ffn_entries, ffn_verdict),
    Comparison("qk-norm", "QK-norm", "The new switches",
               "QK-norm lets training survive a learning rate that breaks the baseline (OLMo 2, Qwen3).",
               "forward_ms",
               "Attention logits grow with width and training length; at d_head 16 they stay small, so the "
               "instability QK-norm prevents may never arise.", _qk_entries, qk_verdict),
    Comparison("sinks", "Sinks", "The new switches",
               "A learned sink gives a head somewhere to put attention it does not need, so it stops dumping it on "
               "the first token, at no cost in quality (gpt-oss).",
               "forward_ms",
               "Streaming and long-context behaviour, where the first token's role as a sink matters most.",
               _sink_entries, lambda c: _switch_verdict(c, "sinks"), first_token=True),
    Comparison("softcap", "Soft-cap", "The new switches",
               "Soft-capping scores and logits keeps training stable at no cost in quality (Gemma 2).",
               "forward_ms",
               "Gemma 2's caps (50 on scores, 30 on logits) only bite on logits that large; a model this small "
               "rarely reaches them.", _softcap_entries, lambda c: _switch_verdict(c, "soft-capping")),
)}


def entry_config(recipe: Recipe, entry: Entry) -> TransformerConfig:
    return base_config(recipe, **entry.changes)


def run_key(config: dict, lr: float, warmup: int, seed: int) -> str:
    """What makes two runs the same run (deterministic on one machine and thread count): every run reads the
    same figures, so one comparison's baseline run serves another's."""
    return json.dumps([config, lr, warmup, seed], sort_keys=True)


def describe_entry(recipe: Recipe, entry: Entry) -> dict:
    """An entry's JSON without runs: its choice, config, costs (transformer.costs) and settings."""
    cfg = entry_config(recipe, entry)
    counts = param_counts(cfg)
    return {"choice": entry.choice, "config": cfg.to_dict(), "parameters": counts["total"],
            "active_parameters": counts["active"], "kv_bytes_per_token": kv_cache_bytes_per_token(cfg),
            "lr": recipe.lr * entry.lr_factor, "warmup": entry.warmup, "warmup_steps": recipe.warmup if entry.warmup else 0,
            "forward_ms": None, "runs": []}


def finish(data: dict) -> dict:
    """Fill in each comparison's verdict and its seed count from the runs (labelled provisional when an entry
    has fewer than MIN_SEEDS seeds), and the processor seconds of every run trained (a shared run once)."""
    trained = [r for c in data["comparisons"] for e in c["entries"] for r in e["runs"] if "shared_with" not in r]
    data["runs_trained"] = len(trained)
    data["processor_seconds_total"] = round(sum(r.get("processor_seconds", 0) + r.get("evaluation_processor_seconds", 0)
                                                for r in trained), 1)
    for comp in data["comparisons"]:
        spec = COMPARISONS[comp["key"]]
        seeds = [len({r["seed"] for r in e["runs"]}) for e in comp["entries"]]
        comp["seeds_per_entry"] = min(seeds) if seeds else 0
        comp["complete"] = bool(seeds) and min(seeds) >= MIN_SEEDS
        if not seeds or max(seeds) == 0:
            comp["verdict"] = "Not measured yet: run " + f"`{COMMAND} --comparison {comp['key']}`."
            continue
        missing = [e["choice"] for e in comp["entries"] if not e["runs"]]
        if missing:  # a verdict compares every entry: say what is still to run instead of guessing
            comp["verdict"] = (f"Provisional: not every entry has run yet (still to run: {', '.join(missing)}); "
                               f"`{COMMAND} --comparison {comp['key']}` goes on.")
            continue
        comp["recipe_small_loss"] = data["recipe"]["small_loss"]
        try:
            verdict = spec.verdict(comp)
        except (KeyError, ValueError, ZeroDivisionError, TypeError) as exc:  # a partial file: say so, do not guess
            verdict = f"Not enough runs to judge yet ({exc})."
        comp.pop("recipe_small_loss")
        unigram = (data.get("baselines") or {}).get("unigram_bits")
        stalled = []
        for e in comp["entries"]:
            stuck = [v for v in entry_stats(e).values if unigram is not None and v >= unigram - STALL_MARGIN]
            if stuck:
                stalled.append(f"{e['choice']} ({len(stuck)} of {len(e['runs'])} seeds)")
        spiked = [f"{e['choice']} (seed {r['seed']}, step {', '.join(map(str, r['loss_spikes']))})"
                  for e in comp["entries"] for r in e["runs"] if r.get("loss_spikes") and not r.get("diverged")]
        if spiked:
            verdict += f" The loss spiked by more than {data['recipe']['blowup_bits']:g} bit and recovered: " \
                       f"{'; '.join(spiked)}."
        if stalled:
            verdict += (f" Stalled at the unigram level ({unigram:.2f} bits/char: it learned only how often each "
                        f"character occurs): {'; '.join(stalled)}.")
        if not comp["complete"]:
            verdict = (f"Provisional, {min(seeds)} of {MIN_SEEDS} seeds per entry so far"
                       + (" (some entries not yet run)" if min(seeds) == 0 else "") + ": " + verdict)
        comp["verdict"] = verdict
    return data


def new_document(recipe: Recipe, hardware: str, keys: list[str]) -> dict:
    comparisons = []
    for key in keys:
        spec = COMPARISONS[key]
        comparisons.append({"key": key, "axis": spec.axis, "group": spec.group, "claim": spec.claim,
                            "verdict": "", "cost_axis": spec.cost_axis, "cannot_test": spec.cannot_test,
                            "first_token": spec.first_token, "lengths": list(spec.lengths),
                            "entries": [describe_entry(recipe, e) for e in spec.entries(recipe)]})
    return {"recipe": recipe.to_dict(), "hardware": hardware, "scale_note": SCALE_NOTE, "command": COMMAND,
            "comparisons": comparisons}


# --- reading the JSON back ------------------------------------------------------------------------------


class TournamentError(ValueError):
    """A tournament JSON that is missing or unreadable: the message names the file and the command that makes it."""


def load(path: str | Path = TOURNAMENT_PATH) -> dict:
    """The tournament JSON, checked for the fields the page and the README read."""
    path = Path(path)
    hint = f"`{COMMAND}` makes it (`{COMMAND} --tiny --out {path}` for a quick one)"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TournamentError(f"{path} is missing; {hint}.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TournamentError(f"{path} cannot be read ({exc}); {hint}.") from None
    try:
        if not isinstance(data["recipe"], dict) or not isinstance(data["hardware"], str):
            raise TypeError("recipe and hardware")
        for comp in data["comparisons"]:
            str(comp["axis"]), str(comp["claim"]), str(comp["verdict"])
            for entry in comp["entries"]:
                str(entry["choice"]), int(entry["parameters"])
                for run in entry["runs"]:
                    int(run["seed"]), bool(run["diverged"]), list(run["curve"])
    except (KeyError, TypeError, ValueError) as exc:
        raise TournamentError(f"{path} is not a tournament file (missing or wrong field: {exc}); {hint}.") from None
    return data


def comparison(data: dict, key: str) -> dict:
    for comp in data["comparisons"]:
        if comp["key"] == key:
            return comp
    raise KeyError(f"no comparison {key!r}; the file has {', '.join(c['key'] for c in data['comparisons'])}")


def summary_rows(data: dict) -> list[dict]:
    """One row per entry: comparison, choice, its cost, held-out bits (mean, lowest and highest seed), seeds,
    diverged runs."""
    rows = []
    for comp in data["comparisons"]:
        for entry in comp["entries"]:
            stats = entry_stats(entry)
            cost = entry.get(comp["cost_axis"])
            longer = {f"{m}x": entry_stats(entry, f"{m}x").mean for m in comp.get("lengths", [1])[1:]}
            rows.append({"comparison": comp["axis"], "choice": entry["choice"], "cost_axis": comp["cost_axis"],
                         "cost": cost, "mean": stats.mean, "low": stats.low, "high": stats.high, "longer": longer,
                         "seeds": len({r["seed"] for r in entry["runs"]}), "diverged": stats.diverged,
                         "runs": stats.runs})
    return rows


COST_LABELS = {"kv_bytes_per_token": "KV bytes/token", "parameters": "parameters", "forward_ms": "forward ms"}


def readme_table(data: dict) -> str:
    """The README's table: for each comparison its verdict, and each entry's held-out bits per character (mean and
    the seeds' range), its cost and its diverged runs."""
    lines = ["| comparison | choice | held-out bits/char: mean (seeds' range) | seeds | diverged | cost |",
             "|---|---|---|---|---|---|"]
    for row in summary_rows(data):
        bits = ("–" if row["mean"] is None else
                f"{row['mean']:.3f} ({row['low']:.3f}–{row['high']:.3f})")
        if row["longer"] and row["mean"] is not None:  # the positions comparison: the same text read in longer windows
            bits += "; " + ", ".join(f"{k.replace('x', '×')} " + ("cannot read" if v is None else f"{v:.3f}")
                                     for k, v in row["longer"].items())
        cost = row["cost"]
        cost_text = "–" if cost is None else (f"{cost:,}" if isinstance(cost, int) else f"{cost:.2f}")
        lines.append(f"| {row['comparison']} | {row['choice']} | {bits} | {row['seeds']} | "
                     f"{row['diverged']}/{row['runs']} | {cost_text} {COST_LABELS[row['cost_axis']]} |")
    lines.append("")
    lines.append("| comparison | the lecture says | measured here |")
    lines.append("|---|---|---|")
    for comp in data["comparisons"]:
        lines.append(f"| {comp['axis']} | {comp['claim']} | {comp['verdict']} |")
    return "\n".join(lines)


README_MARKERS = ("<!-- tournament:table -->", "<!-- /tournament:table -->")


def readme_block(data: dict) -> str:
    """The table between its markers, as the README carries it."""
    return f"{README_MARKERS[0]}\n{readme_table(data)}\n{README_MARKERS[1]}"


# --- a live run against the tournament ------------------------------------------------------------------

MATCH_IGNORES = ("vocab_size", "max_len")  # the Train page sizes these to its task
# what makes a model the same cell: its axes and sizes, and the switches a comparison turns (the FFN's exact
# width and the family details a sidebar cannot set are reported as differences, not refused)
MATCH_FIELDS = ("arch", "position", "norm", "norm_position", "ffn", "n_layers", "d_model", "n_heads", "n_kv_heads",
                "sliding_window", "qk_norm", "sinks", "attn_softcap", "logit_softcap", "kv_rank")
MOE_FIELDS = ("n_experts", "top_k")


def _match_fields(config: dict) -> tuple[str, ...]:
    return MATCH_FIELDS + (MOE_FIELDS if config.get("ffn") == "moe" else ())


def find_cells(data: dict, cfg: TransformerConfig) -> list[tuple[dict, dict]]:
    """Every (comparison, entry) of the tournament whose model has `cfg`'s axes, sizes and switches."""
    wanted = cfg.to_dict()
    fields = _match_fields(wanted)
    return [(comp, entry) for comp in data["comparisons"] for entry in comp["entries"]
            if all(entry["config"].get(f) == wanted.get(f) for f in fields)]


def pick_cell(cells: list[tuple[dict, dict]], lr: float, warmup: int) -> tuple[dict, dict] | None:
    """Of the matching cells, the one trained at this learning rate and with (or without) warm-up, else the
    first at any."""
    for comp, entry in cells:
        if math.isclose(entry["lr"], lr) and (entry["warmup_steps"] > 0) == (warmup > 0):
            return comp, entry
    for comp, entry in cells:
        if math.isclose(entry["lr"], lr):
            return comp, entry
    return cells[0] if cells else None


def config_differences(entry_config: dict, cfg: TransformerConfig) -> list[str]:
    """The fields where `cfg` differs from a cell's model (vocabulary and max_len aside), as 'name yours vs its'."""
    have = cfg.to_dict()
    return [f"{k} {have.get(k)!r} (the tournament's {v!r})" for k, v in entry_config.items()
            if k not in MATCH_IGNORES and have.get(k) != v]


def curve_at(points: list[list[float]], step: int) -> float | None:
    """A curve's value at the point nearest `step` (None past its end or where it is not finite)."""
    if not points or step > points[-1][0] + (points[1][0] - points[0][0] if len(points) > 1 else 0):
        return None
    nearest = min(points, key=lambda p: abs(p[0] - step))
    return nearest[1]


def compare_live(entry: dict, recipe: dict, *, steps: int, lr: float, warmup: int, batch_size: int,
                 context: int, corpus: str, training_bits: float | None, held_out: float | None,
                 differences: list[str] = ()) -> str:
    """One paragraph: how a live run of a tournament cell compares with the tournament's seeds of that cell."""
    stats = entry_stats(entry)
    seeds = ", ".join(f"{r['held_out_bits_per_char']:.3f}" if r["held_out_bits_per_char"] is not None else "diverged"
                      for r in entry["runs"])
    n = len(entry["runs"])
    said = [f"The tournament trained this model {'once' if n == 1 else f'{n} times'} (seed{'s' if n != 1 else ''} "
            f"{', '.join(str(r['seed']) for r in entry['runs'])}) "
            f"for {recipe['steps']} steps of batch {recipe['batch_size']} at lr {entry['lr']:g}, warm-up "
            f"{entry['warmup_steps']}: held-out {seeds} bits per character" +
            (f" (mean {stats.mean:.3f})." if stats.values else ".")]
    differs = []
    if steps != recipe["steps"]:
        differs.append(f"{steps} steps")
    if batch_size != recipe["batch_size"]:
        differs.append(f"batch {batch_size}")
    if not math.isclose(lr, entry["lr"]):
        differs.append(f"lr {lr:g}")
    if warmup != entry["warmup_steps"]:
        differs.append(f"warm-up {warmup}")
    if context != recipe["context"]:
        differs.append(f"crops of {context} characters")
    if corpus != recipe["corpus"]:
        differs.append(f"the text it read ({corpus}; the tournament's: {recipe['corpus']})")
    differs += list(differences)
    at_step = [curve_at(r["curve"], steps - 1) for r in entry["runs"]]
    at_step = [v for v in at_step if v is not None]
    if training_bits is not None and at_step:
        low, high = min(at_step), max(at_step)
        where = ("within" if low - 0.02 <= training_bits <= high + 0.02 else
                 "below" if training_bits < low else "above")
        said.append(f"At step {steps} their training loss read {low:.2f}–{high:.2f} bits per character; your run "
                    f"{training_bits:.2f}, {where} their range.")
    if held_out is not None and stats.values and not differs:
        where = ("within" if stats.low - 0.02 <= held_out <= stats.high + 0.02 else
                 "below" if held_out < stats.low else "above")
        said.append(f"Your run's held-out {held_out:.3f} lies {where} the seeds' range.")
    if differs:
        said.append("Your run differs in " + ", ".join(differs) + ", so the numbers are not the same measurement.")
    else:
        said.append("Same recipe: a live seed of the same cell.")
    return " ".join(said)
