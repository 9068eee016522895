"""The indexer view: the sidebar's model with a lightning indexer switched on (transformer/indexer.py), one query's
dense weights beside the keys its indexer keeps, and what it keeps as k shrinks, against two other ways to choose k
keys: the k the dense weights favour most (the best any choice of k keys can hold) and the k most recent keys (a
sliding window)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from transformer.indexer import kept_by_k, with_indexer
from ui.compute.model_cache import get_model

# the ways to choose k keys the view compares: its name -> the ranking of the keys a query may see, best first,
# from the dense weights (H, n) and the indexer's scores (n,)
RANKINGS = {
    "indexer": lambda dense, scores: scores.sort(descending=True, stable=True).indices,
    "best k (by the dense weights)": lambda dense, scores: dense.mean(0).sort(descending=True, stable=True).indices,
    "most recent k (a window)": lambda dense, scores: torch.arange(len(scores) - 1, -1, -1),
}


@dataclass(frozen=True)
class IndexerView:
    dense: np.ndarray  # (H, n): the query's softmax weights over the n keys it may see, without the indexer
    sparse: np.ndarray  # (H, n): its weights with the indexer: 0 on every dropped key
    scores: np.ndarray  # (n,): the indexer's score of each key
    chosen: np.ndarray  # (n,) bool: the keys the indexer keeps at the chosen k
    ks: list[int]  # 1 .. n
    kept: dict[str, dict[str, list[float]]]  # a key of RANKINGS -> {"mass": per k, "error": per k}
    own_indexer: bool  # the model came with its own (trained) indexer, not a new random one


@st.cache_data(max_entries=16, show_spinner="Running the model with an indexer…")
def indexer_view(config_json: str, seed: int, weights: str, ids: tuple[int, ...], layer: int, query: int,
                 top_k: int) -> IndexerView:
    """One query of one layer (a decoder's) of the sidebar's model, with the indexer keeping top_k keys."""
    base = get_model(config_json, seed, weights)
    own = any(spec.selects_keys for spec in base.cfg.layer_plan())
    model = with_indexer(base, top_k)
    at = f"blocks.{layer}.attn."
    names = [at + "hook_dense_pattern", at + "hook_pattern", at + "hook_v", at + "indexer.hook_index_scores",
             at + "indexer.hook_index_chosen"]
    _, trace = model.run_with_trace(torch.tensor([ids], device=model.device), names=names)
    n = query + 1  # the keys a decoder's query may see: itself and those before it
    dense = trace[at + "hook_dense_pattern"][0, :, query, :n].float().cpu()  # (H, n)
    values = model.blocks[layer].attn.repeat_kv(trace[at + "hook_v"])[0, :, :n].float().cpu()  # (H, n, d_v)
    scores = trace[at + "indexer.hook_index_scores"][0, query, :n].float().cpu()  # (n,)
    ks = list(range(1, n + 1))
    kept = {name: kept_by_k(dense, values, rank(dense, scores), ks) for name, rank in RANKINGS.items()}
    return IndexerView(dense.numpy(), trace[at + "hook_pattern"][0, :, query, :n].float().cpu().numpy(),
                       scores.numpy(), trace[at + "indexer.hook_index_chosen"][0, 0, query, :n].cpu().numpy(),
                       ks, kept, own)
