"""Attention: project -> position -> (repeat kv) -> the five lines | fused SDPA.

One module covers MHA, GQA and MQA: queries get H heads, keys and values get
G = n_kv_heads heads, and query head h reads kv head h // (H / G).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import masks
from .config import TransformerConfig
from .hooks import HookPoint, name_hook_points, wants_any
from .positions import apply_rope


@dataclass
class AttentionInputs:
    """What a stack works out once per forward pass and every layer shares."""

    allowed: torch.Tensor  # bool (B or 1, 1, T_q, T_kv): True = may attend
    mask: torch.Tensor  # the same as an additive mask (0 / most negative float)
    plain_causal: bool  # exactly causal, no padding, window, cache or ALiBi: SDPA's is_causal suffices
    no_mask: bool  # every query sees every key and there is no ALiBi: SDPA needs no mask
    rope: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # cos, sin (B, 1, T, d_head); angles (B, T, d_head/2)
    alibi: torch.Tensor | None = None  # (B or 1, H, T_q, T_kv)
    fused_bias: torch.Tensor | None = None  # mask + alibi, handed to SDPA

    @classmethod
    def from_allowed(cls, allowed: torch.Tensor, alibi: torch.Tensor | None = None,
                     dtype: torch.dtype = torch.float32) -> "AttentionInputs":
        """Inputs for any bool mask (B or 1, 1, T_q, T_kv), plus an ALiBi bias (B or 1, H, T_q, T_kv) if given.

        SDPA's shortcuts are read off the mask itself: every key visible needs no mask, an exactly
        causal one only is_causal. A model knows both from its config and never reads its mask.
        """
        mask = masks.to_additive(allowed, dtype)  # (B or 1, 1, T_q, T_kv)
        t_q, t_kv = allowed.shape[-2:]
        positions = torch.arange(t_q, device=allowed.device)
        no_bias = alibi is None
        return cls(allowed, mask,
                   plain_causal=no_bias and t_q == t_kv and bool((allowed == masks.causal(positions, positions)).all()),
                   no_mask=no_bias and bool(allowed.all()),
                   alibi=alibi, fused_bias=mask if no_bias else mask + alibi)


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    B, T, _ = x.shape
    return x.view(B, T, n_heads, -1).transpose(1, 2)  # (B, n_heads, T, d_head)


def merge_heads(z: torch.Tensor) -> torch.Tensor:
    B, H, T, d_head = z.shape
    return z.transpose(1, 2).reshape(B, T, H * d_head)  # (B, T, H * d_head) = concat(heads)


class Attention(nn.Module):
    """project -> position -> (cache) -> attend. ``projections=False`` builds the core alone, for
    q, k, v made elsewhere (see ``attend``): no W_q, W_k, W_v, and W_o is the identity."""

    def __init__(self, cfg: TransformerConfig, cross: bool = False, projections: bool = True):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_head = cfg.n_heads, cfg.n_kv_heads, cfg.d_head
        self.cross = cross  # queries from the decoder, keys and values from the encoder
        self.fused = True  # default fast path; recording switches to the explicit one
        if projections:
            self.q_proj = nn.Linear(cfg.d_model, cfg.n_heads * cfg.d_head, bias=cfg.bias)
            self.k_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.d_head, bias=cfg.bias)
            self.v_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.d_head, bias=cfg.bias)
            self.o_proj = nn.Linear(cfg.n_heads * cfg.d_head, cfg.d_model, bias=cfg.bias)
        else:
            self.o_proj = nn.Identity()  # concat(heads) comes out as it is
        self.dropout = cfg.dropout
        keys = {"T_kv": "S"} if cross else {}  # cross-attention's keys are the encoder's S positions
        self.hook_q = HookPoint("hook_q")
        self.hook_k = HookPoint("hook_k", **keys)
        self.hook_v = HookPoint("hook_v", **keys)
        if not cross:
            self.hook_rope_angles = HookPoint("hook_rope_angles")
            self.hook_rot_q = HookPoint("hook_rot_q")
            self.hook_rot_k = HookPoint("hook_rot_k")
            self.hook_alibi_bias = HookPoint("hook_alibi_bias")
        self.hook_raw_scores = HookPoint("hook_raw_scores", **keys)
        self.hook_mask = HookPoint("hook_mask", **keys)
        self.hook_attn_scores = HookPoint("hook_attn_scores", **keys)
        self.hook_pattern = HookPoint("hook_pattern", **keys)
        self.hook_z = HookPoint("hook_z")

    def forward(self, x: torch.Tensor, inputs: AttentionInputs, context: torch.Tensor | None = None,
                cache: "dict | None" = None) -> torch.Tensor:
        q = self.hook_q(split_heads(self.q_proj(x), self.n_heads))  # (B, H, T_q, d_head)
        if self.cross and cache is not None and self in cache:
            k, v = cache[self]  # the encoder's keys and values, computed at the first step
        else:
            source = x if context is None else context  # cross-attention reads the encoder output
            k = self.hook_k(split_heads(self.k_proj(source), self.n_kv_heads))  # (B, G, T_kv, d_head)
            v = self.hook_v(split_heads(self.v_proj(source), self.n_kv_heads))  # (B, G, T_kv, d_head)
            if inputs.rope is not None and not self.cross:
                cos, sin, angles = inputs.rope
                self.hook_rope_angles(angles)
                q = self.hook_rot_q(apply_rope(q, cos, sin))  # (B, H, T_q, d_head)
                k = self.hook_rot_k(apply_rope(k, cos, sin))  # (B, G, T_q, d_head)
            if cache is not None:
                if not self.cross and self in cache:
                    past_k, past_v = cache[self]
                    k = torch.cat((past_k, k), dim=2)  # (B, G, T_past + T_q, d_head)
                    v = torch.cat((past_v, v), dim=2)
                cache[self] = (k, v)

        return self.attend(q, k, v, inputs)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, inputs: AttentionInputs,
               fused: bool | None = None) -> torch.Tensor:
        """concat(heads) @ W_o for q (B, H, T_q, d_head) and k, v (B, G, T_kv, d_head): (B, T_q, d_model).

        The five lines when fused is False or one of their hooks is recorded, else one SDPA kernel;
        fused=None follows the module's own setting (``Transformer.set_fused``).
        """
        fused = self.fused if fused is None else fused
        explicit = not fused or wants_any(
            self.hook_raw_scores, self.hook_mask, self.hook_attn_scores, self.hook_pattern,
            *(() if self.cross else (self.hook_alibi_bias,)))
        if explicit:
            return self.explicit_attention(q, k, v, inputs)
        return self.fused_attention(q, k, v, inputs)

    def position_bias(self, inputs: AttentionInputs) -> torch.Tensor:
        """The additive mask, plus ALiBi's distance penalty when it is used."""
        bias = self.hook_mask(inputs.mask)  # (B or 1, 1, T_q, T_kv)
        if inputs.alibi is not None:
            bias = bias + self.hook_alibi_bias(inputs.alibi)  # (B or 1, H, T_q, T_kv)
        return bias

    def explicit_attention(self, q, k, v, inputs: AttentionInputs) -> torch.Tensor:
        k, v = self.repeat_kv(k), self.repeat_kv(v)  # (B, H, T_kv, d_head): each group shares its kv head
        # --- the five lines of attention ---
        scores = self.hook_raw_scores(q @ k.transpose(-2, -1) / math.sqrt(self.d_head))  # (B, H, T_q, T_kv)
        scores = self.hook_attn_scores(scores + self.position_bias(inputs))  # + mask (+ ALiBi)
        weights = self.hook_pattern(scores.softmax(dim=-1))  # (B, H, T_q, T_kv)
        z = self.hook_z(F.dropout(weights, self.dropout, self.training) @ v)  # (B, H, T_q, d_head)
        return self.o_proj(merge_heads(z))  # concat(heads) @ W_o: (B, T_q, d_model)

    def fused_attention(self, q, k, v, inputs: AttentionInputs) -> torch.Tensor:
        # The same computation in one kernel that never stores the T_q x T_kv weights.
        use_is_causal = inputs.plain_causal
        bias = None if use_is_causal or inputs.no_mask else inputs.fused_bias
        z = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias, is_causal=use_is_causal,
            dropout_p=self.dropout if self.training else 0.0,
            enable_gqa=self.n_kv_heads != self.n_heads)  # (B, H, T_q, d_head)
        return self.o_proj(merge_heads(self.hook_z(z)))  # (B, T_q, d_model)

    def repeat_kv(self, kv: torch.Tensor) -> torch.Tensor:
        """(B, G, T, d_head) -> (B, H, T, d_head): kv head g serves query heads g*H/G ... (g+1)*H/G - 1."""
        return kv.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, inputs: AttentionInputs, *,
           fused: bool = True) -> torch.Tensor:
    """Attention on q, k, v of one's own, no projections around it: concat(heads), (B, T_q, H * d_head).

    q (B, H, T_q, d_head); k, v (B, G, T_kv, d_head): query head h reads kv head h // (H / G).
    The path a model's attention takes after its projections (``Attention.attend``): fused=False
    runs the five lines, fused=True one SDPA kernel, unless ``hooks.recording()`` asks for their
    scores or weights (standalone names: "hook_pattern"). ``AttentionInputs.from_allowed`` builds
    ``inputs`` from a bool mask.
    """
    n_heads, n_kv_heads, d_head = q.shape[1], k.shape[1], q.shape[-1]
    cfg = TransformerConfig(d_model=n_heads * d_head, n_heads=n_heads, n_kv_heads=n_kv_heads, position="none")
    core = Attention(cfg, projections=False)
    name_hook_points(core)
    return core.attend(q, k, v, inputs, fused=fused)
