"""The tournament's comparisons, as data: each one's axis, the lecture's claim, its entries (config changes, and a
learning rate or warm-up of their own where the comparison is about those), the cost it is plotted against, and
the function that reads the measured numbers into a one-line verdict (statistics.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ...config import TransformerConfig
from .run import LENGTHS, Recipe, base_config, mlp_params, width_for_params
from .statistics import ffn_verdict, kv_verdict, norms_verdict, positions_verdict, qk_verdict, switch_verdict


@dataclass(frozen=True)
class Entry:
    choice: str
    changes: dict = field(default_factory=dict)  # config fields changed from the recipe's base config
    lr_factor: float = 1.0  # times the recipe's learning rate
    warmup: bool = True  # the recipe's warm-up, or none


@dataclass(frozen=True)
class Comparison:
    key: str  # the --comparison name
    axis: str
    group: str  # the heading it belongs to
    claim: str
    cost_axis: str  # kv_bytes_per_token | parameters | forward_ms
    cannot_test: str
    entries: Callable[[Recipe], list[Entry]]
    verdict: Callable[[dict], str]
    lengths: tuple[int, ...] = (1,)
    first_token: bool = False


def _kv_entries(r: Recipe) -> list[Entry]:
    return [Entry("MHA"), Entry("GQA (2 groups)", {"n_kv_heads": 2}), Entry("MQA", {"n_kv_heads": 1}),
            Entry("MLA", {"kv_rank": r.kv_rank, "rope_dim": r.mla_rope_dim})]


def _position_entries(r: Recipe) -> list[Entry]:
    return [Entry("none", {"position": "none"}), Entry("sinusoidal", {"position": "sinusoidal"}),
            Entry("learned", {"position": "learned", "max_len": r.context + 1}),  # only the rows it trains
            Entry("RoPE"), Entry("ALiBi", {"position": "alibi"})]


def _norm_entries(r: Recipe) -> list[Entry]:
    entries = []
    for layers in (r.n_layers, r.deep_layers):
        for placement in ("pre", "post", "sandwich"):
            for warm in (True, False):
                entries.append(Entry(f"{placement}, {'warm-up' if warm else 'no warm-up'}, {layers} layers",
                                     {"norm_position": placement, "n_layers": layers}, warmup=warm))
    return entries


def _ffn_entries(r: Recipe) -> list[Entry]:
    base = base_config(r)
    mlp = mlp_params(base)
    moe = base.replace(ffn="moe", n_experts=r.n_experts, top_k=r.top_k)
    return [Entry("ReLU", {"ffn": "relu", "d_ff": 4 * r.d_model}),
            Entry("GELU", {"ffn": "gelu", "d_ff": 4 * r.d_model}),
            Entry("SwiGLU"),
            Entry(f"MoE, equal active ({r.top_k} of {r.n_experts} experts)",
                  {"ffn": "moe", "n_experts": r.n_experts, "top_k": r.top_k,
                   "d_ff": width_for_params(moe, mlp, "active")}),
            Entry(f"MoE, equal total ({r.top_k} of {r.n_experts} experts)",
                  {"ffn": "moe", "n_experts": r.n_experts, "top_k": r.top_k,
                   "d_ff": width_for_params(moe, mlp, "total")})]


def _qk_entries(r: Recipe) -> list[Entry]:
    high = f"{r.high_lr_factor:g}x lr"
    return [Entry("off"), Entry("QK-norm", {"qk_norm": "head"}),
            Entry(f"off, {high}", lr_factor=r.high_lr_factor),
            Entry(f"QK-norm, {high}", {"qk_norm": "head"}, lr_factor=r.high_lr_factor)]


def _sink_entries(r: Recipe) -> list[Entry]:
    return [Entry("off"), Entry("sinks", {"sinks": True})]


def _softcap_entries(r: Recipe) -> list[Entry]:
    return [Entry("off"), Entry(f"soft-cap (scores {r.attn_softcap:g}, logits {r.logit_softcap:g})",
                                {"attn_softcap": r.attn_softcap, "logit_softcap": r.logit_softcap})]



COMPARISONS: dict[str, Comparison] = {c.key: c for c in (
    Comparison("kv-heads", "KV heads", "KV heads",
               "GQA and MQA shrink the KV cache with almost no quality loss (MLA too, with a latent instead of heads).",
               "kv_bytes_per_token",
               "Quality at long context and large batch, where the cache matters; heads 128 wide, hundreds of heads. "
               "At 4 heads of 16, MQA's one head is a large share of MHA's.", _kv_entries, kv_verdict),
    Comparison("positions", "Positions", "Positions",
               "RoPE extrapolates: a model trained at one length reads longer text.",
               "parameters",
               "Contexts of thousands of tokens and the scaled RoPE variants (YaRN, LLaMA 3) that were made because "
               "plain RoPE does not extrapolate; a learned table cannot read past the rows it trained.",
               _position_entries, positions_verdict, lengths=LENGTHS),
    Comparison("norms", "Norms", "Norms",
               "Pre-norm trains better than post-norm, and post-norm needs learning-rate warm-up.",
               "parameters",
               "Depths of 24 to 100 layers, where post-norm's gradients at the bottom shrink most; the gradient clip "
               "at 1.0 this recipe shares may hide an instability an unclipped run would show.",
               _norm_entries, norms_verdict),
    Comparison("ffn", "FFN", "FFN",
               "SwiGLU is worth its third matrix; a mixture of experts buys quality at the same active compute.",
               "parameters",
               "MoE's gains come with many experts (8 to 256) and billions of tokens; 4 experts in 2 layers of 64 "
               "for minutes test the mechanism, not the scale.", _ffn_entries, ffn_verdict),
    Comparison("qk-norm", "QK-norm", "The new switches",
               "QK-norm lets training survive a learning rate that breaks the baseline (OLMo 2, Qwen3).",
               "forward_ms",
               "Attention logits grow with width and training length; at d_head 16 they stay small, so the "
               "instability QK-norm prevents may never arise.", _qk_entries, qk_verdict),
    Comparison("sinks", "Sinks", "The new switches",
               "A learned sink gives a head somewhere to put attention it does not need, so it stops dumping it on "
               "the first token, at no cost in quality (gpt-oss).",
               "forward_ms",
               "Streaming and long-context behaviour, where the first token's role as a sink matters most.",
               _sink_entries, lambda c: switch_verdict(c, "sinks"), first_token=True),
    Comparison("softcap", "Soft-cap", "The new switches",
               "Soft-capping scores and logits keeps training stable at no cost in quality (Gemma 2).",
               "forward_ms",
               "Gemma 2's caps (50 on scores, 30 on logits) only bite on logits that large; a model this small "
               "rarely reaches them.", _softcap_entries, lambda c: switch_verdict(c, "soft-capping")),
)}


def entry_config(recipe: Recipe, entry: Entry) -> TransformerConfig:
    return base_config(recipe, **entry.changes)
