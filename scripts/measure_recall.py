"""Recall at distance on the trained models: full attention, the 3:1 Gated DeltaNet hybrid and pure Gated DeltaNet.

    python -m scripts.measure_recall            # measure and write assets/measurements/recall.json

Each model reads a held-out phrase of 24 characters and the same phrase again d characters later
(``transformer.training.recall``); a control row's first phrase is another. The State page's recall tab and the
lesson "Why the hybrids keep one full layer in four" read the file; a test measures one entry again.
A random-init model of the hybrid's shape shows what recall looks like with nothing learned.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer.checkpoint import SHIPPED_DIR, load  # noqa: E402
from transformer.model import Transformer  # noqa: E402
from transformer.training.recall import DISTANCES, PHRASE, recall_at_distance  # noqa: E402

OUT = ROOT / "assets" / "measurements" / "recall.json"
ROWS = 40  # phrases per distance
RANDOM_SEED = 0

# (checkpoint, what its layers are), the full-attention model first: Qwen3's recipe is Qwen3.5's minus the state
MODELS = (("qwen3-language", "full attention (Qwen3: softmax in every layer)"),
          ("qwen3.5-language", "hybrid (Qwen3.5: 3 Gated DeltaNet layers to 1 softmax)"),
          ("qwen3.5-gdn-language", "pure Gated DeltaNet (no softmax layer)"))
RANDOM_OF = "qwen3.5-language"  # the random-init control takes this model's shape


def layer_kinds(model: Transformer) -> list[str]:
    """Each layer's attention kind, as the layer plan names it."""
    return [spec.kind for spec in model.cfg.layer_plan()]


def entry(name: str, label: str, model: Transformer, meta: dict | None) -> dict:
    recall = recall_at_distance(model, limit=ROWS)
    return {"name": name, "label": label, "layers": layer_kinds(model),
            "parameters": sum(p.numel() for p in model.parameters()),
            "steps": (meta or {}).get("training", {}).get("steps"), "recall": recall.as_json()}


def measure(directory: Path = SHIPPED_DIR) -> dict:
    torch.set_grad_enabled(False)
    models = []
    for name, label in MODELS:
        model, meta = load(directory / name)
        models.append(entry(name, label, model.float(), meta))
    shape = load(directory / RANDOM_OF)[0].cfg
    torch.manual_seed(RANDOM_SEED)
    models.append(entry("random-init", f"random-init, {RANDOM_OF}'s shape (seed {RANDOM_SEED})",
                        Transformer(shape).eval(), None))
    return {"distances": list(DISTANCES), "phrase_chars": PHRASE, "rows": ROWS, "random_seed": RANDOM_SEED,
            "models": models}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    result = measure()
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for model in result["models"]:
        print(f"{model['name']:24s}", model["recall"]["accuracy"], "control", model["recall"]["control_accuracy"])


if __name__ == "__main__":
    main()
