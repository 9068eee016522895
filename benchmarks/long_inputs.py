"""The plain forward on a long text: this library against Hugging Face's SDPA forward, time and peak memory;
then ``summarize`` against the plain forward on the shipped LLaMA 2 language checkpoint.

    python -m benchmarks.long_inputs [--lengths 1024 4096 8192 16384 32768] [--threads N] [--only forward|summary]

The same random LLaMA-shaped weights in both (d_model 128, 4 layers, 4 heads, 2 KV heads: the model is built in
Hugging Face and opened with ``from_hf``), one fresh process for each length and each side, so one's allocator
cannot lend to the other. "peak MiB" is the process's maximum resident set (ru_maxrss); "forward MiB" what the
forward added to the resident set it started from. The ratio columns are ours / Hugging Face's, measured side by
side in one run; "max |diff|" compares the last position's logits of the two processes.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch

LENGTHS = (1024, 4096, 8192, 16384, 32768)
SHAPE = dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=344, vocab_size=256, max_position_embeddings=131072)
MiB = 2 ** 20
CHECKPOINT = "llama2-language"


def rss_bytes() -> int:
    """The resident set now, from /proc (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def hugging_face_model():
    import transformers as tf

    torch.manual_seed(0)
    config = tf.LlamaConfig(**SHAPE, attn_implementation="sdpa", bos_token_id=None, eos_token_id=None,
                            pad_token_id=None)
    return tf.LlamaForCausalLM(config).eval()


def worker(side: str, length: int) -> dict:
    """One run of `side` on `length` random tokens, in this process: "ours" or "hf" (the plain forward of the
    LLaMA shape), "plain" or "summary" (the shipped LLaMA 2 checkpoint's forward, or its summaries)."""
    if side in ("plain", "summary"):
        from transformer.checkpoint import SHIPPED_DIR, load
        from transformer.long_context import summarize

        model = load(SHIPPED_DIR / CHECKPOINT)[0]
        ids = torch.randint(1, model.cfg.vocab_size, (1, length), generator=torch.Generator().manual_seed(1))

        def forward():
            if side == "plain":
                return model(ids)[0, -1, :16]
            return summarize(model, ids)["blocks.0.attn"]["entropy"][0, :, -16:].flatten()
    else:
        from transformer.interop import from_hf

        model = hugging_face_model()
        if side == "ours":
            model = from_hf(model)
        ids = torch.randint(0, SHAPE["vocab_size"], (1, length), generator=torch.Generator().manual_seed(1))

        def forward():
            out = model(ids) if side == "ours" else model(input_ids=ids, use_cache=False, logits_to_keep=0).logits
            return out[0, -1, :16]

    with torch.no_grad():
        forward_short = model(input_ids=ids[:, :64], use_cache=False) if side == "hf" else model(ids[:, :64])
        del forward_short  # a warm-up on a short text: kernels chosen, pools made
        before = rss_bytes()
        start = time.perf_counter()
        last = forward()
        seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"seconds": seconds, "peak_bytes": peak, "forward_bytes": peak - before, "last": last.tolist()}


def measure(side: str, length: int, threads: int | None) -> dict:
    command = [sys.executable, "-m", "benchmarks.long_inputs", "--worker", side, "--lengths", str(length)]
    if threads:
        command += ["--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's choice)")
    parser.add_argument("--only", choices=("forward", "summary"), default=None, help="one of the two tables")
    parser.add_argument("--worker", choices=("ours", "hf", "plain", "summary"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.worker:
        print(json.dumps(worker(args.worker, args.lengths[0])))
        return []
    rows = [] if args.only == "summary" else forward_table(args)
    if args.only != "forward":
        rows += summary_table(args)
    return rows


def forward_table(args) -> list[dict]:
    print(f"plain forward, LLaMA shape {SHAPE['hidden_size']}d x {SHAPE['num_hidden_layers']} layers, "
          f"{SHAPE['num_attention_heads']} heads, {SHAPE['num_key_value_heads']} KV heads, float32, "
          f"one process each, {args.threads or torch.get_num_threads()} threads")
    header = (f"{'T':>6} | {'ours s':>7} {'HF s':>7} {'time x':>6} | {'ours peak MiB':>13} {'HF peak MiB':>11} "
              f"{'peak x':>6} | {'ours fwd MiB':>12} {'HF fwd MiB':>10} | {'max |diff|':>10}")
    print(header)
    print("-" * len(header))
    rows = []
    for length in args.lengths:
        ours, hf = measure("ours", length, args.threads), measure("hf", length, args.threads)
        diff = max(abs(a - b) for a, b in zip(ours["last"], hf["last"]))
        row = {"table": "forward", "T": length, "ours": ours, "hf": hf, "time_ratio": ours["seconds"] / hf["seconds"],
               "peak_ratio": ours["peak_bytes"] / hf["peak_bytes"], "max_diff": diff}
        rows.append(row)
        print(f"{length:>6} | {ours['seconds']:7.2f} {hf['seconds']:7.2f} {row['time_ratio']:6.2f} | "
              f"{ours['peak_bytes'] / MiB:13.0f} {hf['peak_bytes'] / MiB:11.0f} {row['peak_ratio']:6.2f} | "
              f"{ours['forward_bytes'] / MiB:12.0f} {hf['forward_bytes'] / MiB:10.0f} | {diff:10.1e}", flush=True)
    return rows


def summary_table(args) -> list[dict]:
    print(f"\nsummarize(window=64, top_k=8) against the plain forward, {CHECKPOINT}, one process each")
    header = (f"{'T':>6} | {'summary s':>9} {'plain s':>7} {'time x':>6} | {'summary peak MiB':>16} "
              f"{'plain peak MiB':>14} {'peak x':>6}")
    print(header)
    print("-" * len(header))
    rows = []
    for length in args.lengths:
        summary, plain = measure("summary", length, args.threads), measure("plain", length, args.threads)
        row = {"table": "summary", "T": length, "summary": summary, "plain": plain,
               "time_ratio": summary["seconds"] / plain["seconds"],
               "peak_ratio": summary["peak_bytes"] / plain["peak_bytes"]}
        rows.append(row)
        print(f"{length:>6} | {summary['seconds']:9.2f} {plain['seconds']:7.2f} {row['time_ratio']:6.2f} | "
              f"{summary['peak_bytes'] / MiB:16.0f} {plain['peak_bytes'] / MiB:14.0f} {row['peak_ratio']:6.2f}",
              flush=True)
    return rows


if __name__ == "__main__":
    main()
