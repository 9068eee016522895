"""Which keys each query may see, as boolean matrices and as additive masks.

All masks are built from positions, so the same code serves a full forward pass
and one cached generation step (queries at positions past..past+T, keys 0..past+T).

``True`` means "may attend". The additive form puts 0 where attention is allowed
and a very negative number where it is not: softmax turns that into exactly 0.
The number is the dtype's most negative finite value rather than -inf, so a query
row that sees nothing at all (a padding query) gives uniform weights, not NaN.
"""
from __future__ import annotations

import torch


def causal(q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """(T_q, T_kv): a query sees keys at or before its own position."""
    return k_pos[None, :] <= q_pos[:, None]


def sliding_window(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int) -> torch.Tensor:
    """(T_q, T_kv): a query sees the `window` most recent keys, itself included."""
    return causal(q_pos, k_pos) & (q_pos[:, None] - k_pos[None, :] < window)


def padding(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, 1, 1, T_kv) from the usual (B, T_kv) mask with 1 = real token, 0 = padding."""
    return attention_mask.bool()[:, None, None, :]


def cross(src_attention_mask: torch.Tensor | None, t_q: int, t_kv: int, device=None) -> torch.Tensor:
    """(B or 1, 1, T_q, T_kv): decoder queries see every real encoder position."""
    if src_attention_mask is None:
        return torch.ones(1, 1, t_q, t_kv, dtype=torch.bool, device=device)
    return padding(src_attention_mask).expand(-1, -1, t_q, -1)


def self_attention(q_pos: torch.Tensor, k_pos: torch.Tensor, *, is_causal: bool,
                   window: int | None = None, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """(B or 1, 1, T_q, T_kv) boolean mask combining causal/window/padding."""
    distance = q_pos[:, None] - k_pos[None, :]  # (T_q, T_kv)
    if is_causal:
        allowed = causal(q_pos, k_pos) if window is None else sliding_window(q_pos, k_pos, window)
    elif window is not None:  # bidirectional: (W-1)//2 keys on each side, at most W in all
        allowed = distance.abs() <= (window - 1) // 2
    else:
        allowed = torch.ones_like(distance, dtype=torch.bool)
    allowed = allowed[None, None]  # (1, 1, T_q, T_kv)
    if attention_mask is not None:
        allowed = allowed & padding(attention_mask)  # (B, 1, T_q, T_kv)
    return allowed


def to_additive(allowed: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """0 where allowed, the most negative finite number where not."""
    additive = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return additive.masked_fill(~allowed, torch.finfo(dtype).min)
