"""One dataclass describes every model: five axes, three architectures, sizes.

Every choice is a plain string (a ``Literal``), so the app can list the options
with ``typing.get_args`` and a URL can carry a whole configuration. Impossible
combinations raise ``ValueError`` at construction, naming the numbers and the fix.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal, get_args

Arch = Literal["decoder", "encoder", "encoder-decoder"]
Position = Literal["none", "sinusoidal", "learned", "rope", "alibi"]
Norm = Literal["layernorm", "rmsnorm"]
NormPosition = Literal["pre", "post"]
FFN = Literal["relu", "gelu", "swiglu", "moe"]
AttentionPattern = Literal["dense", "strided", "block-local", "global-local"]
GeluApproximate = Literal["none", "tanh"]
DType = Literal["float32", "bfloat16"]

# field name -> the Literal listing its valid strings
CHOICES = {
    "arch": Arch,
    "position": Position,
    "norm": Norm,
    "norm_position": NormPosition,
    "ffn": FFN,
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
    d_ff: int | None = None  # None = 4 * d_model (MLP) or about 8/3 * d_model (SwiGLU, MoE)
    max_len: int = 512
    position: Position = "rope"
    norm: Norm = "rmsnorm"
    norm_position: NormPosition = "pre"
    ffn: FFN = "swiglu"
    n_experts: int = 4
    top_k: int = 2
    sliding_window: int | None = None  # a query sees at most W keys, itself included
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
    final_norm: bool | None = None  # a norm after the last block; None = with pre-norm only (post-norm blocks end on one)
    dtype: DType = "float32"

    def __post_init__(self) -> None:
        for field, literal in CHOICES.items():
            value = getattr(self, field)
            valid = get_args(literal)
            if value not in valid:
                raise ValueError(f"{field}={value!r} is not a valid choice; choose one of {', '.join(map(repr, valid))}")
        for field in ("vocab_size", "d_model", "n_heads", "n_layers", "max_len"):
            if int(getattr(self, field)) < 1:
                raise ValueError(f"{field}={getattr(self, field)} must be at least 1")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                f"pick n_heads among {_divisors(self.d_model)} or a d_model that is a multiple of {self.n_heads}"
            )
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
        if self.position == "rope" and self.d_head % 2:
            raise ValueError(
                f"RoPE rotates pairs of dimensions, but d_head = d_model/n_heads = {self.d_model}/{self.n_heads} = {self.d_head} is odd; "
                "choose sizes that give an even head dimension"
            )
        if self.ffn == "moe":
            if self.n_experts < 1:
                raise ValueError(f"n_experts={self.n_experts} must be at least 1")
            if not 1 <= self.top_k <= self.n_experts:
                raise ValueError(
                    f"top_k={self.top_k} must be between 1 and n_experts={self.n_experts}; "
                    f"raise n_experts or lower top_k"
                )
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError(f"sliding_window={self.sliding_window} must be at least 1 (a query always sees itself), or None for no window")
        if self.attention_pattern != "dense":
            if self.sliding_window is not None:
                raise ValueError(f"attention_pattern={self.attention_pattern!r} brings its own local keys; set "
                                 f"sliding_window=None (now {self.sliding_window}), or attention_pattern='dense' "
                                 "to keep the window")
            if self.pattern_size < 1:
                raise ValueError(f"pattern_size={self.pattern_size} must be at least 1 (the stride, block or window "
                                 f"of the {self.attention_pattern} pattern)")
            if self.n_global < 0:
                raise ValueError(f"n_global={self.n_global} must be 0 or more (global tokens of the global-local pattern)")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout={self.dropout} must be in [0, 1)")
        if self.d_ff is None:
            self.d_ff = _derived_d_ff(self.d_model, self.ffn)
        if self.d_ff < 1:
            raise ValueError(f"d_ff={self.d_ff} must be at least 1")
        if self.parallel_block and self.norm_position == "post":
            raise ValueError("parallel_block=True needs norm_position='pre' (attention and FFN read one normalised input)")
        if self.parallel_block and self.arch == "encoder-decoder":
            raise ValueError("parallel_block=True is for decoder-only or encoder-only stacks; the encoder-decoder has a cross-attention step in between")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def has_final_norm(self) -> bool:
        return self.norm_position == "pre" if self.final_norm is None else self.final_norm

    @property
    def group_size(self) -> int:
        """How many query heads read each kv head: H / G (1 for MHA, H for MQA)."""
        return self.n_heads // self.n_kv_heads

    @property
    def attention_kind(self) -> str:
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    def replace(self, **changes) -> "TransformerConfig":
        """A copy with some fields changed (validated again).

        A d_ff that was derived from the width (4 * d_model, or about 8/3 * d_model for SwiGLU and
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


def _derived_d_ff(d_model: int, ffn: str) -> int:
    """The FFN width when none is given: 4 * d_model, or about 8/3 of it where SwiGLU's third matrix pays for less."""
    return 4 * d_model if ffn in ("relu", "gelu") else _round_up(8 * d_model // 3, 8)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
