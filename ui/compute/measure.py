"""Cached measurements for the axis pages and the compare page: library calls, results as numpy.

Each wrapper takes only hashable arguments (a config as JSON, a seed, token ids as a tuple),
so Streamlit caches it across reruns and sessions; the models come from ``ui.compute.model_cache.get_model``.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import streamlit as st
import torch

from transformer import AXES, Transformer, TransformerConfig, analysis, choices
from transformer.axes import label as axes_label
from transformer.axes.attention import WITHOUT_INDEXER, WITHOUT_LATENT
from transformer.hooks import attention_stacks, hook_name
from transformer.positions import (XPOS_SCALE_BASE, RelativePositionBias, alibi_bias, alibi_slopes, relative_buckets,
                                   rope_angles, rope_inv_freq, sinusoidal_table, xpos_decay)
from transformer.probes import with_position

from ui.compute.layers import softmax_twin
from ui.compute.model_cache import get_model

PAD_ID = 0
CHECKPOINTS = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"


# --- KV heads -------------------------------------------------------------------------


@st.cache_data(max_entries=32, show_spinner="Generating with and without the cache…")
def generation_steps(config_json: str, seed: int, ids: tuple[int, ...], n_steps: int) -> list[dict]:
    model = get_model(config_json, seed)
    prompt = torch.tensor([ids], device=model.device)
    return [asdict(step) for step in analysis.cached_generation(model, prompt, n_steps)]


# --- masks ----------------------------------------------------------------------------


@st.cache_data(max_entries=64, show_spinner=False)
def masked_attention(config_json: str, seed: int, ids: tuple[int, ...], layer: int, kind: str,
                     window: int) -> tuple[np.ndarray, np.ndarray]:
    """(additive mask (T, T), weights (H, T, T)) of the live model with its mask replaced by `kind`."""
    model = get_model(config_json, seed)
    causal = model.cfg.row("arch").next_token  # an encoder-decoder runs its (bidirectional) encoder here
    allowed = analysis.allowed_matrix(kind, len(ids), window, causal)
    mask, weights = analysis.attention_under_mask(model, torch.tensor([ids], device=model.device), layer, allowed)
    return mask[0, 0].cpu().numpy(), weights[0].float().cpu().numpy()


def right_padded(batch: list[tuple[int, ...]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) ids and the usual 1/0 mask: every sequence padded on the right to the longest."""
    longest = max(len(ids) for ids in batch)
    ids = torch.full((len(batch), longest), PAD_ID, dtype=torch.long)
    mask = torch.zeros(len(batch), longest, dtype=torch.long)
    for row, seq in enumerate(batch):
        ids[row, :len(seq)] = torch.tensor(seq)
        mask[row, :len(seq)] = 1
    return ids, mask


@st.cache_data(max_entries=64, show_spinner=False)
def padded_attention(config_json: str, seed: int, batch: tuple[tuple[int, ...], ...], layer: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A batch of texts of different lengths: (additive masks (B, T, T), weights (B, H, T, T), padding mask (B, T))."""
    model = get_model(config_json, seed)
    ids, pad = right_padded(list(batch))
    mask, weights = analysis.attention_under_mask(model, ids.to(model.device), layer, attention_mask=pad.to(model.device))
    return mask[:, 0].cpu().numpy(), weights.float().cpu().numpy(), pad.numpy()


def encoder_decoder_twin(cfg: TransformerConfig) -> TransformerConfig:
    """The same axes as an encoder-decoder (a parallel block has no place for cross-attention; multi-head latent
    attention is built for decoders, so the twin's heads get keys and values of their own; a layer that keeps a state
    cannot read an encoder's text both ways, so the twin's layers are softmax layers; an indexer keeps a decoder's
    earlier keys, so the twin attends to every key)."""
    return softmax_twin(cfg).replace(arch="encoder-decoder", parallel_block=False, **WITHOUT_LATENT, **WITHOUT_INDEXER)


@st.cache_data(max_entries=64, show_spinner=False)
def cross_attention(config_json: str, seed: int, batch: tuple[tuple[int, ...], ...], tgt: tuple[int, ...],
                    layer: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decoder queries over padded encoder outputs: (additive masks (B, T_q, S), weights (B, H, T_q, S), source mask)."""
    model = get_model(config_json, seed)
    src, pad = right_padded(list(batch))
    tgt_ids = torch.tensor([tgt] * len(batch), device=model.device)
    mask, weights = analysis.cross_attention(model, src.to(model.device), tgt_ids, layer, pad.to(model.device))
    mask = mask.expand(len(batch), 1, len(tgt), src.shape[1])
    return mask[:, 0].cpu().numpy(), weights.float().cpu().numpy(), pad.numpy()


# --- positions ------------------------------------------------------------------------


@st.cache_data(max_entries=16, show_spinner=False)
def sinusoidal(n_positions: int, d_model: int) -> tuple[np.ndarray, np.ndarray]:
    """(table (P, d), dot products (P, P))."""
    return sinusoidal_table(n_positions, d_model).numpy(), analysis.sinusoidal_similarity(n_positions, d_model).numpy()


@st.cache_data(max_entries=16, show_spinner=False)
def rope_geometry(q: tuple[float, ...], k: tuple[float, ...], n_positions: int, theta: float) -> dict[str, np.ndarray]:
    """Angles per pair, the rotated pairs of q, the score matrix of q and k across positions, its diagonal spread."""
    q_vec, k_vec = torch.tensor(q), torch.tensor(k)
    positions = torch.arange(n_positions)
    scores = analysis.rope_scores(q_vec, k_vec, n_positions, theta)
    offsets, spread = analysis.diagonal_spread(scores)
    return dict(angles=rope_angles(positions, rope_inv_freq(len(q), theta)).numpy(),  # (P, d_head/2)
                pairs=analysis.rope_pairs(q_vec, positions, theta).numpy(),  # (P, d_head/2, 2)
                scores=scores.numpy(), offsets=offsets.numpy(), spread=spread.numpy())


@st.cache_data(max_entries=16, show_spinner=False)
def rotary_decay(q: tuple[float, ...], k: tuple[float, ...], max_distance: int, theta: float) -> dict:
    """q · k against the distance under each rotating scheme (the live model's q and k content), and xPos's
    decay ζ_i^(d/512) of every pair of dimensions at each distance."""
    distances = torch.arange(max_distance + 1)
    q_vec, k_vec = torch.tensor(q), torch.tensor(k)
    schemes = [key for key, row in AXES["position"].choices.items() if row.rotates_qk]
    return dict(distances=distances.numpy(),
                scores={axes_label("position", s): analysis.rotary_scores_by_distance(s, q_vec, k_vec, distances,
                                                                                         theta).numpy()
                        for s in schemes},
                decay=(xpos_decay(len(q))[:, None] ** (distances[None].float() / XPOS_SCALE_BASE)).numpy())  # (pairs, D)


@st.cache_data(max_entries=16, show_spinner=False)
def alibi(n_heads: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    """(slopes (H,), bias (H, T, T))."""
    slopes = alibi_slopes(n_heads)
    positions = torch.arange(t)[None]
    return slopes.numpy(), alibi_bias(slopes, positions, positions)[0].numpy()


@st.cache_data(max_entries=16, show_spinner=False)
def t5_buckets(n_heads: int, n_buckets: int, max_distance: int, bidirectional: bool, span: int,
               seed: int) -> dict[str, np.ndarray]:
    """T5's buckets for the distances -span .. span (decoder: -span .. 0) and an untrained table's bias per head:
    {"distances" (D,), "buckets" (D,), "bias" (H, D), "last_bucket", "last_from"}: the bucket every far distance
    reads, and the first distance (in size) that reads it. Invalid settings raise the config's ValueError."""
    cfg = TransformerConfig(position="t5", n_heads=n_heads, d_model=16 * n_heads, relative_buckets=n_buckets,
                            relative_max_distance=max_distance)
    torch.manual_seed(seed)
    table = RelativePositionBias(cfg, bidirectional)  # N(0, 1) numbers: what training would move
    distances = torch.arange(-span, span + 1 if bidirectional else 1)  # (D,) key position - query position
    with torch.no_grad():
        bias = table(torch.zeros(1, 1, dtype=torch.long), distances[None])[0, :, 0]  # (H, D): the query sits at 0
    buckets = relative_buckets(distances, n_buckets, max_distance, bidirectional)  # (D,)
    sign = 1 if bidirectional else -1  # a decoder's keys lie behind the query
    sizes = torch.arange(0, max_distance + 2)  # the last bucket starts by max_distance at the latest
    by_size = relative_buckets(sign * sizes, n_buckets, max_distance, bidirectional)  # (max_distance + 2,)
    last = int(by_size[-1])
    return dict(distances=distances.numpy(), buckets=buckets.numpy(), bias=bias.numpy(), last_bucket=last,
                last_from=int(sizes[by_size == last][0]))


def beyond_trained_length(config_json: str, seed: int, ids: tuple[int, ...], trained: int) -> dict[str, dict]:
    """Every position scheme with max_len=trained, run on `ids` (longer): its last layer's weights or its error.

    The config's own position scheme plays no part (each is tried), so it is left out of the
    cache key: choosing another position in the sidebar reuses the five runs.
    """
    return _beyond_trained_length(with_position(TransformerConfig.from_json(config_json), "none").to_json(), seed, ids, trained)


@st.cache_data(max_entries=16, show_spinner="Running each position scheme past its trained length…")
def _beyond_trained_length(config_json: str, seed: int, ids: tuple[int, ...], trained: int) -> dict[str, dict]:
    # the five models are built here rather than through get_model, so they do not push the pages' own models
    # out of its cache
    base = TransformerConfig.from_json(config_json)
    results = {}
    for position in choices("position"):
        window = base.sliding_window and min(base.sliding_window, trained)  # a window fits inside the table
        cfg = with_position(base, position, max_len=trained, sliding_window=window)
        torch.manual_seed(seed)
        model = Transformer(cfg).eval()
        src = torch.tensor([ids], device=model.device)
        args = (src, src) if cfg.row("arch").cross else (src,)
        name = hook_name(cfg.n_layers - 1, "attn.hook_pattern", attention_stacks(cfg.arch).output)
        try:
            _, trace = model.run_with_trace(*args, names=[name])
            results[position] = dict(error=None, pattern=trace[name][0].float().cpu().numpy())
        except ValueError as exc:
            results[position] = dict(error=str(exc), pattern=None)
    return results



def _learned_table(model: Transformer) -> np.ndarray:
    owner = model.decoder if model.cfg.row("arch").cross else model
    return owner.pos.table.weight.detach().float().cpu().numpy()  # (max_len, d_model)


@st.cache_data(max_entries=8, show_spinner=False)
def learned_table(config_json: str, seed: int) -> np.ndarray:
    """(max_len, d_model) learned position table of the live model (an untrained one is random)."""
    return _learned_table(get_model(config_json, seed))


@st.cache_resource(show_spinner="Looking for a trained checkpoint…")
def learned_checkpoint() -> tuple[str, np.ndarray] | None:
    """(name, position table) of the first shipped checkpoint with learned positions; None when there is none."""
    try:
        from transformer import checkpoint
    except ImportError:  # checkpoints not available in this version of the library
        return None
    for path in sorted(CHECKPOINTS.glob("*.safetensors")):
        try:
            model, _ = checkpoint.load(path.with_suffix(""))
        except (ValueError, OSError, KeyError):  # unreadable or from another version: skip it
            continue
        if model.cfg.row("position").table_param_terms:  # a table of trained rows
            return path.stem, _learned_table(model)
    return None


@st.cache_data(max_entries=8, show_spinner=False)
def cosine_similarity(table: np.ndarray) -> np.ndarray:
    return analysis.cosine_similarity(torch.from_numpy(table)).numpy()


# --- norms ----------------------------------------------------------------------------

NORM_DEPTH_BASE = dict(arch="decoder", vocab_size=64, d_model=32, n_heads=4, max_len=64)  # small: fast to measure


@st.cache_data(max_entries=256, show_spinner=False)
def depth_profile(position: str, ffn: str, norm: str, placement: str, depth: int, init: str,
                  ids: tuple[int, ...]) -> dict:
    cfg = TransformerConfig(**NORM_DEPTH_BASE, position=position, ffn=ffn, norm=norm, norm_position=placement,
                            n_layers=depth)
    ids_t = torch.tensor([[i % cfg.vocab_size for i in ids]])
    return asdict(analysis.depth_profile(cfg, ids_t, init=init))


def normalized(values: tuple[float, ...]) -> dict[str, np.ndarray]:
    x = torch.tensor(values)
    return {kind: analysis.normalize(x, kind).numpy() for kind in choices("norm")}


# --- FFN ------------------------------------------------------------------------------


@st.cache_data(max_entries=4, show_spinner=False)
def activation_curves(low: float, high: float, n: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    x = torch.linspace(low, high, n)
    return x.numpy(), {name: y.numpy() for name, y in analysis.activation_curves(x).items()}


# --- compare --------------------------------------------------------------------------


def output_comparison(logits_a: np.ndarray, logits_b: np.ndarray) -> dict[str, np.ndarray]:
    """Next-token entropy of each (T,), and KL(A || B) per position when the shapes match."""
    a, b = torch.from_numpy(logits_a), torch.from_numpy(logits_b)
    out = dict(entropy_a=analysis.next_token_entropy(a).numpy(), entropy_b=analysis.next_token_entropy(b).numpy())
    if a.shape == b.shape:
        out["kl"] = analysis.kl_divergence(a, b).numpy()
    return out


@st.cache_data(show_spinner=False)
def length_extrapolation() -> list[dict]:
    """Held-out bits per character at 1x, 2x and 4x the training context, from every shipped language
    checkpoint that measured it, one row per position scheme (read from the checkpoints' JSON)."""
    rows = []
    for path in sorted(CHECKPOINTS.glob("*.json")):
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a broken file is the checkpoint loader's to report
        lengths = meta.get("figures", {}).get("bits_per_char_by_length") if isinstance(meta, dict) else None
        if meta.get("task") == "language" and lengths:
            rows.append({"position": meta["config"]["position"], "model": path.stem, "lengths": lengths,
                         "context": meta.get("corpus", {}).get("context", 256)})
    order = choices("position")
    return sorted(rows, key=lambda row: (order.index(row["position"]), row["model"]))
