"""Text -> the tokens a model reads, and ids -> the labels a page shows.

One token per character for random weights; the task's vocabulary for a trained checkpoint, or the learned
tokenizer (BPE) its JSON names; the model's own tokenizer for a Hugging Face model.
"""
from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from transformer.tokens import SPECIALS, decode_text, from_description
from transformer.training.tasks import get_task
from ui.compute.weights import WeightsSource, weights_info

MAX_TOKENS = 128  # heatmaps stay readable and each rerun's messages small


# how a piece's label marks the space before a word: ours (visible_text), GPT-2's byte symbols, SentencePiece's
WORD_START_MARKS = ("␣", "⏎", "⇥", "Ġ", "Ċ", "▁")


@dataclass
class Tokens:
    ids: list[int]
    labels: list[str]
    truncated_from: int | None  # the original length when the text was cut to MAX_TOKENS
    pieces: bool = False  # learned pieces (BPE, a Hugging Face tokenizer): a token is a word or a part of one
    word_level: bool = False  # a vocabulary of whole words whose pieces carry no space mark: each token is a word

    def words(self) -> list[int] | None:
        """Each token's word, numbered from 0 (a piece that starts with a space, and a special token such as
        <bos>, begins a new word; so does the token after a special one); None for characters, where a token
        is no word."""
        if not self.pieces:
            return None
        if self.word_level:
            return list(range(len(self.labels)))
        numbers, word = [], -1
        for i, label in enumerate(self.labels):
            after_special = i > 0 and self.labels[i - 1] in SPECIALS
            if i == 0 or label in SPECIALS or after_special or label.startswith(WORD_START_MARKS):
                word += 1
            numbers.append(word)
        return numbers


def char_label(ch: str) -> str:
    """A visible label for one character: spaces, controls and combining marks made readable."""
    if ch == " ":
        return "␣"
    if ch == "\n":
        return "⏎"
    if ch == "\t":
        return "⇥"
    category = unicodedata.category(ch)
    if category.startswith("C"):  # control, format, unassigned: show the code point
        return f"U+{ord(ch):04X}"
    if category.startswith("M"):  # a combining mark has no width alone: put it on a dotted circle
        return "◌" + ch
    return ch


def visible(tokens: list[str | None], ids=None) -> list[str]:
    """Vocabulary entries as labels: one-character tokens made visible, the rest ('<bos>', '<0xF0>') as they are;
    an id the tokenizer does not know (a model's vocabulary can be larger than its tokenizer's) as <id N>."""
    return [f"<id {int(ids[i])}>" if t is None else char_label(t) if len(t) == 1 else t
            for i, t in enumerate(tokens)]


def tokenize(text: str, vocab_size: int, max_tokens: int = MAX_TOKENS) -> Tokens:
    """One token per character (after Unicode NFC); ids wrap around the vocabulary."""
    chars = list(unicodedata.normalize("NFC", text))
    if not chars:
        raise ValueError("The input text is empty: type at least one character.")
    truncated_from = len(chars) if len(chars) > max_tokens else None
    chars = chars[:max_tokens]
    return Tokens([ord(c) % vocab_size for c in chars], [char_label(c) for c in chars], truncated_from)


@st.cache_resource(max_entries=4, show_spinner=False)
def hf_tokenizer(path: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError):
        return None  # a model saved without its tokenizer: fall back to characters


def encode_text(text: str, config_json: str, weights: str = "", max_tokens: int = MAX_TOKENS) -> Tokens:
    """Text -> tokens the shown model understands: the task's vocabulary for a trained checkpoint,
    the model's own tokenizer for a Hugging Face model, else one token per character."""
    info = weights_info(config_json, weights)
    vocab_size = json.loads(config_json)["vocab_size"]
    learned = learned_tokenizer(info.tokenizer, vocab_size, weights)
    if learned is not None:  # a checkpoint trained on learned pieces reads the text in its own tokens
        if not text:
            raise ValueError("The input text is empty: type at least one character.")
        ids = [0, *learned.encode(unicodedata.normalize("NFC", text))]  # <bos> first, as in training
        truncated_from = len(ids) if len(ids) > max_tokens else None
        ids = ids[:max_tokens]
        return Tokens(ids, learned.pieces(ids), truncated_from, pieces=True)
    if info.task is not None:
        task = get_task(info.task)
        ids = task.encode(unicodedata.normalize("NFC", text))
        truncated_from = len(ids) if len(ids) > max_tokens else None
        ids = ids[:max_tokens]
        return Tokens(ids, visible(task.decode(ids)), truncated_from)
    if info.kind == "huggingface":
        tokenizer = hf_tokenizer(WeightsSource.parse(weights).path)
        if tokenizer is not None:
            if not text:
                raise ValueError("The input text is empty: type at least one character.")
            ids = tokenizer(text)["input_ids"]
            truncated_from = len(ids) if len(ids) > max_tokens else None
            ids = ids[:max_tokens]
            labels = visible(tokenizer.convert_ids_to_tokens(ids), ids)
            unmarked = " " in text.strip() and not any(label.startswith(WORD_START_MARKS) for label in labels)
            return Tokens(ids, labels, truncated_from, pieces=True, word_level=unmarked)
    return tokenize(text, vocab_size, max_tokens)


def token_labels(ids, config_json: str, weights: str = "") -> list[str]:
    """Labels of model-vocabulary ids, as the input's tokens are labelled."""
    info = weights_info(config_json, weights)
    learned = learned_tokenizer(info.tokenizer, json.loads(config_json)["vocab_size"], weights)
    if learned is not None:
        return learned.pieces(ids)
    if info.task is not None:
        return visible(get_task(info.task).decode(ids))
    if info.kind == "huggingface":
        tokenizer = hf_tokenizer(WeightsSource.parse(weights).path)
        if tokenizer is not None:
            return visible(tokenizer.convert_ids_to_tokens(list(ids)), list(ids))
    return [char_label(chr(int(i))) for i in ids]


def ids_to_text(ids, config_json: str, weights: str = "") -> str:
    """Model-vocabulary ids as text: a learned tokenizer's pieces or the language task's characters joined back
    into what they spell (a piece's own space, bytes into characters); any other task's labels side by side."""
    learned = learned_tokenizer(weights_info(config_json, weights).tokenizer, json.loads(config_json)["vocab_size"],
                                weights)
    if learned is not None:
        return learned.decode(ids)
    if weights_info(config_json, weights).task == "language":
        return decode_text(ids)
    return "".join(token_labels(ids, config_json, weights))


def learned_tokenizer(description: str, vocab_size: int, weights: str = ""):
    """The learned tokenizer (BPE) a checkpoint's JSON names, or None for one that reads characters or its task's
    tokens; its file is looked for beside a checkpoint file, then in assets/tokenizers. A missing file or another
    vocabulary size is the library's ValueError, which the page shows."""
    if not description:
        return None
    source = WeightsSource.parse(weights)
    beside = Path(source.path).parent if source.kind == "checkpoint" else None
    tokenizer = from_description(json.loads(description), vocab_size, beside)
    return tokenizer if tokenizer.row.learned else None
