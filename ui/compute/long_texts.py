"""Cached summaries of a long text, read by a shipped language model (and by random-init weights of its shape).

The figures are the library's (transformer/long_context.py): per head and per token, never a T x T matrix. Here
the text is checked against the page's caps before anything runs, tokenised as the checkpoint reads text, run
once per (model, text, window, weights), and kept as numpy for the figures.
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import streamlit as st
import torch

from transformer import Transformer
from transformer.checkpoint import SHIPPED_DIR
from transformer.long_context import ROLE_THRESHOLDS, head_roles, head_scores, row_weights, summarize
from ui.compute.model_cache import get_model
from ui.compute.shipped import shipped_models
from ui.compute.tokens import encode_text

MAX_CHARS = 200_000  # a pasted or uploaded text longer than this is refused, with this number
MAX_UPLOAD_BYTES = 4 * MAX_CHARS  # UTF-8 takes at most 4 bytes a character
MEMORY_CAP_BYTES = 3 * 2 ** 30  # what one run may hold, estimated before it starts
DOCUMENT = SHIPPED_DIR.parent / "text" / "english-held-out.txt"  # held-out English, never trained on
DOCUMENT_LENGTHS = (2_000, 8_000, 32_000, 128_000)  # characters of it the page offers
DEFAULT_MODEL = "llama2-language"
FIGURES = {"entropy": "entropy (bits)", "sink": "weight on key 0 (sink)", "local": "weight on the nearest keys",
           "distant": "weight on distant keys", "max": "largest weight"}
ZOOM_MAX = 512  # tokens of the closer look: its exact weights are made on demand


@dataclass(frozen=True)
class LongRun:
    """One model's summaries of one text, as numpy."""

    layers: tuple[str, ...]  # "blocks.0.attn" ... (the softmax attention layers)
    figures: dict[str, np.ndarray]  # name -> (layers, heads, T)
    distance_mass: np.ndarray  # (layers, heads, buckets)
    distance_edges: np.ndarray  # (buckets + 1,)
    atlases: dict[str, "Atlas"]  # the queries read ("within the trained length", "beyond it", "the whole text")
    seconds: float


@dataclass(frozen=True)
class Atlas:
    """Every head's role over one range of queries, and the scores each role's threshold was compared with."""

    roles: tuple[tuple[str, ...], ...]  # (layers, heads)
    scores: dict[str, np.ndarray]  # role -> (layers, heads)


def language_models() -> dict[str, object]:
    """The shipped decoders trained on English, by name: the models a long text means something to."""
    return {Path(m.path).name: m for m in shipped_models()
            if m.info.task == "language" and m.cfg.row("arch").causal and not m.cfg.row("arch").cross}


def check_text(text: str) -> None:
    """ValueError for a text the page will not read: empty, or past MAX_CHARS."""
    if not text.strip():
        raise ValueError("The text is empty: paste or upload some text, or pick the shipped document.")
    if len(text) > MAX_CHARS:
        raise ValueError(f"The text has {len(text):,} characters, over this page's cap of {MAX_CHARS:,}: cut it to "
                         f"{MAX_CHARS:,} characters or fewer (a book chapter fits; a whole book does not).")


def document(characters: int) -> str:
    """The first `characters` of the shipped held-out English text."""
    return DOCUMENT.read_text(encoding="utf-8")[:characters]


def tokens_of(name: str, text: str) -> list[int]:
    """The text in the model's own tokens, its start token first, uncut."""
    check_text(text)
    return encode_text(text, language_models()[name].key, max_tokens=10 * MAX_CHARS).ids


def estimated_bytes(cfg, n_tokens: int, top_k: int = 8) -> int:
    """What a run holds at its peak, estimated before it starts: the forward's O(T) activations, one block of
    weights, and the figures kept (two runs: trained and random-init)."""
    d_model = cfg.d_model
    forward = 24 * n_tokens * d_model * 4  # q, k, v, the FFN's hidden layer and the residual, float32
    block = 6 * 2 ** 22 * 4  # one block of weights and its temporaries (long_context.rows_per_block)
    kept = 2 * cfg.n_layers * cfg.n_heads * n_tokens * (6 + 2 * top_k) * 4
    return forward + block + kept


def check_memory(name: str, n_tokens: int) -> None:
    """MemoryError before a run whose estimate is past MEMORY_CAP_BYTES."""
    cfg = language_models()[name].cfg
    need = estimated_bytes(cfg, n_tokens)
    if need > MEMORY_CAP_BYTES:
        raise MemoryError(f"Reading {n_tokens:,} tokens with {name} would hold about {need / 2**30:.1f} GiB, over "
                          f"this page's cap of {MEMORY_CAP_BYTES / 2**30:.0f} GiB: use a shorter text.")


def past_positions(name: str, n_tokens: int) -> str | None:
    """Why a model with a position table cannot read this many tokens, or None when it can."""
    cfg = language_models()[name].cfg
    if cfg.row("position").bounds_length and n_tokens > cfg.max_len:
        return (f"{name} has a learned table of {cfg.max_len} positions and no row for a position past it, so it "
                f"cannot read {n_tokens:,} tokens. Pick a model whose positions are computed (RoPE), or cut the "
                f"text to {cfg.max_len - 1} tokens.")
    return None


def _model(name: str, trained: bool) -> Transformer:
    """The shipped checkpoint, or random-init weights of its shape."""
    return get_model(language_models()[name].key, 0) if trained else _random_model(name)


@st.cache_resource(max_entries=2, show_spinner=False)
def _random_model(name: str) -> Transformer:
    """Random-init weights of the same shape (seed 0): what a head's figures look like before any training."""
    torch.manual_seed(0)
    return Transformer(language_models()[name].cfg).eval()


_RUNS: OrderedDict[tuple, LongRun] = OrderedDict()  # the last few runs, shared by every session
_RUNS_KEPT = 4
_LOCK = threading.Lock()
SECONDS_PER_MILLION: dict[str, float] = {}  # the last run's seconds per layer and per million (T x T) entries


def summaries(name: str, text: str, window: int, trained: bool,
              progress: Callable[[str], None] | None = None) -> LongRun:
    """The summaries of `text` read by `name` (trained) or by random-init weights of its shape; kept for the next
    rerun. Not st.cache_data: a run reports its progress to the page, which a cached function may not do."""
    key = (name, hashlib.sha256(text.encode("utf-8")).hexdigest(), window, trained)
    with _LOCK:
        if key in _RUNS:
            _RUNS.move_to_end(key)
            return _RUNS[key]
    ids = torch.tensor([tokens_of(name, text)])
    model = _model(name, trained)
    run = run_summaries(model, ids, window, language_models()[name].info.trained_tokens, progress)
    SECONDS_PER_MILLION[name] = run.seconds / len(run.layers) / (ids.shape[1] ** 2 / 1e6)
    with _LOCK:
        _RUNS[key] = run
        while len(_RUNS) > _RUNS_KEPT:
            _RUNS.popitem(last=False)
    return run


def estimated_seconds(name: str, n_tokens: int) -> float | None:
    """How long one run should take, from the last run of this model on this server (None before the first)."""
    rate = SECONDS_PER_MILLION.get(name)
    layers = sum(1 for spec in language_models()[name].cfg.layer_plan() if spec.row.softmax)
    return None if rate is None else rate * layers * n_tokens ** 2 / 1e6


def query_ranges(n_tokens: int, trained_tokens: int | None) -> dict[str, tuple[int, int]]:
    """The ranges of queries an atlas reads: the whole text, and where it passes the trained length, the part
    within it and the part beyond it."""
    if trained_tokens is None or n_tokens <= trained_tokens:
        return {"the whole text": (0, n_tokens)}
    return {"within the trained length": (0, trained_tokens), "beyond it": (trained_tokens, n_tokens)}


def run_summaries(model: Transformer, ids: torch.Tensor, window: int, trained_tokens: int | None,
                  progress: Callable[[str], None] | None = None) -> LongRun:
    start = time.perf_counter()
    found = summarize(model, ids, window=window, progress=progress)
    seconds = time.perf_counter() - start
    layers = tuple(found)
    figures = {name: np.stack([found[layer][name][0].numpy() for layer in layers]) for name in FIGURES}
    atlases = {}
    for label, (first, stop) in query_ranges(ids.shape[1], trained_tokens).items():
        scores = [head_scores(found[layer], window, first, stop) for layer in layers]
        atlases[label] = Atlas(tuple(tuple(head_roles(found[layer], window, first, stop)) for layer in layers),
                               {role: np.stack([s[role].numpy() for s in scores]) for role in scores[0]})
    return LongRun(layers, figures, np.stack([found[layer]["distance_mass"][0].numpy() for layer in layers]),
                   found[layers[0]]["distance_edges"].numpy(), atlases, seconds)


@st.cache_data(max_entries=8, show_spinner="Computing that window's exact weights…")
def window_weights(name: str, text: str, layer: str, head: int, start: int, length: int, trained: bool) -> np.ndarray:
    """One head's exact weights (length, T) for queries start .. start + length - 1."""
    ids = torch.tensor([tokens_of(name, text)])
    model = _model(name, trained)
    return row_weights(model, ids, layer=layer, start=start, stop=start + length)[0, head].numpy()


def labels_of(name: str, text: str, start: int, length: int) -> list[str]:
    """The visible labels of tokens start .. start + length - 1 of the text, in the model's own tokens."""
    tokens = encode_text(text, language_models()[name].key, max_tokens=10 * MAX_CHARS)
    return list(tokens.labels[start:start + length])
