"""Snapshot what the library computes, and compare two snapshots: a refactor that changes nothing leaves them equal.

    python -m scripts.behaviour_snapshot dump OUT_DIR              # measures the tree in the current directory
    python -m scripts.behaviour_snapshot compare DIR_A DIR_B       # exits 1 if any item differs or is on one side only
    cd ../other-tree && python /path/to/scripts/behaviour_snapshot.py dump OUT_DIR   # measures ../other-tree

A snapshot holds
  presets/NAME.json          every preset's config (``to_dict``)
  cards/KEY.json             every model card: its classroom and real configs, published and counted parameters
  checkpoints/NAME.npz       every shipped checkpoint's float32 logits on a fixed input, and that input
  lessons/NN-SLUG.*.json     every lesson step's figure (``fig.to_json()``) and its live question, choices and answer
and checkpoints/not_snapshotted.json, lessons/not_snapshotted.json: what could not be run, and why.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

# Language models read this (over 256 characters, so Mistral's, Gemma 3's and gpt-oss's windows slide; under
# GPT-2's 512; a repeated sentence, so induction heads have something to copy).
ENGLISH = ("The cat sat on the mat, and the dog lay by the door. When the rain stopped, the children ran outside to "
           "play in the wet grass. Their mother called them back for supper at six o'clock. The cat sat on the mat, "
           "and the dog lay by the door. A river runs through the valley, past the old mill and the stone bridge.")
ENCODER_CHARS, MASK_EVERY = 64, 8  # BERT's language model trained on 64 characters; every 8th is masked for it
# The synthetic tasks' inputs, written out here so that a change to the library's example texts cannot move them
TASK_TEXTS = {"induction": "qhvtwcmbvtwcmbkx", "copy": "transformer", "reverse": "attention", "sort": "3141592653",
              "mirror": "dr_wwa_d", "mixed": "3hello2024world"}
VISION_IMAGES = 10  # the first held-out digits


# --- dump -------------------------------------------------------------------------------------------------


def write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def dump_configs(out: Path) -> tuple[int, int]:
    """presets/ and cards/; returns (presets, cards) written."""
    from transformer import MODEL_CARDS, PRESETS

    for name, config in PRESETS.items():
        write_json(out / "presets" / f"{name}.json", config.to_dict())
    for key, card in MODEL_CARDS.items():
        write_json(out / "cards" / f"{key}.json", {
            "name": card.name, "year": card.year, "summary": card.summary, "config": card.config.to_dict(),
            "real": {size: cfg.to_dict() for size, cfg in card.real.items()},
            "published_params": card.published_params, "published_active": card.published_active,
            "active_counts": card.active_counts, "counted": {size: card.counted(size) for size in card.real}})
    return len(PRESETS), len(MODEL_CARDS)


def checkpoint_inputs(model, meta: dict) -> dict[str, np.ndarray]:
    """The fixed input a checkpoint reads, as the arrays its forward takes (in order)."""
    import torch

    from transformer import rnn, vision
    from transformer.training.tasks import SequenceToSequence, get_task

    if vision.VISION_KEY in meta:
        return {"images": vision.digits_split().test_images[:VISION_IMAGES].numpy()}
    if rnn.SEQ2SEQ_KEY in meta:
        task = model.cfg.source_task
    else:
        task = get_task(meta["task"]).for_arch(model.cfg.arch)
    if isinstance(task, SequenceToSequence):  # teacher forcing: <bos> and the right answer shifted right
        text = TASK_TEXTS[task.name]
        src = task.encode(text)
        answer = [src[i] for i in task.source_index(len(text)).tolist()]
        return {"src_ids": np.array([src]), "tgt_in": np.array([[task.token_id("<bos>"), *answer[:-1]]])}
    if task.name != "language":
        return {"input_ids": np.array([task.encode(TASK_TEXTS[task.name])])}
    if model.cfg.row("arch").next_token:
        return {"input_ids": np.array([task.encode(ENGLISH)])}
    ids = torch.tensor(task.encode(ENGLISH[:ENCODER_CHARS]))
    ids[1::MASK_EVERY] = task.token_id("<mask>")
    return {"input_ids": ids[None].numpy()}


def dump_checkpoints(out: Path) -> tuple[int, dict[str, str]]:
    """checkpoints/NAME.npz for every checkpoint file shipped; returns (written, {name: why not} for the rest)."""
    import torch

    from transformer.checkpoint import SHIPPED_DIR, load

    skipped = {}
    paths = sorted(p for p in SHIPPED_DIR.glob("*.json") if p.name != "index.json")
    for path in paths:
        name = path.stem
        try:
            model, meta = load(path.with_suffix(""), device="cpu")
            inputs = checkpoint_inputs(model.eval(), meta)
            torch.manual_seed(0)
            with torch.no_grad():
                logits = model(*(torch.from_numpy(a) for a in inputs.values()))
        except Exception as error:  # recorded, so that the other side's snapshot shows what this one lacks
            skipped[name] = f"{type(error).__name__}: {error}"
            continue
        np.savez(out / "checkpoints" / f"{name}.npz", **inputs, logits=logits.float().numpy())
    write_json(out / "checkpoints" / "not_snapshotted.json", skipped)
    return len(paths) - len(skipped), skipped


def jsonable(value):
    """Numpy scalars as Python numbers, for json.dumps."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dump_lessons(out: Path) -> tuple[int, dict[str, str]]:
    """lessons/NN-SLUG.figure.json and .live.json for every step; returns (steps written, {slug: why not})."""
    from streamlit.logger import set_log_level

    set_log_level("error")  # the cached builders' bare-mode warnings, one per call, say nothing here
    from ui.lessons.steps import STEPS

    skipped = {}
    for number, step in enumerate(STEPS, start=1):
        stem = f"{number:02d}-{step.slug}"
        try:
            live = step.build()
        except Exception as error:  # recorded, as for checkpoints
            skipped[step.slug] = f"{type(error).__name__}: {error}"
            continue
        (out / "lessons" / f"{stem}.figure.json").write_text(live.figure.to_json(), encoding="utf-8")
        rest = {f.name: getattr(live, f.name) for f in fields(live) if f.name != "figure"}
        (out / "lessons" / f"{stem}.live.json").write_text(
            json.dumps(rest, indent=1, sort_keys=True, default=jsonable) + "\n", encoding="utf-8")
    write_json(out / "lessons" / "not_snapshotted.json", skipped)
    return len(STEPS) - len(skipped), skipped


def dump(out: Path) -> None:
    import torch

    import transformer

    if out.exists() and any(out.iterdir()):
        sys.exit(f"{out} is not empty: dump into a new directory, so that no stale item survives")
    for part in ("checkpoints", "lessons"):
        (out / part).mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    print(f"measuring {Path(transformer.__file__).resolve().parent.parent}")
    presets, cards = dump_configs(out)
    print(f"{presets} presets, {cards} model cards")
    for part, run in (("checkpoints", dump_checkpoints), ("lesson steps", dump_lessons)):
        written, skipped = run(out)
        print(f"{written} {part}" + (f", {len(skipped)} not snapshotted:" if skipped else ""))
        for name, why in skipped.items():
            print(f"  {name}: {why}")


# --- compare ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    item: str  # path inside the snapshot
    status: str  # "identical", "differs", "only in A" or "only in B"
    detail: str = ""


def first_difference(a, b, where: str = "") -> str | None:
    """The path of the first place two parsed JSON values differ (e.g. ``data[0].z[3]``), or None if equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a.keys() | b.keys()):
            here = f"{where}.{key}" if where else str(key)
            if key not in a or key not in b:
                return f"{here} (only in {'B' if key not in a else 'A'})"
            found = first_difference(a[key], b[key], here)
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return None if len(a) == len(b) else f"{where} (length {len(a)} vs {len(b)})"
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return None if a == b or both_nan else f"{where or '(the whole value)'}: {a!r} vs {b!r}"


def array_differences(a: Path, b: Path) -> list[str]:
    """One line per array of two .npz files that is not bitwise equal: its max abs difference, or why none."""
    with np.load(a) as left, np.load(b) as right:
        found = [f"{key} only in {'A' if key in left else 'B'}" for key in sorted(left.keys() ^ right.keys())]
        for key in sorted(left.keys() & right.keys()):
            x, y = left[key], right[key]
            if x.shape != y.shape:
                found.append(f"{key}: shape {x.shape} vs {y.shape}")
            elif not np.array_equal(x, y, equal_nan=x.dtype.kind == "f" and y.dtype.kind == "f"):
                diff = np.abs(x.astype(np.float64) - y.astype(np.float64))
                found.append(f"{key}: max abs difference {np.nanmax(diff):.3g}")
    return found


def compare_item(a: Path, b: Path) -> str | None:
    """What differs between one item's two files, or None if nothing does."""
    if a.suffix == ".npz":
        return "; ".join(array_differences(a, b)) or None
    if a.suffix == ".json":
        found = first_difference(json.loads(a.read_text(encoding="utf-8")), json.loads(b.read_text(encoding="utf-8")))
        return found and f"first differing key {found}"
    return None if a.read_bytes() == b.read_bytes() else "the bytes differ"


def compare(dir_a: Path, dir_b: Path) -> list[Outcome]:
    """Every item of either snapshot, in path order, with what became of it."""
    def items(root: Path) -> set[str]:
        return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}

    in_a, in_b = items(dir_a), items(dir_b)
    outcomes = []
    for item in sorted(in_a | in_b):
        if item not in in_b:
            outcomes.append(Outcome(item, "only in A"))
        elif item not in in_a:
            outcomes.append(Outcome(item, "only in B"))
        else:
            detail = compare_item(dir_a / item, dir_b / item)
            outcomes.append(Outcome(item, "differs", detail) if detail else Outcome(item, "identical"))
    return outcomes


def report(dir_a: Path, dir_b: Path) -> int:
    """Print every item's outcome and a summary; 0 if both snapshots hold the same items, all identical."""
    for side, root in (("A", dir_a), ("B", dir_b)):
        if not root.is_dir():
            sys.exit(f"{side} = {root}: no such directory")
    outcomes = compare(dir_a, dir_b)
    print(f"A = {dir_a}\nB = {dir_b}")
    for o in outcomes:
        print(f"{o.status:<10} {o.item}" + (f": {o.detail}" if o.detail else ""))
    counts = {status: sum(o.status == status for o in outcomes)
              for status in ("identical", "differs", "only in A", "only in B")}
    print(", ".join(f"{n} {status}" for status, n in counts.items()))
    return 0 if counts["identical"] == len(outcomes) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("dump", help="snapshot the tree in the current directory").add_argument("out_dir", type=Path)
    compare_parser = commands.add_parser("compare", help="compare two snapshots")
    compare_parser.add_argument("dir_a", type=Path)
    compare_parser.add_argument("dir_b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "compare":
        return report(args.dir_a, args.dir_b)
    # the tree measured is the current directory's, even when this file is run from another tree
    sys.path.insert(0, os.getcwd())
    dump(args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
