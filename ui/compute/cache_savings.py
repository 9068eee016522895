"""Where a real model's cache saves: the bytes it holds at a context beside what a cache keeping every token in
every layer would, and in words which layers hold less (KV heads page, "KV-cache memory at real sizes")."""
from __future__ import annotations

from collections import Counter

from transformer.config import TransformerConfig
from transformer.costs import every_token_bytes, kv_cache_bytes


def savings(cfg: TransformerConfig) -> str:
    """Which of cfg's layers hold less than every token's keys and values, in a few words ('' if none does)."""
    plan = cfg.layer_plan()
    parts = []
    if cfg.row("kv_heads").latent:
        parts.append(f"a latent of {cfg.kv_rank} + {cfg.d_rope} per token (MLA)")
    states = sum(spec.row.keeps_state for spec in plan)
    if states:
        parts.append(f"{states} of {len(plan)} layers a fixed state")
    pooled = Counter(spec.compress_rate for spec in plan if spec.compresses and spec.compress_rate)
    if pooled:
        blocks = " and ".join(f"{n} by {rate}" for rate, n in sorted(pooled.items()))
        parts.append(f"blocks pooled ({blocks}) beside a window of {plan[0].window}, one head as key and value")
    windowed = Counter(spec.window for spec in plan if spec.window is not None and not spec.compresses
                       and not spec.row.keeps_state)
    parts += [f"{n} of {len(plan)} layers a window of {w:,}" for w, n in sorted(windowed.items())]
    chunked = Counter(spec.chunk for spec in plan if spec.chunk is not None and spec.window is None)
    parts += [f"{n} of {len(plan)} layers a chunk of {c:,}" for c, n in sorted(chunked.items())]
    shared = sum(spec.reuses_kv for spec in plan)
    if shared:
        parts.append(f"{shared} layers reuse an earlier layer's K and V")
    return "; ".join(parts)


def cache_row(cfg: TransformerConfig, context: int, bytes_per_value: int) -> dict:
    """The GiB cfg's cache holds at `context` tokens (windows, chunks, shared layers, pooled blocks and states
    counted), what it would hold if every layer kept every token's K and V, the indexer's own keys inside the
    first, and where it saves."""
    held = kv_cache_bytes(cfg, context, bytes_per_value)
    every_token = every_token_bytes(cfg, context, bytes_per_value)
    return {f"cache at {context:,} tokens (GiB)": round(held["total"] / 2**30, 3),
            "every token in every layer (GiB)": round(every_token / 2**30, 3),
            "of it indexer keys (GiB)": round(held.get("index keys", 0) / 2**30, 3),
            "where it saves": savings(cfg) or "nowhere: every layer holds every token"}
