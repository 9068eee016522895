"""Checkpoints of every kind: one loader, the shipped ones, and which of them a config asks for.

    save(model, "assets/checkpoints/gpt2-induction", meta)  # -> .safetensors + .json
    model, meta = load("assets/checkpoints/gpt2-induction")
    model.tokenizer.encode("The cat")                       # a language model's tokenizer (meta["tokenizer"] names it)
    find_checkpoint(PRESETS["llama2"])                      # the shipped weights of that preset, or None

The file format (safetensors + JSON, ``save``, ``read_meta``, ``CheckpointError``) is
``checkpoint_format.py``'s; this module adds the reading of every kind of model. Its kinds' modules
(vision.py, rnn.py) build on the format alone, so importing them here makes no cycle.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from . import rnn, tokens, vision
from .checkpoint_format import SHIPPED_DIR, CheckpointError, checkpoint_paths, load_weights, read_document, read_meta, save
from .config import TransformerConfig
from .model import Transformer

__all__ = ["save", "load", "read_meta", "CheckpointError", "SHIPPED_DIR", "trained_tokens", "ShippedCheckpoint",
           "shipped", "variants", "find_checkpoint", "same_model"]

# fields a task sizes for itself; any other difference means a different model
TASK_SIZED_FIELDS = ("vocab_size", "max_len")


def load_transformer(path: str | Path, device: torch.device | str | None = None) -> tuple[Transformer, dict]:
    """(Transformer of the file's config, in eval mode, meta): a checkpoint that marks no other kind.

    A language model (or any checkpoint whose JSON names a "tokenizer") comes with its tokenizer as
    ``model.tokenizer`` and its description in meta["tokenizer"]; characters where the JSON names none."""
    document, cfg = read_meta(path)
    tokenizer = read_tokenizer(path, document, cfg.vocab_size)
    model = load_weights(Transformer(cfg, device=device), path)
    if tokenizer is not None:
        model.tokenizer = tokenizer
        document["tokenizer"] = tokenizer.describe()
    return model, document


def read_tokenizer(path: str | Path, document: dict, vocab_size: int):
    """The tokenizer a checkpoint's JSON names ("tokenizer"), characters for a language model that names none,
    None for a synthetic task's (its task spells its tokens). A missing or mismatched file is a CheckpointError."""
    if "tokenizer" not in document and document.get("task") != "language":
        return None
    _, json_path = checkpoint_paths(path)
    try:
        return tokens.from_description(document.get("tokenizer"), vocab_size, beside=json_path.parent)
    except ValueError as error:
        raise CheckpointError(f"{json_path}: {error}") from None


# a JSON entry that marks another kind of model -> the loader of that kind
KIND_LOADERS = {vision.VISION_KEY: vision.load, rnn.SEQ2SEQ_KEY: rnn.load}


def load(path: str | Path, device: torch.device | str | None = None) -> tuple[torch.nn.Module, dict]:
    """(model in eval mode, meta) from PATH.safetensors + PATH.json; raises CheckpointError if anything is wrong.

    Any shipped kind: a JSON with a "vision" entry is a Vision Transformer, one with a "seq2seq" entry a GRU
    encoder-decoder (``KIND_LOADERS``), any other a Transformer of its config."""
    document = read_document(path)
    kind = next((key for key in KIND_LOADERS if key in document), None)
    return (KIND_LOADERS[kind] if kind else load_transformer)(path, device)


def trained_tokens(meta: dict) -> int | None:
    """The longest sequence a checkpoint trained on, <bos> included, as its JSON records it (for files older than
    that field, their language crop); None when it says nothing (``training.train.trained_length`` then asks the
    task)."""
    if "trained_tokens" in meta:
        return int(meta["trained_tokens"])
    if meta.get("task") == "language" and "context" in meta.get("corpus", {}):
        return 1 + int(meta["corpus"]["context"])
    return None


# --- the checkpoints shipped in assets/checkpoints ------------------------------------


@dataclass(frozen=True)
class ShippedCheckpoint:
    name: str  # e.g. "gpt2-induction"
    preset: str  # a key of PRESETS
    task: str  # a key of transformer.training.tasks.TASKS
    path: Path  # without extension: load(path)
    accuracy: float  # on fresh samples, answer positions only
    train_seconds: float


def shipped(directory: str | Path = SHIPPED_DIR) -> list[ShippedCheckpoint]:
    """The trained checkpoints listed in directory/index.json, in its order."""
    return _index_entries(directory, "checkpoints")


def variants(directory: str | Path = SHIPPED_DIR) -> list[ShippedCheckpoint]:
    """Checkpoints of a preset's recipe with one axis changed (index.json's "variants"), shipped for
    comparisons such as length extrapolation; the presets' own checkpoints are ``shipped()``."""
    return _index_entries(directory, "variants")


def _index_entries(directory: str | Path, group: str) -> list[ShippedCheckpoint]:
    index_path = Path(directory) / "index.json"
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{index_path}: no such file; run scripts/train_checkpoints.py to make it") from None
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{index_path}: not valid JSON ({error})") from None
    try:
        return [ShippedCheckpoint(e["name"], e["preset"], e["task"], Path(directory) / e["name"], e["accuracy"],
                                  e["train_seconds"]) for e in index.get(group, [])]
    except (KeyError, TypeError, AttributeError) as error:
        raise CheckpointError(f"{index_path}: an entry lacks {error}; each needs name, preset, task, accuracy, "
                              "train_seconds (run scripts/train_checkpoints.py to rewrite it)") from None


def find_checkpoint(cfg: TransformerConfig, task: str | None = None, directory: str | Path = SHIPPED_DIR) -> Path | None:
    """The shipped checkpoint trained with this config (``same_model``), or None.

    With `task`, only checkpoints of that task count. The first match in index order wins.
    """
    for entry in shipped(directory):
        if (task is None or entry.task == task) and same_model(read_meta(entry.path)[1], cfg):
            return entry.path
    return None


def same_model(trained: TransformerConfig, wanted: TransformerConfig) -> bool:
    """Whether weights trained with one config are the model another config asks for: every field agrees but
    vocab_size and max_len, which a task sizes for itself."""
    return _comparable(trained.to_dict()) == _comparable(wanted.to_dict())


def _comparable(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in TASK_SIZED_FIELDS}
