"""The tournament's harness: one recipe every run shares, its model, and one run trained and read on held-out text.

    recipe = Recipe()                                    # d_model 64, 2 layers, 4 heads, crops of 128, batch 16
    run = train_run(base_config(recipe), recipe, seed=0)
    run["held_out_bits_per_char"], run["curve"], run["processor_seconds"], run["diverged"]
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch

from ...config import TransformerConfig
from ...costs.params import param_counts
from ...model import Transformer
from .. import language

LENGTHS = (1, 2, 4)  # the positions comparison reads held-out text at these multiples of the trained length


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
    eval_windows: int = 256  # held-out windows of `context` characters (a quarter as many, 4x as long, for lengths)
    corpus: str = "english"
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    blowup_bits: float = 1.0  # a 10-step mean training loss this far above its lowest earlier one: diverged
    tie_embeddings: bool = False  # untied, as in LLaMA: tied, deep post-norm models stalled (a comparison of its own)
    frontier_layers: int = 4  # depth of the hybrid and NoPE comparisons: one full (or NoPE) layer in four
    length_windows: str = "prefixes"  # held out at 2x and 4x: "prefixes" (1x reads each window's start) or "separate"
    repeat_rate: float = 0.0  # the share of training rows that repeat a span (practice at copying)

    def __post_init__(self):
        if self.length_windows not in LENGTH_READERS:
            raise ValueError(f"length_windows={self.length_windows!r}: choose {' or '.join(map(repr, LENGTH_READERS))}")

    def to_dict(self) -> dict:
        return {**asdict(self), "optimizer": "AdamW (betas 0.9, 0.98), linear warm-up then cosine to 0.1 x peak, "
                                              "gradient clip at grad_clip; transformer.training.train.train",
                "task": f"next character of crops of {self.context} characters ("
                        + (f"{self.repeat_rate:.0%} of the rows repeat a span" if self.repeat_rate else
                           "no repeated spans") + "), "
                        f"{'WordNet English' if self.corpus == 'english' else self.corpus}; held-out split",
                "tokens_per_run": self.tokens}

    @property
    def tokens(self) -> int:
        """Characters each run reads: steps x batch x (context + 1)."""
        return self.steps * self.batch_size * (self.context + 1)

    @property
    def high_lr(self) -> float:
        return self.lr * self.high_lr_factor




def base_config(recipe: Recipe, **changes) -> TransformerConfig:
    """The recipe's model: LLaMA's axes (RoPE, RMSNorm before each sublayer, SwiGLU with d_ff sized so the FFN
    has the parameters of a 4 x d_model MLP, embeddings as the recipe ties them), a decoder reading characters,
    max_len 4 x the trained context."""
    vocab = len(language.VOCAB)
    base = dict(arch="decoder", vocab_size=vocab, d_model=recipe.d_model, n_heads=recipe.n_heads,
                n_layers=recipe.n_layers, max_len=LENGTHS[-1] * recipe.context + 1, position="rope", norm="rmsnorm",
                norm_position="pre", ffn="swiglu", tie_embeddings=recipe.tie_embeddings)
    cfg = TransformerConfig(**base)
    cfg = cfg.replace(d_ff=width_for_params(cfg, mlp_params(cfg), "total"))
    return cfg.replace(**changes) if changes else cfg


def mlp_params(cfg: TransformerConfig) -> int:
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
    """Held-out bits per character read in windows of multiple x the trained context, eval_windows // multiple
    of them spread over the text; None when the result is not finite."""
    context = multiple * recipe.context
    bits = language.bits_per_char(model, context=context, limit=max(1, recipe.eval_windows // multiple),
                                  corpus=recipe.corpus)
    return round(bits, 4) if math.isfinite(bits) else None


@torch.no_grad()
def window_bits(model: Transformer, windows: torch.Tensor, batch_size: int = 16) -> float:
    """Mean -log2 p of each window's characters after <bos>: windows (N, 1 + length + 1)."""
    total = 0.0
    for batch in windows.split(batch_size):
        logits = model(batch[:, :-1]).float()  # (B, 1 + length, vocab)
        total += torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten(),
                                                   reduction="sum").item()
    return total / (windows.shape[0] * (windows.shape[1] - 1)) / math.log(2)


def by_length_prefixes(model: Transformer, recipe: Recipe, multiples: tuple[int, ...]) -> dict:
    """Held-out bits at each multiple of the trained length on the same windows: eval_windows // the largest
    multiple windows of the longest length, each length reading their prefixes (1x the first `context`
    characters, 2x the first 2 x context), so a shorter read is part of every longer one."""
    longest = max(multiples)
    windows = language.held_out_windows(longest * recipe.context, max(1, recipe.eval_windows // longest),
                                        recipe.corpus)  # (N, 1 + longest * context + 1)
    out = {}
    for m in multiples:
        length = m * recipe.context + 1
        if not can_read(model.cfg, length):
            out[f"{m}x"] = None
            continue
        bits = window_bits(model, windows[:, :1 + length])  # (N, 1 + m * context + 1): the prefix
        out[f"{m}x"] = round(bits, 4) if math.isfinite(bits) else None
    return out


def by_length_separate(model: Transformer, recipe: Recipe, multiples: tuple[int, ...]) -> dict:
    """Held-out bits at each multiple, each length in windows of its own (fewer and longer ones, spread over the
    text: the 2x and 4x windows share few characters with the 1x ones)."""
    return {f"{m}x": held_out_bits(model, recipe, m) if can_read(model.cfg, m * recipe.context + 1) else None
            for m in multiples}


LENGTH_READERS = {"prefixes": by_length_prefixes, "separate": by_length_separate}

TINY = Recipe(d_model=16, n_layers=1, deep_layers=2, context=16, batch_size=2, steps=6, warmup=2, kv_rank=8,
              mla_rope_dim=2, eval_windows=4, corpus="python-docs")


def can_read(cfg: TransformerConfig, length: int) -> bool:
    """Whether the model has positions for `length` tokens (a learned table has only the rows it trained)."""
    return cfg.max_len >= length


def train_run(cfg: TransformerConfig, recipe: Recipe, seed: int, *, lr: float | None = None,
              warmup: int | None = None, lengths: tuple[int, ...] = LENGTHS, first_token: bool = True,
              should_stop: Callable[[], bool] | None = None,
              measure: Callable[[Transformer, Recipe], dict] | None = None) -> dict:
    """Train `cfg` on the recipe's text for recipe.steps steps (train.train: AdamW, warm-up then cosine) and read
    it on held-out text. Returns the run's JSON: seed, steps, tokens, lr, warmup, held-out bits per character
    (None when diverged), the training curve (bits per character), diverged (and the step), processor and
    wall seconds; with lengths (1, 2, 4) the held-out figure at each multiple of the trained length (None where
    the model cannot read that far); with first_token, the share of attention that goes to <bos>; with `measure`,
    what it reads of the trained model (measures.py) under "measured"."""
    from ..tasks import Language
    from ..train import train

    lr = recipe.lr if lr is None else lr
    warmup = recipe.warmup if warmup is None else warmup
    if lr <= 0:
        raise ValueError(f"lr={lr} must be greater than 0")
    if not 0 <= warmup <= recipe.steps:
        raise ValueError(f"warmup={warmup} must be between 0 and the run's {recipe.steps} steps")
    task = Language(corpus=recipe.corpus, context=recipe.context, repeat_rate=recipe.repeat_rate)
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
    bits = held_out_bits(model, recipe)
    by_length = LENGTH_READERS[recipe.length_windows](model, recipe, lengths) if len(lengths) > 1 else {}
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
    if measure is not None and failed is None:
        run["measured"] = measure(model, recipe)
    run.update(processor_seconds=round(train_cpu, 2), evaluation_processor_seconds=round(time.process_time() - cpu
                                                                                          - train_cpu, 2),
               wall_seconds=round(time.perf_counter() - wall, 2))
    return run


@torch.no_grad()
def first_token_attention(model: Transformer, recipe: Recipe, windows: int = 8) -> float:
    """The mean attention weight on <bos> from the queries of the second half of held-out windows, all layers and
    heads: where a head with nothing to read puts its weight when it has no sink."""
    from ...hooks import hook_name

    ids = language.held_out_windows(recipe.context, windows, recipe.corpus)[:, :-1]
    names = [hook_name(i, "attn.hook_pattern") for i in range(model.cfg.n_layers)]
    _, trace = model.run_with_trace(ids, names=names)
    half = ids.shape[1] // 2
    return float(torch.stack([trace[n][..., half:, 0].float().mean() for n in names]).mean())
