"""The shipped checkpoints: which of them is the model a config asks for, and what a banner says about
trained weights (their task, their score, their measured heads).
"""
from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import NamedTuple

from transformer import TransformerConfig, checkpoint
from transformer.tokens import DEFAULT as DEFAULT_TOKENS
from transformer.training.train import trained_length


@dataclass(frozen=True)
class WeightsInfo:
    """What a banner says about a page's weights."""

    kind: str  # "trained" (a shipped checkpoint), "huggingface" or "random"
    label: str  # what a banner says
    task: str | None = None  # the checkpoint's task: its vocabulary encodes the text
    trained_tokens: int | None = None  # the longest sequence it trained on: past it, a view says so
    heads: str = ""  # what its measured heads do, beside random-init weights (language checkpoints)
    tokenizer: str = ""  # the JSON of the tokenizer its checkpoint names ("": its task's own tokens)

    @property
    def tokens(self) -> str:
        """The row of AXES["tokens"] it reads text in: characters for a checkpoint that names no tokenizer."""
        return json.loads(self.tokenizer).get("name", DEFAULT_TOKENS) if self.tokenizer else DEFAULT_TOKENS


def trained_info(name: str, meta: dict) -> WeightsInfo:
    """The banner of a trained checkpoint, read from its JSON."""
    score = score_text(meta)
    return WeightsInfo("trained", f"{name} ({meta.get('task')} task{', ' + score if score else ''})", meta.get("task"),
                       trained_length(meta), heads_text(meta),
                       json.dumps(meta["tokenizer"], sort_keys=True) if "tokenizer" in meta else "")


class _ShippedModel(NamedTuple):
    key: str  # its config's to_json(), the cache key
    path: str
    info: WeightsInfo  # what its banner says
    cfg: TransformerConfig


@functools.lru_cache(maxsize=1)
def shipped_models() -> tuple[_ShippedModel, ...]:
    """Every shipped checkpoint's config, path and banner, read once: the presets' own, and the variants that
    read a family's text in other tokens (BPE), which the sidebar's Tokens choice opens.

    A missing or broken index means no trained weights: every page then says its weights are random.
    """
    try:
        entries, variants = checkpoint.shipped(), checkpoint.variants()
    except checkpoint.CheckpointError as exc:
        logging.getLogger(__name__).warning("no shipped checkpoints: %s", exc)
        return ()
    rows = []
    for entry in entries + variants:
        meta, cfg = checkpoint.read_meta(entry.path)
        info = trained_info(f"trained checkpoint {entry.name}", meta)
        if entry in entries or info.tokens != DEFAULT_TOKENS:
            rows.append(_ShippedModel(cfg.to_json(), str(entry.path), info, cfg))
    return tuple(rows)


HEAD_WORDS = {"previous_token_head": "previous-token head", "induction_head": "induction head",
              "next_token_head": "next-character head"}


def heads_text(meta: dict) -> str:
    """'Its previous-token head is L0H1 (0.93 on held-out text; random weights 0.04–0.09), ...': each head
    figure that exceeds its random-init control, read from the checkpoint's JSON."""
    figures = meta.get("figures", {})
    control = figures.get("random_init", {})
    said = []
    for key, words in HEAD_WORDS.items():
        if key in figures and key in control and figures[key]["score"] > control[key][1]:
            best, (low, high) = figures[key], control[key]
            said.append(f"{words} L{best['layer']}H{best['head']} ({best['score']:.2f} on held-out text; "
                        f"random weights {low:.2f}–{high:.2f})")
    return ("Its " + ", its ".join(said) + ".") if said else ""


def score_text(meta: dict) -> str:
    """How well a checkpoint does, in its task's own measure: '1.93 bits per character', 'accuracy 0.99'."""
    figures = meta.get("figures", {})
    if "bits_per_char" in figures:
        return f"{figures['bits_per_char']:.2f} bits per character on held-out text"
    if "masked_accuracy" in figures:
        return f"masked-character accuracy {figures['masked_accuracy']:.2f} on held-out text"
    accuracy = meta.get("accuracy")
    if not isinstance(accuracy, (int, float)):
        return ""
    return f"accuracy {accuracy:.2f}"


def _trained_matches(cfg: TransformerConfig, tokens: str = DEFAULT_TOKENS) -> list[_ShippedModel]:
    """Every shipped checkpoint that is the model this config asks for (the library's rule) and reads text in
    `tokens` (a row of AXES["tokens"]), in index order."""
    return [shipped for shipped in _trained_matches_of(cfg.to_json()) if shipped.info.tokens == tokens]


@functools.lru_cache(maxsize=256)
def _trained_matches_of(config_json: str) -> tuple[_ShippedModel, ...]:
    # the sidebar asks three times a rerun; comparing the config with every shipped one took ~10 ms each time
    cfg = TransformerConfig.from_json(config_json)
    return tuple(shipped for shipped in shipped_models() if checkpoint.same_model(shipped.cfg, cfg))


def trained_tasks(cfg: TransformerConfig, tokens: str = DEFAULT_TOKENS) -> list[str]:
    """The tasks shipped checkpoints were trained on with these axes and sizes, reading `tokens` (language first)."""
    return [shipped.info.task for shipped in _trained_matches(cfg, tokens)]


def trained_config(cfg: TransformerConfig, task: str | None = None,
                   tokens: str = DEFAULT_TOKENS) -> TransformerConfig | None:
    """The shipped checkpoint's config for these axes and sizes, reading text in `tokens`: the one trained on
    `task` when there is one, else the first in index order; None when no checkpoint has them."""
    matches = _trained_matches(cfg, tokens)
    if not matches:
        return None
    return next((shipped.cfg for shipped in matches if shipped.info.task == task), matches[0].cfg)
