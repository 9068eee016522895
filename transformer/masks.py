"""Which keys each query may see, as boolean matrices and as additive masks.

Dense choices (causal, padding, sliding window, chunked, cross) and the sparse patterns that let attention cost
less than T² (strided, block-local, global + local): each pattern has a causal form for decoders and a
bidirectional one for encoders.

All masks are built from positions, so the same code serves a full forward pass
and one cached generation step (queries at positions past..past+T, keys 0..past+T).

``True`` means "may attend". The additive form puts 0 where attention is allowed
and a very negative number where it is not: softmax turns that into exactly 0.
The number is the dtype's most negative finite value rather than -inf, so a query
row that sees nothing at all (a padding query) gives uniform weights, not NaN.
"""
from __future__ import annotations

import torch

from .axes import AXES


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


def chunked(q_pos: torch.Tensor, k_pos: torch.Tensor, chunk: int, is_causal: bool = True) -> torch.Tensor:
    """(T_q, T_kv): Llama 4's chunked attention: positions 0..C-1, C..2C-1 ... form chunks, and a query sees only
    the keys of its own (in a decoder, those up to itself). Unlike a window, the first query of a chunk sees itself
    alone, however much text came before."""
    same_chunk = (q_pos[:, None] // chunk) == (k_pos[None, :] // chunk)  # (T_q, T_kv)
    return same_chunk & causal(q_pos, k_pos) if is_causal else same_chunk


def local_window(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int, is_causal: bool = True) -> torch.Tensor:
    """(T_q, T_kv): a decoder's query sees the `window` most recent keys; an encoder's (W-1)//2 keys on each
    side, at most W in all."""
    if is_causal:
        return sliding_window(q_pos, k_pos, window)
    return (q_pos[:, None] - k_pos[None, :]).abs() <= (window - 1) // 2


def top_k(scores: torch.Tensor, allowed: torch.Tensor, k: int) -> torch.Tensor:
    """(B, 1, T_q, T_kv): of the keys each query may see (`allowed`, (B or 1, 1, T_q, T_kv)), the k its `scores`
    (B, T_q, T_kv) rank highest (DeepSeek-V3.2's indexer); every allowed key where fewer than k are allowed.

    Equal scores are common (a key every indexer head scores below 0 scores exactly 0): among them the earlier key
    wins. A stable sort makes that rule, so a query picks the same keys in a cached step, where its row ends at
    itself, as in a whole forward pass, where hidden later keys follow (``topk``'s order among equals depends on
    the row's length)."""
    ranked = scores.masked_fill(~allowed[:, 0], float("-inf"))  # (B, T_q, T_kv): a hidden key is never picked first
    order = ranked.sort(dim=-1, descending=True, stable=True).indices  # (B, T_q, T_kv): ties in key order
    picked = order[..., :min(k, scores.shape[-1])]  # (B, T_q, k)
    chosen = torch.zeros_like(ranked, dtype=torch.bool).scatter_(-1, picked, True)  # (B, T_q, T_kv)
    return chosen[:, None] & allowed  # (B, 1, T_q, T_kv): a pick among hidden keys (a short row) stays hidden


# --- sparse patterns ---------------------------------------------------------------


def strided(q_pos: torch.Tensor, k_pos: torch.Tensor, stride: int, is_causal: bool = True) -> torch.Tensor:
    """(T_q, T_kv): the Sparse Transformer's strided pattern (Child et al. 2019), both of its heads in one:
    keys less than `stride` away, and every key a multiple of `stride` away."""
    distance = q_pos[:, None] - k_pos[None, :]  # (T_q, T_kv)
    allowed = (distance.abs() < stride) | (distance % stride == 0)
    return allowed & (distance >= 0) if is_causal else allowed


def block_local(q_pos: torch.Tensor, k_pos: torch.Tensor, block: int, is_causal: bool = True) -> torch.Tensor:
    """(T_q, T_kv): a query sees only the keys of its own block of `block` positions (0..block-1, block..)."""
    allowed = (q_pos[:, None] // block) == (k_pos[None, :] // block)  # (T_q, T_kv)
    return allowed & causal(q_pos, k_pos) if is_causal else allowed


def global_local(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int, n_global: int,
                 is_causal: bool = True) -> torch.Tensor:
    """(T_q, T_kv): Longformer's and BigBird's pattern: a local window, plus the first `n_global` tokens,
    which every query sees and which see every key (in a decoder, every key before them)."""
    is_global = (k_pos[None, :] < n_global) | (q_pos[:, None] < n_global)  # (T_q, T_kv)
    allowed = local_window(q_pos, k_pos, window, is_causal) | is_global
    return allowed & causal(q_pos, k_pos) if is_causal else allowed


def sparse(pattern: str, q_pos: torch.Tensor, k_pos: torch.Tensor, size: int, is_causal: bool = True,
           n_global: int = 1) -> torch.Tensor:
    """(T_q, T_kv) the pairs a sparse pattern allows; `size` is its stride, block or local window."""
    builders = {
        "strided": lambda: strided(q_pos, k_pos, size, is_causal),
        "block-local": lambda: block_local(q_pos, k_pos, size, is_causal),
        "global-local": lambda: global_local(q_pos, k_pos, size, n_global, is_causal),
    }
    if pattern not in builders:
        raise ValueError(f"attention pattern {pattern!r} is not one of {', '.join(builders)}")
    return builders[pattern]()


def self_attention(q_pos: torch.Tensor, k_pos: torch.Tensor, *, is_causal: bool,
                   window: int | None = None, attention_mask: torch.Tensor | None = None,
                   pattern: str = "dense", pattern_size: int = 8, n_global: int = 1,
                   chunk: int | None = None) -> torch.Tensor:
    """(B or 1, 1, T_q, T_kv) boolean mask combining causal/window/chunk/sparse pattern/padding."""
    if AXES["attention_pattern"].row(pattern).sparse:
        allowed = sparse(pattern, q_pos, k_pos, pattern_size, is_causal, n_global)
    elif window is not None:
        allowed = local_window(q_pos, k_pos, window, is_causal)
    elif chunk is not None:
        allowed = chunked(q_pos, k_pos, chunk, is_causal)
    elif is_causal:
        allowed = causal(q_pos, k_pos)
    else:
        allowed = torch.ones(len(q_pos), len(k_pos), dtype=torch.bool, device=q_pos.device)
    allowed = allowed[None, None]  # (1, 1, T_q, T_kv)
    if attention_mask is not None:
        allowed = allowed & padding(attention_mask)  # (B, 1, T_q, T_kv)
    return allowed


def to_additive(allowed: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """0 where allowed, the most negative finite number where not."""
    additive = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return additive.masked_fill(~allowed, torch.finfo(dtype).min)
