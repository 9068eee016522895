"""The cached model and the cached trace (as numpy) that every page draws from.

Models live in ``st.cache_resource`` keyed by their config; traces in ``st.cache_data`` keyed by config and
tokens. Recording is thread-local in the library, so two sessions tracing the same cached model at once never
mix their tensors.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from transformer import Transformer, TransformerConfig, checkpoint
from transformer.hooks import ablations, attention_stacks, hook_name
from transformer.training.tasks import get_task
from ui.compute.shipped import shipped_models
from ui.compute.tokens import token_labels
from ui.compute.weights import WeightsSource, weights_info

START_TOKEN = 0  # the decoder's first input in an encoder-decoder


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
    for shipped in shipped_models():
        if shipped.key == config_json:
            return checkpoint.load(shipped.path)[0].eval()
    torch.manual_seed(seed)
    return Transformer(TransformerConfig.from_json(config_json)).eval()


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


@dataclass(frozen=True)
class Ablation:
    """Parts switched off for every view: (layer, head) pairs and (layer, expert) pairs of the self-attention stack."""

    heads: tuple[tuple[int, int], ...] = ()
    experts: tuple[tuple[int, int], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.heads or self.experts)

    def interventions(self, cfg: TransformerConfig) -> dict:
        return ablations(self.heads, self.experts, attention_stacks(cfg.arch).output)


# Entries, not bytes, bound a cache. A trace is 0.3 MiB for a classroom preset on an example text, 4.5 MiB at the
# 128-token cap, and 80-190 MiB for the largest model the sidebar allows (12 layers, d_model 512) on 128 tokens.
@st.cache_data(max_entries=32, show_spinner="Running the model…")
def get_trace(config_json: str, seed: int, ids: tuple[int, ...], labels: tuple[str, ...], weights: str = "",
              ablation: Ablation = Ablation()) -> TraceData:
    model = get_model(config_json, seed, weights)
    cfg = model.cfg
    switched_off = ablation.interventions(cfg)
    src = torch.tensor([ids], device=model.device)
    if cfg.row("arch").cross:
        # the decoder reads its own greedy output, one token behind, as it would when generating
        task = weights_info(config_json, weights).task
        start = get_task(task).token_id("<bos>") if task else START_TOKEN
        with model.intervene(switched_off):
            out = model.generate(src, max_new_tokens=len(ids), start_token_id=start)  # (1, 1 + T)
        tgt = out[:, : len(ids)]
        logits, trace = model.run_with_trace(src, tgt, interventions=switched_off)
        tgt_labels = get_task(task).decode(tgt[0]) if task else ["<s>"] + token_labels(tgt[0, 1:], config_json, weights)
    else:
        logits, trace = model.run_with_trace(src, interventions=switched_off)
        tgt_labels = list(labels)
    events = [dict(index=e.index, name=e.name, dims=list(e.dims), op=e.op, shape=list(e.shape)) for e in trace.events]
    return TraceData(trace.to_numpy(), events, logits[0].float().cpu().numpy(), list(labels), tgt_labels)
