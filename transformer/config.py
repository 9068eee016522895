"""One dataclass describes every model: five axes, three architectures, sizes.

Every choice is a plain string (a ``Literal``), so the app can list the options
with ``typing.get_args`` and a URL can carry a whole configuration. Impossible
combinations raise ``ValueError`` at construction, naming the numbers and the fix.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Literal, get_args

Arch = Literal["decoder", "encoder", "encoder-decoder"]
Position = Literal["none", "sinusoidal", "learned", "rope", "alibi"]
RopeScaling = Literal["none", "linear", "dynamic", "yarn", "llama3"]
Norm = Literal["layernorm", "rmsnorm"]
NormPosition = Literal["pre", "post", "sandwich", "after"]
QKNorm = Literal["none", "head", "full"]
FFN = Literal["relu", "gelu", "swiglu", "geglu", "moe"]
Router = Literal["softmax", "sigmoid"]
ExpertActivation = Literal["swiglu", "geglu", "clamped-swiglu"]
AttentionPattern = Literal["dense", "strided", "block-local", "global-local"]
GeluApproximate = Literal["none", "tanh"]
DType = Literal["float32", "bfloat16"]

# field name -> the Literal listing its valid strings
CHOICES = {
    "arch": Arch,
    "position": Position,
    "rope_scaling": RopeScaling,
    "norm": Norm,
    "norm_position": NormPosition,
    "qk_norm": QKNorm,
    "ffn": FFN,
    "router": Router,
    "expert_activation": ExpertActivation,
    "attention_pattern": AttentionPattern,
    "gelu_approximate": GeluApproximate,
    "dtype": DType,
}


def choices(field: str) -> tuple[str, ...]:
    """The valid strings of a choice field, e.g. ``choices("position")``."""
    return get_args(CHOICES[field])


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
    layer_pattern: str = "uniform"  # which layers are local (sliding_window) and which global: see LAYER_PATTERNS
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
    score_scale: float | None = None  # multiplies q.k; None = 1 / sqrt(head_dim) (Gemma: query_pre_attn_scalar^-0.5)
    sinks: bool = False  # a learned logit per head joins each row's softmax and is dropped (gpt-oss)
    kv_rank: int | None = None  # multi-head latent attention: K and V come from a latent of this width (DeepSeek)
    q_rank: int | None = None  # MLA: q from its own low-rank latent too (None = one full projection)
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
    expert_limit: float = 7.0  # clamped-swiglu: the clamp on the gate and the up projection (gpt-oss: 7)
    first_dense_layers: int = 0  # the first layers keep a dense SwiGLU of d_ff (DeepSeek-V3: 3)

    def __post_init__(self) -> None:
        for field, literal in CHOICES.items():
            value = getattr(self, field)
            valid = get_args(literal)
            if value not in valid:
                raise ValueError(f"{field}={value!r} is not a valid choice; choose one of {', '.join(map(repr, valid))}")
        for field in ("vocab_size", "d_model", "n_heads", "n_layers", "max_len"):
            if int(getattr(self, field)) < 1:
                raise ValueError(f"{field}={getattr(self, field)} must be at least 1")
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                f"pick n_heads among {_divisors(self.d_model)}, a d_model that is a multiple of {self.n_heads}, "
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
                f"each kv head must serve the same number of query heads: pick n_kv_heads among {_divisors(self.n_heads)}"
            )
        self._check_rope()
        self._check_latent()
        if self.ffn == "moe":
            if self.n_experts < 1:
                raise ValueError(f"n_experts={self.n_experts} must be at least 1")
            if not 1 <= self.top_k <= self.n_experts:
                raise ValueError(
                    f"top_k={self.top_k} must be between 1 and n_experts={self.n_experts}; "
                    f"raise n_experts or lower top_k"
                )
            if self.n_expert_groups < 1 or self.n_experts % self.n_expert_groups:
                raise ValueError(f"n_expert_groups={self.n_expert_groups} must divide n_experts={self.n_experts}; "
                                 f"pick one of {_divisors(self.n_experts)}")
            if not 1 <= self.top_groups <= self.n_expert_groups:
                raise ValueError(f"top_groups={self.top_groups} must be between 1 and "
                                 f"n_expert_groups={self.n_expert_groups}")
            per_group = self.n_experts // self.n_expert_groups
            if self.top_k > self.top_groups * per_group:
                raise ValueError(f"top_k={self.top_k} experts cannot come from top_groups={self.top_groups} groups of "
                                 f"{per_group}; raise top_groups or lower top_k")
            if not 0 <= self.first_dense_layers <= self.n_layers:
                raise ValueError(f"first_dense_layers={self.first_dense_layers} must be between 0 and "
                                 f"n_layers={self.n_layers}")
        else:
            moe_only = {"n_shared_experts": 0, "first_dense_layers": 0, "router": "softmax", "n_expert_groups": 1,
                        "expert_activation": "swiglu", "d_expert": None}
            for field, default in moe_only.items():
                if getattr(self, field) != default:
                    raise ValueError(f"{field}={getattr(self, field)!r} is a mixture-of-experts setting, but "
                                     f"ffn={self.ffn!r} is dense; set ffn='moe' or {field}={default!r}")
        if self.n_shared_experts < 0:
            raise ValueError(f"n_shared_experts={self.n_shared_experts} must be 0 or more")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError(f"sliding_window={self.sliding_window} must be at least 1 (a query always sees itself), or None for no window")
        if self.sliding_window is not None and self.sliding_window > self.max_len:
            raise ValueError(f"sliding_window={self.sliding_window} is larger than max_len={self.max_len}, so no "
                             f"query could ever miss a key; use a window of at most {self.max_len}, or None")
        self.layer_windows()  # a pattern that does not parse raises here
        if self.attention_pattern != "dense":
            if self.sliding_window is not None or self.layer_pattern != "uniform":
                raise ValueError(f"attention_pattern={self.attention_pattern!r} brings its own local keys; set "
                                 f"sliding_window=None (now {self.sliding_window}) and layer_pattern='uniform' "
                                 f"(now {self.layer_pattern!r}), or attention_pattern='dense' to keep the window")
            if self.pattern_size < 1:
                raise ValueError(f"pattern_size={self.pattern_size} must be at least 1 (the stride, block or window "
                                 f"of the {self.attention_pattern} pattern)")
            if self.n_global < 0:
                raise ValueError(f"n_global={self.n_global} must be 0 or more (global tokens of the global-local pattern)")
        for field in ("attn_softcap", "logit_softcap", "score_scale"):
            value = getattr(self, field)
            if value is not None and not value > 0:
                raise ValueError(f"{field}={value} must be greater than 0, or None to switch it off")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout={self.dropout} must be in [0, 1)")
        if self.d_ff is None:
            self.d_ff = _derived_d_ff(self.d_model, self.ffn)
        if self.d_ff < 1:
            raise ValueError(f"d_ff={self.d_ff} must be at least 1")
        if self.parallel_block and self.norm_position != "pre":
            raise ValueError(f"parallel_block=True needs norm_position='pre' (now {self.norm_position!r}): "
                             "attention and FFN read normalised copies of one input")
        if self.parallel_norms not in (1, 2):
            raise ValueError(f"parallel_norms={self.parallel_norms} must be 1 (one norm both sublayers read) or 2")
        if self.parallel_block and self.arch == "encoder-decoder":
            raise ValueError("parallel_block=True is for decoder-only or encoder-only stacks (the encoder-decoder has a "
                             "cross-attention step in between): set arch='decoder' or 'encoder', or parallel_block=False")
        if self.norm_plus_one and self.norm != "rmsnorm":
            raise ValueError(f"norm_plus_one=True is Gemma's RMSNorm scale (1 + w); it needs norm='rmsnorm', not {self.norm!r}")

    def _check_rope(self) -> None:
        from .positions import POSITIONS, ROPE_SCALINGS

        rotates = POSITIONS[self.position].rotates_qk
        if self.rope_dim is not None:
            if not rotates:
                raise ValueError(f"rope_dim={self.rope_dim} needs a position scheme that rotates q and k "
                                 f"(position='rope'), not {self.position!r}")
            if self.rope_dim < 2 or self.rope_dim % 2 or self.rope_dim > self.d_head:
                raise ValueError(f"rope_dim={self.rope_dim} must be an even number from 2 to d_head={self.d_head}: "
                                 "RoPE rotates pairs of dimensions")
        elif rotates and self.d_head % 2:
            source = "head_dim" if self.head_dim is not None else f"d_model/n_heads = {self.d_model}/{self.n_heads}"
            raise ValueError(
                f"RoPE rotates pairs of dimensions, but d_head = {source} = {self.d_head} is odd; "
                "choose sizes that give an even head dimension, or an even rope_dim"
            )
        scaled = self.rope_scaling != "none"
        if scaled and not rotates:
            raise ValueError(f"rope_scaling={self.rope_scaling!r} stretches RoPE, but position={self.position!r}; "
                             "set position='rope' or rope_scaling='none'")
        if self.rope_factor < 1:
            raise ValueError(f"rope_factor={self.rope_factor} must be at least 1: scaling stretches RoPE to a context "
                             "rope_factor times longer than the one it was trained on")
        if self.rope_local_theta is not None and not rotates:
            raise ValueError(f"rope_local_theta={self.rope_local_theta} needs position='rope', not {self.position!r}")
        if scaled:
            ROPE_SCALINGS[self.rope_scaling].check(self)

    def _check_latent(self) -> None:
        if self.kv_rank is None:
            if self.q_rank is not None:
                raise ValueError(f"q_rank={self.q_rank} is part of multi-head latent attention; set kv_rank too, "
                                 "or q_rank=None")
            return
        width = self.n_heads * self.d_head
        if not 1 <= self.kv_rank <= width:
            raise ValueError(f"kv_rank={self.kv_rank} must be between 1 and the heads' width n_heads * head_dim = "
                             f"{self.n_heads} * {self.d_head} = {width}: a latent wider than the keys saves nothing")
        if self.q_rank is not None and not 1 <= self.q_rank <= width:
            raise ValueError(f"q_rank={self.q_rank} must be between 1 and n_heads * head_dim = {width}")
        if self.n_kv_heads != self.n_heads:
            raise ValueError(f"multi-head latent attention rebuilds a key and a value for every head from its "
                             f"latent; set n_kv_heads={self.n_heads} (= n_heads), not {self.n_kv_heads}")
        if self.qk_norm != "none" or self.attn_gate:
            raise ValueError(f"multi-head latent attention (kv_rank={self.kv_rank}) normalises its own latent; "
                             f"qk_norm={self.qk_norm!r} and attn_gate={self.attn_gate} are not built for it: set "
                             "qk_norm='none' and attn_gate=False, or kv_rank=None")
        if self.arch != "decoder":
            raise ValueError(f"multi-head latent attention (kv_rank={self.kv_rank}) is built for decoders; "
                             f"set arch='decoder' (now {self.arch!r}) or kv_rank=None")
        from .positions import POSITIONS

        if POSITIONS[self.position].rotates_qk and (self.rope_dim is None or self.rope_dim == self.d_head):
            raise ValueError(f"MLA keeps RoPE off the latent: give it a decoupled rope_dim smaller than "
                             f"head_dim={self.d_head} (DeepSeek-V3: 64 of 192)")

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
        from .positions import POSITIONS

        if not POSITIONS[self.position].rotates_qk:
            return 0
        return self.rope_dim if self.rope_dim is not None else self.d_head

    @property
    def has_qkv_bias(self) -> bool:
        return self.bias if self.qkv_bias is None else self.qkv_bias

    @property
    def has_final_norm(self) -> bool:
        from .block import NORM_PLACEMENTS

        return NORM_PLACEMENTS[self.norm_position].final_norm if self.final_norm is None else self.final_norm

    @property
    def group_size(self) -> int:
        """How many query heads read each kv head: H / G (1 for MHA, H for MQA)."""
        return self.n_heads // self.n_kv_heads

    @property
    def attention_kind(self) -> str:
        if self.kv_rank is not None:
            return "MLA"
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    def layer_windows(self) -> tuple[int | None, ...]:
        """Each layer's window: an int for a local layer, None for a global one (``layer_pattern``)."""
        return parse_layer_pattern(self.layer_pattern, self.n_layers, self.sliding_window)

    def layer_is_moe(self, layer: int) -> bool:
        return self.ffn == "moe" and layer >= self.first_dense_layers

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


# --- per-layer attention kinds ---------------------------------------------------------

# named patterns: layer index, layer count -> local?
LAYER_PATTERNS = {
    "uniform": None,  # every layer alike: local when sliding_window is set, else global (Mistral; LLaMA)
    "global": lambda i, n: False,
    "local": lambda i, n: True,
    "alternate": lambda i, n: i % 2 == 0,  # local, global, local, ... (Gemma 2, gpt-oss)
}


def parse_layer_pattern(pattern: str, n_layers: int, window: int | None) -> tuple[int | None, ...]:
    """Each layer's window (None = global) from a pattern.

    "uniform", "global", "local", "alternate"; "5:1" = five local layers, then one global, repeated
    (Gemma 3); or a comma list with one entry per layer: "local", "global", or a window of its own ("64").
    """
    text = str(pattern).strip().lower()
    if text in LAYER_PATTERNS:
        rule = LAYER_PATTERNS[text]
        local = [window is not None] * n_layers if rule is None else [rule(i, n_layers) for i in range(n_layers)]
        windows = [window if is_local else None for is_local in local]
    elif ":" in text:
        parts = text.split(":")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts) or int(parts[0]) + int(parts[1]) < 1:
            raise ValueError(f"layer_pattern={pattern!r} does not parse: write 'N:M' with whole numbers, e.g. '5:1' "
                             "for five local layers then one global")
        n_local, n_global = int(parts[0]), int(parts[1])
        windows = [window if i % (n_local + n_global) < n_local else None for i in range(n_layers)]
    else:
        entries = [e.strip() for e in text.split(",")]
        if len(entries) != n_layers:
            raise ValueError(f"layer_pattern={pattern!r} names {len(entries)} layers but n_layers={n_layers}; "
                             f"give one entry per layer, or one of {', '.join(LAYER_PATTERNS)} or 'N:M'")
        windows = []
        for entry in entries:
            if entry in ("local", "l"):
                windows.append(window if window is not None else -1)
            elif entry in ("global", "g"):
                windows.append(None)
            elif entry.isdigit() and int(entry) >= 1:
                windows.append(int(entry))
            else:
                raise ValueError(f"layer_pattern={pattern!r} does not parse: {entry!r} is not 'local', 'global' or "
                                 "a window of at least 1")
    if any(w == -1 for w in windows) or (window is None and text not in ("uniform", "global") and "," not in text):
        raise ValueError(f"layer_pattern={pattern!r} has local layers but sliding_window is None; "
                         "set sliding_window to the local layers' window")
    return tuple(windows)


def _derived_d_ff(d_model: int, ffn: str) -> int:
    """The FFN width when none is given: 4 * d_model, or about 8/3 of it where a gate's third matrix pays for less."""
    from .ffn import FFN_KINDS

    return _round_up(8 * d_model // 3, 8) if FFN_KINDS[ffn].gated else 4 * d_model


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
