"""Is a page rerun still interactive? The forward pass of every shipped language checkpoint on 256 characters.

    python -m benchmarks.checkpoint_forward [--smoke] [--threads 1 2] [--repeats 20]

For each language checkpoint in assets/checkpoints/index.json (and its variants): the median time of one
plain forward and of one forward recording every hook (what a page's trace costs) on a 256-character
text after <bos> (BERT: the 64 characters its position table was trained on), at each thread count asked for.
Target: the plain forward within 50 ms on two cores.
--smoke times one checkpoint once: its numbers mean nothing, it only proves the benchmark runs.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from transformer.checkpoint import load, shipped, variants
from transformer.training import english
from transformer.training.language import encode_chars

TEXT_CHARS = 256
TARGET_MS = 50.0


def median_ms(run, repeats: int) -> float:
    run()  # warm up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


@torch.no_grad()
def measure(threads: list[int], repeats: int, limit: int | None = None) -> list[dict]:
    entries = [e for e in shipped() + variants() if e.task == "language"][:limit]
    rows = []
    for entry in entries:
        model, meta = load(entry.path, device="cpu")
        characters = min(TEXT_CHARS, meta["corpus"]["context"])  # never past the context it was trained on
        ids = torch.tensor([[0, *encode_chars(english.outside_prose()[:characters])]])  # (1, 1 + characters)
        for n in threads:
            torch.set_num_threads(n)
            rows.append({"checkpoint": entry.name, "threads": n, "characters": characters,
                         "parameters": sum(p.numel() for p in model.parameters()),
                         "forward_ms": median_ms(lambda: model(ids), repeats),
                         "trace_ms": median_ms(lambda: model.run_with_trace(ids), repeats)})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    rows = measure(args.threads[:1], 1, limit=1) if args.smoke else measure(args.threads, args.repeats)
    print("| checkpoint | parameters | threads | characters | forward (ms) | recording every hook (ms) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        flag = "" if r["forward_ms"] <= TARGET_MS else f" (over {TARGET_MS:.0f})"
        print(f"| {r['checkpoint']} | {r['parameters'] / 1e6:.2f} M | {r['threads']} | {r['characters']} | "
              f"{r['forward_ms']:.1f}{flag} | {r['trace_ms']:.1f} |")


if __name__ == "__main__":
    main()
