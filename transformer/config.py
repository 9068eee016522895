"""One dataclass describes every model: its choices on every axis, its sizes, its layer plan.

Every choice is a plain string, a key of its axis in the table of choices (transformer/axes), so the
app lists the options from the table and a URL can carry a whole configuration. The table's rows
check the config, and callers ask a row's flags (``cfg.row("position").rotates_qk``), never the name.
Impossible combinations raise ``ValueError`` at construction, naming the numbers and the fix.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Literal

from .axes import AXES, FIELD_AXES, Choice, divisors, keys
from .layer_plan import LayerSpec, build_plan

# each choice field's valid strings are the keys of its axis in the table (transformer/axes)
Arch = Literal[keys("arch")]
Position = Literal[keys("position")]
RopeScaling = Literal[keys("rope_scaling")]
Norm = Literal[keys("norm")]
NormPosition = Literal[keys("norm_position")]
QKNorm = Literal[keys("qk_norm")]
FFN = Literal[keys("ffn")]
Router = Literal[keys("router")]
ExpertActivation = Literal[keys("expert_activation")]
AttentionPattern = Literal[keys("attention_pattern")]
GeluApproximate = Literal[keys("gelu_approximate")]
DType = Literal[keys("dtype")]
LinearKind = Literal[tuple(key for key, row in AXES["attention"].choices.items() if row.keeps_state)]
FeatureMap = Literal[keys("feature_map")]


def choices(field: str) -> tuple[str, ...]:
    """The valid strings of a choice field, e.g. ``choices("position")``."""
    return keys(FIELD_AXES[field])


def _round_up(n: int, multiple: int) -> int:
    return multiple * math.ceil(n / multiple)


@dataclass
class TransformerConfig:
    arch: Arch = "decoder"
    vocab_size: int = 128
    d_model: int = 64
    n_heads: int = 4
    n_kv_heads: int | None = None  # None = n_heads (MHA); 1 = MQA; 1 < G < H = GQA
    n_layers: int = 2
    d_ff: int | None = None  # None = 4 * d_model (MLP) or about 8/3 * d_model (gated FFNs, MoE)
    max_len: int = 512
    position: Position = "rope"
    norm: Norm = "rmsnorm"
    norm_position: NormPosition = "pre"
    ffn: FFN = "swiglu"
    n_experts: int = 4
    top_k: int = 2
    sliding_window: int | None = None  # a query sees at most W keys, itself included (local layers only, see layer_pattern)
    attention_pattern: AttentionPattern = "dense"  # a sparse pattern in every self-attention (masks.sparse)
    pattern_size: int = 8  # the sparse pattern's stride, block or local window
    n_global: int = 1  # "global-local": the first tokens that see and are seen by every token
    dropout: float = 0.0
    # Details real model families need (see README, "Configuration fields").
    bias: bool = False  # biases in the attention and FFN projections (GPT-2, BERT, BLOOM)
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    gelu_approximate: GeluApproximate = "none"  # "tanh" for GPT-2 and BLOOM
    parallel_block: bool = False  # attention and FFN read the same norm (Falcon, PaLM)
    embed_norm: bool = False  # a LayerNorm right after the embeddings (BERT, BLOOM)
    tie_embeddings: bool = True  # the output head reuses the token embedding matrix
    head_transform: bool = False  # dense + activation + norm before the head (BERT's MLM head)
    head_bias: bool = False  # a bias on the output logits (BERT)
    final_norm: bool | None = None  # a norm after the last block; None = unless the blocks end on a norm (post-norm)
    dtype: DType = "float32"
    # --- the attention of 2024-2026 (docs/architecture.md, "Modern variants") ---
    head_dim: int | None = None  # None = d_model / n_heads; Qwen3 and Gemma choose it on its own
    v_head_dim: int | None = None  # None = head_dim; MLA's values may be narrower than its q and k
    qkv_bias: bool | None = None  # biases on q, k, v only; None = as `bias` (Qwen2: True with bias=False)
    attn_gate: bool = False  # gated attention: concat(heads) * sigmoid(x W_gate) before W_o
    layer_pattern: str = "uniform"  # which layers are local (sliding_window) and which global: see layer_plan.py
    nope_layers: str = "none"  # layers that leave RoPE out: "none", "every 4" (Llama 4, SmolLM3) or "3, 7"
    attention_chunk: int | None = None  # chunked layers see only the keys of their own chunk this long (Llama 4: 8192)
    chunked_layers: str = "all"  # the layers attention_chunk cuts: "all", "rope" (those RoPE turns: Llama 4), "0, 1"
    kv_shared_layers: str = "none"  # layers reusing an earlier layer's K and V: "none", "last N" (Gemma 4), "5 from 3"
    # --- Gemma 4 (docs/architecture.md, "Modern variants"; transformer/per_layer.py) ---
    per_layer_dim: int | None = None  # per-layer input embeddings: each layer adds a gated vector this wide (Gemma 4: 256)
    k_eq_v: bool = False  # one projection gives K and V on the global layers (no window) and in cross-attention
    value_norm: bool = False  # each value head divided by its RMS, no weight (Gemma 4)
    layer_scalar: bool = False  # each block's output stream times a learned number (Gemma 4)
    global_head_dim: int | None = None  # the global layers' head width; None = head_dim (Gemma 4: 512 beside 256)
    global_kv_heads: int | None = None  # the global layers' kv heads; None = n_kv_heads (Gemma 4 31B: 4 beside 16)
    rope_fraction: float = 1.0  # rope_scaling="proportional": the share of each head's frequencies that turn (0.25)
    wide_shared_ffn: bool = False  # the layers that reuse K and V (kv_shared_layers) have an FFN 2 x d_ff wide
    attn_temperature_scale: float | None = None  # Llama 4 (0.1): q on NoPE layers times 1 + s log(1 + floor((t+1)/f))
    attn_temperature_floor: float = 8192.0  # that f: the temperature steps up once every f positions (Llama 4: 8192)
    rope_dim: int | None = None  # dimensions of each head RoPE rotates, the first ones (None = all; NeoX: d_head / 4)
    rope_scaling: RopeScaling = "none"  # stretching RoPE past its trained length
    rope_factor: float = 1.0  # how many times longer than rope_original_max_len
    rope_original_max_len: int | None = None  # the context RoPE was trained on; None = max_len / rope_factor
    rope_low_freq_factor: float = 1.0  # LLaMA 3: wavelengths above original / low_freq_factor are interpolated
    rope_high_freq_factor: float = 4.0  # LLaMA 3: wavelengths below original / high_freq_factor are kept
    yarn_beta_fast: float = 32.0  # YaRN: dimensions turning more than beta_fast times over the context are kept
    yarn_beta_slow: float = 1.0  # YaRN: dimensions turning less than beta_slow times are interpolated
    yarn_attention_factor: float | None = None  # YaRN's scale on cos and sin; None = 0.1 ln(factor) + 1
    yarn_truncate: bool = True  # YaRN: round the ramp's ends to whole dimensions (gpt-oss: False)
    rope_local_theta: float | None = None  # the local layers' RoPE base (Gemma 3: 10k local, 1M global)
    qk_norm: QKNorm = "none"  # an RMSNorm on q and k: per head (Qwen3, Gemma 3) or over the projection (OLMo 2)
    attn_softcap: float | None = None  # scores -> c * tanh(scores / c) before the mask (Gemma 2)
    logit_softcap: float | None = None  # the same on the final logits (Gemma 2)
    relative_buckets: int = 32  # position="t5": learned bias rows per head (an encoder splits them by sign)
    relative_max_distance: int = 128  # position="t5": distances from here on share the last bucket
    head_input_scale: float | None = None  # the last hidden state times this before the head (T5 tied: d_model**-0.5)
    score_scale: float | None = None  # multiplies q.k; None = 1 / sqrt(head_dim) (Gemma: query_pre_attn_scalar^-0.5)
    sinks: bool = False  # a learned logit per head joins each row's softmax and is dropped (gpt-oss)
    kv_rank: int | None = None  # multi-head latent attention: K and V come from a latent of this width (DeepSeek)
    q_rank: int | None = None  # MLA: q from its own low-rank latent too (None = one full projection)
    latent_norm_eps: float | None = None  # MLA: its latents' RMSNorm eps; None = norm_eps (Kimi Linear: 1e-6 vs 1e-5)
    norm_plus_one: bool = False  # RMSNorm scales by (1 + w), w starting at 0 (Gemma)
    scale_embeddings: bool = False  # embeddings times sqrt(d_model) (Gemma)
    parallel_norms: int = 1  # a parallel block's norms: 1 shared (Falcon 7B, PaLM) or 2, one per sublayer (GPT-NeoX)
    d_expert: int | None = None  # an MoE expert's hidden width; None = d_ff
    n_shared_experts: int = 0  # experts every token passes through besides its top-k (DeepSeek)
    router: Router = "softmax"  # softmax over experts (Mixtral), or a sigmoid per expert (DeepSeek-V3)
    router_norm: bool = True  # renormalise the chosen experts' weights to sum to 1
    routed_scale: float = 1.0  # the routed experts' sum is multiplied by this (DeepSeek-V3: 2.5)
    n_expert_groups: int = 1  # DeepSeek-V3: experts in groups, a token picks top_groups groups first
    top_groups: int = 1
    expert_activation: ExpertActivation = "swiglu"  # clamped-swiglu: gpt-oss's experts
    expert_limit: float = 7.0  # clamped-swiglu: the gate's upper clamp and the up projection's ±clamp (gpt-oss: 7)
    first_dense_layers: int = 0  # the first layers keep a dense SwiGLU of d_ff (DeepSeek-V3: 3)
    shared_expert_gate: bool = False  # the shared experts' output times sigmoid(x W_shared_gate) (Qwen3-Next)
    hash_layers: int = 0  # the first MoE layers choose experts by a fixed table of token ids (DeepSeek-V4: 3)
    moe_layers: str = "all"  # the layers past first_dense_layers that route: "all", "every 2" (Llama 4 Maverick), "1, 3"
    router_scales_input: bool = False  # the router's weight scales the token before its expert, expert(g·x) (Llama 4)
    # --- keys a lightning indexer chooses (DeepSeek-V3.2, GLM-5: transformer/indexer.py) ---
    index_top_k: int | None = None  # each query attends only to the k earlier keys the indexer scores highest; None = all
    index_heads: int = 4  # the indexer's small heads, each scoring every key by ReLU(q·k) (DeepSeek-V3.2: 64)
    index_head_dim: int = 32  # an indexer head's width, its first d_rope dimensions turned by RoPE (DeepSeek-V3.2: 128)
    # DeepSeek-V4's attention (transformer/compressed_attention.py) on every layer: "none", or one entry per layer,
    # "window", "indexed N" (blocks of N pooled keys, index_top_k chosen) or "pooled N" (see layer_plan.py)
    compress_layers: str = "none"
    compress_rope_theta: float | None = None  # the RoPE base of the layers that pool blocks; None = rope_theta (160000)
    o_groups: int | None = None  # DeepSeek-V4: heads in this many groups, each projected to o_rank first (8)
    o_rank: int | None = None  # the width each group of heads is projected to before W_o (DeepSeek-V4: 1024)
    # hyper-connections (transformer/hyper_connections.py): the residual widened into this many streams, mixed before
    # and after each sublayer by doubly stochastic matrices (DeepSeek-V4: 4); 1 = the ordinary residual
    hyper_streams: int = 1
    hyper_sinkhorn_iters: int = 20  # the Sinkhorn iterations that make each mixing matrix doubly stochastic
    hyper_eps: float = 1e-6  # the floor added to the mixing weights and to the Sinkhorn sums
    # --- attention that keeps a state (transformer/linear_attention.py; Hugging Face: layer_types, linear_*) ---
    attention_layers: str = "softmax"  # each layer's kind: one kind for all, "3:1" (Qwen3.5) or a comma list (layer_plan.py)
    linear_kind: LinearKind = "gated-deltanet"  # the kind of the linear layers "N:M" and "linear_attention" name
    linear_chunk_size: int = 64  # tokens per chunk of the chunked form (the result does not depend on it)
    linear_key_heads: int | None = None  # q and k heads of a linear layer; None = linear_value_heads (Qwen3-Next: 16)
    linear_value_heads: int | None = None  # its v heads, one state each; None = n_heads (Qwen3-Next: 32)
    linear_key_head_dim: int | None = None  # a state's rows; None = d_head (Qwen3-Next: 128)
    linear_value_head_dim: int | None = None  # a state's columns; None = d_head (Qwen3-Next: 128)
    linear_feature_map: FeatureMap = "elu+1"  # "linear" layers: φ on q and k (elu+1, or the identity)
    linear_conv_size: int = 4  # the short convolution's kernel, the current token included (Qwen3-Next: 4)
    delta_beta_max: float = 1.0  # the delta rule's β = delta_beta_max * sigmoid(x W_b); 2 in OLMo hybrid
    linear_norm_position: NormPosition | None = None  # linear layers' block norms; None = norm_position (OLMo hybrid: pre)
    linear_read_norm_eps: float | None = None  # the linear layers' read norm's eps; None = norm_eps (OLMo hybrid: 1e-5)
    linear_sigmoid_gate: bool = False  # decayed-linear layers: the normed read times sigmoid(x W_g) (lightning, MiniMax-01)
    # decayed-linear layers in MiniMax-01's lightning form: SiLU on q, k, v; q unscaled; head h of layer l decays by
    # exp(-(2^(-8/H))^(h+1) (1 - l/(L-1))); one RMSNorm over all heads
    linear_lightning: bool = False

    def __post_init__(self) -> None:
        for field, axis in FIELD_AXES.items():
            AXES[axis].row(getattr(self, field))  # an unknown choice raises, listing the valid ones
        for field in ("vocab_size", "d_model", "n_heads", "n_layers", "max_len"):
            if int(getattr(self, field)) < 1:
                raise ValueError(f"{field}={getattr(self, field)} must be at least 1")
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                f"pick n_heads among {divisors(self.d_model)}, a d_model that is a multiple of {self.n_heads}, "
                "or set head_dim"
            )
        for field in ("head_dim", "v_head_dim"):
            if getattr(self, field) is not None and getattr(self, field) < 1:
                raise ValueError(f"{field}={getattr(self, field)} must be at least 1, or None for the default")
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if self.n_kv_heads < 1:
            raise ValueError(f"n_kv_heads={self.n_kv_heads} must be at least 1 (1 = MQA)")
        if self.n_kv_heads > self.n_heads:
            raise ValueError(
                f"n_kv_heads={self.n_kv_heads} is more than n_heads={self.n_heads}; "
                f"use at most {self.n_heads} kv heads (= MHA)"
            )
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads}; "
                f"each kv head must serve the same number of query heads: pick n_kv_heads among {divisors(self.n_heads)}"
            )
        if self.rope_factor < 1:
            raise ValueError(f"rope_factor={self.rope_factor} must be at least 1: scaling stretches RoPE to a context "
                             "rope_factor times longer than the one it was trained on")
        for axis in ("position", "rope_scaling", "kv_heads", "ffn"):
            self._check_row(axis)
        if self.n_shared_experts < 0:
            raise ValueError(f"n_shared_experts={self.n_shared_experts} must be 0 or more")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError(f"sliding_window={self.sliding_window} must be at least 1 (a query always sees itself), or None for no window")
        if self.sliding_window is not None and self.sliding_window > self.max_len:
            raise ValueError(f"sliding_window={self.sliding_window} is larger than max_len={self.max_len}, so no "
                             f"query could ever miss a key; use a window of at most {self.max_len}, or None")
        if self.attention_chunk is not None and not 1 <= self.attention_chunk <= self.max_len:
            raise ValueError(f"attention_chunk={self.attention_chunk} must be from 1 (a query sees itself alone) to "
                             f"max_len={self.max_len} (a longer chunk never cuts); use a chunk in that range, or None")
        self._check_row("attention_pattern")
        AXES["feature_map"].row(self.linear_feature_map, "linear_feature_map")
        if self.linear_norm_position is not None:
            AXES["norm_position"].row(self.linear_norm_position, "linear_norm_position")
        # a pattern that does not parse or does not fit the model, or a setting no layer of it reads, raises here
        plan = self.layer_plan()
        # (first_dense_layers = n_layers keeps every layer dense on purpose: a routed model's dense control)
        if self.row("ffn").routed and self.first_dense_layers < self.n_layers and not any(s.routed for s in plan):
            raise ValueError(f"moe_layers={self.moe_layers!r} with first_dense_layers={self.first_dense_layers} leaves "
                             f"none of the n_layers={self.n_layers} layers routed; name a layer from "
                             f"{self.first_dense_layers} on, or set ffn to a dense kind")
        for kind in dict.fromkeys(spec.kind for spec in plan):  # each kind's own check, once
            check = AXES["attention"].row(kind).check
            if check is not None:
                check(self)
        self._check_row("qk_norm")
        for row in AXES["mask"].choices.values():  # a mask a field switches on for every softmax layer (index_top_k)
            if row.switch is not None and getattr(self, row.switch) is not None:
                row.check(self)
        for field in ("attn_softcap", "logit_softcap", "score_scale", "head_input_scale", "attn_temperature_scale",
                      "latent_norm_eps"):
            value = getattr(self, field)
            if value is not None and not value > 0:
                raise ValueError(f"{field}={value} must be greater than 0, or None to switch it off")
        if self.attn_temperature_scale is None and self.attn_temperature_floor != 8192.0:
            raise ValueError(f"attn_temperature_floor={self.attn_temperature_floor} is a setting of the temperature "
                             "by position, which is off; set attn_temperature_scale (Llama 4: 0.1) or "
                             "attn_temperature_floor=8192.0")
        for row in AXES["scores"].choices.values():  # what a switched-on choice of the scores needs from the rest
            if row.check is not None and getattr(self, row.switch) not in (None, False):
                row.check(self)
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout={self.dropout} must be in [0, 1)")
        if self.d_ff is None:
            self.d_ff = _derived_d_ff(self.d_model, self.ffn)
        if self.d_ff < 1:
            raise ValueError(f"d_ff={self.d_ff} must be at least 1")
        placement = self.row("norm_position")
        if self.parallel_block and (placement.after or placement.on_sum or placement.skips_normed):
            raise ValueError(f"parallel_block=True needs norm_position='pre' (now {self.norm_position!r}): "
                             "attention and FFN read normalised copies of one input")
        if self.parallel_norms not in (1, 2):
            raise ValueError(f"parallel_norms={self.parallel_norms} must be 1 (one norm both sublayers read) or 2")
        if self.parallel_block and self.row("arch").cross:
            raise ValueError("parallel_block=True is for decoder-only or encoder-only stacks (the encoder-decoder has a "
                             "cross-attention step in between): set arch='decoder' or 'encoder', or parallel_block=False")
        self._check_gemma4()
        if self.norm_plus_one and self.row("norm").centres:
            raise ValueError(f"norm_plus_one=True is Gemma's RMSNorm scale (1 + w); it needs norm='rmsnorm', not {self.norm!r}")

    def _check_gemma4(self) -> None:
        """Per-layer embeddings, K = V, the value norm and the global layers' own head sizes (Gemma 4)."""
        for field in ("per_layer_dim", "global_head_dim", "global_kv_heads"):
            if getattr(self, field) is not None and getattr(self, field) < 1:
                raise ValueError(f"{field}={getattr(self, field)} must be at least 1, or None to switch it off")
        if self.per_layer_dim is not None and self.row("arch").cross:
            raise ValueError(f"per_layer_dim={self.per_layer_dim} gives each layer of one stack its own embedding of "
                             "the tokens; an encoder-decoder has two stacks: set arch='decoder' or 'encoder', or "
                             "per_layer_dim=None")
        for field in ("global_head_dim", "global_kv_heads"):
            if getattr(self, field) is not None and self.row("arch").cross:
                raise ValueError(f"{field}={getattr(self, field)} sizes the global self-attention layers, and an "
                                 "encoder-decoder's cross-attention would have none of its own: set arch='decoder' or "
                                 f"'encoder', or {field}=None")
        if self.global_kv_heads is not None and self.n_heads % self.global_kv_heads:
            raise ValueError(f"n_heads={self.n_heads} is not divisible by global_kv_heads={self.global_kv_heads}; "
                             f"pick global_kv_heads among {divisors(self.n_heads)}")
        latent = self.row("kv_heads").latent
        for field in ("k_eq_v", "value_norm", "global_head_dim", "global_kv_heads"):
            if latent and getattr(self, field) not in (None, False):
                raise ValueError(f"{field}={getattr(self, field)} changes the K and V projections, but kv_rank="
                                 f"{self.kv_rank} rebuilds K and V from a latent (MLA); set kv_rank=None or "
                                 f"{field} off")
        if self.k_eq_v and self.v_head_dim is not None and self.v_head_dim != self.d_head:
            raise ValueError(f"k_eq_v=True makes each value its key's projection, d_head={self.d_head} wide, but "
                             f"v_head_dim={self.v_head_dim}; set v_head_dim=None or k_eq_v=False")
        if self.wide_shared_ffn and not any(spec.reuses_kv for spec in self.layer_plan()):
            raise ValueError(f"wide_shared_ffn=True widens the FFN of the layers that reuse K and V, but "
                             f"kv_shared_layers={self.kv_shared_layers!r} names none; set kv_shared_layers (Gemma 4: "
                             "'last N') or wide_shared_ffn=False")
        if self.wide_shared_ffn and self.row("ffn").routed:
            raise ValueError(f"wide_shared_ffn=True widens a dense FFN, but ffn={self.ffn!r} routes to experts; "
                             "set a dense ffn or wide_shared_ffn=False")
        if not 0 < self.rope_fraction <= 1:
            raise ValueError(f"rope_fraction={self.rope_fraction} must be in (0, 1]: the share of each head's RoPE "
                             "frequencies that turn")
        if self.rope_fraction != 1.0 and not self.row("rope_scaling").turns_fraction:
            raise ValueError(f"rope_fraction={self.rope_fraction} is read by proportional RoPE only, but rope_scaling="
                             f"{self.rope_scaling!r}; set rope_scaling='proportional' or rope_fraction=1.0")

    def layer_config(self, spec: LayerSpec) -> "TransformerConfig":
        """The config one layer of the plan is built from: a global layer (no window) takes global_head_dim and
        global_kv_heads where they are set, and only a global layer makes K and V with one projection (k_eq_v), as
        Gemma 4's full_attention layers do; with wide_shared_ffn a layer that reuses K and V has an FFN of 2 x d_ff.
        Every other layer, and every layer that keeps a state, is built from this config itself."""
        if spec.row.keeps_state:  # its sizes are the linear_* fields'
            return self
        changes = {}
        if spec.window is None:
            changes = {field: value for field, value in (("head_dim", self.global_head_dim),
                                                          ("n_kv_heads", self.global_kv_heads)) if value is not None}
        elif self.k_eq_v:
            changes["k_eq_v"] = False
        if self.wide_shared_ffn and spec.reuses_kv:
            changes["d_ff"] = 2 * self.d_ff
        if not changes:
            return self
        return dataclasses.replace(self, global_head_dim=None, global_kv_heads=None, **changes)

    def _check_row(self, axis: str) -> None:
        """The config check of this config's row on `axis`, if it has one."""
        check = self.row(axis).check
        if check is not None:
            check(self)

    @property
    def d_head(self) -> int:
        """The width of one head's q and k (and v unless v_head_dim says otherwise)."""
        return self.head_dim if self.head_dim is not None else self.d_model // self.n_heads

    @property
    def d_v(self) -> int:
        return self.v_head_dim if self.v_head_dim is not None else self.d_head

    @property
    def d_rope(self) -> int:
        """How many of each head's dimensions RoPE rotates (0 without RoPE)."""
        if not self.row("position").rotates_qk:
            return 0
        return self.rope_dim if self.rope_dim is not None else self.d_head

    @property
    def has_qkv_bias(self) -> bool:
        return self.bias if self.qkv_bias is None else self.qkv_bias

    @property
    def has_final_norm(self) -> bool:
        """A norm after the last block: final_norm, by default unless the last block ends on one (post-norm)."""
        return self.layer_plan()[-1].placement.final_norm if self.final_norm is None else self.final_norm

    @property
    def group_size(self) -> int:
        """How many query heads read each kv head: H / G (1 for MHA, H for MQA)."""
        return self.n_heads // self.n_kv_heads

    @property
    def state_heads(self) -> int:
        """A linear layer's value heads, one state each: linear_value_heads, by default n_heads."""
        return self.linear_value_heads if self.linear_value_heads is not None else self.n_heads

    @property
    def state_key_heads(self) -> int:
        """A linear layer's q and k heads, each serving state_heads / state_key_heads value heads."""
        return self.linear_key_heads if self.linear_key_heads is not None else self.state_heads

    @property
    def state_d_k(self) -> int:
        """Rows of one state: a linear layer's key width (linear_key_head_dim, by default d_head)."""
        return self.linear_key_head_dim if self.linear_key_head_dim is not None else self.d_head

    @property
    def state_d_v(self) -> int:
        """Columns of one state: a linear layer's value width (linear_value_head_dim, by default d_head)."""
        return self.linear_value_head_dim if self.linear_value_head_dim is not None else self.d_head

    @property
    def read_norm_eps(self) -> float:
        """The eps of a linear layer's read norm: linear_read_norm_eps, by default norm_eps (OLMo hybrid's is its
        kernels' 1e-5, where its other norms take rms_norm_eps, 1e-6)."""
        return self.linear_read_norm_eps if self.linear_read_norm_eps is not None else self.norm_eps

    @property
    def attention_kind(self) -> str:
        if self.kv_rank is not None:
            return "MLA"
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    def choice_key(self, axis: str) -> str:
        """This config's choice on an axis: its field, or the key derived from other fields."""
        if axis in DERIVED_KEYS:
            return DERIVED_KEYS[axis](self)
        if AXES[axis].field is None:
            raise ValueError(f"axis {axis!r} has no single choice per config; ask the layer plan (attention) or the "
                             f"fields that make it (mask, scores)")
        return getattr(self, AXES[axis].field)

    def row(self, axis: str) -> Choice:
        """This config's row of the table on an axis: ``cfg.row("position").rotates_qk``."""
        return AXES[axis].row(self.choice_key(axis))

    def layer_plan(self) -> tuple[LayerSpec, ...]:
        """One row per layer: its attention kind, window, positions and the layer whose K/V it reads
        (transformer/layer_plan.py); ``[spec.hf_layer_type for spec in cfg.layer_plan()]`` is Hugging Face's
        ``layer_types``."""
        return build_plan(self)

    def layer_windows(self) -> tuple[int | None, ...]:
        """Each layer's window: an int for a local layer, None for a global one (``layer_pattern``)."""
        return tuple(spec.window for spec in self.layer_plan())

    def layer_is_moe(self, layer: int) -> bool:
        """Whether layer `layer` routes to experts: a routed model's layers past its first dense ones that
        ``moe_layers`` names (the others keep a dense gated FFN of d_ff)."""
        return self.layer_plan()[layer].routed

    def replace(self, **changes) -> "TransformerConfig":
        """A copy with some fields changed (validated again).

        A d_ff that was derived from the width (4 * d_model, or about 8/3 * d_model for gated FFNs and
        MoE) is derived again when d_model or ffn changes; a d_ff set to another value is kept.
        """
        reshaped = {"d_model", "ffn"} & changes.keys()
        if reshaped and "d_ff" not in changes and self.d_ff == _derived_d_ff(self.d_model, self.ffn):
            changes = {**changes, "d_ff": None}
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TransformerConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown config fields {sorted(unknown)}; valid fields are {sorted(known)}")
        return cls(**data)

    def to_json(self) -> str:
        """Its fields as JSON, keys sorted: one text per config, so the app caches by it (``from_json`` reads it)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TransformerConfig":
        """The config a JSON object of its fields describes, such as ``to_json``'s text."""
        return cls.from_dict(json.loads(text))


# the axes whose key is derived from other fields
DERIVED_KEYS = {
    "kv_heads": lambda cfg: cfg.attention_kind,
    "block": lambda cfg: "parallel" if cfg.parallel_block else "sequential",
    "feature_map": lambda cfg: cfg.linear_feature_map,
}


def _derived_d_ff(d_model: int, ffn: str) -> int:
    """The FFN width when none is given: 4 * d_model, or about 8/3 of it where a gate's third matrix pays for less."""
    return _round_up(8 * d_model // 3, 8) if AXES["ffn"].row(ffn).gated else 4 * d_model
