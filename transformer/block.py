"""One block: attention and FFN sublayers, each wrapped in a residual connection and a norm.

Pre-norm (GPT-2, LLaMA):   x = x + sublayer(norm(x))
Post-norm (2017, BERT):    x = norm(x + sublayer(x))
Parallel (Falcon, PaLM):   x = x + attn(norm(x)) + ffn(norm(x))
Decoder blocks of an encoder-decoder add cross-attention between the two.
"""
from __future__ import annotations

import torch
from torch import nn

from .attention import Attention, AttentionInputs
from .config import TransformerConfig
from .ffn import FFNS
from .hooks import HookPoint
from .norms import NORMS


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig, cross: bool = False):
        super().__init__()
        Norm = NORMS[cfg.norm]
        self.pre_norm = cfg.norm_position == "pre"
        self.parallel = cfg.parallel_block
        self.has_cross = cross
        self.ln1 = Norm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        if cross:
            self.ln_cross = Norm(cfg.d_model, cfg.norm_eps)
            self.cross_attn = Attention(cfg, cross=True)
            self.hook_cross_attn_out = HookPoint("hook_cross_attn_out")
            self.hook_resid_cross = HookPoint("hook_resid_cross")
        if not self.parallel:
            self.ln2 = Norm(cfg.d_model, cfg.norm_eps)
            self.hook_resid_mid = HookPoint("hook_resid_mid")
        self.mlp = FFNS[cfg.ffn](cfg)
        self.dropout = nn.Dropout(cfg.dropout)
        self.hook_resid_pre = HookPoint("hook_resid_pre")
        self.hook_attn_out = HookPoint("hook_attn_out")
        self.hook_mlp_out = HookPoint("hook_mlp_out")
        self.hook_resid_post = HookPoint("hook_resid_post")

    def forward(self, x: torch.Tensor, inputs: AttentionInputs, cross_inputs: AttentionInputs | None = None,
                memory: torch.Tensor | None = None, cache: dict | None = None) -> torch.Tensor:
        x = self.hook_resid_pre(x)  # (B, T, d_model)
        if self.parallel:
            h = self.ln1(x)
            attn = self.hook_attn_out(self.attn(h, inputs, cache=cache))
            mlp = self.hook_mlp_out(self.mlp(h))
            return self.hook_resid_post(x + self.dropout(attn) + self.dropout(mlp))
        x = self.hook_resid_mid(self.sublayer(
            x, self.ln1, lambda h: self.hook_attn_out(self.attn(h, inputs, cache=cache))))
        if self.has_cross:
            x = self.hook_resid_cross(self.sublayer(
                x, self.ln_cross, lambda h: self.hook_cross_attn_out(self.cross_attn(h, cross_inputs, memory, cache))))
        return self.hook_resid_post(self.sublayer(x, self.ln2, lambda h: self.hook_mlp_out(self.mlp(h))))

    def sublayer(self, x: torch.Tensor, norm: nn.Module, fn) -> torch.Tensor:
        if self.pre_norm:
            return x + self.dropout(fn(norm(x)))  # normalise the sublayer's input
        return norm(x + self.dropout(fn(x)))  # normalise the sum
