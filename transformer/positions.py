"""Where a token is: sinusoidal, learned, RoPE (and its scalings), xPos and ALiBi.

Sinusoidal and learned positions are added to the embeddings once, at the bottom.
RoPE rotates q and k inside every attention layer; ALiBi adds a distance penalty
to every layer's scores, and T5 a learned bias per bucket of distance (one table per
stack). "none" leaves order to the mask alone. A layer without positions in a RoPE
model (Llama 4) may still scale its queries up with the position (``temperature_scales``): an
inverse temperature, so the softmax's temperature falls as the text grows.

What each scheme and each RoPE scaling does is its row in the table of choices
(transformer/axes/positions.py); this file builds them: the tables added to the embeddings
(``POSITION_EMBEDDINGS``), RoPE's rotation and the frequencies of each scaling (``ROPE_SCALES``),
ALiBi's bias, T5's buckets (``SCORE_BIASES``: the schemes that bias the scores).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
from torch import nn

from .axes import AXES

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


# the schemes that add vectors to the embeddings (``PositionChoice.adds_embedding``): their tables
POSITION_EMBEDDINGS: dict[str, type[nn.Module]] = {"sinusoidal": SinusoidalPositions, "learned": LearnedPositions}

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


def _proportional(inv_freq, cfg, seq_len, theta):
    """Gemma 4's global layers: theta^(-2i/d) for the first rope_fraction of the pairs, 0 (no turn) for the rest."""
    turning = int(cfg.rope_fraction * len(inv_freq))
    return torch.cat((inv_freq[:turning], inv_freq.new_zeros(len(inv_freq) - turning))), 1.0  # (d_rope/2,)


# how each scaling that rescales (``RopeScalingChoice.rescales``) changes the frequencies:
# (inv_freq, cfg, sequence length, base) -> (inv_freq, scale on cos and sin)
ROPE_SCALES: dict[str, Callable[..., tuple[torch.Tensor, float]]] = {
    "linear": _linear, "dynamic": _dynamic, "yarn": _yarn, "llama3": _llama3,
    "proportional": _proportional}


def scaled_inv_freq(cfg: "TransformerConfig", seq_len: int, theta: float | None = None,
                    scaling: str | None = None) -> tuple[torch.Tensor, float]:
    """(d_rope/2,) frequencies of RoPE after the config's scaling, and the scale YaRN puts on cos and sin.

    `theta` and `scaling` override the config's (a local layer of Gemma 3 has its own base and no scaling).
    """
    theta = cfg.rope_theta if theta is None else theta
    inv_freq = rope_inv_freq(cfg.d_rope, theta)
    scaling = cfg.rope_scaling if scaling is None else scaling
    if not AXES["rope_scaling"].row(scaling).rescales:
        return inv_freq, 1.0
    return ROPE_SCALES[scaling](inv_freq, cfg, seq_len, theta)


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


@dataclass(frozen=True)
class Rotation:
    """What a rotating scheme hands every layer that turns q and k: cos and sin for the queries and for the keys,
    (B, 1, T, d_rope) each (the same tables for RoPE), and the angles (B, T, d_rope/2) they come from."""

    q_cos: torch.Tensor
    q_sin: torch.Tensor
    k_cos: torch.Tensor
    k_sin: torch.Tensor
    angles: torch.Tensor


def rope_rotation(position_ids: torch.Tensor, angles: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> Rotation:
    """RoPE: queries and keys turn by the same angles."""
    cos, sin = rope_tables(angles, dtype, scale)  # (B, 1, T, d_rope)
    return Rotation(cos, sin, cos, sin, angles)


XPOS_GAMMA, XPOS_SCALE_BASE = 0.4, 512.0  # the xPos paper's constants


def xpos_decay(d_rope: int) -> torch.Tensor:
    """(d_rope/2,): xPos's ζ_i = (2i/d + γ) / (1 + γ), one per pair of dimensions: below 1, smallest for the
    fast-turning pairs, so their long-range oscillation is damped most."""
    return (torch.arange(0, d_rope, 2, dtype=torch.float32) / d_rope + XPOS_GAMMA) / (1 + XPOS_GAMMA)


def xpos_rotation(position_ids: torch.Tensor, angles: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> Rotation:
    """xPos: RoPE's turn, with q scaled by ζ^(t/B) and k by ζ^(-t/B): q_n · k_m then carries ζ^((n-m)/B), a decay
    that depends on the distance only (so a cache of scaled keys stays right)."""
    cos, sin = rope_tables(angles, torch.float32, scale)  # (B, 1, T, d_rope)
    zeta = xpos_decay(2 * angles.shape[-1]).to(angles.device)  # (d_rope/2,)
    growth = zeta ** (position_ids[..., None].float() / XPOS_SCALE_BASE)  # (B, T, d_rope/2)
    up = torch.cat((growth, growth), dim=-1)[:, None]  # (B, 1, T, d_rope): both dimensions of a pair alike
    return Rotation((cos * up).to(dtype), (sin * up).to(dtype), (cos / up).to(dtype), (sin / up).to(dtype), angles)


# the schemes that rotate q and k (``PositionChoice.rotates_qk``):
# (position ids (B or 1, T), angles (B or 1, T, d_rope/2), dtype, scale on cos and sin) -> Rotation
ROTATIONS: dict[str, Callable[..., Rotation]] = {"rope": rope_rotation, "xpos": xpos_rotation}


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


# --- T5's relative position buckets -----------------------------------------------------

def relative_buckets(distance: torch.Tensor, n_buckets: int, max_distance: int, bidirectional: bool) -> torch.Tensor:
    """The bucket of each signed distance key - query (any shape, ints): T5's relative position buckets.

    Half of a direction's buckets hold one distance each (0, 1, 2 ...); the other half split the distances up to
    max_distance logarithmically, and every distance past it shares the last bucket. Bidirectional (an encoder):
    the upper half of the buckets is for keys after the query. Causal (a decoder): only keys before the query (or
    the query itself) get a bucket of their own; a later key, which the mask hides anyway, reads bucket 0.
    """
    offset = torch.zeros_like(distance)
    if bidirectional:
        n_buckets //= 2
        offset = (distance > 0).long() * n_buckets  # keys after the query read the upper half
        far = distance.abs()
    else:
        far = (-distance).clamp(min=0)  # how far back the key is
    exact = n_buckets // 2  # distances 0 .. exact - 1 have a bucket each
    last = max(n_buckets - 1, 0)
    if exact == 0 or max_distance <= exact:  # no room for logarithmic buckets: every longer distance reads the last
        logarithmic = torch.full_like(far, last)
    else:
        # log(far / exact) / log(max_distance / exact) runs from 0 at `exact` to 1 at max_distance
        ratio = (far.float() / exact).clamp(min=1.0).log() / math.log(max_distance / exact)  # (same shape as distance)
        logarithmic = (exact + (ratio * (n_buckets - exact)).long()).clamp(max=last)
    return offset + torch.where(far < exact, far, logarithmic)


class RelativePositionBias(nn.Module):
    """T5's bias: one learned number per head and bucket, (B or 1, H, T_q, T_kv) for the given positions.

    One table per stack, built once per forward pass and added to the scores of every layer of that stack.
    """

    def __init__(self, cfg: "TransformerConfig", bidirectional: bool):
        super().__init__()
        self.n_buckets, self.max_distance, self.bidirectional = (cfg.relative_buckets, cfg.relative_max_distance,
                                                                 bidirectional)
        self.table = nn.Embedding(cfg.relative_buckets, cfg.n_heads)  # (buckets, H)

    def forward(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        distance = k_pos[:, None, :] - q_pos[:, :, None]  # (B or 1, T_q, T_kv): key position - query position
        buckets = relative_buckets(distance, self.n_buckets, self.max_distance, self.bidirectional)  # (B, T_q, T_kv)
        return self.table(buckets).permute(0, 3, 1, 2)  # (B or 1, H, T_q, T_kv)


def _alibi_scores_bias(cfg, learned, q_pos, k_pos) -> torch.Tensor:
    return alibi_bias(alibi_slopes(cfg.n_heads).to(q_pos.device), q_pos, k_pos)  # (B or 1, H, T_q, T_kv)


def _t5_scores_bias(cfg, learned, q_pos, k_pos) -> torch.Tensor:
    return learned(q_pos, k_pos)  # (B or 1, H, T_q, T_kv)


# the schemes that add a bias to the scores (``PositionChoice.score_bias``):
# (config, the stack's learned table or None, query positions (B or 1, T_q), key positions) -> (B or 1, H, T_q, T_kv)
SCORE_BIASES: dict[str, Callable[..., torch.Tensor]] = {"alibi": _alibi_scores_bias, "t5": _t5_scores_bias}


# --- Llama 4's temperature on the layers without positions ---------------------------------

def temperature_scales(position_ids: torch.Tensor, scale: float, floor: float) -> torch.Tensor:
    """(B or 1, 1, T, 1): what q is multiplied by at each position t, 1 + scale · log(1 + ⌊(t + 1) / floor⌋).

    1 for the first floor - 1 positions, then growing with the log of the position: a query far into the text
    sees many more keys, and without the boost its softmax would spread ever flatter over them (Llama 4 scales
    its NoPE layers so, with scale 0.1 and floor 8192).
    """
    steps = torch.floor((position_ids.float() + 1.0) / floor)  # (B or 1, T)
    return (torch.log1p(steps) * scale + 1.0)[:, None, :, None]  # (B or 1, 1, T, 1)
