"""How generation keeps the keys and values of the past: one growing tensor per layer, or fixed-size blocks.

Not a field of the model's config: the same weights generate the same tokens with either layout. A caller
picks one when it makes the cache (``transformer.model.CACHE_LAYOUTS``, one class per row).
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import Axis, Choice


@dataclass(frozen=True, kw_only=True)
class CacheChoice(Choice):
    blocks: bool  # stored in fixed-size blocks found through a block table, allocated as the tokens come


KV_CACHE = Axis("KV-cache layout", {
    "contiguous": CacheChoice(
        "contiguous", "each layer's keys and values in one tensor per batch, grown by one token a step",
        "The simplest layout: the past of a request lies in one piece, ready for attention as it is.",
        "Hugging Face's DynamicCache, most teaching code", blocks=False),
    "paged": CacheChoice(
        "paged", "keys and values in fixed-size blocks of a shared pool; a block table per request lists its "
        "blocks in order, and a new block is taken only when the last one is full",
        "A server that reserves every request's maximum length wastes most of its memory on slots no token "
        "fills; paging wastes at most one partly filled block per request, so more requests fit at once.",
        "vLLM's PagedAttention (2023)", blocks=True),
}, problem="A server generates for many requests of different lengths at once. Where their keys and values lie "
           "decides how much memory sits reserved and empty, and so how many requests fit.")
