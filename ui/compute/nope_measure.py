"""Layers without positions (NoPE), measured on a model that has them (Positions page, "NoPE layers" tab).

A NoPE layer turns neither q nor k: nothing in its scores says how far a key is, only the causal mask (each query
sees itself and what came before) and whatever earlier layers wrote into the residual stream. So what it looks at is
a question for measurement: how its weight falls with distance beside a RoPE layer of the same model, how much of it
lands on the first token, and the same for random-init weights of the same shape.
"""
from __future__ import annotations

import numpy as np
import torch

from transformer import Transformer
from transformer.hooks import hook_name

NOPE_MODEL = "llama4-language"  # the shipped checkpoint with NoPE layers: Llama 4-style, its last layer without RoPE
LONGER_THAN = "llama2-language"  # the same size with RoPE in every layer, for reading longer text


def layer_kind(model: Transformer, layer: int) -> str:
    """'NoPE' or 'RoPE', with the layer's chunk or window where it has one."""
    spec = model.cfg.layer_plan()[layer]
    bound = f", chunk of {spec.chunk}" if spec.chunk else f", window of {spec.window}" if spec.window else ""
    return ("RoPE" if spec.rotates else "NoPE") + bound


def distance_profile(pattern: np.ndarray) -> np.ndarray:
    """(H, T, T) causal softmax weights -> (T,): the weight a query puts on the key d tokens back, for d = 0 .. T-1,
    averaged over the heads and the queries that have such a key."""
    H, T, _ = pattern.shape
    return np.array([np.diagonal(pattern, offset=-d, axis1=1, axis2=2).mean() for d in range(T)])


def layer_summary(pattern: np.ndarray) -> dict[str, float]:
    """(H, T, T) weights -> the share on the first token and on the token before, and the mean distance looked back,
    averaged over heads and the queries past the first."""
    H, T, _ = pattern.shape
    queries = np.arange(1, T)
    distance = (np.arange(T)[:, None] - np.arange(T)[None, :]).clip(min=0)  # (T, T): q - k
    return {"first token": float(pattern[:, 1:, 0].mean()),
            "token before": float(pattern[:, queries, queries - 1].mean()),
            "mean distance back": float((pattern[:, 1:] * distance[1:]).sum(-1).mean())}


@torch.no_grad()
def nope_view(model: Transformer, ids: torch.Tensor, seed: int = 0) -> dict:
    """Every layer's weights on `ids` (1, T), its distance profile and summary, for the model and for random-init
    weights of its shape. Returns {"layers": [{"layer", "kind", "pattern" (H, T, T), "profile", "summary",
    "random summary"}], "nope": [layer indices without RoPE], "rope": [layers with it]}."""
    torch.manual_seed(seed)
    random = Transformer(model.cfg, device=model.device).eval()
    names = [hook_name(i, "attn.hook_pattern") for i in range(model.cfg.n_layers)]
    _, trace = model.run_with_trace(ids, names=names)
    _, random_trace = random.run_with_trace(ids, names=names)
    layers = []
    for i, name in enumerate(names):
        pattern = trace[name][0].float().numpy()  # (H, T, T)
        layers.append({"layer": i, "kind": layer_kind(model, i), "pattern": pattern,
                       "profile": distance_profile(pattern), "summary": layer_summary(pattern),
                       "random summary": layer_summary(random_trace[name][0].float().numpy())})
    plan = model.cfg.layer_plan()
    return {"layers": layers, "nope": [s.index for s in plan if not s.rotates],
            "rope": [s.index for s in plan if s.rotates]}
