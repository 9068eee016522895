"""Cached measurements for the scaling and permutation pages: library calls (transformer.probes), results as numpy.

Arguments are hashable (a config as JSON, token ids and permutations as tuples), so Streamlit
caches each result across reruns and sessions.
"""
from __future__ import annotations

from dataclasses import asdict

import numpy as np
import streamlit as st
import torch

from transformer import AXES, TransformerConfig, choices, probes
from transformer.tokens import SPECIALS
from ui.compute.tokens import WORD_START_MARKS, Tokens

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@st.cache_data(max_entries=16, show_spinner=False)
def scaling_curves(d_heads: tuple[int, ...], n_keys: int, seed: int) -> dict:
    """Variance and entropy against d_head for random unit-variance q and k (see probes.random_score_statistics)."""
    curves = probes.random_score_statistics(list(d_heads), n_keys, seed)
    return dict(asdict(curves), max_entropy=curves.max_entropy)


@st.cache_data(max_entries=16, show_spinner=False)
def softmax_rows(d_head: int, n_keys: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    unscaled, scaled = probes.softmax_row(d_head, n_keys, seed)
    return unscaled.numpy(), scaled.numpy()


def live_statistics(q: np.ndarray, k: np.ndarray) -> dict:
    """Per query head of one layer: q, k and score statistics (see probes.head_score_statistics)."""
    return asdict(probes.head_score_statistics(torch.from_numpy(np.asarray(q)), torch.from_numpy(np.asarray(k))))


def shuffle_order(tokens: Tokens, n: int, seed: int) -> tuple[int, ...]:
    """A seeded shuffle of the first `n` tokens: whole words where the tokens are pieces (BPE), a start token kept
    first; one token at a time where they are characters."""
    words = tokens.words()
    if words is None:
        return tuple(probes.seeded_permutation(n, seed).tolist())
    return tuple(probes.seeded_word_permutation(words[:n], seed, keep_first=_starts_framed(tokens)).tolist())


def words_to_shuffle(tokens: Tokens, n: int) -> int | None:
    """How many words a shuffle of the first `n` tokens moves (the start token stays first); None for characters."""
    words = tokens.words()
    return None if words is None else len(set(words[:n])) - _starts_framed(tokens)


def _starts_framed(tokens: Tokens) -> bool:
    """Whether the text begins with a start token (<bos>), which a shuffle of words leaves first."""
    return bool(tokens.labels) and tokens.labels[0] in SPECIALS


def shuffled_text(tokens: Tokens, order) -> str:
    """The tokens in `order` as text to read: words apart by a space where the tokens are pieces (a piece's own
    space mark dropped), else every token apart."""
    words = tokens.words()
    if words is None:
        return " ".join(tokens.labels[i] for i in order)
    said: list[str] = []
    for place, i in enumerate(order):
        if place and words[i] == words[order[place - 1]]:
            said[-1] += tokens.labels[i]
        else:
            said.append(tokens.labels[i].lstrip("".join(WORD_START_MARKS)))
    return " ".join(said)


def _as_numpy(result: dict) -> dict:
    """The weights as float32 numpy (what the page draws), to keep cached entries small."""
    return {k: v.float().numpy() if isinstance(v, torch.Tensor) else v for k, v in result.items()}


def permutation_results(config_json: str, ids: tuple[int, ...], perm: tuple[int, ...], seed: int,
                        dtype: str) -> dict[tuple[str, str], dict]:
    """(mask, position) -> probes.permutation_test's result, for every position scheme with no mask and with a causal mask.

    mask is "none" (the config made an encoder) or "causal" (a decoder).
    """
    cfg = TransformerConfig.from_json(config_json)
    runs = {(mask, position): probes.equivariance_config(cfg, position, causal=AXES["mask"].row(mask).causal)
            for mask in ("none", "causal") for position in choices("position")}
    return {run: permutation_run(run_cfg.to_json(), ids, perm, seed, dtype) for run, run_cfg in runs.items()}


def prefix_shuffle(config_json: str, ids: tuple[int, ...], perm: tuple[int, ...], seed: int, dtype: str) -> dict:
    """A causal decoder with no positions, its prefix shuffled and its last token kept last."""
    cfg = probes.equivariance_config(TransformerConfig.from_json(config_json), "none", causal=True)
    return permutation_run(cfg.to_json(), ids, perm, seed, dtype)


# Each run is cached under its own config, which replaces the sidebar's position and mask: choosing another
# position in the sidebar reuses all ten runs (the prefix shuffle is one more run, cached the same way).
@st.cache_data(max_entries=96, show_spinner="Running each model on the text and on its shuffle…")
def permutation_run(run_config_json: str, ids: tuple[int, ...], perm: tuple[int, ...], seed: int, dtype: str) -> dict:
    """probes.permutation_test of one model (its config as JSON), weights as float32 numpy."""
    return _as_numpy(probes.permutation_test(TransformerConfig.from_json(run_config_json), torch.tensor(ids),
                                             torch.tensor(perm), seed, DTYPES[dtype]))
