"""The KV cache a model holds in generation, from its dimensions alone: per token, and per layer at a context.

    kv_cache_bytes_per_token(cfg, bytes_per_value=2, context=None)   growth per token, or the average at a context
    kv_cache_bytes(cfg, context, bytes_per_value=2)   a cache of `context` tokens: global and local layers, tensors
"""
from __future__ import annotations

from ..config import TransformerConfig


def _cache_width(cfg: TransformerConfig) -> dict[str, int]:
    """Numbers one layer caches per token, by tensor: K (G·d_h) and V (G·d_v); MLA its latent and one rope key."""
    if cfg.row("kv_heads").latent:
        return {"latent": cfg.kv_rank, "rope keys": cfg.d_rope}
    return {"keys": cfg.n_kv_heads * cfg.d_head, "values": cfg.n_kv_heads * cfg.d_v}


def kv_cache_bytes(cfg: TransformerConfig, context: int, bytes_per_value: int = 2) -> dict:
    """Bytes the KV cache of one sequence of `context` tokens holds, and where they sit.

    A global layer holds every token; a local layer (window W, ``cfg.layer_windows()``) needs only the last
    W, so it holds min(context, W) -- what a serving stack that drops older keys keeps. (This library's own
    ``KVCache`` keeps every token in every layer, and so matches this only for global layers.) Per layer and
    token: K and V, G·d_h + G·d_v numbers; MLA caches its latent and one rotated key shared by the heads,
    r_kv + d_r numbers. Self-attention only: an encoder-decoder's cross-attention keys are computed once
    from the source.

    Returns {"total", "global layers", "local layers", and by tensor "keys" and "values" (or MLA's "latent"
    and "rope keys"): bytes; "per layer": a tuple of each layer's bytes}.
    """
    if context < 1:
        raise ValueError(f"context={context} must be at least 1 token")
    width = _cache_width(cfg)
    per_token = sum(width.values()) * bytes_per_value
    held = [context if w is None else min(context, w) for w in cfg.layer_windows()]  # tokens each layer holds
    windows = cfg.layer_windows()
    per_layer = tuple(n * per_token for n in held)
    return {"total": sum(per_layer),
            "global layers": sum(b for b, w in zip(per_layer, windows) if w is None),
            "local layers": sum(b for b, w in zip(per_layer, windows) if w is not None),
            **{tensor: n * bytes_per_value * sum(held) for tensor, n in width.items()},
            "per layer": per_layer}


def kv_cache_bytes_per_token(cfg: TransformerConfig, bytes_per_value: int = 2, context: int | None = None):
    """Bytes of KV cache per token (fp16 by default).

    context=None: what one more token adds while every layer still holds every token -- K and V of G kv heads
    in every layer, 2·L·G·d_h (G·d_h + G·d_v when values are narrower), MLA L·(r_kv + d_r). That is the growth
    before any window is full, the growth of this library's ``KVCache`` at any length (it keeps local layers'
    old tokens too), and an upper bound; an int.
    context=T: the average per token of a cache of T tokens whose local layers hold only their window,
    ``kv_cache_bytes(cfg, T)["total"] / T``; a float, which falls as T passes the windows.
    """
    if context is not None:
        return kv_cache_bytes(cfg, context, bytes_per_value)["total"] / context
    n_self_attention_layers = cfg.n_layers  # the decoder's layers in an encoder-decoder
    return n_self_attention_layers * sum(_cache_width(cfg).values()) * bytes_per_value
