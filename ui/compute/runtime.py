"""Text -> tokens, the cached model, and the cached trace (as numpy) that every page draws from.

Models live in ``st.cache_resource`` keyed by their config; traces in ``st.cache_data``
keyed by config and tokens. Recording is thread-local in the library, so two sessions
tracing the same cached model at once never mix their tensors.
"""
from __future__ import annotations

import functools
import json
import logging
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal, NamedTuple

import numpy as np
import streamlit as st
import torch

from transformer import Transformer, TransformerConfig, checkpoint
from transformer.training import language
from transformer.hooks import ablations, attention_stacks, hook_name
from transformer.positions import POSITIONS
from transformer.training.tasks import get_task
from transformer.training.train import trained_length

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


@dataclass(frozen=True)
class WeightsSource:
    """Where a page's weights come from, read from the one string the URL and the session keep.

    "" is the default (a shipped checkpoint that fits the config, else random weights);
    "hf:<directory or cached id>" a local Hugging Face model; "ckpt:<path>" a checkpoint
    file, e.g. one trained on the Train page.
    """

    kind: Literal["default", "huggingface", "checkpoint"] = "default"
    path: str = ""

    PREFIXES: ClassVar[dict[str, str]] = {"huggingface": "hf:", "checkpoint": "ckpt:"}

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

    def __str__(self) -> str:
        return self.PREFIXES.get(self.kind, "") + self.path


@dataclass(frozen=True)
class WeightsInfo:
    kind: str  # "trained" (a shipped checkpoint), "huggingface" or "random"
    label: str  # what a banner says
    task: str | None = None  # the checkpoint's task: its vocabulary encodes the text
    trained_tokens: int | None = None  # the longest sequence it trained on: past it, a view says so
    heads: str = ""  # what its measured heads do, beside random-init weights (language checkpoints)


def _trained_info(name: str, meta: dict) -> WeightsInfo:
    score = score_text(meta)
    return WeightsInfo("trained", f"{name} ({meta.get('task')} task{', ' + score if score else ''})", meta.get("task"),
                       trained_length(meta), heads_text(meta))


class _ShippedModel(NamedTuple):
    key: str  # its config's to_json(), the cache key
    path: str
    info: WeightsInfo  # what its banner says
    cfg: TransformerConfig


@functools.lru_cache(maxsize=1)
def _shipped_configs() -> tuple[_ShippedModel, ...]:
    """Every shipped checkpoint's config, path and banner, read once.

    A missing or broken index means no trained weights: every page then says its weights are random.
    """
    try:
        entries = checkpoint.shipped()
    except checkpoint.CheckpointError as exc:
        logging.getLogger(__name__).warning("no shipped checkpoints: %s", exc)
        return ()
    rows = []
    for entry in entries:
        meta, cfg = checkpoint.read_meta(entry.path)
        rows.append(_ShippedModel(cfg.to_json(), str(entry.path),
                                  _trained_info(f"trained checkpoint {entry.name}", meta), cfg))
    return tuple(rows)


HEAD_WORDS = {"previous_token_head": "previous-token head", "induction_head": "induction head",
              "next_token_head": "next-character head"}


def heads_text(meta: dict) -> str:
    """'Its previous-token head is L0H1 (0.93 on held-out text; random weights 0.04–0.09), ...': each head
    figure that exceeds its random-init control, read from the checkpoint's JSON."""
    figures = meta.get("figures", {})
    control = figures.get("random_init", {})
    said = []
    for key, words in HEAD_WORDS.items():
        if key in figures and key in control and figures[key]["score"] > control[key][1]:
            best, (low, high) = figures[key], control[key]
            said.append(f"{words} L{best['layer']}H{best['head']} ({best['score']:.2f} on held-out text; "
                        f"random weights {low:.2f}–{high:.2f})")
    return ("Its " + ", its ".join(said) + ".") if said else ""


def score_text(meta: dict) -> str:
    """How well a checkpoint does, in its task's own measure: '1.93 bits per character', 'accuracy 0.99'."""
    figures = meta.get("figures", {})
    if "bits_per_char" in figures:
        return f"{figures['bits_per_char']:.2f} bits per character on held-out text"
    if "masked_accuracy" in figures:
        return f"masked-character accuracy {figures['masked_accuracy']:.2f} on held-out text"
    accuracy = meta.get("accuracy")
    if not isinstance(accuracy, (int, float)):
        return ""
    return f"accuracy {accuracy:.2f}"


def _trained_matches(cfg: TransformerConfig) -> list[_ShippedModel]:
    """Every shipped checkpoint that is the model this config asks for (the library's rule), in index order."""
    return list(_trained_matches_of(cfg.to_json()))


@functools.lru_cache(maxsize=256)
def _trained_matches_of(config_json: str) -> tuple[_ShippedModel, ...]:
    # the sidebar asks three times a rerun; comparing the config with every shipped one took ~10 ms each time
    cfg = TransformerConfig.from_json(config_json)
    return tuple(shipped for shipped in _shipped_configs() if checkpoint.same_model(shipped.cfg, cfg))


def trained_tasks(cfg: TransformerConfig) -> list[str]:
    """The tasks shipped checkpoints were trained on with these axes and sizes (language first)."""
    return [shipped.info.task for shipped in _trained_matches(cfg)]


def trained_config(cfg: TransformerConfig, task: str | None = None) -> TransformerConfig | None:
    """The shipped checkpoint's config for these axes and sizes: the one trained on `task` when there is
    one, else the first in index order; None when no checkpoint has them."""
    matches = _trained_matches(cfg)
    if not matches:
        return None
    return next((shipped.cfg for shipped in matches if shipped.info.task == task), matches[0].cfg)


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
        return _trained_info(f"your checkpoint {Path(source.path).name}", meta)
    for shipped in _shipped_configs():
        if shipped.key == config_json:
            return shipped.info
    return WeightsInfo("random", "untrained (random) weights")


@st.cache_resource(max_entries=8, show_spinner="Loading the model…")
def get_model(config_json: str, seed: int, weights: str = "") -> Transformer:
    """The model for a config: a shipped checkpoint when one matches it exactly, else seeded random weights.

    weights (a WeightsSource's string) may name a local Hugging Face model or a checkpoint file instead.
    """
    source = WeightsSource.parse(weights)
    if source.kind == "huggingface":
        from transformer.interop import from_hf

        return from_hf(source.path).eval()
    if source.kind == "checkpoint":
        return checkpoint.load(source.path)[0].eval()
    for shipped in _shipped_configs():
        if shipped.key == config_json:
            return checkpoint.load(shipped.path)[0].eval()
    torch.manual_seed(seed)
    return Transformer(TransformerConfig.from_json(config_json)).eval()


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
            return Tokens(ids, visible(tokenizer.convert_ids_to_tokens(ids), ids), truncated_from)
    return tokenize(text, vocab_size, max_tokens)


@dataclass
class TraceData:
    """A recorded forward pass, as numpy: what pages draw."""

    arrays: dict[str, np.ndarray]  # hook name -> values
    events: list[dict]  # in forward order: index, name, dims, op, shape
    logits: np.ndarray  # (T, vocab) for the first sequence
    src_labels: list[str]  # token labels of the (source) input
    tgt_labels: list[str]  # decoder-side labels (encoder-decoder), else the same as src_labels

    def pattern(self, layer: int, stack: str = "", module: str = "attn") -> np.ndarray:
        """(H, T_q, T_kv) softmax weights of one layer, first sequence."""
        return self.arrays[hook_name(layer, f"{module}.hook_pattern", stack)][0]


# Entries, not bytes, bound a cache. A trace is 0.3 MiB for a classroom preset on an example text, 4.5 MiB at the
# 128-token cap, and 80-190 MiB for the largest model the sidebar allows (12 layers, d_model 512) on 128 tokens.
@dataclass(frozen=True)
class Ablation:
    """Parts switched off for every view: (layer, head) pairs and (layer, expert) pairs of the self-attention stack."""

    heads: tuple[tuple[int, int], ...] = ()
    experts: tuple[tuple[int, int], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.heads or self.experts)

    def interventions(self, cfg: TransformerConfig) -> dict:
        return ablations(self.heads, self.experts, attention_stacks(cfg.arch).output)


@st.cache_data(max_entries=32, show_spinner="Running the model…")
def get_trace(config_json: str, seed: int, ids: tuple[int, ...], labels: tuple[str, ...], weights: str = "",
              ablation: Ablation = Ablation()) -> TraceData:
    model = get_model(config_json, seed, weights)
    cfg = model.cfg
    switched_off = ablation.interventions(cfg)
    src = torch.tensor([ids], device=model.device)
    if cfg.arch == "encoder-decoder":
        # the decoder reads its own greedy output, one token behind, as it would when generating
        task = weights_info(config_json, weights).task
        start = get_task(task).token_id("<bos>") if task else START_TOKEN
        with model.intervene(switched_off):
            out = model.generate(src, max_new_tokens=len(ids), start_token_id=start)  # (1, 1 + T)
        tgt = out[:, : len(ids)]
        logits, trace = model.run_with_trace(src, tgt, interventions=switched_off)
        tgt_labels = get_task(task).decode(tgt[0]) if task else ["<s>"] + [char_label(chr(int(t))) for t in tgt[0, 1:]]
    else:
        logits, trace = model.run_with_trace(src, interventions=switched_off)
        tgt_labels = list(labels)
    events = [dict(index=e.index, name=e.name, dims=list(e.dims), op=e.op, shape=list(e.shape)) for e in trace.events]
    return TraceData(trace.to_numpy(), events, logits[0].float().cpu().numpy(), list(labels), tgt_labels)


def token_labels(ids, config_json: str, weights: str = "") -> list[str]:
    """Labels of model-vocabulary ids, as the input's tokens are labelled."""
    info = weights_info(config_json, weights)
    if info.task is not None:
        return visible(get_task(info.task).decode(ids))
    if info.kind == "huggingface":
        tokenizer = hf_tokenizer(WeightsSource.parse(weights).path)
        if tokenizer is not None:
            return visible(tokenizer.convert_ids_to_tokens(list(ids)), list(ids))
    return [char_label(chr(int(i))) for i in ids]


@dataclass
class Prediction:
    """What a decoder predicts after the input."""

    top: list[tuple[str, float]]  # the most likely next tokens at the last position, with probabilities
    continuation: list[str]  # labels of the sampled continuation
    continuation_text: str  # the same as text (language models: bytes joined back into characters)


@st.cache_data(max_entries=64, show_spinner=False)
def predict(config_json: str, seed: int, ids: tuple[int, ...], weights: str = "", ablation: Ablation = Ablation(),
            temperature: float = 1.0, top_k: int = 5, new_tokens: int = 40, sample_seed: int = 0) -> Prediction:
    """Top-k next tokens at temperature and a continuation sampled with the KV cache (seeded), with
    `ablation` switched off."""
    model = get_model(config_json, seed, weights)
    if model.cfg.arch != "decoder":
        raise ValueError("next-token prediction needs a decoder (a model that reads left to right)")
    src = torch.tensor([ids], device=model.device)  # (1, T)
    with torch.no_grad(), model.intervene(ablation.interventions(model.cfg)):
        logits = model(src)[0].float()  # (T, vocab)
        probs = (logits[-1] / (temperature if temperature > 0 else 1.0)).softmax(-1)  # (vocab,)
        top = probs.topk(min(top_k, probs.numel()))
        if POSITIONS[model.cfg.position].bounds_length:  # a position table ends at max_len
            new_tokens = max(0, min(new_tokens, model.cfg.max_len - len(ids)))
        generator = torch.Generator(device=model.device).manual_seed(sample_seed)
        out = model.generate(src, max_new_tokens=new_tokens, temperature=temperature, top_k=top_k,
                             generator=generator, use_cache=True)  # (1, T + new_tokens)
    new_ids = out[0, len(ids):].tolist()
    task = weights_info(config_json, weights).task
    text = language.decode_text(new_ids) if task == "language" else "".join(token_labels(new_ids, config_json, weights))
    return Prediction(list(zip(token_labels(top.indices.tolist(), config_json, weights), top.values.tolist())),
                      token_labels(new_ids, config_json, weights), text)


@st.cache_data(max_entries=64, show_spinner=False)
def fill_in(config_json: str, seed: int, ids: tuple[int, ...], position: int, weights: str = "",
            ablation: Ablation = Ablation(), top_k: int = 5) -> list[tuple[str, float]]:
    """A masked-character encoder's top-k guesses for the token at `position`, hidden behind <mask>."""
    model = get_model(config_json, seed, weights)
    hidden = list(ids)
    hidden[position] = language.VOCAB.index("<mask>")
    with torch.no_grad(), model.intervene(ablation.interventions(model.cfg)):
        probs = model(torch.tensor([hidden], device=model.device))[0, position].float().softmax(-1)  # (vocab,)
    top = probs.topk(top_k)
    return list(zip(token_labels(top.indices.tolist(), config_json, weights), top.values.tolist()))


@st.cache_data(max_entries=64, show_spinner=False)
def masked_each(config_json: str, seed: int, ids: tuple[int, ...], weights: str = "",
                ablation: Ablation = Ablation()) -> np.ndarray:
    """(T - 1,) the probability a masked-character encoder gives each token after <bos> when that token alone
    is hidden: one batch, one row per hidden position."""
    model = get_model(config_json, seed, weights)
    rows = torch.tensor([ids], device=model.device).repeat(len(ids) - 1, 1)  # (T - 1, T)
    positions = torch.arange(1, len(ids), device=model.device)  # (T - 1,)
    rows[positions - 1, positions] = language.VOCAB.index("<mask>")  # row i hides token i + 1 (<bos> stays)
    with torch.no_grad(), model.intervene(ablation.interventions(model.cfg)):
        probs = model(rows)[positions - 1, positions].float().softmax(-1)  # (T - 1, vocab)
    truth = torch.tensor(ids[1:], device=model.device)  # (T - 1,)
    return probs.gather(-1, truth[:, None])[:, 0].cpu().numpy()


@st.cache_data(max_entries=64, show_spinner=False)
def actual_next(config_json: str, seed: int, ids: tuple[int, ...], weights: str = "",
                ablation: Ablation = Ablation()) -> np.ndarray:
    """(T - 1,) the probability a decoder gave to each token of the input that actually came next."""
    model = get_model(config_json, seed, weights)
    src = torch.tensor([ids], device=model.device)  # (1, T)
    with torch.no_grad(), model.intervene(ablation.interventions(model.cfg)):
        probs = model(src)[0, :-1].float().softmax(-1)  # (T - 1, vocab)
    return probs.gather(-1, src[0, 1:, None])[:, 0].cpu().numpy()
