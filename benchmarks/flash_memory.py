"""Peak memory and time of causal attention as T grows: the explicit five lines vs SDPA vs tiled, as a table.

    python -m benchmarks.flash_memory [--lengths 512 1024 2048 4096] [--block 128] [--threads N]

The measurements are the library's (transformer.flash_memory, which the app's Flash page runs as
a fresh process); this table adds what the formulas expect and how far each output is from SDPA's.
"formula" is full_attention_bytes or tiled_attention_bytes (neither counts the output).
"""
from __future__ import annotations

import argparse

import torch

from transformer.costs import full_attention_bytes, tiled_attention_bytes
from transformer.flash_memory import (B, BLOCK, D_HEAD, G, H, LENGTHS, METHODS, give_freed_memory_back,
                                      measuring_device, peak_bytes, random_qkv, sdpa, seconds)

MiB = 2 ** 20


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--block", type=int, default=BLOCK)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = measuring_device()
    if device.type == "cpu":
        give_freed_memory_back()
    print(f"causal attention, B={B} H={H} G={G} d_head={D_HEAD} float32, block {args.block}, on {device}, "
          f"{torch.get_num_threads()} threads")
    header = f"{'T':>6} {'method':>9} {'peak MiB':>9} {'formula MiB':>12} {'ms':>9} {'max |diff|':>11}"
    print(header)
    print("-" * len(header))
    with torch.no_grad():
        for T in args.lengths:
            q, k, v = random_qkv(T, device)
            reference = sdpa(q, k, v, args.block).transpose(1, 2).reshape(B, T, H * D_HEAD)
            formula = {"explicit": full_attention_bytes(B, H, T, 4),
                       "tiled": tiled_attention_bytes(B, H, T, args.block, args.block, D_HEAD)}
            for name, method in METHODS.items():
                run = lambda: method(q, k, v, args.block)  # noqa: E731
                out = run()  # warm-up, and the answer to compare
                out = out if out.dim() == 3 else out.transpose(1, 2).reshape(B, T, H * D_HEAD)
                diff = (out - reference).abs().max().item()
                peak = peak_bytes(run, device) / MiB
                ms = seconds(run, device) * 1000
                expected = f"{formula[name] / MiB:12.2f}" if name in formula else f"{'':>12}"
                print(f"{T:>6} {name:>9} {peak:9.1f} {expected} {ms:9.1f} {diff:11.1e}")


if __name__ == "__main__":
    main()
