"""Training steps per second of the English checkpoints' recipe, on the CPU or a GPU.

    python -m benchmarks.train_step [--presets llama2 gpt2 ...] [--steps 30] [--device cuda] [--threads 2]
                                    [--out results.json]

Each preset trains at its card's classroom size on everyday English (WordNet, Debian's wordnet-base) as the
shipped English checkpoints do after their warm-up: batch 16 of 512-character crops, a quarter of the rows
repeating a span, AdamW. A step is the whole of one: the batch drawn, forward, loss, backward, clipping and
the optimizer; train() reads each step's loss back, so on a GPU a step's time includes its kernels. The first
`--warm-up` steps are not counted (allocator pools, kernel selection).
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch

from benchmarks.run import machine
from transformer.training.tasks import Language
from transformer.training.train import config_for, train

PRESETS = ("llama2", "gpt2", "mixtral", "deepseek-v3", "gemma3")
BATCH, CONTEXT = 16, 512


def english_task() -> Language:
    """The English recipe's task after its induction warm-up (scripts/train_checkpoints.py: ENGLISH)."""
    return Language(corpus="english", context=CONTEXT, repeat_rate=0.25, random_spans=0.0, log_uniform_lengths=True)


def measure(preset: str, steps: int, warm_up: int, device: torch.device) -> dict:
    """Steps per second of `steps` timed steps of the preset's English recipe, after `warm_up` untimed ones."""
    task = english_task()
    model, history = train(config_for(preset, task), task, warm_up + steps, batch_size=BATCH, lr=3e-3,
                           device=device, progress=False)
    ends = [0.0] + [h["seconds"] for h in history]  # history's seconds count from the start of training
    timed = [ends[i + 1] - ends[i] for i in range(warm_up, len(history))]
    return dict(preset=preset, parameters=sum(p.numel() for p in model.parameters()), steps=steps,
                median_step_ms=1e3 * statistics.median(timed), steps_per_s=len(timed) / sum(timed),
                characters_per_s=len(timed) * BATCH * CONTEXT / sum(timed),
                loss_first=history[0]["loss"], loss_last=history[-1]["loss"])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=list(PRESETS))
    parser.add_argument("--steps", type=int, default=30, help="timed steps per preset")
    parser.add_argument("--warm-up", type=int, default=5, help="untimed steps first")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--threads", type=int, help="torch threads on the CPU (default: what the machine gives)")
    parser.add_argument("--out", help="write the rows and the machine to this JSON file")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here")
    if args.steps < 1 or args.warm_up < 0:
        parser.error(f"--steps {args.steps} must be at least 1 and --warm-up {args.warm_up} at least 0")
    if args.threads:
        torch.set_num_threads(args.threads)
    info = machine(device)
    print(f"English recipe, batch {BATCH} x {CONTEXT} characters, float32, on "
          f"{info['gpu'] or info['cpu'] + f' ({torch.get_num_threads()} threads)'}")
    print("| preset | parameters | ms a step (median) | steps/s | characters/s | loss first -> last |")
    print("|---|---|---|---|---|---|")
    for preset in args.presets:  # a misspelt preset says so before any training starts
        try:
            config_for(preset, english_task())
        except ValueError as e:
            parser.error(str(e))
    rows = []
    for preset in args.presets:
        r = measure(preset, args.steps, args.warm_up, device)
        rows.append(r)
        print(f"| {preset} | {r['parameters']:,} | {r['median_step_ms']:.1f} | {r['steps_per_s']:.2f} "
              f"| {r['characters_per_s']:,.0f} | {r['loss_first']:.2f} -> {r['loss_last']:.2f} |", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(machine=info, batch=BATCH, context=CONTEXT, rows=rows), f, indent=1)
    return rows


if __name__ == "__main__":
    main()
