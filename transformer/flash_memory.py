"""Peak memory and time of causal attention as T grows: the explicit five lines vs SDPA vs tiled.

    python -m transformer.flash_memory memory|time [--lengths 512 1024 2048 4096] [--block 128]

measures one quantity and prints one JSON line per measurement, as it is made: the app's Flash
page runs it as a fresh process (a peak of resident memory means something only in a process that
does nothing else) and moves a progress bar line by line. ``python -m benchmarks.flash_memory``
prints the same measurements as a table beside the formulas.

Peak memory is what one call adds on top of its inputs, its own output included:
torch.cuda.max_memory_allocated on a GPU; on a Linux CPU, the process's peak resident
memory (VmHWM, reset through /proc/self/clear_refs), with every allocation over 16 KiB
made as its own mapping so that freeing it really gives it back. The explicit path
includes building its additive mask, as the library does once per forward pass.
The tiled version is a Python loop written to be read and recorded, so its time says
nothing about a fused flash kernel; its memory does.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import re
import statistics
import time
from pathlib import Path
from typing import Iterator

import torch
import torch.nn.functional as F

from . import masks
from .attention import AttentionInputs, attend
from .flash import tiled_attention

B, H, G, D_HEAD = 1, 4, 2, 64
LENGTHS = (512, 1024, 2048, 4096)
BLOCK = 128


def explicit(q, k, v, block):
    positions = torch.arange(q.shape[2], device=q.device)
    allowed = masks.self_attention(positions, positions, is_causal=True)  # (1, 1, T, T)
    return attend(q, k, v, AttentionInputs.from_allowed(allowed, dtype=q.dtype), fused=False)  # (B, T, H * d_head)


def sdpa(q, k, v, block):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def tiled(q, k, v, block):
    return tiled_attention(q, k, v, is_causal=True, block_q=block, block_k=block)[0]


METHODS = {"explicit": explicit, "sdpa": sdpa, "tiled": tiled}


def measuring_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def random_qkv(T: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(T)
    q = torch.randn(B, H, T, D_HEAD, generator=g).to(device)  # (B, H, T, d_head)
    k = torch.randn(B, G, T, D_HEAD, generator=g).to(device)  # (B, G, T, d_head)
    v = torch.randn(B, G, T, D_HEAD, generator=g).to(device)  # (B, G, T, d_head)
    return q, k, v


def give_freed_memory_back() -> None:
    """glibc: serve every allocation over 16 KiB with its own mmap, returned to the OS when freed."""
    M_MMAP_THRESHOLD = -3
    ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, 16 * 1024)


def peak_bytes(fn, device: torch.device) -> int:
    """Memory one call adds at its peak, over what was held before it."""
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak resident size to the current one
    before = _status_kib("VmRSS")
    fn()
    return (_status_kib("VmHWM") - before) * 1024


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(rf"{field}:\s+(\d+) kB", f.read()).group(1))


def seconds(fn, device: torch.device, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measurements(kind: str, lengths: list[int], block: int) -> Iterator[dict]:
    """Peak memory ("memory", bytes) or time ("time", seconds) of each method at each T.

    Yields a header {"device", "threads", "methods", "setup"}, then {"T", "method", "value"} per
    measurement; or one {"error"} when this machine cannot measure it.
    """
    device = measuring_device()
    if device.type == "cpu" and kind == "memory":
        if not Path("/proc/self/clear_refs").exists():
            yield {"error": "measuring peak memory on a CPU needs Linux (/proc/self/clear_refs); "
                            "the time measurement works everywhere"}
            return
        give_freed_memory_back()  # freed blocks go back to the OS, so the resident peak is the real one
    yield {"device": str(device), "threads": torch.get_num_threads(), "methods": list(METHODS),
           "setup": dict(B=B, H=H, G=G, d_head=D_HEAD)}
    with torch.no_grad():
        for T in lengths:
            q, k, v = random_qkv(T, device)
            for name, method in METHODS.items():
                run = lambda: method(q, k, v, block)  # noqa: E731
                run()  # warm-up: first calls allocate caches and pick kernels
                value = peak_bytes(run, device) if kind == "memory" else seconds(run, device)
                yield {"T": T, "method": name, "value": value}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["memory", "time"], help="peak bytes or seconds per call")
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--block", type=int, default=BLOCK)
    args = parser.parse_args(argv)
    for record in measurements(args.kind, args.lengths, args.block):
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
