"""One block: attention and FFN sublayers, each wrapped in a residual connection and norms.

Where the norms sit is one row of ``NORM_PLACEMENTS``:

Pre-norm (GPT-2, LLaMA):        x = x + sublayer(norm(x))
Post-norm (2017, BERT):         x = norm(x + sublayer(x))
Sandwich (Gemma 2, Gemma 3):    x = x + norm_post(sublayer(norm(x)))
After the sublayer (OLMo 2):    x = x + norm_post(sublayer(x))
Parallel (Falcon, PaLM, NeoX):  x = x + attn(norm(x)) + ffn(norm(x))   (one norm, or one per sublayer)
Decoder blocks of an encoder-decoder add cross-attention between the two.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .attention import ATTENTION_KINDS, Attention, AttentionInputs
from .config import TransformerConfig
from .ffn import make_ffn
from .hooks import HookPoint
from .norms import make_norm


@dataclass(frozen=True)
class NormPlacement:
    """Where a block's norms sit around each sublayer, as data."""

    before: bool  # normalises the sublayer's input (ln1, ln2, ln_cross)
    after: bool  # normalises the sublayer's output before the residual add (ln1_post, ln2_post, ln_cross_post)
    on_sum: bool  # normalises the residual sum (post-norm: ln1, ln2, ln_cross)
    final_norm: bool  # a norm after the last block by default (post-norm blocks already end on one)


NORM_PLACEMENTS: dict[str, NormPlacement] = {
    "pre": NormPlacement(before=True, after=False, on_sum=False, final_norm=True),
    "post": NormPlacement(before=False, after=False, on_sum=True, final_norm=False),
    "sandwich": NormPlacement(before=True, after=True, on_sum=False, final_norm=True),
    "after": NormPlacement(before=False, after=True, on_sum=False, final_norm=True),
}


class Sublayer:
    """The norms around one sublayer and its residual add, as the placement row says.

    The norms are the block's own modules (``ln1`` before or on the sum, ``ln1_post`` after), made here.
    """

    def __init__(self, cfg: TransformerConfig, placement: NormPlacement, block: nn.Module, name: str):
        self.placement = placement
        if placement.before or placement.on_sum:
            setattr(block, name, make_norm(cfg))
        if placement.after:
            setattr(block, name + "_post", make_norm(cfg))
        self.name = name

    def __call__(self, block: nn.Module, x: torch.Tensor, fn, dropout: nn.Module) -> torch.Tensor:
        p = self.placement
        h = getattr(block, self.name)(x) if p.before else x  # (B, T, d_model)
        out = fn(h)
        if p.after:
            out = getattr(block, self.name + "_post")(out)
        x = x + dropout(out)
        return getattr(block, self.name)(x) if p.on_sum else x


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig, cross: bool = False, layer: int = 0):
        super().__init__()
        placement = NORM_PLACEMENTS[cfg.norm_position]
        self.parallel = cfg.parallel_block
        self.has_cross = cross
        self.window = cfg.layer_windows()[layer]  # None: a global layer; W: a local one
        self.attn = ATTENTION_KINDS[cfg.attention_kind](cfg)
        if self.parallel:
            self.ln1 = make_norm(cfg)
            if cfg.parallel_norms == 2:
                self.ln2 = make_norm(cfg)
        else:
            self._sublayers = {name: Sublayer(cfg, placement, self, name) for name in
                               ("ln1", *(("ln_cross",) if cross else ()), "ln2")}
            self.hook_resid_mid = HookPoint("hook_resid_mid")
        if cross:
            self.cross_attn = Attention(cfg, cross=True)
            self.hook_cross_attn_out = HookPoint("hook_cross_attn_out")
            self.hook_resid_cross = HookPoint("hook_resid_cross")
        self.mlp = make_ffn(cfg, layer)
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
            mlp = self.hook_mlp_out(self.mlp(self.ln2(x) if hasattr(self, "ln2") else h))
            return self.hook_resid_post(x + self.dropout(attn) + self.dropout(mlp))
        x = self.hook_resid_mid(self._sublayers["ln1"](
            self, x, lambda h: self.hook_attn_out(self.attn(h, inputs, cache=cache)), self.dropout))
        if self.has_cross:
            x = self.hook_resid_cross(self._sublayers["ln_cross"](
                self, x, lambda h: self.hook_cross_attn_out(self.cross_attn(h, cross_inputs, memory, cache)),
                self.dropout))
        return self.hook_resid_post(self._sublayers["ln2"](
            self, x, lambda h: self.hook_mlp_out(self.mlp(h)), self.dropout))
