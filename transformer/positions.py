"""Where a token is: sinusoidal, learned, RoPE (and its scalings) and ALiBi.

Sinusoidal and learned positions are added to the embeddings once, at the bottom.
RoPE rotates q and k inside every attention layer; ALiBi adds a distance penalty
to every layer's scores. "none" leaves order to the mask alone.

Each scheme is one row of ``POSITIONS`` that says what it does (adds to the embeddings?
rotates q and k? adds a score bias?); the model and the pages ask the row, never the name.
Each RoPE scaling is one row of ``ROPE_SCALINGS``: how it changes the frequencies.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
from torch import nn

if TYPE_CHECKING:
    from .config import TransformerConfig


def sinusoidal_table(n_positions: int, d_model: int) -> torch.Tensor:
    """(n_positions, d_model): PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...)."""
    position = torch.arange(n_positions, dtype=torch.float32)[:, None]  # (P, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))  # (ceil(d/2),)
    table = torch.zeros(n_positions, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return table


class SinusoidalPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        return self.table[position_ids]  # (B, T, d_model)


class LearnedPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len
        self.table = nn.Embedding(max_len, d_model)

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        return self.table(position_ids)  # (B, T, d_model)


@dataclass(frozen=True)
class PositionScheme:
    """What a position scheme does, as data."""

    embedding: type | None  # a module whose vectors are added to the embeddings, or None
    rotates_qk: bool  # rotates q and k in every attention layer (RoPE)
    score_bias: bool  # adds a bias to every layer's scores (ALiBi)
    hooks: tuple[str, ...]  # the hook sites it fires
    table_param_terms: bool = False  # its table holds max_len x d_model trained parameters

    @property
    def bounds_length(self) -> bool:
        """A table of max_len rows: no position past it exists."""
        return self.embedding is not None


POSITIONS: dict[str, PositionScheme] = {
    "none": PositionScheme(None, False, False, ()),
    "sinusoidal": PositionScheme(SinusoidalPositions, False, False, ("hook_pos_embed",)),
    "learned": PositionScheme(LearnedPositions, False, False, ("hook_pos_embed",), table_param_terms=True),
    "rope": PositionScheme(None, True, False, ("attn.hook_rope_angles", "attn.hook_rot_q", "attn.hook_rot_k")),
    "alibi": PositionScheme(None, False, True, ("attn.hook_alibi_bias",)),
}

# positions added to the embeddings; RoPE, ALiBi and "none" add nothing there
ADDITIVE_POSITIONS = {name: row.embedding for name, row in POSITIONS.items() if row.embedding is not None}


# --- RoPE -------------------------------------------------------------------

def rope_inv_freq(d_head: int, theta: float = 10000.0) -> torch.Tensor:
    """(d_head/2,): the rotation speed of each pair of dimensions, theta^(-2i/d_head)."""
    return theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)


# --- RoPE scaling: reading past the trained context -----------------------------------


def _original_len(cfg: "TransformerConfig") -> int:
    return cfg.rope_original_max_len or max(1, round(cfg.max_len / cfg.rope_factor))


def _linear(inv_freq, cfg, seq_len, theta):
    """Position interpolation: every frequency slowed by the factor, so position s*p turns as p did."""
    return inv_freq / cfg.rope_factor, 1.0


def _dynamic(inv_freq, cfg, seq_len, theta):
    """Dynamic NTK: past the trained context, a larger base slows the low frequencies most; inside it, nothing."""
    original, dim = _original_len(cfg), 2 * len(inv_freq)
    if seq_len <= original:
        return inv_freq, 1.0
    base = theta * ((cfg.rope_factor * seq_len / original) - (cfg.rope_factor - 1)) ** (dim / (dim - 2))
    return rope_inv_freq(dim, base).to(inv_freq.device), 1.0


def _yarn_factor(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(inv_freq, cfg, seq_len, theta):
    """YaRN: fast-turning dimensions kept, slow ones interpolated, a linear ramp between; cos and sin scaled."""
    dim, original, base = 2 * len(inv_freq), _original_len(cfg), theta

    def dim_turning(n_turns: float) -> float:  # the dimension that turns n_turns times over the trained context
        return dim * math.log(original / (n_turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = dim_turning(cfg.yarn_beta_fast), dim_turning(cfg.yarn_beta_slow)
    if cfg.yarn_truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float32, device=inv_freq.device) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # 1: extrapolate (keep the frequency), 0: interpolate (divide by the factor)
    scaled = inv_freq / cfg.rope_factor * (1 - keep) + inv_freq * keep
    attention = cfg.yarn_attention_factor if cfg.yarn_attention_factor is not None else _yarn_factor(cfg.rope_factor)
    return scaled, attention


def _llama3(inv_freq, cfg, seq_len, theta):
    """LLaMA 3.1: long wavelengths interpolated, short ones kept, a smooth blend between the two bands."""
    original, factor = _original_len(cfg), cfg.rope_factor
    wavelength = 2 * math.pi / inv_freq
    low_band, high_band = original / cfg.rope_low_freq_factor, original / cfg.rope_high_freq_factor
    smooth = ((original / wavelength - cfg.rope_low_freq_factor)
              / (cfg.rope_high_freq_factor - cfg.rope_low_freq_factor)).clamp(0, 1)
    blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    scaled = torch.where(wavelength > low_band, inv_freq / factor, blended)
    return torch.where(wavelength < high_band, inv_freq, scaled), 1.0


def _check_llama3(cfg):
    if not cfg.rope_high_freq_factor > cfg.rope_low_freq_factor > 0:
        raise ValueError(f"rope_high_freq_factor={cfg.rope_high_freq_factor} must be larger than "
                         f"rope_low_freq_factor={cfg.rope_low_freq_factor}, and both above 0 (LLaMA 3.1: 4 and 1)")


def _check_yarn(cfg):
    if not cfg.yarn_beta_fast > cfg.yarn_beta_slow > 0:
        raise ValueError(f"yarn_beta_fast={cfg.yarn_beta_fast} must be larger than yarn_beta_slow="
                         f"{cfg.yarn_beta_slow}, and both above 0 (the paper: 32 and 1)")


@dataclass(frozen=True)
class RopeScaling:
    """How a scaling changes RoPE's frequencies: (inv_freq, cfg, sequence length, base) -> (inv_freq, scale on cos/sin)."""

    scale: Callable[..., tuple[torch.Tensor, float]] | None
    depends_on_length: bool = False  # the frequencies change with the sequence's length (dynamic NTK)
    check: Callable[["TransformerConfig"], None] = lambda cfg: None


ROPE_SCALINGS: dict[str, RopeScaling] = {
    "none": RopeScaling(None),
    "linear": RopeScaling(_linear),
    "dynamic": RopeScaling(_dynamic, depends_on_length=True),
    "yarn": RopeScaling(_yarn, check=_check_yarn),
    "llama3": RopeScaling(_llama3, check=_check_llama3),
}


def scaled_inv_freq(cfg: "TransformerConfig", seq_len: int, theta: float | None = None,
                    scaling: str | None = None) -> tuple[torch.Tensor, float]:
    """(d_rope/2,) frequencies of RoPE after the config's scaling, and the scale YaRN puts on cos and sin.

    `theta` and `scaling` override the config's (a local layer of Gemma 3 has its own base and no scaling).
    """
    theta = cfg.rope_theta if theta is None else theta
    inv_freq = rope_inv_freq(cfg.d_rope, theta)
    row = ROPE_SCALINGS[cfg.rope_scaling if scaling is None else scaling]
    return (inv_freq, 1.0) if row.scale is None else row.scale(inv_freq, cfg, seq_len, theta)


def rope_angles(position_ids: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """(B, T, d_head/2): angle = position * frequency."""
    return position_ids[..., None].float() * inv_freq


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Half-split layout: dimension i pairs with dimension i + d_head/2."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x_i, x_{i+d/2}) by its angle. x: (B, heads, T, d_head); cos, sin: (B, 1, T, d_head)."""
    return x * cos + rotate_half(x) * sin


def rope_tables(angles: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of (B, T, d_head/2) angles, laid out (B, 1, T, d_head) for apply_rope (times YaRN's scale)."""
    emb = torch.cat((angles, angles), dim=-1)[:, None]  # (B, 1, T, d_head)
    return (emb.cos() * scale).to(dtype), (emb.sin() * scale).to(dtype)


def apply_partial_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first d_rope dimensions of each head (cos, sin: (B, 1, T, d_rope)), pass the rest as they are."""
    d_rope = cos.shape[-1]
    if d_rope == x.shape[-1]:
        return apply_rope(x, cos, sin)
    return torch.cat((apply_rope(x[..., :d_rope], cos, sin), x[..., d_rope:]), dim=-1)  # (B, heads, T, d_head)


# --- ALiBi ------------------------------------------------------------------

def alibi_slopes(n_heads: int) -> torch.Tensor:
    """(H,): the ALiBi paper's geometric slopes 2^(-8/n), 2^(-16/n), ...

    For a head count that is not a power of two, take the slopes of the nearest
    lower power of two, then every other slope of the next power of two.
    """
    def power_of_two_slopes(n: int) -> list[float]:
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_two_slopes(closest)
    if closest < n_heads:
        slopes += power_of_two_slopes(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(slopes: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """(B, H, T_q, T_kv): -slope * |query position - key position|.

    q_pos, k_pos: (B, T) position ids. Causal models never see the future keys, so
    for them this is the paper's -slope * (i - j).
    """
    distance = (q_pos[:, :, None] - k_pos[:, None, :]).abs().float()  # (B, T_q, T_kv)
    return -slopes[None, :, None, None] * distance[:, None]  # (B, H, T_q, T_kv)
