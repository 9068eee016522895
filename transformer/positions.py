"""Where a token is: sinusoidal, learned, RoPE and ALiBi.

Sinusoidal and learned positions are added to the embeddings once, at the bottom.
RoPE rotates q and k inside every attention layer; ALiBi adds a distance penalty
to every layer's scores. "none" leaves order to the mask alone.
"""
from __future__ import annotations

import math

import torch
from torch import nn


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


# positions added to the embeddings; RoPE, ALiBi and "none" add nothing there
ADDITIVE_POSITIONS = {"sinusoidal": SinusoidalPositions, "learned": LearnedPositions}


# --- RoPE -------------------------------------------------------------------

def rope_inv_freq(d_head: int, theta: float = 10000.0) -> torch.Tensor:
    """(d_head/2,): the rotation speed of each pair of dimensions, theta^(-2i/d_head)."""
    return theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)


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


def rope_tables(angles: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of (B, T, d_head/2) angles, laid out (B, 1, T, d_head) for apply_rope."""
    emb = torch.cat((angles, angles), dim=-1)[:, None]  # (B, 1, T, d_head)
    return emb.cos().to(dtype), emb.sin().to(dtype)


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
