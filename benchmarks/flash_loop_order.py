"""FlashAttention 1's loop order against FlashAttention 2's, timed in the same framework, with the HBM bytes each moves.

    python -m benchmarks.flash_loop_order [--lengths 1024 2048 4096] [--block 128] [--d-head 64] [--smoke]

Both orders are the library's PyTorch loops (transformer.flash_io.fa1_attention and the library's TiledAttention,
counted through fa2_attention): one tile per Python iteration, each tile a few small kernels. The device is CUDA
when one is present, else the CPU. The bytes are what each loop reports to an HBMTraffic counter (fp16 elements)
during its warm-up call; the timed calls count nothing. scaled_dot_product_attention is timed beside them as the
fused kernel the library uses by default. A Python loop's time is mostly launching small kernels, so what it says
about a fused kernel's HBM-bound speed is limited: read the bytes column for that.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from transformer.flash_io import fa1_attention, fa2_attention
from transformer.flash_memory import measuring_device, seconds
from transformer.hbm import HBMTraffic, check_tiles_fit

B, H = 1, 4
LENGTHS, SMOKE_LENGTHS = (1024, 2048, 4096), (128,)
ELEMENT_BYTES = 2  # the bytes are counted as a fp16 kernel would move them; the arithmetic here is float32
MiB = 2 ** 20

# method -> how it is called on (q, k, v, block, traffic)
METHODS = {
    "FA1 order": lambda q, k, v, block, traffic: fa1_attention(q, k, v, traffic, block_q=block, block_k=block),
    "FA2 order": lambda q, k, v, block, traffic: fa2_attention(q, k, v, traffic, block_q=block, block_k=block),
    "sdpa": lambda q, k, v, block, traffic: F.scaled_dot_product_attention(q, k, v),
}


def rows(lengths: list[int], block: int, d_head: int, repeats: int) -> list[dict]:
    """One dict per (T, method): seconds per call (median), MiB moved (None for sdpa) and max |out - sdpa|."""
    check_tiles_fit(block, block, d_head, ELEMENT_BYTES, 192 * 1024)
    device = measuring_device()
    results = []
    with torch.no_grad():
        for T in lengths:
            g = torch.Generator().manual_seed(T)
            q, k, v = (torch.randn(B, H, T, d_head, generator=g).to(device) for _ in range(3))  # (B, H, T, d_head)
            reference = F.scaled_dot_product_attention(q, k, v)  # (B, H, T, d_head)
            for name, method in METHODS.items():
                traffic = HBMTraffic(ELEMENT_BYTES)
                out = method(q, k, v, block, traffic)  # warm-up, counted once
                time_s = seconds(lambda: method(q, k, v, block, None), device, repeats)
                results.append({"T": T, "method": name, "device": str(device), "seconds": time_s,
                                "mib_moved": traffic.total_bytes / MiB if traffic.total_bytes else None,
                                "max_diff": float((out - reference).abs().max())})
    return results


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's choice)")
    parser.add_argument("--smoke", action="store_true", help="one short length, one repeat: checks that it runs")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    lengths, repeats = (list(SMOKE_LENGTHS), 1) if args.smoke else (args.lengths, args.repeats)
    results = rows(lengths, args.block, args.d_head, repeats)
    print(f"non-causal attention, B={B} H={H} d_head={args.d_head}, tiles of {args.block}, float32 arithmetic, "
          f"bytes counted as fp16, on {results[0]['device']}, {torch.get_num_threads()} threads")
    header = f"{'T':>6} {'method':>10} {'ms':>10} {'MiB moved':>10} {'max |diff|':>11}"
    print(header)
    print("-" * len(header))
    for row in results:
        moved = f"{row['mib_moved']:10.1f}" if row["mib_moved"] is not None else f"{'':>10}"
        print(f"{row['T']:>6} {row['method']:>10} {row['seconds'] * 1000:10.1f} {moved} {row['max_diff']:11.1e}")
    return results


if __name__ == "__main__":
    main()
