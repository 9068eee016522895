"""Attention: project -> position -> (repeat kv) -> the five lines | fused SDPA.

One module covers MHA, GQA and MQA: queries get H heads, keys and values get
G = n_kv_heads heads, and query head h reads kv head h // (H / G). ``LatentAttention``
(MLA) rebuilds every head's key and value from a small latent. The switches of 2024-2026
sit around the five lines: QK-norm before RoPE, Llama 4's temperature on q, soft-capping
and sinks inside them, an output gate after them. A layer built from a row of the plan
that reuses an earlier layer's K and V (Gemma 4) projects q alone; one whose row selects keys (DeepSeek-V3.2)
lets its lightning indexer (transformer/indexer.py) cut each query's keys to its top k before the five lines.
"""
from __future__ import annotations

import contextvars
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from . import masks
from .config import TransformerConfig
from .hooks import HookPoint, name_hook_points, wants_any
from .indexer import LightningIndexer, matching_loss
from .layer_plan import LayerSpec
from .norms import UnitRMS, make_norm
from .positions import Rotation, apply_partial_rope, apply_rope


# Reads every softmax attention's q, k and inputs as it attends, for figures made without the T x T weights
# (transformer.long_context.summarize); one per thread, as the recorder is
ATTENTION_READER: contextvars.ContextVar[Callable | None] = contextvars.ContextVar("attention_lab_reader", default=None)

# A T_q x T_kv tensor (a mask, a bias, scores) is built whole only up to this many entries; past it, the layer
# works through blocks of query rows, so a long text costs O(T) memory beside its key and value tensors.
TILE_ENTRIES = 1 << 22  # 2048 x 2048: every text up to 2,048 tokens runs in one block, as before


@dataclass
class AttentionInputs:
    """What a stack works out once per forward pass and every layer shares.

    Which keys each query sees is a rule, not a tensor: ``keys(rows)`` builds the bool mask of the query rows asked
    for. The whole (T_q, T_kv) mask, its additive form and the position bias are made only when something asks for
    them (the five lines, a recorded hook), once per forward; the fused path asks for none of them when SDPA's
    ``is_causal`` suffices, and for one block of rows at a time otherwise (``row_blocks``)."""

    keys: Callable[[slice], torch.Tensor]  # query rows -> bool (B or 1, 1, rows, T_kv): True = may attend
    t_q: int
    dtype: torch.dtype
    plain_causal: bool  # exactly causal, no padding, window, cache or ALiBi: SDPA's is_causal suffices
    no_mask: bool  # every query sees every key and there is no ALiBi: SDPA needs no mask
    rope: Rotation | None = None  # cos and sin for q and for k (B, 1, T, d_rope); the angles (B, T, d_rope/2)
    score_bias: Callable[[slice], torch.Tensor] | None = None  # query rows -> ALiBi / T5 bias (B or 1, H, rows, T_kv)
    q_scale: torch.Tensor | None = None  # (B or 1, 1, T_q, 1) q's temperature by position (Llama 4's NoPE layers)
    layer_kv: dict | None = None  # this pass's K and V by layer, for the later layers that reuse them (Gemma 4)

    @cached_property
    def allowed(self) -> torch.Tensor:
        return self.keys(slice(None))  # (B or 1, 1, T_q, T_kv)

    @cached_property
    def mask(self) -> torch.Tensor:
        """The same as an additive mask (0 / most negative float), (B or 1, 1, T_q, T_kv)."""
        return masks.to_additive(self.allowed, self.dtype)

    @cached_property
    def alibi(self) -> torch.Tensor | None:
        return None if self.score_bias is None else self.score_bias(slice(None))  # (B or 1, H, T_q, T_kv)

    @cached_property
    def fused_bias(self) -> torch.Tensor:
        """mask + position bias, handed to SDPA: made once per forward pass for every layer that asks."""
        return self.mask if self.score_bias is None else self.mask + self.alibi

    @classmethod
    def given(cls, allowed: torch.Tensor, alibi: torch.Tensor | None = None, *, plain_causal: bool, no_mask: bool,
              dtype: torch.dtype = torch.float32, **rest) -> "AttentionInputs":
        """Inputs for a mask already made, (B or 1, 1, T_q, T_kv), and a bias (B or 1, H, T_q, T_kv) if any."""
        inputs = cls(lambda rows: allowed[..., rows, :], allowed.shape[-2], dtype, plain_causal, no_mask,
                     score_bias=None if alibi is None else (lambda rows: alibi[..., rows, :]), **rest)
        inputs.__dict__.update(allowed=allowed, alibi=alibi)  # the cached properties' values, already at hand
        return inputs

    @classmethod
    def from_allowed(cls, allowed: torch.Tensor, alibi: torch.Tensor | None = None,
                     dtype: torch.dtype = torch.float32) -> "AttentionInputs":
        """Inputs for any bool mask (B or 1, 1, T_q, T_kv), plus an ALiBi bias (B or 1, H, T_q, T_kv) if given.

        SDPA's shortcuts are read off the mask itself: every key visible needs no mask, an exactly
        causal one only is_causal. A model knows both from its config and never reads its mask.
        """
        t_q, t_kv = allowed.shape[-2:]
        positions = torch.arange(t_q, device=allowed.device)
        no_bias = alibi is None
        return cls.given(allowed, alibi, dtype=dtype,
                         plain_causal=no_bias and t_q == t_kv and bool((allowed == masks.causal(positions, positions)).all()),
                         no_mask=no_bias and bool(allowed.all()))

    def keeping(self, chosen: torch.Tensor) -> "AttentionInputs":
        """These inputs with each query's keys cut to `chosen` (B, 1, T_q, T_kv): a layer's indexer top-k."""
        return self.given(self.allowed & chosen, self.alibi, plain_causal=False, no_mask=False, dtype=self.dtype,
                          rope=self.rope, q_scale=self.q_scale, layer_kv=self.layer_kv)

    def rows(self, start: int, stop: int) -> "AttentionInputs":
        """These inputs for query rows start:stop alone (their mask and bias made for those rows only)."""
        part = slice(start, stop)
        cached = self.__dict__  # a whole tensor already made is sliced, not made again
        allowed = cached["allowed"][..., part, :] if "allowed" in cached else self.keys(part)
        alibi = None if self.score_bias is None else (
            cached["alibi"][..., part, :] if "alibi" in cached else self.score_bias(part))
        return self.given(allowed, alibi, plain_causal=False, no_mask=self.no_mask, dtype=self.dtype,
                          rope=self.rope, q_scale=None if self.q_scale is None else self.q_scale[..., part, :],
                          layer_kv=self.layer_kv)

    def row_blocks(self, t_kv: int) -> list[tuple[int, int]]:
        """The blocks of query rows a layer works through: one, (0, T_q), while T_q x T_kv <= TILE_ENTRIES."""
        size = max(1, TILE_ENTRIES // max(t_kv, 1))
        return [(start, min(start + size, self.t_q)) for start in range(0, self.t_q, size)]


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    B, T, _ = x.shape
    return x.view(B, T, n_heads, -1).transpose(1, 2)  # (B, n_heads, T, d_head)


def merge_heads(z: torch.Tensor) -> torch.Tensor:
    B, H, T, d_head = z.shape
    return z.transpose(1, 2).reshape(B, T, H * d_head)  # (B, T, H * d_head) = concat(heads)


class Attention(nn.Module):
    """project -> (QK-norm) -> position -> (cache) -> attend -> (gate) -> W_o.

    ``projections=False`` builds the core alone, for q, k, v made elsewhere (see ``attend``): no W_q,
    W_k, W_v, and W_o is the identity. ``spec``, its layer's row of the plan, says whether RoPE turns it
    and whose K and V it reads: a layer that reuses an earlier one's has no W_k, W_v or k-norm.
    """

    def __init__(self, cfg: TransformerConfig, cross: bool = False, projections: bool = True,
                 spec: LayerSpec | None = None):
        super().__init__()
        H, G, d_head, d_v = cfg.n_heads, cfg.n_kv_heads, cfg.d_head, cfg.d_v
        self.n_heads, self.n_kv_heads, self.d_head = H, G, d_head
        self.scale = cfg.score_scale if cfg.score_scale is not None else 1 / math.sqrt(d_head)
        self.softcap = cfg.attn_softcap
        self.cross = cross  # queries from the decoder, keys and values from the encoder
        self.fused = True  # default fast path; recording switches to the explicit one
        # the axis along which the cached K and V grow, one per token (a paged cache stores them in blocks by it);
        # cross-attention keeps the encoder's, computed once, which never grow
        self.cache_token_dims = None if cross else (2, 2)
        self.layer = spec.index if spec is not None else None  # where later layers find its K and V (``layer_kv``)
        self.kv_from = spec.kv_from if spec is not None and spec.reuses_kv else None  # the layer whose K and V it reads
        makes_kv = projections and self.kv_from is None
        if projections:
            self.q_proj = nn.Linear(cfg.d_model, H * d_head, bias=cfg.has_qkv_bias)
            if makes_kv:
                self.k_proj = nn.Linear(cfg.d_model, G * d_head, bias=cfg.has_qkv_bias)
                if not cfg.k_eq_v:  # Gemma 4's global layers: x W_k serves as the values too
                    self.v_proj = nn.Linear(cfg.d_model, G * d_v, bias=cfg.has_qkv_bias)
            self.o_proj = nn.Linear(H * d_v, cfg.d_model, bias=cfg.bias)
        else:
            self.o_proj = nn.Identity()  # concat(heads) comes out as it is
        if projections and cfg.attn_gate:
            self.gate_proj = nn.Linear(cfg.d_model, H * d_v, bias=cfg.bias)
            self.hook_attn_gate = HookPoint("hook_attn_gate")
        qk_norm = cfg.row("qk_norm")
        self.qk_norm_per_head = qk_norm.per_head
        turned = spec is not None and spec.rotates  # RoPE turns this layer's q and k (never cross-attention's)
        if projections and qk_norm.normalises and (turned or not qk_norm.rope_layers_only):
            # an RMSNorm per head (width d_head) or over all heads; Llama 4's has no weight
            self.q_norm = (make_norm(cfg, d_head if qk_norm.per_head else H * d_head, "rmsnorm", hook=False)
                           if qk_norm.weighted else UnitRMS(cfg.norm_eps))
            self.hook_q_norm = HookPoint("hook_q_norm", qk_norm)
            if makes_kv:
                self.k_norm = (make_norm(cfg, d_head if qk_norm.per_head else G * d_head, "rmsnorm", hook=False)
                               if qk_norm.weighted else UnitRMS(cfg.norm_eps))
                self.hook_k_norm = HookPoint("hook_k_norm", qk_norm)
        if makes_kv and cfg.value_norm:  # Gemma 4: each value head at unit RMS, nothing to learn
            self.v_norm = UnitRMS(cfg.norm_eps)
            self.hook_v_norm = HookPoint("hook_v_norm")
        if cfg.sinks and not cross:
            self.sinks = nn.Parameter(torch.zeros(H))  # (H,) one learned logit per head
            self.hook_sink_share = HookPoint("hook_sink_share")
        self.dropout = cfg.dropout
        keys = {"T_kv": "S"} if cross else {}  # cross-attention's keys are the encoder's S positions
        self.hook_q = HookPoint("hook_q")
        if self.kv_from is None:
            self.hook_k = HookPoint("hook_k", **keys)
            self.hook_v = HookPoint("hook_v", **keys)
        if not cross:
            self.hook_rope_angles = HookPoint("hook_rope_angles")
            self.hook_rot_q = HookPoint("hook_rot_q")
            if self.kv_from is None:
                self.hook_rot_k = HookPoint("hook_rot_k")
            self.hook_alibi_bias = HookPoint("hook_alibi_bias")
            if cfg.row("position").learned_bias:  # T5's learned bias, the stack's one table read by bucket
                self.hook_rel_bias = HookPoint("hook_rel_bias")
            if cfg.attn_temperature_scale is not None and spec is not None and not spec.rotates:  # a NoPE layer
                self.hook_q_temperature = HookPoint("hook_q_temperature")
        self.hook_raw_scores = HookPoint("hook_raw_scores", **keys)
        if self.softcap is not None:
            self.hook_capped_scores = HookPoint("hook_capped_scores", **keys)
        self.hook_mask = HookPoint("hook_mask", **keys)
        self.hook_attn_scores = HookPoint("hook_attn_scores", **keys)
        self.hook_pattern = HookPoint("hook_pattern", **keys)
        self.hook_z = HookPoint("hook_z")
        if spec is not None and spec.selects_keys and not cross:
            # its queries read DeepSeek's q latent where MLA has one (q_rank), else the block's input
            self.indexer = LightningIndexer(cfg, spec, query_width=cfg.q_rank or cfg.d_model)
            self.hook_dense_pattern = HookPoint("hook_dense_pattern")
            self.hook_kept_mass = HookPoint("hook_kept_mass")

    def forward(self, x: torch.Tensor, inputs: AttentionInputs, context: torch.Tensor | None = None,
                cache: "dict | None" = None) -> torch.Tensor:
        q, k, v = self.project(x, inputs, context, cache)
        if hasattr(self, "indexer"):
            inputs = self.select_keys(x, q, k, inputs, cache)
        gate = self.hook_attn_gate(torch.sigmoid(self.gate_proj(x))) if hasattr(self, "gate_proj") else None
        return self.attend(q, k, v, inputs, gate=gate)

    def index_queries(self, x: torch.Tensor) -> torch.Tensor:
        """What the indexer's queries are projected from: the block's input (MLA: its q latent)."""
        return x

    def select_keys(self, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, inputs: AttentionInputs,
                    cache: "dict | None") -> AttentionInputs:
        """The inputs cut to the indexer's top-k keys. Asked for, the dense weights it departs from (every key the
        mask allows) and the share of their mass the chosen keys hold."""
        # a sort passes no gradient: the indexer reads detached inputs and learns from its own loss alone
        chosen, scores = self.indexer(x.detach(), self.index_queries(x).detach(), inputs, cache)  # (B, 1, T_q, T_kv)
        learning = self.training and torch.is_grad_enabled()
        if learning or wants_any(self.hook_dense_pattern, self.hook_kept_mass):
            dense = self.hook_dense_pattern(self.dense_weights(q, k, inputs))  # (B, H, T_q, T_kv)
            self.hook_kept_mass((dense * chosen).sum(dim=-1))  # (B, H, T_q): 1 = the chosen keys hold it all
        self.indexer.loss = (matching_loss(scores, dense, inputs.allowed) if learning
                             else torch.zeros((), device=x.device))
        return inputs.keeping(chosen)

    def dense_weights(self, q: torch.Tensor, k: torch.Tensor, inputs: AttentionInputs) -> torch.Tensor:
        """softmax weights (B, H, T_q, T_kv) over every key the mask allows, as the layer would without an indexer."""
        scores = (q * self.scale) @ self.repeat_kv(k).transpose(-2, -1)  # (B, H, T_q, T_kv)
        if self.softcap is not None:
            scores = self.softcap * torch.tanh(scores / self.softcap)
        return self.sink_softmax(scores + inputs.fused_bias)[0]  # mask (+ position bias): (B or 1, 1 or H, T_q, T_kv)

    def project(self, x: torch.Tensor, inputs: AttentionInputs, context: torch.Tensor | None,
                cache: "dict | None") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q (B, H, T_q, d_head); k (B, G, T_kv, d_head) and v (B, G, T_kv, d_v), cached ones first."""
        q = self.hook_q(split_heads(self.q_proj(x), self.n_heads))  # (B, H, T_q, d_head)
        if hasattr(self, "q_norm"):
            q = self.hook_q_norm(self.normalize(q, self.q_norm))
        if self.cross and cache is not None and self in cache:
            k, v = cache[self]  # the encoder's keys and values, computed at the first step
            return q, k, v
        if self.kv_from is not None:  # Gemma 4: an earlier layer's keys (turned, normed) and values, cached ones first
            k, v = inputs.layer_kv[self.kv_from]  # (B, G, T_kv, d_head), (B, G, T_kv, d_v)
            if inputs.rope is not None:
                q, _ = self.rotate(q, None, inputs)
            return self.with_temperature(q, inputs), k, v
        source = x if context is None else context  # cross-attention reads the encoder output
        k = self.hook_k(split_heads(self.k_proj(source), self.n_kv_heads))  # (B, G, T_kv, d_head)
        # K = V (k_eq_v): the values are the keys as projected, before the keys' norm and RoPE
        values = k if not hasattr(self, "v_proj") else split_heads(self.v_proj(source), self.n_kv_heads)
        v = self.hook_v(values)  # (B, G, T_kv, d_v)
        if hasattr(self, "v_norm"):
            v = self.hook_v_norm(self.v_norm(v))  # (B, G, T_kv, d_v)
        if hasattr(self, "k_norm"):
            k = self.hook_k_norm(self.normalize(k, self.k_norm))
        if inputs.rope is not None and not self.cross:
            q, k = self.rotate(q, k, inputs)
        if cache is not None:
            if not self.cross and self in cache:
                past_k, past_v = cache[self]
                k = torch.cat((past_k, k), dim=2)  # (B, G, T_past + T_q, d_head)
                v = torch.cat((past_v, v), dim=2)
            cache[self] = (k, v)
        if inputs.layer_kv is not None:  # a later layer may reuse them: the same tensors, never a copy
            inputs.layer_kv[self.layer] = (k, v)
        return self.with_temperature(q, inputs), k, v

    def with_temperature(self, q: torch.Tensor, inputs: AttentionInputs) -> torch.Tensor:
        """Llama 4's temperature on a layer without positions: q times its position's scale (``q_scale``)."""
        if inputs.q_scale is None:
            return q
        return self.hook_q_temperature((q * inputs.q_scale).to(q.dtype))  # (B, H, T_q, d_head)

    def normalize(self, t: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        """QK-norm: per head (Qwen3, Gemma 3), or over all heads at once (OLMo 2)."""
        if self.qk_norm_per_head:
            return norm(t)  # (B, heads, T, d_head)
        B, n, T, d = t.shape
        return norm(t.transpose(1, 2).reshape(B, T, n * d)).view(B, T, n, d).transpose(1, 2)

    def rotate(self, q: torch.Tensor, k: torch.Tensor | None,
               inputs: AttentionInputs) -> tuple[torch.Tensor, torch.Tensor | None]:
        """RoPE (or another rotating scheme) on the first d_rope dimensions of every q and k head; k is None in a
        layer whose keys an earlier layer turned (``kv_from``)."""
        turn = inputs.rope
        self.hook_rope_angles(turn.angles)
        q = self.hook_rot_q(apply_partial_rope(q, turn.q_cos, turn.q_sin))  # (B, H, T_q, d_head)
        if k is not None:
            k = self.hook_rot_k(apply_partial_rope(k, turn.k_cos, turn.k_sin))  # (B, G, T_q, d_head)
        return q, k

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, inputs: AttentionInputs,
               fused: bool | None = None, gate: torch.Tensor | None = None) -> torch.Tensor:
        """concat(heads) (* gate) @ W_o for q (B, H, T_q, d_head) and k, v (B, G, T_kv, d): (B, T_q, d_model).

        The five lines when fused is False or one of their hooks is recorded, else one SDPA kernel;
        fused=None follows the module's own setting (``Transformer.set_fused``). Soft-capped scores
        have no SDPA kernel: they always take the five lines (recording nothing unless asked), block by
        block of query rows on a long text.
        """
        reader = ATTENTION_READER.get()
        if reader is not None:
            reader(self, q, k, inputs)
        fused = self.fused if fused is None else fused
        recorded = not fused or wants_any(
            self.hook_raw_scores, self.hook_mask, self.hook_attn_scores, self.hook_pattern,
            *(() if self.cross else (self.bias_hook,)), *((self.hook_sink_share,) if self.has_sinks else ()))
        if recorded:
            return self.explicit_attention(q, k, v, inputs, gate)
        if self.softcap is None:
            return self.fused_attention(q, k, v, inputs, gate)
        blocks = inputs.row_blocks(k.shape[2])
        if len(blocks) == 1:
            return self.explicit_attention(q, k, v, inputs, gate)
        return torch.cat([self.explicit_attention(q[:, :, start:stop], k, v, inputs.rows(start, stop),
                                                  self.gate_rows(gate, start, stop))
                          for start, stop in blocks], dim=1)  # (B, T_q, d_model)

    def gate_rows(self, gate: torch.Tensor | None, start: int, stop: int) -> torch.Tensor | None:
        """What ``output`` multiplies query rows start:stop by: their rows of the gate (B, T_q, H * d_v)."""
        return None if gate is None else gate[:, start:stop]

    @property
    def has_sinks(self) -> bool:
        return hasattr(self, "sinks")

    @property
    def bias_hook(self) -> HookPoint:
        """Where the scores' position bias is recorded: T5's learned one, else ALiBi's."""
        return getattr(self, "hook_rel_bias", self.hook_alibi_bias)

    def position_bias(self, inputs: AttentionInputs) -> torch.Tensor:
        """The additive mask, plus the position bias (ALiBi's distance penalty, T5's learned buckets) when used."""
        mask = self.hook_mask(inputs.mask)  # (B or 1, 1, T_q, T_kv)
        if inputs.alibi is None:
            return mask
        bias = inputs.alibi  # (B or 1, H, T_q, T_kv): T5's learned buckets where the layer has them, else ALiBi's
        alibi = self.hook_rel_bias(bias) if hasattr(self, "hook_rel_bias") else self.hook_alibi_bias(bias)
        if mask is inputs.mask and alibi is inputs.alibi:
            return inputs.fused_bias  # the same sum, made once per forward pass for every layer
        return mask + alibi

    def add_mask(self, scores: torch.Tensor, inputs: AttentionInputs) -> torch.Tensor:
        """scores + the additive mask (+ ALiBi's bias), (B, H, T_q, T_kv).

        Added in place when no hook point keeps or replaces the scores that come in (their T_q x T_kv
        tensor is then this pass's own, and nothing reads it again): one such tensor, not two.
        """
        bias = self.position_bias(inputs)
        came_from = self.hook_capped_scores if self.softcap is not None else self.hook_raw_scores
        fits = bias.dtype == scores.dtype and torch.broadcast_shapes(bias.shape, scores.shape) == scores.shape
        return scores.add_(bias) if fits and not wants_any(came_from) else scores + bias

    def soft_cap(self, scores: torch.Tensor) -> torch.Tensor:
        """Gemma 2: c * tanh(scores / c) keeps every score inside (-c, c) before the mask."""
        if self.softcap is None:
            return scores
        return self.hook_capped_scores(self.softcap * (scores / self.softcap).tanh_())  # (B, H, T_q, T_kv)

    def softmax(self, scores: torch.Tensor) -> torch.Tensor:
        """softmax over the keys; with sinks, each head's sink logit joins the row and its share is dropped."""
        weights, sink_share = self.sink_softmax(scores)
        if sink_share is not None:
            self.hook_sink_share(sink_share)  # (B, H, T_q): what the sink took from each row
        return weights

    def sink_softmax(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The weights (B, H, T_q, T_kv), and with sinks the share (B, H, T_q) each row's sink took (else None)."""
        if not self.has_sinks:
            return scores.softmax(dim=-1), None
        B, H, T_q, _ = scores.shape
        sink = self.sinks.to(scores.dtype).view(1, H, 1, 1).expand(B, H, T_q, 1)  # (B, H, T_q, 1)
        weights = torch.cat((scores, sink), dim=-1).softmax(dim=-1)  # (B, H, T_q, T_kv + 1)
        return weights[..., :-1], weights[..., -1]  # rows sum to 1 - the sink's share

    def output(self, z: torch.Tensor, gate: torch.Tensor | None) -> torch.Tensor:
        """concat(heads) @ W_o; gated attention first multiplies it by sigmoid(x W_gate)."""
        heads = merge_heads(z)  # (B, T_q, H * d_v)
        return self.o_proj(heads if gate is None else heads * gate)  # (B, T_q, d_model)

    def explicit_attention(self, q, k, v, inputs: AttentionInputs, gate=None) -> torch.Tensor:
        """The five lines, each result through its hook point. Two choices keep the T_q x T_kv tensors few:
        1/sqrt(d_head) multiplies q (T_q x d_head numbers) rather than the scores, and the mask is added
        into the scores themselves when no hook point keeps them (``add_mask``)."""
        k, v = self.repeat_kv(k), self.repeat_kv(v)  # (B, H, T_kv, d): each group shares its kv head
        # --- the five lines of attention ---
        scores = self.hook_raw_scores((q * self.scale) @ k.transpose(-2, -1))  # (B, H, T_q, T_kv) = q.k / sqrt(d_head)
        scores = self.hook_attn_scores(self.add_mask(self.soft_cap(scores), inputs))  # + mask (+ ALiBi)
        weights = self.hook_pattern(self.softmax(scores))  # (B, H, T_q, T_kv)
        z = self.hook_z(F.dropout(weights, self.dropout, self.training) @ v)  # (B, H, T_q, d_v)
        return self.output(z, gate)  # concat(heads) @ W_o: (B, T_q, d_model)

    def fused_attention(self, q, k, v, inputs: AttentionInputs, gate=None) -> torch.Tensor:
        """The same computation in SDPA, which never stores the T_q x T_kv weights. Where is_causal (or no mask)
        suffices no mask is made at all; else each block of query rows gets its own, over the keys it can see."""
        if (inputs.plain_causal or inputs.no_mask) and not self.has_sinks:
            z = self.fused_heads(q, k, v, None, is_causal=inputs.plain_causal)  # (B, H, T_q, d_v)
        else:
            blocks = inputs.row_blocks(k.shape[2])
            if len(blocks) == 1:
                z = self.fused_heads(q, k, v, inputs.fused_bias)
            else:
                z = torch.cat([self.fused_heads(q[:, :, start:stop], *visible_keys(k, v, inputs.rows(start, stop)))
                               for start, stop in blocks], dim=2)  # (B, H, T_q, d_v)
        return self.output(self.hook_z(z), gate)  # (B, T_q, d_model)

    def fused_heads(self, q, k, v, bias: torch.Tensor | None, is_causal: bool = False) -> torch.Tensor:
        """weights @ V per head (B, H, T_q, d_v) in one SDPA call, for an additive bias (B or 1, 1 or H, T_q, T_kv)."""
        d_v = v.shape[-1]
        share_channel = (self.has_sinks and self.sinks.requires_grad and torch.is_grad_enabled()
                         and not (self.training and self.dropout))
        if self.has_sinks:  # the sink as one more key: q . 0 = 0, plus a bias of the sink's logit, and a zero value
            B, G, T_kv, _ = k.shape
            T_q = q.shape[2]
            k = torch.cat((k, k.new_zeros(B, G, 1, k.shape[-1])), dim=2)  # (B, G, T_kv + 1, d_head)
            v = torch.cat((v, v.new_zeros(B, G, 1, d_v)), dim=2)  # (B, G, T_kv + 1, d_v)
            if share_channel:  # one more value channel, 1 on the sink's key only: its output is the sink's share
                v = torch.cat((v, (torch.arange(T_kv + 1, device=v.device) == T_kv).to(v.dtype)
                               .view(1, 1, -1, 1).expand(B, G, -1, 1)), dim=-1)  # (B, G, T_kv + 1, d_v + 1)
            rows = bias.shape[0]  # 1 unless padding makes each row's mask its own
            bias = bias.expand(rows, self.n_heads, T_q, -1)
            sink = self.sinks.to(bias.dtype).view(1, -1, 1, 1).expand(rows, -1, T_q, 1)
            # a bias that needs a gradient sends SDPA to a kernel 3x slower; the share channel gives the sink its own
            bias = torch.cat((bias, sink.detach() if share_channel else sink), dim=-1)  # (B or 1, H, T_q, T_kv + 1)
        if v.shape[-1] != q.shape[-1]:  # the fast kernels want one head size: zeros pad the narrower side (the scale is explicit)
            width = max(v.shape[-1], q.shape[-1])
            # only the narrower side: F.pad by nothing would still copy the wider ones
            q, k, v = (t if t.shape[-1] == width else F.pad(t, (0, width - t.shape[-1])) for t in (q, k, v))  # (B, ., T, width)
        z = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias, is_causal=is_causal, scale=self.scale,
            dropout_p=self.dropout if self.training else 0.0,
            enable_gqa=self.n_kv_heads != self.n_heads)  # (B, H, T_q, width)
        if share_channel:  # d z / d sink = -share * z: added as a term whose value is 0
            sink_logit = self.sinks.view(1, -1, 1, 1)  # (1, H, 1, 1)
            share = z[..., d_v:d_v + 1]  # (B, H, T_q, 1)
            z = z[..., :d_v] - (sink_logit - sink_logit.detach()).to(z.dtype) * (share * z[..., :d_v]).detach()
        return z[..., :d_v]  # (B, H, T_q, d_v)

    def repeat_kv(self, kv: torch.Tensor) -> torch.Tensor:
        """(B, G, T, d) -> (B, H, T, d): kv head g serves query heads g*H/G ... (g+1)*H/G - 1."""
        if kv.shape[1] == self.n_heads:  # MHA: every query head has its own kv head already
            return kv
        return kv.repeat_interleave(self.n_heads // kv.shape[1], dim=1)


class LatentAttention(Attention):
    """Multi-head latent attention (DeepSeek-V2/V3): keys and values rebuilt per head from a latent.

    Each token is compressed into a latent c = norm(x W_down) of kv_rank numbers; k_h = c W_uk,h and
    v_h = c W_uv,h. At inference W_uk folds into the query (``absorbed_weights``); a rotation by position between
    the two would stop that fold, so every key gets one extra rotated part x W_rope of d_rope numbers, cached apart
    and shared by all heads. The cache holds only c and that rotated part.
    Layout of a q and k head here: its d_rope rotated dimensions first, then the d_head - d_rope others.
    """

    def __init__(self, cfg: TransformerConfig, spec: LayerSpec | None = None):
        super().__init__(cfg, projections=False, spec=spec)
        H, d_v = cfg.n_heads, cfg.d_v
        self.d_rope, self.d_nope, self.kv_rank = cfg.d_rope, cfg.d_head - cfg.d_rope, cfg.kv_rank
        if cfg.q_rank is not None:  # q from its own latent (DeepSeek-V3)
            self.q_down = nn.Linear(cfg.d_model, cfg.q_rank, bias=cfg.has_qkv_bias)
            self.q_down_norm = make_norm(cfg, cfg.q_rank, "rmsnorm", hook=False, eps=cfg.latent_norm_eps)
            self.q_up = nn.Linear(cfg.q_rank, H * cfg.d_head, bias=False)
        else:
            self.q_proj = nn.Linear(cfg.d_model, H * cfg.d_head, bias=cfg.has_qkv_bias)
        self.kv_down = nn.Linear(cfg.d_model, cfg.kv_rank, bias=cfg.has_qkv_bias)
        self.kv_norm = make_norm(cfg, cfg.kv_rank, "rmsnorm", hook=False, eps=cfg.latent_norm_eps)
        if self.d_rope:
            self.k_rope = nn.Linear(cfg.d_model, self.d_rope, bias=cfg.has_qkv_bias)
        self.k_up = nn.Linear(cfg.kv_rank, H * self.d_nope, bias=False)
        self.v_up = nn.Linear(cfg.kv_rank, H * d_v, bias=False)
        self.o_proj = nn.Linear(H * d_v, cfg.d_model, bias=cfg.bias)
        self.hook_latent = HookPoint("hook_latent")
        self.hook_k_rope = HookPoint("hook_k_rope")
        del self.hook_rot_k  # the rotated key is hook_k_rope, one for all heads
        self.cache_token_dims = (1, 2)  # the cached latent (B, T, kv_rank) and rotated key (B, 1, T, d_rope) grow by token

    def rotate(self, q, k_rope, inputs):
        turn = inputs.rope
        self.hook_rope_angles(turn.angles)
        q = self.hook_rot_q(apply_partial_rope(q, turn.q_cos, turn.q_sin))  # (B, H, T_q, d_head): its first d_rope dims turn
        return q, self.hook_k_rope(apply_rope(k_rope, turn.k_cos, turn.k_sin))  # (B, 1, T_q, d_rope)

    def queries(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "q_down"):
            return self.q_up(self.q_down_norm(self.q_down(x)))  # (B, T, H * d_head)
        return self.q_proj(x)

    def index_queries(self, x: torch.Tensor) -> torch.Tensor:
        """DeepSeek-V3.2's indexer reads the q latent, RMSNorm(x W_q_down) (B, T, q_rank), where there is one; made
        again here, one small product, so that queries() stays one expression."""
        return self.q_down_norm(self.q_down(x)) if hasattr(self, "q_down") else x

    def project(self, x, inputs, context, cache):
        q = self.hook_q(split_heads(self.queries(x), self.n_heads))  # (B, H, T_q, d_head)
        latent = self.hook_latent(self.kv_norm(self.kv_down(x)))  # (B, T_q, kv_rank): what the cache keeps
        k_rope = self.k_rope(x)[:, None] if self.d_rope else x.new_zeros(*x.shape[:2], 0)[:, None]  # (B, 1, T_q, d_rope)
        if inputs.rope is not None:
            q, k_rope = self.rotate(q, k_rope, inputs)
        if cache is not None:
            if self in cache:
                past_latent, past_rope = cache[self]
                latent = torch.cat((past_latent, latent), dim=1)  # (B, T_kv, kv_rank)
                k_rope = torch.cat((past_rope, k_rope), dim=2)  # (B, 1, T_kv, d_rope)
            cache[self] = (latent, k_rope)
        k_nope = split_heads(self.k_up(latent), self.n_heads)  # (B, H, T_kv, d_head - d_rope)
        k = torch.cat((k_rope.expand(-1, self.n_heads, -1, -1), k_nope), dim=-1)  # (B, H, T_kv, d_head)
        v = split_heads(self.v_up(latent), self.n_heads)  # (B, H, T_kv, d_v)
        return self.with_temperature(q, inputs), self.hook_k(k), self.hook_v(v)

    def absorbed_weights(self, q: torch.Tensor, latent: torch.Tensor, k_rope: torch.Tensor,
                         inputs: AttentionInputs) -> torch.Tensor:
        """The same softmax weights without ever building a key: W_uk folds into the query (inference form).

        q (B, H, T_q, d_head) rotated; latent (B, T_kv, kv_rank); k_rope (B, 1, T_kv, d_rope) rotated.
        q_h . k_h = q_rope . k_rope + q_nope,h . (c W_uk,h) = q_rope . k_rope + (q_nope,h W_uk,h^T) . c
        """
        q_rope, q_nope = q.split((self.d_rope, self.d_nope), dim=-1)
        w_uk = self.k_up.weight.view(self.n_heads, self.d_nope, self.kv_rank)  # (H, d_nope, kv_rank)
        q_latent = torch.einsum("bhtd,hdr->bhtr", q_nope, w_uk)  # (B, H, T_q, kv_rank): a query in latent space
        scores = (q_latent @ latent[:, None].transpose(-2, -1) + q_rope @ k_rope.transpose(-2, -1)) * self.scale
        return self.softmax(self.soft_cap(scores) + self.position_bias(inputs))  # (B, H, T_q, T_kv)


def visible_keys(k: torch.Tensor, v: torch.Tensor, part: AttentionInputs
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """k, v and the bias of a block of query rows, cut to the span of keys any of its rows sees (a window's or a
    chunk's keys, not the whole text); the whole span where some row sees no key at all, so it reads as before."""
    allowed = part.allowed.reshape(-1, part.allowed.shape[-1])  # (B * rows, T_kv)
    seen = allowed.any(dim=0).nonzero()
    if not bool(allowed.any(dim=-1).all()) or len(seen) == 0:
        return k, v, part.fused_bias
    first, last = int(seen[0]), int(seen[-1]) + 1
    return k[:, :, first:last], v[:, :, first:last], part.fused_bias[..., first:last]


# the attention module of each KV-heads kind (the rows of AXES["kv_heads"], ``cfg.attention_kind``)
KV_HEAD_MODULES: dict[str, type[Attention]] = {"MHA": Attention, "GQA": Attention, "MQA": Attention,
                                               "MLA": LatentAttention}


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
