"""Cached runs of speculative decoding on the shipped checkpoints: which target, which drafts, every k on one text.

The decoding itself is the library's (transformer/speculative.py); here the shipped decoders are named, loaded
once (get_model) and run on the learner's sentence, and the results kept as plain numbers for the figures.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st
import torch

from transformer import Transformer, param_counts
from transformer.speculative import early_exit_draft, speculative_generate
from transformer.tokens import DEFAULT as DEFAULT_TOKENS
from ui.compute.model_cache import get_model
from ui.compute.shipped import shipped_models
from ui.compute.tokens import encode_text, token_labels

DEFAULT_TARGET = "llama2-language"
EARLY_EXIT_LAYERS = 2
EARLY_EXIT = f"the target's own first {EARLY_EXIT_LAYERS} layers (early exit)"
KS = tuple(range(1, 9))  # the draft lengths the page compares
MAX_PROMPT = 64  # tokens of the sentence read as the prompt: each k re-runs both models over it


@dataclass(frozen=True)
class Run:
    """One speculative generation, as numbers."""

    k: int
    rounds: tuple[tuple[tuple[int, ...], int, int], ...]  # per round: proposed ids, accepted count, target's id
    new_ids: tuple[int, ...]  # the tokens generated, equal to the target's greedy ones
    acceptance_rate: float
    target_forwards: int
    greedy_forwards: int
    equal_to_greedy: bool  # checked against the target's own generate(), every run


def decoders() -> dict[str, object]:
    """Every shipped decoder checkpoint by name (its config, path and banner), in index order."""
    return {Path(m.path).name: m for m in shipped_models()
            if m.cfg.row("arch").causal and not m.cfg.row("arch").cross}


def language_decoders() -> dict[str, object]:
    """The shipped decoders trained on English text: the targets a typed sentence means something to."""
    return {name: m for name, m in decoders().items() if m.info.task == "language"}


def sidebar_target(config_json: str, weights: str) -> str | None:
    """The name of the sidebar's model when it is a shipped language decoder, else None."""
    if weights:
        return None
    return next((name for name, m in language_decoders().items() if m.key == config_json), None)


def default_draft(target: str) -> str:
    """The smallest shipped language decoder other than the target (by parameter count)."""
    others = {name: m for name, m in language_decoders().items() if name != target}
    return min(others, key=lambda name: param_counts(others[name].cfg)["total"])


def draft_options(target: str) -> list[str]:
    """What can draft for the target: its own first layers, then every other shipped decoder (a draft of another
    task reads another vocabulary: the page says why it cannot draft)."""
    others = [name for name in decoders() if name != target]
    first = default_draft(target)
    return [first, EARLY_EXIT, *(name for name in others if name != first)]


def _model(config_json: str) -> Transformer:
    return get_model(config_json, 0)


@st.cache_resource(max_entries=4, show_spinner="Building the early-exit draft…")
def _early_exit(target: str) -> Transformer:
    return early_exit_draft(_model(decoders()[target].key), EARLY_EXIT_LAYERS)


def prompt_tokens(target: str, text: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The sentence in the target's tokens, at most MAX_PROMPT of them: (ids, labels)."""
    tokens = encode_text(text, decoders()[target].key, max_tokens=MAX_PROMPT)
    return tuple(tokens.ids), tuple(tokens.labels)


def labels_of(target: str, ids) -> list[str]:
    """The target's labels of token ids."""
    return token_labels(list(ids), decoders()[target].key)


def vocabulary(info) -> str:
    """What a shipped model's token ids mean: its task and its tokenizer. A checkpoint that names no tokenizer reads
    characters, as one that names the character tokenizer does; a learned one is named in full (its merges)."""
    return f"{info.task} {info.tokenizer if info.tokens != DEFAULT_TOKENS else DEFAULT_TOKENS}"


@st.cache_data(max_entries=16, show_spinner="Drafting and verifying, k = 1 … 8…")
def sweep(target: str, draft: str, ids: tuple[int, ...], new_tokens: int, ks: tuple[int, ...] = KS) -> list[Run]:
    """Speculative decoding of `new_tokens` after `ids`, once per k; ValueError when the draft cannot draft."""
    shipped = decoders()
    target_model = _model(shipped[target].key)
    draft_model = _early_exit(target) if draft == EARLY_EXIT else _model(shipped[draft].key)
    vocabularies = None if draft == EARLY_EXIT else tuple(vocabulary(m.info) for m in (shipped[target], shipped[draft]))
    prompt = torch.tensor([ids], device=target_model.device)  # (1, T)
    greedy = target_model.generate(prompt, new_tokens)  # (1, T + new): what every run must give back
    runs = []
    for k in ks:
        result = speculative_generate(target_model, draft_model, prompt, new_tokens, k, vocabularies)
        runs.append(Run(k, tuple((r.proposed, r.accepted, r.target_token) for r in result.rounds),
                        tuple(result.ids[0, len(ids):].tolist()), result.acceptance_rate, result.target_forwards,
                        result.greedy_forwards, bool(torch.equal(result.ids, greedy))))
    return runs
