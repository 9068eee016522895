"""Cached computations of the State page: one head's state written token by token, what an old association becomes
when a similar key writes over it, how many pairs a state recalls, and the cache against the state at real sizes.

Every number comes from the library: the model's hooks (``hook_state`` asked for by its exact name), the recurrent
form of transformer/linear_attention.py for the experiments on random keys, transformer/costs for the bytes.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import streamlit as st
import torch
from scipy import stats

from transformer import AXES, TransformerConfig
from transformer.axes.attention import KIND_FIELDS
from transformer.costs import kv_cache_bytes
from transformer.hooks import hook_name
from transformer.linear_attention import recurrent_form
from transformer.presets import MODEL_CARDS

from ui.compute.layers import HYBRID, SOFTMAX, non_softmax_layers, state_layers, with_attention_layers
from ui.compute.model_cache import get_model

SITES = ("hook_q", "hook_k", "hook_v", "hook_phi_q", "hook_phi_k", "hook_decay", "hook_channel_decay", "hook_beta",
         "hook_predicted", "hook_correction", "hook_state", "hook_z", "hook_pattern")


def hybrid_of(cfg: TransformerConfig) -> tuple[TransformerConfig, str | None]:
    """A model with linear layers for a page about them: `cfg` itself when it has some, else the same model with three
    linear layers to one softmax layer (at least four layers, so one of them is softmax), and why it was changed.
    Where the sidebar's model cannot have linear layers (an encoder, a window on every layer, a sparse pattern), a
    plain decoder of its width and heads instead, with the reason."""
    if state_layers(cfg):
        return cfg, None
    layers = max(cfg.n_layers, 4)
    if AXES["attention"].row(cfg.linear_kind).conv_only:  # LFM2's convolutions hold no state matrix to show
        cfg = cfg.replace(linear_kind=KIND_FIELDS["linear_kind"][0])
    try:
        return with_attention_layers(cfg.replace(n_layers=layers), HYBRID), (
            f"The sidebar's model has no linear layer, so this page uses the same model with {HYBRID} layers "
            f"(three {AXES['attention'].row(cfg.linear_kind).label} layers, then one softmax layer; {layers} layers).")
    except ValueError as exc:
        plain = TransformerConfig(vocab_size=cfg.vocab_size, d_model=cfg.d_model, n_heads=cfg.n_heads, n_layers=layers,
                                  max_len=cfg.max_len, attention_layers=HYBRID, linear_kind=cfg.linear_kind)
        return plain, (f"The sidebar's model has no linear layer and cannot take any ({exc}), so this page uses a "
                       f"decoder of its width and heads with {HYBRID} layers ({layers} layers).")


@dataclass(frozen=True)
class HeadState:
    """One head of one linear layer on the text, token by token (T tokens), as the state saw it."""

    q: np.ndarray  # (T, d_k): q as the state reads it (φ(q), or q of length 1 for the delta rule)
    k: np.ndarray  # (T, d_k): k as the state writes it
    v: np.ndarray  # (T, d_v)
    states: np.ndarray  # (T, d_k, d_v): the state after each token
    read: np.ndarray  # (T, d_v): hook_z, q_tᵀ S_t / sqrt(d_k)
    weights: np.ndarray  # (T, T): the implied weights, read = weights @ v
    decay: np.ndarray | None  # (T,) or, per key channel (Kimi), (T, d_k): what scaled the state before each write
    beta: np.ndarray | None  # (T,): the delta rule's write strength
    predicted: np.ndarray | None  # (T, d_v): what the state said for k_t before the write (delta rule)
    correction: np.ndarray | None  # (T, d_v): what it stored along k_t instead of v_t (delta rule)

    @property
    def written(self) -> np.ndarray:
        """(T, d_v): what each token wrote along its key: the correction under the delta rule, else v itself."""
        return self.v if self.correction is None else self.correction

    def before(self, t: int) -> np.ndarray:
        """(d_k, d_v): the state token t found, after its decay: S_t minus the token's own write."""
        previous = self.states[t - 1] if t else np.zeros_like(self.states[0])
        return previous * (1.0 if self.decay is None else np.reshape(self.decay[t], (-1, 1)))  # one row or each

    def write(self, t: int) -> np.ndarray:
        """(d_k, d_v): token t's write, k_t times what it wrote."""
        return np.outer(self.k[t], self.written[t])

    def read_of_state(self, t: int) -> np.ndarray:
        """(d_v,): q_t read against the state it left, q_tᵀ S_t / √d_k: what hook_z recorded."""
        return self.q[t] @ self.states[t] / math.sqrt(self.q.shape[-1])

    def read_of_weights(self, t: int) -> np.ndarray:
        """(d_v,): the same read as the implied weights give it, Σ_j w_tj v_j."""
        return self.weights[t] @ self.v

    def says_after(self, t: int) -> np.ndarray:
        """(d_v,): what the state returns for k_t once token t has written, S_tᵀ k_t."""
        return self.k[t] @ self.states[t]


@st.cache_data(max_entries=8, show_spinner="Recording the state…")  # a head of 128 tokens: up to 8 MiB
def head_state(config_json: str, seed: int, ids: tuple[int, ...], layer: int, head: int, weights: str = "") -> HeadState:
    """One head's state after every token of `ids` in `layer`, with what wrote it and what read it.

    ``hook_state`` is recorded only when asked for by name, and switches the layer to its recurrent form: the page
    asks for the one layer it shows. A q or k head serves H / H_k value heads (Qwen3-Next: two), so the head's q
    and k are its key head's.
    """
    model = get_model(config_json, seed, weights)
    cfg = model.cfg
    names = [hook_name(layer, f"attn.{site}") for site in SITES]
    _, trace = model.run_with_trace(torch.tensor([ids], device=model.device), names=names)
    got = {site: trace[name][0].float().cpu().numpy() for site, name in zip(SITES, names) if name in trace}
    key_head = head // (cfg.state_heads // cfg.state_key_heads)
    q = got.get("hook_phi_q", got["hook_q"])[key_head]  # no φ (decayed linear): q and k as projected
    k = got.get("hook_phi_k", got["hook_k"])[key_head]
    per_head = lambda site: got[site][head] if site in got else None
    decay = per_head("hook_decay") if "hook_decay" in got else per_head("hook_channel_decay")  # (T,) or (T, d_k)
    return HeadState(q, k, got["hook_v"][head], got["hook_state"][head], got["hook_z"][head], got["hook_pattern"][head],
                     decay, per_head("hook_beta"), per_head("hook_predicted"), per_head("hook_correction"))


# --- an old association overwritten ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Overwrite:
    """Three pairs written in order into a 4 × 4 state: (k₁, v₁), an unrelated (k₂, v₂), then (k₃, v₃) with k₃
    close to k₁; what each rule reads back with k₁ and with k₃ afterwards."""

    similarity: float  # k₁ · k₃
    values: np.ndarray  # (3, 4): v₁, v₂, v₃
    reads: dict[str, np.ndarray]  # rule -> (2, 4): the reads with k₁ and with k₃
    states: dict[str, np.ndarray]  # rule -> (4, 4): the state after the three writes
    corrections: np.ndarray  # (3, 4): what the delta rule stored for each pair


RULES = {"adds": "plain linear attention: S += k vᵀ", "corrects": "delta rule: S += k (v − Sᵀk)ᵀ, β = 1"}


@st.cache_data(max_entries=64, show_spinner=False)
def overwrite(similarity: float) -> Overwrite:
    """Run both rules of the library's recurrent form on three hand-made pairs (values one-hot, so a read shows at a
    glance which value it returns)."""
    c = float(similarity)
    keys = torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 1.0], [c, math.sqrt(max(0.0, 1 - c * c)), 0, 0]])  # unit keys
    values = torch.eye(4)[:3]  # v₁, v₂, v₃ = e₀, e₁, e₂
    as_batch = lambda x: x[None, None]  # (1, 1, T, d)
    reads, states, corrections = {}, {}, None
    for rule, beta in (("adds", None), ("corrects", torch.ones(1, 1, 3))):
        result = recurrent_form(as_batch(keys), as_batch(keys), as_batch(values), None, beta, torch.zeros(1, 1, 4, 4))
        state = result.state[0, 0]  # (4, 4)
        reads[rule] = (keys[[0, 2]] @ state).numpy()  # read after the last write: k₁ᵀ S and k₃ᵀ S
        states[rule] = state.numpy()
        if result.correction is not None:
            corrections = result.correction[0, 0].numpy()
    return Overwrite(c, values.numpy(), reads, states, corrections)


# --- capacity: how many pairs a d_k-wide state recalls ---------------------------------------------------------

MEASURES = {"identified": "the read is nearer its own value than any other stored value (a clean-up memory's recall)",
            "reproduced": "the read lies within 0.5 of its own value, a unit vector (what the next layer gets)"}
MARGIN = 0.05  # stated before measuring: a difference in recall under 5 points is no difference
SEEDS = 8


@dataclass(frozen=True)
class Capacity:
    d_k: int
    n: np.ndarray  # (P,): pairs stored
    recall: dict[str, dict[str, np.ndarray]]  # rule -> measure -> (P, seeds): share of the n pairs recalled


@st.cache_data(max_entries=8, show_spinner="Storing and recalling random pairs…")
def capacity(d_k: int, seeds: int = SEEDS) -> Capacity:
    """Write N pairs (random unit keys and values of d_k numbers) into one state with each rule, then read every
    key back from the state after the N-th write; recall against N up to 3·d_k, for each seed.

    One recurrent pass per rule and seed batch (``recurrent_form`` with the states kept) gives the state after
    every write, so the first N pairs of one long sequence are the experiment for N.
    """
    n_max = 3 * d_k
    generator = torch.Generator().manual_seed(0)
    unit = lambda x: x / x.norm(dim=-1, keepdim=True)
    keys = unit(torch.randn(seeds, 1, n_max, d_k, generator=generator))  # (seeds, 1, N, d_k): a batch of seeds
    values = unit(torch.randn(seeds, 1, n_max, d_k, generator=generator))
    ns = np.unique(np.linspace(1, n_max, 25).round().astype(int).tolist() + [d_k // 2, d_k])
    recall = {}
    for rule, beta in (("adds", None), ("corrects", torch.ones(seeds, 1, n_max))):
        passed = recurrent_form(keys, keys, values, None, beta, torch.zeros(seeds, 1, d_k, d_k), keep_states=True)
        rows = {measure: [] for measure in MEASURES}
        for n in ns:
            reads = keys[:, 0, :n] @ passed.states[:, 0, n - 1]  # (seeds, n, d_v): every stored key, read back
            stored = values[:, 0, :n]
            nearest = (unit(reads) @ stored.transpose(1, 2)).argmax(-1)  # (seeds, n)
            rows["identified"].append((nearest == torch.arange(n)).float().mean(-1).numpy())
            rows["reproduced"].append(((reads - stored).norm(dim=-1) < 0.5).float().mean(-1).numpy())
        recall[rule] = {measure: np.array(r) for measure, r in rows.items()}
    return Capacity(d_k, ns, recall)


@dataclass(frozen=True)
class Verdict:
    n: int
    difference: float  # mean over seeds of (delta rule − plain) recall
    low: float  # its 95% interval
    high: float
    word: str  # "better", "worse", "equivalent" or "undecided", for the delta rule against MARGIN


def paired_verdict(result: Capacity, measure: str, n: int) -> Verdict:
    """The delta rule against plain linear attention at n pairs: the seed-paired difference (the same keys and values
    in both), its 95% t interval, against MARGIN."""
    row = int(np.searchsorted(result.n, n))
    diff = result.recall["corrects"][measure][row] - result.recall["adds"][measure][row]  # (seeds,)
    mean = float(diff.mean())
    half = float(stats.t.ppf(0.975, len(diff) - 1) * diff.std(ddof=1) / math.sqrt(len(diff)))
    low, high = mean - half, mean + half
    word = ("better" if low > MARGIN else "worse" if high < -MARGIN else
            "equivalent" if -MARGIN < low and high < MARGIN else "undecided")
    return Verdict(int(result.n[row]), mean, low, high, word)


def holds_to(result: Capacity, rule: str, measure: str, level: float = 0.9) -> int:
    """The largest N of the grid before the mean recall first falls below `level` (0: below it from the first N)."""
    mean = result.recall[rule][measure].mean(-1)
    falls = np.flatnonzero(mean < level)
    if not len(falls):
        return int(result.n[-1])
    return int(result.n[falls[0] - 1]) if falls[0] else 0


# --- memory at real sizes ----------------------------------------------------------------------------------------

# Qwen3-Next-80B-A3B from its card (published config.json): every fourth of 48 layers softmax attention (16 q heads,
# 2 kv heads of head_dim 256), Gated DeltaNet in the others (16 key heads, 32 value heads, both 128 wide, a
# convolution of 4). The same model with one kind in every layer, then the other state-keeping families as published.
QWEN3_NEXT = MODEL_CARDS["qwen3-next"].real["80B-A3B"]
SHAPES = {
    "GQA in all 48 layers (Qwen3-Next's softmax layers everywhere)":
        QWEN3_NEXT.replace(attention_layers=SOFTMAX, linear_key_heads=None, linear_value_heads=None,
                           linear_key_head_dim=None, linear_value_head_dim=None),
    "Qwen3-Next-80B-A3B: 36 Gated DeltaNet + 12 GQA layers (3:1)": QWEN3_NEXT,
    "Gated DeltaNet in all 48 layers (Qwen3-Next's linear layers everywhere)":
        QWEN3_NEXT.replace(attention_layers=QWEN3_NEXT.linear_kind, position="none", n_kv_heads=None, qk_norm="none",
                           attn_gate=False, rope_dim=None),
}
FAMILY_SHAPES = {  # every other card that mixes state-keeping and softmax layers, as published
    f"{card.name} {size}: {len(kept)} state + {cfg.n_layers - len(kept)} softmax layers": cfg
    for card in MODEL_CARDS.values() if card.key != "qwen3-next" for size, cfg in card.real.items()
    for kept in [non_softmax_layers(cfg)] if 0 < len(kept) < cfg.n_layers}
ALL_SHAPES = {**SHAPES, **FAMILY_SHAPES}
CONTEXTS = np.unique(np.logspace(3, 20 * math.log10(2), 41).round().astype(int))  # 1,000 to 2^20 tokens
MARKED = (1024, 4096, 32768, 131072, 1048576)


@st.cache_data(show_spinner=False)
def cache_by_context(bytes_per_value: int, contexts: tuple[int, ...] = tuple(CONTEXTS),
                     families: bool = False) -> dict[str, dict[str, np.ndarray]]:
    """Shape -> {"total", "global layers" (the growing keys and values), "state layers" (the constant states)}:
    bytes at each context, from ``kv_cache_bytes``: Qwen3-Next's three shapes, and with `families` the other
    state-keeping cards too."""
    out = {}
    for name, cfg in (ALL_SHAPES if families else SHAPES).items():
        held = [kv_cache_bytes(cfg, int(t), bytes_per_value) for t in contexts]
        out[name] = {part: np.array([h[part] for h in held], dtype=float)
                     for part in ("total", "global layers", "state layers")}
    return out


# --- recall at distance on the trained models (scripts/measure_recall.py) ----------------------------------------

RECALL_MEASURED = Path(__file__).resolve().parents[2] / "assets" / "measurements" / "recall.json"
COPIES = 0.05  # a model recalls at d when the first copy lifts exact predictions by 5 points over the control rows


def recall_measured(path: Path = RECALL_MEASURED) -> dict:
    """The measurement file: distances, and per model its name, label, layer kinds and recall (``Recall.as_json``)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} is missing: run `python -m scripts.measure_recall` to measure it") from None


def recall_lift(model: dict) -> np.ndarray:
    """(distances,) how much the first copy lifts exact predictions of the second, over the control rows."""
    return np.array(model["recall"]["accuracy"]) - np.array(model["recall"]["control_accuracy"])
