"""What a model predicts from the input, cached: next tokens and a sampled continuation (decoders), guesses
for masked characters (masked-character encoders), and the probability each actual next token was given."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from transformer.training import language
from ui.compute.model_cache import Ablation, get_model
from ui.compute.tokens import ids_to_text, token_labels


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
    if not model.cfg.row("arch").next_token:
        raise ValueError("next-token prediction needs a decoder (a model that reads left to right)")
    src = torch.tensor([ids], device=model.device)  # (1, T)
    with torch.no_grad(), model.intervene(ablation.interventions(model.cfg)):
        logits = model(src)[0].float()  # (T, vocab)
        probs = (logits[-1] / (temperature if temperature > 0 else 1.0)).softmax(-1)  # (vocab,)
        top = probs.topk(min(top_k, probs.numel()))
        if model.cfg.row("position").bounds_length:  # a position table ends at max_len
            new_tokens = max(0, min(new_tokens, model.cfg.max_len - len(ids)))
        generator = torch.Generator(device=model.device).manual_seed(sample_seed)
        out = model.generate(src, max_new_tokens=new_tokens, temperature=temperature, top_k=top_k,
                             generator=generator, use_cache=True)  # (1, T + new_tokens)
    new_ids = out[0, len(ids):].tolist()
    # whole tokens: a BPE piece is shown as the word or part of a word it is, its space made visible (␣cat)
    return Prediction(list(zip(token_labels(top.indices.tolist(), config_json, weights), top.values.tolist())),
                      token_labels(new_ids, config_json, weights), ids_to_text(new_ids, config_json, weights))


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
