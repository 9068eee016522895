"""Train and save every shipped checkpoint into assets/checkpoints, and write its index.json.

    python scripts/train_checkpoints.py                 # all of them
    python scripts/train_checkpoints.py --only gpt2-induction bert-mirror

Each recipe is a preset, a task and a few training settings; the accuracy stored with a
checkpoint is measured on fresh samples after training. Training uses one CPU thread
by default (--threads), which is both fair on a shared two-core machine and, for models
this small, faster than two threads that fight over cores.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformer import checkpoint  # noqa: E402
from transformer.train import config_for, describe, train  # noqa: E402


@dataclass(frozen=True)
class Recipe:
    preset: str
    task: str
    steps: int
    lr: float = 3e-3
    batch_size: int = 32
    seed: int = 0
    aux_loss_weight: float = 0.01  # MoE load balancing
    changes: dict = field(default_factory=dict)  # config fields sized for the task (n_layers, max_len)

    @property
    def name(self) -> str:
        return f"{self.preset}-{self.task}"


RECIPES = [
    Recipe("llama2", "induction", steps=1000),
    Recipe("mistral", "induction", steps=1000),
    Recipe("falcon", "induction", steps=1000),
    # Learned positions (GPT-2), ALiBi (BLOOM) and PaLM's block did not form induction heads within a
    # minute (see docs/checkpoints.md); they ship on sort, whose pointer attention they learn quickly.
    Recipe("gpt2", "sort", steps=2000),
    Recipe("palm", "sort", steps=2000),
    Recipe("bloom", "sort", steps=1500),
    Recipe("mixtral", "mixed", steps=800, batch_size=64),
    Recipe("original", "reverse", steps=1500),
    Recipe("original", "copy", steps=500),
    Recipe("bert", "mirror", steps=2000),
]


def file_bytes(path: Path) -> int:
    weights, meta = checkpoint.checkpoint_paths(path)
    return weights.stat().st_size + meta.stat().st_size


def train_recipe(recipe: Recipe, directory: Path) -> dict:
    cfg = config_for(recipe.preset, recipe.task, **recipe.changes)
    model, history = train(cfg, recipe.task, recipe.steps, lr=recipe.lr, batch_size=recipe.batch_size,
                           seed=recipe.seed, aux_loss_weight=recipe.aux_loss_weight, device="cpu")
    meta = describe(model, recipe.task, history, {
        "batch_size": recipe.batch_size, "lr": recipe.lr, "seed": recipe.seed, "aux_loss_weight": recipe.aux_loss_weight,
        "threads": torch.get_num_threads(), "config_changes": recipe.changes})
    meta["preset"] = recipe.preset
    path = directory / recipe.name
    checkpoint.save(model, path, meta)
    seconds = meta["training"]["seconds"]
    print(f"{recipe.name:22s} accuracy {meta['accuracy']:.3f}  {seconds:5.1f} s  {file_bytes(path) / 1024:6.0f} KiB "
          f"{json.dumps(meta.get('figures', {}))}", flush=True)
    return {"name": recipe.name, "preset": recipe.preset, "task": recipe.task, "accuracy": meta["accuracy"],
            "train_seconds": seconds, "bytes": file_bytes(path)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="recipe names, e.g. gpt2-induction (default: all)")
    parser.add_argument("--out", type=Path, default=checkpoint.SHIPPED_DIR)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    known = {r.name: r for r in RECIPES}
    unknown = set(args.only or []) - set(known)
    if unknown:
        parser.error(f"unknown recipes {sorted(unknown)}; choose from {', '.join(known)}")
    torch.set_num_threads(args.threads)  # this script's own process, not the library's business

    index_path = args.out / "index.json"
    previous = {e["name"]: e for e in json.loads(index_path.read_text())["checkpoints"]} if index_path.exists() else {}
    for recipe in RECIPES:
        if not args.only or recipe.name in args.only:
            previous[recipe.name] = train_recipe(recipe, args.out)
    entries = [previous[r.name] for r in RECIPES if r.name in previous]  # recipe order
    index_path.write_text(json.dumps({"format_version": 1, "checkpoints": entries}, indent=2) + "\n")
    print(f"{len(entries)} checkpoints, {sum(e['bytes'] for e in entries) / 2**20:.2f} MiB in all; wrote {index_path}")


if __name__ == "__main__":
    main()
