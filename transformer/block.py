"""One block: attention and FFN sublayers, each wrapped in a residual connection and norms.

Where the norms sit is the layer's row on the placement axis (transformer/axes/stack.py), which its row of the
layer plan names (``LayerSpec.placement``: norm_position, or linear_norm_position on a layer that keeps a state):

Pre-norm (GPT-2, LLaMA):        x = x + sublayer(norm(x))
Post-norm (2017, BERT):         x = norm(x + sublayer(x))
Sandwich (Gemma 2, Gemma 3):    x = x + norm_post(sublayer(norm(x)))
After the sublayer (OLMo 2):    x = x + norm_post(sublayer(x))
Normed skip (MiniMax-01):       x = norm(x) + sublayer(norm(x))
Parallel (Falcon, PaLM, NeoX):  x = x + attn(norm(x)) + ffn(norm(x))   (one norm, or one per sublayer)
Decoder blocks of an encoder-decoder add cross-attention between the two.
"""
from __future__ import annotations

import torch
from torch import nn

from .attention import KV_HEAD_MODULES, Attention, AttentionInputs
from .compressed_attention import CompressedAttention
from .config import TransformerConfig
from .ffn import make_ffn
from .hooks import HookPoint
from .hyper_connections import HyperConnection, mix
from .layer_plan import LayerSpec
from .linear_attention import STATE_MODULES, StateInputs
from .norms import make_norm
from .per_layer import PerLayerInput
from .short_conv import ShortConv

# the module of each attention kind (the rows of AXES["attention"]) for one layer of the plan, (cfg, spec) -> module:
# softmax attention as the KV-heads kind builds it, with its layer's positions and K/V source; a kind that keeps a
# state is built alike on every layer, and so is the gated short convolution (LFM2)
ATTENTION_MODULES = {"softmax": lambda cfg, spec: KV_HEAD_MODULES[cfg.attention_kind](cfg, spec=spec),
                     **{kind: (lambda cfg, spec, build=build: build(cfg, layer=spec.index))
                        for kind, build in STATE_MODULES.items()},
                     "short-conv": lambda cfg, spec: ShortConv(cfg, "short-conv")}


def residual(x: torch.Tensor, sublayer, norm_in: nn.Module | None, norm_out: nn.Module | None,
             norm_sum: nn.Module | None, dropout: nn.Module, skips_normed: bool = False) -> torch.Tensor:
    """x + sublayer(x), with the norms the placement puts before it, after it, or on the sum; `skips_normed`: the
    residual path carries the normed input instead of x (MiniMax-01)."""
    normed = norm_in(x) if norm_in is not None else x  # (B, T, d_model)
    out = sublayer(normed)  # (B, T, d_model)
    if norm_out is not None:
        out = norm_out(out)
    x = (normed if skips_normed else x) + dropout(out)
    return norm_sum(x) if norm_sum is not None else x


class Block(nn.Module):
    """One layer, built from its row of the layer plan (``cfg.layer_plan()[i]``)."""

    def __init__(self, cfg: TransformerConfig, spec: LayerSpec, cross: bool = False):
        super().__init__()
        placement = spec.placement
        self.parallel = cfg.row("block").parallel
        self.has_cross = cross
        self.spec = spec  # its attention kind, window, positions, the layer whose K/V it reads, its norms' placement
        self.layer_cfg = cfg.layer_config(spec)  # its own sizes (Gemma 4's global layers), which its inputs share
        # DeepSeek-V4's layers (compress_layers) all take its attention: a window beside pooled blocks
        self.attn = (CompressedAttention(self.layer_cfg, spec) if spec.compresses else
                     ATTENTION_MODULES[spec.kind](self.layer_cfg, spec))
        # The norms, declared where they are used: ln1 around attention, ln_cross around cross-attention, ln2
        # around the FFN, each on the sublayer's input (pre, sandwich) or on the sum (post); ln*_post on its output.
        if self.parallel:  # one norm both sublayers read, or one each (GPT-NeoX)
            self.ln1 = make_norm(cfg)
            self.ln2 = make_norm(cfg) if cfg.parallel_norms == 2 else None
        else:
            wraps, after = placement.before or placement.on_sum, placement.after
            self.ln1 = make_norm(cfg) if wraps else None
            self.ln1_post = make_norm(cfg) if after else None
            if cross:
                self.ln_cross = make_norm(cfg) if wraps else None
                self.ln_cross_post = make_norm(cfg) if after else None
            self.ln2 = make_norm(cfg) if wraps else None
            self.ln2_post = make_norm(cfg) if after else None
            if cfg.hyper_streams == 1:  # several streams have no one residual to record: hook_hyper_* instead
                self.hook_resid_mid = HookPoint("hook_resid_mid")
        self.on_sum, self.skips_normed = placement.on_sum, placement.skips_normed
        if cross:
            self.cross_attn = Attention(cfg, cross=True)
            self.hook_cross_attn_out = HookPoint("hook_cross_attn_out")
            self.hook_resid_cross = HookPoint("hook_resid_cross")
        self.mlp = make_ffn(self.layer_cfg, spec.index)  # Gemma 4's shared layers may have a wider one
        # Gemma 4: after the FFN, the layer's own embedding of each token through a gate; then the stream times a scalar
        self.per_layer = PerLayerInput(cfg) if cfg.per_layer_dim is not None else None
        if self.per_layer is not None:
            self.hook_per_layer_out = HookPoint("hook_per_layer_out")
        self.layer_scalar = nn.Parameter(torch.ones(1)) if cfg.layer_scalar else None  # (1,)
        self.dropout = nn.Dropout(cfg.dropout)
        # hyper-connections: the residual is hyper_streams streams, mixed around each sublayer (DeepSeek-V4)
        self.attn_hyper = HyperConnection(cfg) if cfg.hyper_streams > 1 else None
        self.mlp_hyper = HyperConnection(cfg) if cfg.hyper_streams > 1 else None
        if cfg.hyper_streams == 1:
            self.hook_resid_pre = HookPoint("hook_resid_pre")
            self.hook_resid_post = HookPoint("hook_resid_post")
        self.hook_attn_out = HookPoint("hook_attn_out")
        self.hook_mlp_out = HookPoint("hook_mlp_out")

    @property
    def window(self) -> int | None:
        return self.spec.window

    def around(self, name: str, x: torch.Tensor, sublayer) -> torch.Tensor:
        """The residual step of one sublayer with its norms (``name``: ln1, ln_cross or ln2)."""
        norm, norm_out = getattr(self, name), getattr(self, name + "_post")
        return residual(x, sublayer, None if self.on_sum else norm, norm_out, norm if self.on_sum else None,
                        self.dropout, self.skips_normed)

    def forward(self, x: torch.Tensor, inputs: AttentionInputs | StateInputs, cross_inputs: AttentionInputs | None = None,
                memory: torch.Tensor | None = None, cache: dict | None = None,
                per_layer_input: torch.Tensor | None = None, token_ids: torch.Tensor | None = None) -> torch.Tensor:
        """`per_layer_input` (B, T, per_layer_dim): this layer's own embedding of the tokens (Gemma 4), else None;
        `token_ids` (B, T) for a MoE that routes by them (hash_layers)."""
        if self.attn_hyper is not None:
            return self.forward_streams(x, inputs, cache, token_ids)
        x = self.hook_resid_pre(x)  # (B, T, d_model)
        if self.parallel:
            h = self.ln1(x)
            attn = self.hook_attn_out(self.attn(h, inputs, cache=cache))
            mlp = self.hook_mlp_out(self.ffn(self.ln2(x) if self.ln2 is not None else h, token_ids))
            return self.hook_resid_post(self.finish(x + self.dropout(attn) + self.dropout(mlp), per_layer_input))
        x = self.hook_resid_mid(self.around("ln1", x, lambda h: self.hook_attn_out(self.attn(h, inputs, cache=cache))))
        if self.has_cross:
            x = self.hook_resid_cross(self.around(
                "ln_cross", x, lambda h: self.hook_cross_attn_out(self.cross_attn(h, cross_inputs, memory, cache))))
        x = self.around("ln2", x, lambda h: self.hook_mlp_out(self.ffn(h, token_ids)))  # (B, T, d_model)
        return self.hook_resid_post(self.finish(x, per_layer_input))

    def ffn(self, h: torch.Tensor, token_ids: torch.Tensor | None) -> torch.Tensor:
        """The FFN sublayer; a MoE layer that routes by token id (``hash_layers``) reads the ids too."""
        return self.mlp(h, token_ids) if getattr(self.mlp, "hashes", False) else self.mlp(h)

    def forward_streams(self, streams: torch.Tensor, inputs: AttentionInputs, cache: dict | None,
                        token_ids: torch.Tensor | None = None) -> torch.Tensor:
        """The block on hyper_streams residual streams (B, T, n, d_model): each pre-norm sublayer reads a weighted
        sum of them, and its output and the streams, mixed by a doubly stochastic matrix, become the new streams."""
        read, post, comb = self.attn_hyper(streams)  # (B, T, d_model), (B, T, n), (B, T, n, n)
        out = self.hook_attn_out(self.attn(self.ln1(read), inputs, cache=cache))  # (B, T, d_model)
        streams = mix(streams, self.dropout(out), post, comb)  # (B, T, n, d_model)
        read, post, comb = self.mlp_hyper(streams)
        out = self.hook_mlp_out(self.ffn(self.ln2(read), token_ids))  # (B, T, d_model)
        return mix(streams, self.dropout(out), post, comb)  # (B, T, n, d_model)

    def finish(self, x: torch.Tensor, per_layer_input: torch.Tensor | None) -> torch.Tensor:
        """Gemma 4's last steps: its per-layer input through the gate onto the stream, then the stream times the
        layer's scalar. (B, T, d_model); x itself where neither is switched on."""
        if self.per_layer is not None:
            x = x + self.hook_per_layer_out(self.per_layer(x, per_layer_input))  # (B, T, d_model)
        return x if self.layer_scalar is None else x * self.layer_scalar  # (B, T, d_model)


