"""The sweep behind How models grow: models of several widths, one FLOP budget each, their held-out loss.

    python -m transformer.training.scaling_sweep   # writes assets/measurements/scaling-sweep.json, a few minutes

The recipe (widths, LLaMA's axes, where the result lives) is the library's, in transformer.scaling;
training them is this package's work.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from . import language
from ..costs.flops import BACKWARD_PER_FORWARD, forward_flops
from ..costs.params import param_counts
from ..scaling import SWEEP_BASE, SWEEP_PATH, SWEEP_WIDTHS, sweep_config
from .tasks import Language
from .train import train


@dataclass(frozen=True)
class SweepSettings:
    budget: float = 1e12  # training FLOPs each model may spend: about two minutes of one thread for all four
    context: int = 64  # characters per training crop
    batch_size: int = 16
    lr: float = 3e-3
    seed: int = 0
    eval_windows: int = 256  # held-out windows of `context` characters the loss is read on


def iso_flop_sweep(settings: SweepSettings = SweepSettings(), widths=SWEEP_WIDTHS, log=print) -> dict:
    """Train a model of each width on everyday English with the same FLOP budget and read its held-out loss.

    A bigger model costs more per token, so it trains on fewer: steps = budget / (3 x forward FLOPs of one
    batch), the forward counted as torch's FLOP counter counts it (transformer.costs.forward_flops).
    """
    task = Language(corpus="english", context=settings.context, repeat_rate=0.0)  # plain text, no copying
    runs = []
    for d_model in widths:
        cfg = sweep_config(d_model, len(task.vocab), settings.context)
        step_flops = (1 + BACKWARD_PER_FORWARD) * forward_flops(cfg, settings.batch_size, 1 + settings.context)
        steps = max(1, round(settings.budget / step_flops))
        model, history = train(cfg, task, steps, batch_size=settings.batch_size, lr=settings.lr, seed=settings.seed,
                               device="cpu", progress=False)
        bits = language.bits_per_char(model, context=settings.context, limit=settings.eval_windows, corpus="english")
        runs.append({"d_model": d_model, "vocab_size": cfg.vocab_size, "params": param_counts(cfg)["total"],
                     "steps": steps,
                     "tokens": steps * settings.batch_size * (1 + settings.context),
                     "flops": steps * step_flops, "bits_per_char": round(bits, 4),
                     "nats_per_char": round(bits * math.log(2), 4),
                     "cpu_seconds": round(history[-1]["cpu_seconds"], 1)})
        log(json.dumps(runs[-1]))
    return {"settings": asdict(settings), "recipe": {**SWEEP_BASE, "n_heads": "d_model / 16"},
            "corpus": "everyday English (transformer.training.english), held-out split", "runs": runs}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Measure loss against model size at one fixed FLOP budget.")
    parser.add_argument("--out", default=str(SWEEP_PATH), help="the JSON file to write")
    parser.add_argument("--budget", type=float, default=SweepSettings.budget)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the seconds recorded are for one thread
    start = time.perf_counter()
    result = iso_flop_sweep(SweepSettings(budget=args.budget))
    result["wall_seconds"] = round(time.perf_counter() - start, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
