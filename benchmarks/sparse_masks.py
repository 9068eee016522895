"""Sparse attention patterns against dense attention: what they save, and when that saving becomes time.

    python -m benchmarks.sparse_masks [--smoke] [--lengths 1024 2048 4096] [--size 64] [--threads 1] [--out FILE]

For each length T and each causal pattern (strided, block-local, global + local, all of size 64), one run
measures side by side, as medians of interleaved repeats:
- dense: torch's SDPA with is_causal=True, the reference every ratio divides by;
- SDPA + mask: the same kernel given the pattern as a boolean mask, what the library's fused path does;
- block-sparse: for block-local, SDPA run on each block alone (the T x T matrix reshaped into T/b blocks of
  b x b), which computes exactly the allowed pairs; its output is checked against SDPA + mask.
It also counts, from the masks themselves, the share of pairs each pattern allows and the share of 64 x 64
tiles a block-sparse kernel would have to compute (a tile with one allowed pair must be computed whole).

A dense kernel given a mask still computes every score and throws the masked ones away, so "SDPA + mask" is
never faster than dense, and usually slower (it reads a T x T mask too). Only a kernel that skips empty
tiles turns the pattern into time, and only as far as the tiles are empty: strided with a stride of one tile
touches every tile.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from transformer import AXES, analysis, masks

B, H, D_HEAD = 1, 8, 64
PATTERNS = tuple(key for key, row in AXES["attention_pattern"].choices.items() if row.sparse)
FULL = dict(lengths=(1024, 2048, 4096), repeats=7)
SMOKE = dict(lengths=(128, 256), repeats=2)


def block_sparse_block_local(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int) -> torch.Tensor:
    """Causal block-local attention computing only the allowed pairs: each block of queries against its own
    block of keys. (B, H, T, d_head) in and out; T a multiple of block."""
    B, H, T, d = q.shape
    blocks = [x.view(B, H, T // block, block, d) for x in (q, k, v)]  # (B, H, T/b, b, d_head)
    return F.scaled_dot_product_attention(*blocks, is_causal=True).view(B, H, T, d)


def median_seconds(calls: dict, repeats: int) -> dict[str, float]:
    """Median wall time of each call, the calls interleaved so that a busy machine slows them alike."""
    samples = {name: [] for name in calls}
    for name, call in calls.items():  # warm-up
        call()
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in samples.items()}


def measure(T: int, size: int, repeats: int) -> list[dict]:
    g = torch.Generator().manual_seed(T)
    q, k, v = (torch.randn(B, H, T, D_HEAD, generator=g) for _ in range(3))  # (B, H, T, d_head)
    positions = torch.arange(T)
    dense_pairs, dense_tiles = T * (T + 1) // 2, (T // size) * (T // size + 1) // 2
    rows = []
    for pattern in PATTERNS:
        allowed = masks.self_attention(positions, positions, is_causal=True, pattern=pattern, pattern_size=size)
        calls = {"dense": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                 "masked": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)}
        row = {"T": T, "pattern": pattern,
               "pairs": analysis.allowed_pairs(pattern, T, size) / dense_pairs,
               "tiles": analysis.tiles_needed(pattern, T, size, size) / dense_tiles}
        if AXES["attention_pattern"].row(pattern).whole_blocks:
            calls["block_sparse"] = lambda: block_sparse_block_local(q, k, v, size)
            row["max_difference"] = float((calls["block_sparse"]() - calls["masked"]()).abs().max())
        with torch.no_grad():
            seconds = median_seconds(calls, repeats)
        row.update({f"{name}_ms": 1e3 * s for name, s in seconds.items()})
        row.update({f"{name}_vs_dense": s / seconds["dense"] for name, s in seconds.items() if name != "dense"})
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| T | pattern | pairs scored | tiles to compute | SDPA + mask / dense | block-sparse / dense |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        sparse = f"{r['block_sparse_vs_dense']:.2f}x" if "block_sparse_vs_dense" in r else "—"
        lines.append(f"| {r['T']:,} | {r['pattern']} | {r['pairs']:.1%} | {r['tiles']:.1%} | "
                     f"{r['masked_vs_dense']:.2f}x | {sparse} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="short lengths, two repeats: checks that it runs")
    parser.add_argument("--lengths", type=int, nargs="+")
    parser.add_argument("--size", type=int, default=64, help="stride, block and window of the patterns; the tile size")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    mode = SMOKE if args.smoke else FULL
    lengths = args.lengths or mode["lengths"]
    bad = [T for T in lengths if T % args.size]
    if bad:
        parser.error(f"lengths {bad} are not multiples of --size {args.size}")
    rows = [row for T in lengths for row in measure(T, args.size, mode["repeats"])]
    print(table(rows))
    if args.out:
        Path(args.out).write_text(json.dumps({"threads": args.threads, "size": args.size, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    main()
