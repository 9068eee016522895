"""LayerNorm centres and scales each vector; RMSNorm only scales it.

Every norm of a model is made by ``make_norm``: the blocks' norms, the final one, the embeddings' and
the head's (BERT), and attention's QK-norm and latent norm. Whether a kind centres is its row in the
table of choices (transformer/axes/stack.py); ``NORM_MODULES`` builds it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .axes import AXES
from .hooks import HookPoint


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * weight + bias"""

    def __init__(self, d_model: int, eps: float = 1e-5, plus_one: bool = False, hook: bool = True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.hook_normalized = HookPoint("hook_normalized", AXES["norm"].row("layernorm")) if hook else nn.Identity()

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
        self.hook_normalized = HookPoint("hook_normalized", AXES["norm"].row("rmsnorm")) if hook else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normalized = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.plus_one:
            return self.hook_normalized((normalized * (1.0 + self.weight.float())).to(x.dtype))
        return self.hook_normalized(self.weight * normalized.to(x.dtype))


class UnitRMS(nn.Module):
    """Llama 4's weightless "L2 norm" on q and k: each vector scaled to unit RMS, in float32, nothing to learn."""

    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)  # (..., d)


NORM_MODULES: dict[str, type[nn.Module]] = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}

def make_norm(cfg, width: int | None = None, kind: str | None = None, hook: bool = True,
              eps: float | None = None) -> nn.Module:
    """A norm over `width` features (d_model by default) of the config's kind, or of `kind` where a model fixes
    it whatever its blocks use (QK-norm is always an RMSNorm, BERT's embedding norm a LayerNorm); at `eps`, by
    default the config's norm_eps (MLA's latent norms may keep their own: ``latent_norm_eps``)."""
    kind = cfg.norm if kind is None else kind
    return NORM_MODULES[kind](width or cfg.d_model, cfg.norm_eps if eps is None else eps, cfg.norm_plus_one, hook)  # plus_one: an RMSNorm's (Gemma)
