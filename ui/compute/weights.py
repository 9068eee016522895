"""Where a page's weights come from (shipped, random, a Hugging Face model, a checkpoint file), their config
and what a banner says about them."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from transformer import AXES, TransformerConfig, checkpoint
from transformer.tokens import get_tokenizer
from ui.compute.shipped import WeightsInfo, shipped_models, trained_info


@dataclass(frozen=True)
class WeightsSource:
    """Where a page's weights come from, read from the one string the URL and the session keep.

    "" is the default (a shipped checkpoint that fits the config, else random weights);
    "hf:<directory or cached id>" a local Hugging Face model; "ckpt:<path>" a checkpoint
    file, e.g. one trained on the Train page; "tokens:<row of AXES['tokens']>" the default, read in
    that tokenizer's tokens (the sidebar's Tokens control: random weights read BPE only through it).
    """

    kind: Literal["default", "huggingface", "checkpoint", "tokens"] = "default"
    path: str = ""  # the directory, the file, or for "tokens" the tokenizer's row

    PREFIXES: ClassVar[dict[str, str]] = {"huggingface": "hf:", "checkpoint": "ckpt:", "tokens": "tokens:"}

    @classmethod
    def parse(cls, text: str) -> "WeightsSource":
        for kind, prefix in cls.PREFIXES.items():
            if text.startswith(prefix):
                return cls(kind, text[len(prefix):])
        return cls()

    @classmethod
    def huggingface(cls, path: str) -> str:
        return str(cls("huggingface", path))

    @classmethod
    def checkpoint_file(cls, path: str) -> str:
        return str(cls("checkpoint", path))

    @classmethod
    def read_in(cls, tokens: str) -> str:
        """The default weights read in a tokenizer's tokens: "" for one that is not learned (characters, every
        model's default without a checkpoint that names another)."""
        return str(cls("tokens", tokens)) if AXES["tokens"].row(tokens, "tokens").learned else ""

    def __str__(self) -> str:
        return self.PREFIXES.get(self.kind, "") + self.path


def weights_config(weights: str) -> TransformerConfig:
    """The config of explicitly chosen weights (reads only their config, not the tensors)."""
    source = WeightsSource.parse(weights)
    if source.kind == "huggingface":
        from transformer.interop import describe_hf

        return describe_hf(source.path).config
    return checkpoint.read_meta(source.path)[1]


def weights_info(config_json: str, weights: str = "") -> WeightsInfo:
    source = WeightsSource.parse(weights)
    if source.kind == "huggingface":
        return WeightsInfo("huggingface", f"Hugging Face model {source.path}")
    if source.kind == "checkpoint":
        meta, _ = checkpoint.read_meta(source.path)
        return trained_info(f"your checkpoint {Path(source.path).name}", meta)
    for shipped in shipped_models():
        if shipped.key == config_json:
            return shipped.info
    if source.kind == "tokens":  # random weights whose embedding rows are a learned tokenizer's pieces
        tokenizer = get_tokenizer(source.path)
        return WeightsInfo("random", f"untrained (random) weights reading {tokenizer.row.label} tokens",
                           tokenizer=json.dumps(tokenizer.describe(), sort_keys=True))
    return WeightsInfo("random", "untrained (random) weights")
