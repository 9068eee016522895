"""Cached measurements for "Why this prediction?" and its lessons: transformer.interpret's results as numpy.

Arguments are hashable (a config as JSON, token ids as tuples), so Streamlit caches each result across
reruns and sessions. Every patching and attribution result comes with the same measure on a model of
the same shape with random-init weights: what a head does is what it does beyond that.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from transformer import Transformer, TransformerConfig
from transformer.interpret import (direct_logit_attribution, logit_difference, logit_lens, patch_heads,
                                   patch_residual)

from ui.compute.model_cache import get_model
from ui.compute.tokens import encode_text, token_labels

TOP_K = 5  # tokens a lens cell lists when hovered
# FLOPs the page spends on one patching: about a second or two on one core. forwards_within turns it into
# a number of forward passes of the prompt at hand.
PATCH_BUDGET_FLOPS = 2e10


def residual_rows(blocks: list[int], n_layers: int) -> list[int]:
    """The residual rows patched with these blocks: the stream entering each, and leaving the last block
    when that block is among them."""
    return sorted(blocks) + ([n_layers] if n_layers - 1 in blocks else [])


def patching_forwards(blocks: list[int], n_positions: int, n_layers: int, n_heads: int) -> int:
    """Forward passes of one prompt the page's patching takes: the residual grid, then every head of the
    chosen blocks in the model and in its random-init control."""
    return len(residual_rows(blocks, n_layers)) * n_positions + 2 * len(blocks) * n_heads


def within_budget(budget: int, n_tokens: int, n_layers: int, n_heads: int) -> tuple[list[int], list[int]]:
    """The most blocks (the last ones), then the most positions (the last ones), whose patching fits a budget of
    forward passes: what the page offers when the whole grid does not fit. ([], []) when not even one fits."""
    for n_blocks in range(n_layers, 0, -1):
        blocks = list(range(n_layers - n_blocks, n_layers))
        for n_positions in range(n_tokens, 0, -1):
            if patching_forwards(blocks, n_positions, n_layers, n_heads) <= budget:
                return blocks, list(range(n_tokens - n_positions, n_tokens))
    return [], []


@dataclass(frozen=True)
class PromptPair:
    """A clean prompt, a corrupted one of the same length, and the next token each should lead to."""

    clean: str
    corrupt: str
    right: str  # the clean prompt's answer
    wrong: str  # the corrupted prompt's answer


# ready-made pairs: the answer is a copy of something earlier in the prompt, which the corruption changes
PAIRS = {
    "a word changed": PromptPair("The cat sat on the mat. The cat sat on the m",
                                 "The cat sat on the mop. The cat sat on the m", "a", "o"),
    "a name changed": PromptPair("I saw Peter and Mary. Then I saw Peter and M",
                                 "I saw Peter and Nina. Then I saw Peter and N", "a", "i"),
    "a number changed": PromptPair("The code is 4719. The code is 47", "The code is 4759. The code is 47", "1", "5"),
}


@st.cache_resource(max_entries=4, show_spinner=False)
def random_init_model(config_json: str, seed: int) -> Transformer:
    """A model of the same config with the library's random initialisation: the control for every claim."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return Transformer(TransformerConfig.from_json(config_json)).eval()


def answer_token(prompt: str, answer: str, config_json: str, weights: str = "") -> int:
    """The one token `answer` adds after `prompt` for this model's tokenizer; else a ValueError that says why."""
    if not answer:
        raise ValueError("An answer is empty: type the token the model should predict next "
                         "(for a character model, one character).")
    before = encode_text(prompt, config_json, weights, max_tokens=10 ** 9).ids
    after = encode_text(prompt + answer, config_json, weights, max_tokens=10 ** 9).ids
    added = after[len(before):] if after[:len(before)] == before else after
    if len(added) != 1:
        raise ValueError(f"The answer {answer!r} is {len(added)} tokens for this model's tokenizer after the prompt; "
                         "an answer must be exactly one token (for a character model: one character of its table; "
                         "an emoji or a rare character is several byte tokens).")
    return added[0]


@dataclass
class LensView:
    top_labels: np.ndarray  # (n_layers + 1, T, TOP_K) str: the most likely tokens read from each row
    top_probs: np.ndarray  # (n_layers + 1, T, TOP_K) their probabilities
    top_ids: np.ndarray  # (n_layers + 1, T, TOP_K) their ids
    answer_probs: np.ndarray  # (n_layers + 1, T) probability of the model's final answer at each position
    answers: np.ndarray  # (T,) the model's final answer (top token) at each position

    def first_row(self, position: int) -> int:
        """The row from which on the final answer stays the top token at `position` (the last row at the latest)."""
        holds = self.top_ids[:, position, 0] == self.answers[position]  # (rows,)
        row = len(holds) - 1
        while row > 0 and holds[row - 1]:
            row -= 1
        return row


@st.cache_data(max_entries=32, show_spinner=False)
def lens_view(config_json: str, seed: int, ids: tuple[int, ...], weights: str = "",
              random_init: bool = False) -> LensView:
    """The logit lens of the page's model, or with random_init=True of its random-init control."""
    model = random_init_model(config_json, seed) if random_init else get_model(config_json, seed, weights)
    probs = logit_lens(model, torch.tensor([ids], device=model.device)).exp()  # (R, T, vocab)
    top = probs.topk(min(TOP_K, probs.shape[-1]))
    top_ids = top.indices.cpu().numpy()
    listed = np.unique(top_ids).tolist()
    label_of = dict(zip(listed, token_labels(listed, config_json, weights)))
    answers = probs[-1].argmax(-1)  # (T,)
    answer_probs = probs.gather(-1, answers.expand(probs.shape[0], -1)[..., None])[..., 0]  # (R, T)
    return LensView(np.vectorize(label_of.get, otypes=[object])(top_ids), top.values.cpu().numpy(), top_ids,
                    answer_probs.cpu().numpy(), answers.cpu().numpy())


@dataclass
class Patching:
    """Effects as the patched run's logit difference minus the corrupted run's (0: nothing restored)."""

    gap: float  # the clean run's logit difference minus the corrupted run's: all there is to restore
    residual: np.ndarray  # (rows, positions)
    heads: np.ndarray  # (blocks, n_heads)
    control_gap: float  # the same for random-init weights of the same shape
    control_heads: np.ndarray  # (blocks, n_heads)


def _baseline(model: Transformer, clean: torch.Tensor, corrupt: torch.Tensor, metric) -> tuple[float, float]:
    """(the corrupted run's metric, the clean run's minus it)."""
    with torch.no_grad():
        corrupted = float(metric(model(corrupt)))
        return corrupted, float(metric(model(clean))) - corrupted


@st.cache_data(max_entries=32, show_spinner="Patching…")
def patching(config_json: str, seed: int, clean_ids: tuple[int, ...], corrupt_ids: tuple[int, ...], right: int,
             wrong: int, weights: str = "", rows: tuple[int, ...] | None = None,
             positions: tuple[int, ...] | None = None, blocks: tuple[int, ...] | None = None) -> Patching:
    """Residual patching over `rows` x `positions` and head patching over `blocks` (None: all), for the logit
    difference right - wrong at the last position; head patching also on random-init weights."""
    model, control = get_model(config_json, seed, weights), random_init_model(config_json, seed)
    clean, corrupt = (torch.tensor([ids], device=model.device) for ids in (clean_ids, corrupt_ids))
    metric = logit_difference(right, wrong)
    corrupted, gap = _baseline(model, clean, corrupt, metric)
    control_corrupted, control_gap = _baseline(control, clean, corrupt, metric)
    residual = patch_residual(model, clean, corrupt, metric, layers=rows, positions=positions)  # (rows, positions)
    heads = patch_heads(model, clean, corrupt, metric, layers=blocks)  # (blocks, H)
    control_heads = patch_heads(control, clean, corrupt, metric, layers=blocks)
    return Patching(gap, (residual - corrupted).cpu().numpy(), (heads - corrupted).cpu().numpy(), control_gap,
                    (control_heads - control_corrupted).cpu().numpy())


@dataclass
class AttributionView:
    labels: list[str]  # "embeddings", "L0H1" ..., "L0 FFN" or "L0E2" ... ("L0 shared"), "biases"
    values: np.ndarray  # (parts,) direct effect on the logit
    logit: float  # the model's logit (before its soft cap, if it has one): the sum of the values
    control_largest_head: float  # the largest |head| value on random-init weights, same token and text
    capped_logit: float | None = None  # the logit after the model's soft cap (None: no cap)


@st.cache_data(max_entries=64, show_spinner=False)
def attribution(config_json: str, seed: int, ids: tuple[int, ...], token: int, weights: str = "") -> AttributionView:
    """Direct logit attribution of `token` at the last position, per head and per FFN (or per expert)."""
    model = get_model(config_json, seed, weights)
    src = torch.tensor([ids], device=model.device)
    parts = direct_logit_attribution(model, src, token)
    cfg = model.cfg
    L, H = parts.heads.shape
    labels = ["embeddings"] + [f"L{layer}H{head}" for layer in range(L) for head in range(H)]
    values = [parts.embed, *parts.heads.flatten().tolist()]
    for layer in range(L):
        if parts.experts is not None and cfg.layer_is_moe(layer):  # each routed expert, then what no router chose
            labels += [f"L{layer}E{e}" for e in range(parts.experts.shape[1])]
            values += parts.experts[layer].tolist()
            if cfg.n_shared_experts:
                labels.append(f"L{layer} shared")
                values.append(float(parts.ffn[layer] - parts.experts[layer].sum()))
        else:  # a dense FFN (also a routed model's first dense layers)
            labels.append(f"L{layer} FFN")
            values.append(float(parts.ffn[layer]))
    control = direct_logit_attribution(random_init_model(config_json, seed), src, token)
    return AttributionView(labels + ["biases"], np.array(values + [parts.constant]), parts.logit,
                           float(control.heads.abs().max()), parts.capped_logit)
