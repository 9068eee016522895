"""Cached library calls for the lecture's opening and closing chapters: the GRU models, the sparse patterns on
the live model, the scaling sweep. Arguments are hashable, results numpy or plain numbers."""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from transformer import analysis, rnn, scaling

from ui.compute.model_cache import get_model

CONTEXTS = {"bottleneck": "one fixed vector", "attention": "additive attention"}  # how the pages name the two GRUs


@st.cache_resource(show_spinner="Loading the GRU encoder-decoders…")
def gru_models() -> dict[str, tuple[rnn.GRUSeq2Seq, dict]]:
    """The two shipped copy models, keyed "bottleneck" and "attention" (read-only, shared by every session)."""
    return {context: rnn.load(rnn.shipped_path(context)) for context in CONTEXTS}


def accuracy_curves() -> dict[str, dict[int, float]]:
    """{model name: {source length: share of letters right}} as each checkpoint's JSON measured it."""
    return {CONTEXTS[context]: {int(n): acc for n, acc in meta["accuracy_by_length"].items()}
            for context, (_, meta) in gru_models().items()}


@st.cache_data(max_entries=64, show_spinner=False)
def gru_copies(text: str) -> dict[str, tuple[str, np.ndarray | None]]:
    """Each model's copy of `text` and its attention weights (T_out, S) (None for the bottleneck);
    a ValueError for a text the models cannot read."""
    copies = {}
    for context, (model, _) in gru_models().items():
        answer, weights = model.translate(text)
        copies[context] = (answer, None if weights is None else weights.numpy())
    return copies


@dataclass(frozen=True)
class SparseView:
    additive: np.ndarray  # (T, T) the pattern as an additive mask
    weights: np.ndarray  # (H, T, T) the live model's weights under it
    gap: float  # largest |logit difference| between the fused and the explicit path
    pairs: int  # allowed (query, key) pairs


@st.cache_data(max_entries=64, show_spinner=False)
def sparse_attention(config_json: str, seed: int, ids: tuple[int, ...], layer: int, pattern: str, size: int,
                     n_global: int) -> SparseView:
    """The live model with a sparse pattern in every self-attention layer (the same weights): one layer's mask
    and weights, and how far its fused path is from its explicit path. A size the text cannot hold raises."""
    model = get_model(config_json, seed)
    causal = model.cfg.row("arch").next_token  # an encoder-decoder runs its (bidirectional) encoder here
    allowed = analysis.allowed_matrix(pattern, len(ids), size, causal, n_global)  # checks the size against T
    sparse = analysis.with_pattern(model, pattern, size, n_global)
    batch = torch.tensor([ids], device=model.device)
    mask, weights = analysis.attention_under_mask(sparse, batch, layer)
    return SparseView(mask[0, 0].cpu().numpy(), weights[0].float().cpu().numpy(),
                      analysis.fused_explicit_gap(sparse, batch), int(allowed.sum()))


@st.cache_data(max_entries=64, show_spinner=False)
def pairs_at_length(pattern: str, t: int, size: int, causal: bool, n_global: int) -> int:
    """Allowed pairs of the pattern on a text of t tokens (counted from the mask, a few rows at a time)."""
    return analysis.allowed_pairs(pattern, t, size, causal, n_global)


@st.cache_data(show_spinner=False)
def scaling_sweep() -> dict:
    """The sweep measured by ``python -m transformer.scaling``, as shipped."""
    return json.loads(scaling.SWEEP_PATH.read_text(encoding="utf-8"))
