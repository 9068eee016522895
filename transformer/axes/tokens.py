"""How text becomes the ids a model reads: one token per character, or byte-level BPE pieces.

Not a field of the model's config: a checkpoint's JSON names its tokenizer ("tokenizer"), and
``transformer.tokens`` builds one tokenizer per row of this axis.
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import Axis, Choice


@dataclass(frozen=True, kw_only=True)
class TokensChoice(Choice):
    learned: bool  # its pieces were learned from training text (merges), so it ships as a file
    file: str | None  # the tokenizer file in assets/tokenizers, for a learned one


TOKENS = Axis("Tokens", {
    "characters": TokensChoice(
        "characters", "one token per character of a small table; any other character as its UTF-8 bytes",
        "A tiny vocabulary that spells any text, so a classroom model spends its parameters on attention, "
        "not on an embedding table.", "the lab's own models", learned=False, file=None),
    "bpe": TokensChoice(
        "byte-level BPE", "UTF-8 bytes merged into frequent pieces, most frequent pair first, as learned from "
        "the training text",
        "A frequent word is one token, so a sentence is a few tokens instead of dozens and every attention "
        "row is a word or a piece of one; any text still encodes, byte by byte where no piece fits.",
        "GPT-2, GPT-4, LLaMA 3", learned=True, file="bpe-english-2048.json"),
}, problem="A model reads ids, not text. Characters need a tiny vocabulary but make every sentence long; learned "
           "pieces make it short at the price of a larger embedding table, and cost more tokens in languages "
           "the pieces were not learned on.")
