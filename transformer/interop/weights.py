"""Renaming weights into ours: the helpers every source (Hugging Face, torch.nn) shares."""
from __future__ import annotations

import torch
from torch import nn

Weights = dict[str, torch.Tensor]  # our state-dict name -> tensor
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}  # the source dtypes a config can say


def linear(ours: str, weight: torch.Tensor, bias: torch.Tensor | None, cfg_bias: bool) -> Weights:
    """One projection. Where we have a bias and the source has none, a zero bias is exact."""
    out = {f"{ours}.weight": weight}
    if cfg_bias:
        out[f"{ours}.bias"] = bias if bias is not None else torch.zeros(weight.shape[0], dtype=weight.dtype, device=weight.device)
    return out


def from_linear(ours: str, layer: nn.Linear, cfg_bias: bool) -> Weights:
    return linear(ours, layer.weight, layer.bias, cfg_bias)


def norm_weights(ours: str, norm: nn.Module) -> Weights:
    """LayerNorm (weight, bias) or RMSNorm (weight). Ours always has a LayerNorm bias: zero where the source has none."""
    out = {f"{ours}.weight": norm.weight}
    if isinstance(norm, nn.LayerNorm):
        out[f"{ours}.bias"] = norm.bias if norm.bias is not None else torch.zeros_like(norm.weight)
    return out


def split_interleaved(weight: torch.Tensor, n_heads: int, d_head: int) -> list[torch.Tensor]:
    """A fused qkv whose rows run head by head, [q_h, k_h, v_h] for each head h (BLOOM, Falcon MHA).

    Works for weights (3*D, D) and biases (3*D,): returns q, k, v, each (H*d_head, ...).
    """
    per_head = weight.reshape(n_heads, 3, d_head, *weight.shape[1:])  # (H, 3, d_head, ...)
    return [per_head[:, j].reshape(n_heads * d_head, *weight.shape[1:]) for j in range(3)]
