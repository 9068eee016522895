"""Measure every shipped checkpoint on fresh samples and print the figures as markdown tables.

    python scripts/measure_checkpoints.py

Per checkpoint: accuracy on answer positions; the head that draws the task's pattern
(induction: the token after the previous occurrence; copy/reverse: the diagonal /
anti-diagonal of the cross-attention; mirror: the masked token's twin; sort: the
value being written) with its score, and for induction the best previous-token head
in an earlier layer; for the mixture of experts, where each kind of token is routed.
Training seconds and file sizes come from the checkpoint files themselves. The language
checkpoints' figures were measured on every held-out character when they were trained and
are read back from their JSON.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformer.checkpoint import checkpoint_paths, load, shipped, variants  # noqa: E402
from transformer.tasks import TASKS, expert_usage, head_scores, specialisation  # noqa: E402
from transformer.train import evaluate  # noqa: E402

ACCURACY_SEED, PATTERN_SEED = 777, 778  # neither is used by training or by the stored accuracy

PATTERN_NAMES = {"induction": "induction", "copy": "diagonal (cross)", "reverse": "anti-diagonal (cross)",
                 "mirror": "twin", "sort": "pointer"}


def best_head(scores: torch.Tensor) -> tuple[int, int, float]:
    """(layer, head, score) of the highest entry of an (L, H) table."""
    flat = int(scores.argmax())
    layer, head = divmod(flat, scores.shape[1])
    return layer, head, float(scores[layer, head])


def measure(entry) -> dict:
    model, meta = load(entry.path, device="cpu")
    task = TASKS[entry.task]
    weights, json_file = checkpoint_paths(entry.path)
    row = {"name": entry.name, "preset": entry.preset, "task": entry.task,
           "accuracy": evaluate(model, task, n_batches=8, batch_size=128, seed=ACCURACY_SEED),
           "seconds": meta["training"]["seconds"], "steps": meta["training"]["steps"],
           "kib": (weights.stat().st_size + json_file.stat().st_size) / 1024}
    batch = task.sample(256, seed=PATTERN_SEED)
    if entry.task == "mixed":
        row["experts"] = expert_usage(model, task, batch)
        return row
    scores = head_scores(model, task, batch)
    layer, head, score = best_head(scores["solution"])
    row["pattern"] = f"{PATTERN_NAMES[entry.task]} L{layer}H{head} {score:.2f}"
    if entry.task in ("copy", "reverse"):
        row["pattern"] += f" (layer mean {scores['solution'][layer].mean():.2f})"
    if entry.task == "induction" and layer > 0:
        p_layer, p_head, p_score = best_head(scores["previous_token"][:layer])
        row["previous"] = f"L{p_layer}H{p_head} {p_score:.2f}"
    return row


def language_tables(entries) -> None:
    """The language checkpoints' held-out figures, recorded in their JSON when they were trained
    (`transformer.language.measure`: every held-out character, every held-out sentence)."""
    print("| checkpoint | held-out bits/char | next-char accuracy | previous-token head | induction head | "
          "steps | train s | size KiB |")
    print("|---|---|---|---|---|---|---|---|")
    lengths, experts = [], []
    for entry in entries:
        weights, json_file = checkpoint_paths(entry.path)
        meta = json.loads(json_file.read_text())
        figures, training = meta["figures"], meta["training"]
        head = lambda key: (f"L{figures[key]['layer']}H{figures[key]['head']} {figures[key]['score']:.2f}"
                            if key in figures else "")
        bpc = f"{figures['bits_per_char']:.2f}" if "bits_per_char" in figures else "(encoder)"
        kib = (weights.stat().st_size + json_file.stat().st_size) / 1024
        accuracy = (f"{figures['masked_accuracy']:.3f} (masked characters)" if "masked_accuracy" in figures
                    else f"{meta['accuracy']:.3f}")
        after = f"(next-character head {head('next_token_head')})" if "next_token_head" in figures else head("induction_head")
        print(f"| {entry.name} | {bpc} | {accuracy} | {head('previous_token_head')} | {after} | "
              f"{training['steps']} | {training['seconds']:.0f} | {kib:.0f} |")
        if "bits_per_char_by_length" in figures:
            lengths.append((entry.name, meta["config"]["position"], meta["corpus"].get("context", 256),
                            figures["bits_per_char_by_length"]))
        if "experts_by_class" in figures:
            experts.append((entry.name, figures["experts_by_class"], figures["expert_class_separation"]))
    print("\n| checkpoint | position | trained on | " + " | ".join(f"{m} context" for m in lengths[0][3]) + " |")
    print("|---|---|---|" + "---|" * len(lengths[0][3]))
    for name, position, context, by_length in lengths:
        print(f"| {name} | {position} | {context} | " + " | ".join(f"{v:.2f}" for v in by_length.values()) + " |")
    for name, usage, separation in experts:
        print(f"\nExpert routing of {name} on held-out text (share of each class's top-k slots per expert):\n")
        n_experts = len(next(iter(usage[0].values())))
        print("| layer | characters | " + " | ".join(f"expert {e}" for e in range(n_experts)) + " | separation |")
        print("|---|---|" + "---|" * n_experts + "---|")
        for layer, (by_class, sep) in enumerate(zip(usage, separation)):
            for kind, share in by_class.items():
                print(f"| {layer} | {kind} | " + " | ".join(f"{s:.2f}" for s in share) + f" | {sep:.2f} |")


def main() -> None:
    torch.set_num_threads(1)
    entries = shipped()
    language_tables([e for e in entries if e.task == "language"] + variants())
    print()
    rows = [measure(entry) for entry in entries if entry.task != "language"]
    print("| checkpoint | accuracy | pattern head (score) | previous-token head | steps | train s | size KiB |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        pattern = r.get("pattern", "experts: see below")
        print(f"| {r['name']} | {r['accuracy']:.3f} | {pattern} | {r.get('previous', '')} | {r['steps']} | "
              f"{r['seconds']:.1f} | {r['kib']:.0f} |")
    print(f"\nTotal size: {sum(r['kib'] for r in rows) / 1024:.2f} MiB in {len(rows)} checkpoints.")
    for r in rows:
        if "experts" not in r:
            continue
        print(f"\nExpert routing of {r['name']} (share of each kind's top-k slots per expert):\n")
        n_experts = len(next(iter(r["experts"][0].values())))
        print("| layer | kind | " + " | ".join(f"expert {e}" for e in range(n_experts)) + " | specialisation |")
        print("|---|---|" + "---|" * n_experts + "---|")
        for layer, usage in enumerate(r["experts"]):
            spec = specialisation(usage)
            for kind, share in usage.items():
                print(f"| {layer} | {kind} | " + " | ".join(f"{s:.2f}" for s in share.tolist()) + f" | {spec:.2f} |")


if __name__ == "__main__":
    main()
