"""LayerNorm centres and scales each vector; RMSNorm only scales it.

``NORMS`` has one row per kind: its module, and whether it centres and shifts.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .hooks import HookPoint


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * weight + bias"""

    def __init__(self, d_model: int, eps: float = 1e-5, plus_one: bool = False, hook: bool = True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.hook_normalized = HookPoint("hook_normalized", "layernorm") if hook else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hook_normalized(F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps))


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, computed in float32 as LLaMA does.

    plus_one (Gemma): the scale is (1 + weight), the weight starting at 0, applied in float32.
    """

    def __init__(self, d_model: int, eps: float = 1e-5, plus_one: bool = False, hook: bool = True):
        super().__init__()
        self.eps, self.plus_one = eps, plus_one
        self.weight = nn.Parameter(torch.zeros(d_model) if plus_one else torch.ones(d_model))
        self.hook_normalized = HookPoint("hook_normalized", "rmsnorm") if hook else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normalized = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.plus_one:
            return self.hook_normalized((normalized * (1.0 + self.weight.float())).to(x.dtype))
        return self.hook_normalized(self.weight * normalized.to(x.dtype))


@dataclass(frozen=True)
class NormKind:
    module: type
    centres: bool  # subtracts the mean (and has a bias to add back): 2·D parameters, else D


NORMS: dict[str, NormKind] = {"layernorm": NormKind(LayerNorm, True), "rmsnorm": NormKind(RMSNorm, False)}


def make_norm(cfg, width: int | None = None, hook: bool = True) -> nn.Module:
    """The config's norm over `width` features (d_model by default)."""
    return NORMS[cfg.norm].module(width or cfg.d_model, cfg.norm_eps, cfg.norm_plus_one, hook)
