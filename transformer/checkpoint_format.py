"""One checkpoint on disk: weights in safetensors, everything else in a JSON file beside them.

    save(model, "assets/checkpoints/gpt2-induction", meta)  # -> .safetensors + .json
    document, cfg = read_meta("assets/checkpoints/gpt2-induction")

Nothing is pickled and loading executes no code: the JSON holds the config (validated
by ``TransformerConfig``), the task, the training settings and the measured accuracy;
the safetensors file holds named tensors only. Tied weights (the output head that
reuses the embedding) are stored once and listed under "shared".

This module knows the file format and no kind of model: the Vision Transformer (vision.py) and the
GRU encoder-decoder (rnn.py) write and read their files with it, and ``transformer.checkpoint.load``,
which imports them, reads every kind. Every way a checkpoint can be wrong -- a missing file, a truncated
or corrupt safetensors, bad JSON, a config that fails validation, weights whose names or shapes do not
fit the config -- raises ``CheckpointError`` (a ``ValueError``) naming the file and why.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .config import TransformerConfig

FORMAT = "attention-lab-checkpoint"
FORMAT_VERSION = 1
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "assets" / "checkpoints"
RESERVED_KEYS = ("format", "format_version", "weights", "config", "shared")


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded: the message names the file and the reason."""


def checkpoint_paths(path: str | Path) -> tuple[Path, Path]:
    """(weights, json) for a checkpoint path given with or without its extension."""
    path = Path(path)
    stem = path.with_suffix("") if path.suffix in (".safetensors", ".json") else path
    return stem.with_name(stem.name + ".safetensors"), stem.with_name(stem.name + ".json")


def shared_names(model: torch.nn.Module) -> dict[str, str]:
    """alias -> canonical name, for state_dict entries that are the same tensor (tied weights)."""
    first_name: dict[tuple, str] = {}
    shared = {}
    for name, tensor in model.state_dict().items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tensor.stride())
        if key in first_name:
            shared[name] = first_name[key]
        else:
            first_name[key] = name
    return shared


def save(model: torch.nn.Module, path: str | Path, meta: dict | None = None,
         store_as: torch.dtype | None = None) -> tuple[Path, Path]:
    """Write PATH.safetensors (weights, tied ones once) and PATH.json (the model's ``cfg`` + meta). Returns both paths.

    `store_as=torch.bfloat16` halves the file; loading casts the weights back to the config's dtype."""
    meta = dict(meta or {})
    clash = [k for k in RESERVED_KEYS if k in meta]
    if clash:
        raise ValueError(f"meta keys {clash} are written by save() itself; rename them (reserved: {', '.join(RESERVED_KEYS)})")
    weights_path, json_path = checkpoint_paths(path)
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    shared = shared_names(model)
    tensors = {name: t.detach().cpu().to(store_as or t.dtype).contiguous()
               for name, t in model.state_dict().items() if name not in shared}
    save_file(tensors, str(weights_path), metadata={"format": FORMAT, "format_version": str(FORMAT_VERSION)})
    document = {"format": FORMAT, "format_version": FORMAT_VERSION, "weights": weights_path.name,
                "config": model.cfg.to_dict(), "shared": shared, **meta}
    json_path.write_text(json.dumps(document, indent=2) + "\n")
    return weights_path, json_path


def read_document(path: str | Path) -> dict:
    """The checkpoint's JSON document, checked to be one of ours in this format version (any kind of model)."""
    _, json_path = checkpoint_paths(path)
    if not json_path.is_file():
        raise CheckpointError(f"{json_path}: no such checkpoint file; save one with transformer.checkpoint.save "
                              "or pick a path from transformer.checkpoint.shipped()")
    try:
        document = json.loads(json_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{json_path}: not valid JSON ({error}); the file is damaged, save the checkpoint again") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise CheckpointError(f"{json_path}: not an Attention Lab checkpoint (expected \"format\": \"{FORMAT}\")")
    version = document.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(f"{json_path}: format_version {version!r}, but this library reads version {FORMAT_VERSION}")
    return document


def read_meta(path: str | Path) -> tuple[dict, TransformerConfig]:
    """The checkpoint's JSON document and its validated config, without touching the weights.

    The document's "config" is given back as the config reads it: a field newer than the file takes its default."""
    _, json_path = checkpoint_paths(path)
    document = read_document(path)
    try:
        cfg = TransformerConfig.from_dict(document["config"])
    except KeyError:
        raise CheckpointError(f"{json_path}: has no \"config\" entry") from None
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{json_path}: its config is not valid: {error}") from None
    return {**document, "config": cfg.to_dict()}, cfg


def load_weights(model: torch.nn.Module, path: str | Path) -> torch.nn.Module:
    """Fill a freshly built model with PATH.safetensors (tied weights stored once); the model in eval mode."""
    weights_path, json_path = checkpoint_paths(path)
    if not weights_path.is_file():
        raise CheckpointError(f"{weights_path}: no such file; {json_path.name} is there but its weights are missing")
    try:
        tensors = load_file(str(weights_path))
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"{weights_path}: cannot be read as safetensors ({error}); "
                              "the file is truncated or corrupt, save or download it again") from None
    shared = shared_names(model)
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items() if name not in shared}
    problems = _mismatches(expected, {name: tuple(t.shape) for name, t in tensors.items()})
    if problems:
        raise CheckpointError(f"{weights_path}: weights do not fit the config in {json_path.name}: {'; '.join(problems)}")
    with torch.no_grad():
        model.load_state_dict({**tensors, **{alias: tensors[name] for alias, name in shared.items()}})
    return model.eval()


def _mismatches(expected: dict[str, tuple], found: dict[str, tuple], limit: int = 5) -> list[str]:
    def some(names):
        names = sorted(names)
        return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")

    problems = []
    missing, unexpected = expected.keys() - found.keys(), found.keys() - expected.keys()
    if missing:
        problems.append(f"missing {some(missing)}")
    if unexpected:
        problems.append(f"unexpected {some(unexpected)}")
    wrong = [f"{n} is {found[n]}, the config needs {expected[n]}" for n in sorted(expected.keys() & found.keys())
             if expected[n] != found[n]]
    problems += wrong[:limit] + ([f"and {len(wrong) - limit} more with other shapes"] if len(wrong) > limit else [])
    return problems
