"""LayerNorm centres and scales each vector; RMSNorm only scales it."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .hooks import HookPoint


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * weight + bias"""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.hook_normalized = HookPoint("hook_normalized", "layernorm")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hook_normalized(F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps))


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, computed in float32 as LLaMA does."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.hook_normalized = HookPoint("hook_normalized", "rmsnorm")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normalized = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.hook_normalized(self.weight * normalized.to(x.dtype))


NORMS = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}
