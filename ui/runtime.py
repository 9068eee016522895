"""Text -> tokens, the cached model, and the cached trace (as numpy) that every page draws from.

Models live in ``st.cache_resource`` keyed by their config; traces in ``st.cache_data``
keyed by config and tokens. Recording is thread-local in the library, so two sessions
tracing the same cached model at once never mix their tensors.
"""
from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from transformer import Transformer, TransformerConfig

MAX_TOKENS = 128  # heatmaps stay readable and each rerun's messages small
START_TOKEN = 0  # the decoder's first input in an encoder-decoder


@dataclass
class Tokens:
    ids: list[int]
    labels: list[str]
    truncated_from: int | None  # the original length when the text was cut to MAX_TOKENS


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


def tokenize(text: str, vocab_size: int, max_tokens: int = MAX_TOKENS) -> Tokens:
    """One token per character (after Unicode NFC); ids wrap around the vocabulary."""
    chars = list(unicodedata.normalize("NFC", text))
    if not chars:
        raise ValueError("The input text is empty: type at least one character.")
    truncated_from = len(chars) if len(chars) > max_tokens else None
    chars = chars[:max_tokens]
    return Tokens([ord(c) % vocab_size for c in chars], [char_label(c) for c in chars], truncated_from)


@st.cache_resource(max_entries=8, show_spinner="Building the model…")
def get_model(config_json: str, seed: int) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig.from_dict(json.loads(config_json)))
    return model.eval()


@dataclass
class TraceData:
    """A recorded forward pass, as numpy: what pages draw."""

    arrays: dict[str, np.ndarray]  # hook name -> values
    events: list[dict]  # in forward order: index, name, dims, op, shape
    logits: np.ndarray  # (T, vocab) for the first sequence
    src_labels: list[str]  # token labels of the (source) input
    tgt_labels: list[str]  # decoder-side labels (encoder-decoder), else the same as src_labels

    def pattern(self, layer: int, prefix: str = "", kind: str = "attn") -> np.ndarray:
        """(H, T_q, T_kv) softmax weights of one layer, first sequence."""
        return self.arrays[f"{prefix}blocks.{layer}.{kind}.hook_pattern"][0]


@st.cache_data(max_entries=64, show_spinner="Running the model…")
def get_trace(config_json: str, seed: int, ids: tuple[int, ...], labels: tuple[str, ...]) -> TraceData:
    model = get_model(config_json, seed)
    cfg = model.cfg
    src = torch.tensor([ids], device=model.device)
    if cfg.arch == "encoder-decoder":
        # the decoder reads its own greedy output, one token behind, as it would when generating
        out = model.generate(src, max_new_tokens=len(ids), start_token_id=START_TOKEN)  # (1, 1 + T)
        tgt = out[:, : len(ids)]
        logits, trace = model.run_with_trace(src, tgt)
        tgt_labels = ["<s>"] + [char_label(chr(int(t))) for t in tgt[0, 1:]]
    else:
        logits, trace = model.run_with_trace(src)
        tgt_labels = list(labels)
    events = [dict(index=e.index, name=e.name, dims=list(e.dims), op=e.op, shape=list(e.shape)) for e in trace.events]
    return TraceData(trace.to_numpy(), events, logits[0].float().cpu().numpy(), list(labels), tgt_labels)
