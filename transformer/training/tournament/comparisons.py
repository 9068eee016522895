"""The tournament's comparisons, as data: each one's axis, the claim it tests (quoted from its source), its entries
(config changes, a learning rate or warm-up of their own where the comparison is about those, the entry each is
measured against, and the verdicts the claim predicts for it), and the cost it is plotted against. One rule reads
every comparison (verdict.py); judgement.py applies it to the runs.

The next run's comparisons beyond the lecture's axes: tied vs untied embeddings, full attention vs a 3:1 hybrid
vs pure Gated DeltaNet, NoPE on every fourth layer vs RoPE everywhere, a lightning indexer's top-k keys against
every key.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from ...config import TransformerConfig
from .run import LENGTHS, Recipe, base_config, mlp_params, width_for_params

AGREES_IF_NO_LOSS = ("equivalent", "better")  # "no quality loss", "at no cost": equal within the margin, or better


@dataclass(frozen=True)
class Claim:
    """What a comparison tests. `lecture`: a sentence of the lecture's documents, word for word (lecture-claims.md);
    otherwise a paper's or model card's claim, in this project's words, with the source named."""
    quote: str
    source: str
    lecture: bool = True

    def to_dict(self) -> dict:
        return {"quote": self.quote, "source": self.source, "lecture": self.lecture, "verbatim": self.lecture}


@dataclass(frozen=True)
class Entry:
    choice: str
    changes: dict = field(default_factory=dict)  # config fields changed from the recipe's base config
    lr_factor: float = 1.0  # times the recipe's learning rate
    warmup: bool = True  # the recipe's warm-up, or none
    against: str | None = ""  # the choice it is measured against: "" the comparison's first entry, None none
    predicted: dict = field(default_factory=dict)  # length ("1x", "4x") -> the verdicts the claim predicts there
    # there to show a failure (a rate chosen to break training; tied embeddings under deep post-norm, which stalled
    # in the first tournament): its not learning is a finding, so the learning gate passes over it
    stress: bool = False


@dataclass(frozen=True)
class Comparison:
    key: str  # the --comparison name
    axis: str
    group: str
    claim: Claim
    cost_axis: str  # kv_bytes_per_token | parameters
    cannot_test: str
    entries: Callable[[Recipe], list[Entry]]
    lengths: tuple[int, ...] = (1,)
    longer_against: str = "self"  # at 2x and 4x: "self" (the same run at 1x) or "reference" (its reference there)
    first_token: bool = False
    out_of_reach: Callable[[dict], str | None] | None = None  # why a measured comparison cannot test its claim
    tied_caveat: str = ""  # said beside the verdict when every entry tied its embeddings
    steps_factor: int = 1  # times the recipe's steps and warm-up, for a comparison whose entries learn slowly
    repeat_rate: float = 0.0  # the share of training rows that repeat a span, where copying is measured
    measure: str | None = None  # what else is read of each trained model (measures.MEASURES)

    def recipe(self, shared: Recipe) -> Recipe:
        """This comparison's recipe: the shared one, with its own steps and repeated spans where it has them."""
        return replace(shared, steps=shared.steps * self.steps_factor, warmup=shared.warmup * self.steps_factor,
                       repeat_rate=self.repeat_rate)


def _kv_entries(r: Recipe) -> list[Entry]:
    return [Entry("MHA"), Entry("GQA (2 groups)", {"n_kv_heads": 2}, predicted={"1x": AGREES_IF_NO_LOSS}),
            Entry("MQA", {"n_kv_heads": 1}), Entry("MLA", {"kv_rank": r.kv_rank, "rope_dim": r.mla_rope_dim})]


def _position_entries(r: Recipe) -> list[Entry]:
    reads_longer = {f"{m}x": AGREES_IF_NO_LOSS for m in LENGTHS[1:]}  # no worse than at the trained length
    return [Entry("RoPE", predicted=reads_longer), Entry("none", {"position": "none"}, against="RoPE"),
            Entry("sinusoidal", {"position": "sinusoidal"}, against="RoPE"),
            Entry("learned", {"position": "learned", "max_len": r.context + 1}, against="RoPE"),  # the rows it trains
            Entry("ALiBi", {"position": "alibi"}, against="RoPE")]


def _norm_name(placement: str, warm: bool, layers: int) -> str:
    return f"{placement}, {'warm-up' if warm else 'no warm-up'}, {layers} layers"


def _norm_entries(r: Recipe) -> list[Entry]:
    """At each depth, pre-norm with warm-up is the reference; post-norm (and sandwich) with warm-up is measured
    against it, and each placement without warm-up against itself with warm-up."""
    entries = []
    for layers in (r.n_layers, r.deep_layers):
        for placement in ("pre", "post", "sandwich"):
            for warm in (True, False):
                is_reference = placement == "pre" and warm
                against = None if is_reference else _norm_name("pre" if warm else placement, True, layers)
                harder = placement == "post"  # the claim: post-norm is harder to train, and needs warm-up
                entries.append(Entry(_norm_name(placement, warm, layers),
                                     {"norm_position": placement, "n_layers": layers}, warmup=warm, against=against,
                                     predicted={"1x": ("worse",)} if harder else {}))
    return entries


def _ffn_entries(r: Recipe) -> list[Entry]:
    base = base_config(r)
    mlp = mlp_params(base)
    moe = base.replace(ffn="moe", n_experts=r.n_experts, top_k=r.top_k)
    return [Entry("SwiGLU"),
            Entry("ReLU", {"ffn": "relu", "d_ff": 4 * r.d_model}, predicted={"1x": ("worse",)}),
            Entry("GELU", {"ffn": "gelu", "d_ff": 4 * r.d_model}, predicted={"1x": ("worse",)}),
            Entry(f"MoE, equal active ({r.top_k} of {r.n_experts} experts)",
                  {"ffn": "moe", "n_experts": r.n_experts, "top_k": r.top_k,
                   "d_ff": width_for_params(moe, mlp, "active")}),
            Entry(f"MoE, equal total ({r.top_k} of {r.n_experts} experts)",
                  {"ffn": "moe", "n_experts": r.n_experts, "top_k": r.top_k,
                   "d_ff": width_for_params(moe, mlp, "total")})]


def _high(r: Recipe) -> str:
    return f"{r.high_lr_factor:g}x lr"


def _qk_entries(r: Recipe) -> list[Entry]:
    return [Entry("off"), Entry("QK-norm", {"qk_norm": "head"}),
            Entry(f"off, {_high(r)}", lr_factor=r.high_lr_factor, stress=True),
            Entry(f"QK-norm, {_high(r)}", {"qk_norm": "head"}, lr_factor=r.high_lr_factor,
                  against=f"off, {_high(r)}", predicted={"1x": ("better",)})]


def _qk_out_of_reach(comp: dict) -> str | None:
    """The claim is about a rate that breaks the baseline: if the high rate did not hurt the baseline (its verdict
    against the baseline at the recipe's rate is not "worse": no seed diverged and the interval does not lie above
    0), there was nothing for QK-norm to prevent, and the claim is untested."""
    by_choice = {e["choice"]: e for e in comp["entries"]}
    baseline = by_choice[comp["entries"][-1]["against"]]  # QK-norm at the high rate is measured against it
    if any(r["diverged"] for r in baseline["runs"]) or baseline.get("verdict") == "worse":
        return None
    return (f"the high rate did not hurt the baseline ({baseline['choice']} against {baseline['against']}: "
            f"{baseline.get('verdict') or 'no verdict'}, no seed diverged), so there was no failure for QK-norm to "
            "prevent; the entries' verdicts still show how each trained at it")


def _sink_entries(r: Recipe) -> list[Entry]:
    return [Entry("off"), Entry("sinks", {"sinks": True}, predicted={"1x": AGREES_IF_NO_LOSS})]


def _softcap_entries(r: Recipe) -> list[Entry]:
    return [Entry("off"), Entry(f"soft-cap (scores {r.attn_softcap:g}, logits {r.logit_softcap:g})",
                                {"attn_softcap": r.attn_softcap, "logit_softcap": r.logit_softcap},
                                predicted={"1x": AGREES_IF_NO_LOSS})]


def _embedding_entries(r: Recipe) -> list[Entry]:
    deep = {"n_layers": r.deep_layers}
    return [Entry("pre-norm, untied", {**deep, "tie_embeddings": False}),
            Entry("pre-norm, tied", {**deep, "tie_embeddings": True}, predicted={"1x": AGREES_IF_NO_LOSS}),
            Entry("post-norm, untied", {**deep, "tie_embeddings": False, "norm_position": "post"}),
            Entry("post-norm, tied", {**deep, "tie_embeddings": True, "norm_position": "post"},
                  against="post-norm, untied", predicted={"1x": AGREES_IF_NO_LOSS}, stress=True)]


def _attention_kind_entries(r: Recipe) -> list[Entry]:
    layers = {"n_layers": r.frontier_layers}
    return [Entry("full attention", layers),
            Entry("3:1 hybrid (Gated DeltaNet)", {**layers, "attention_layers": "3:1"},
                  predicted={"1x": AGREES_IF_NO_LOSS}),
            Entry("pure Gated DeltaNet", {**layers, "attention_layers": "gated-deltanet", "position": "none"})]


def _nope_entries(r: Recipe) -> list[Entry]:
    layers = {"n_layers": r.frontier_layers}
    return [Entry("RoPE everywhere", layers),
            Entry("NoPE every fourth layer", {**layers, "nope_layers": "every 4"},
                  predicted={f"{m}x": ("better",) for m in LENGTHS[1:]})]


def _indexer_entries(r: Recipe) -> list[Entry]:
    layers = {"n_layers": r.frontier_layers}
    quarter = r.context // 4  # k = T/4: each query keeps a quarter of a full crop's keys
    return [Entry("dense attention", layers),
            Entry(f"indexer top-{quarter}", {**layers, "index_top_k": quarter, "index_heads": 4, "index_head_dim": 16},
                  predicted={"1x": AGREES_IF_NO_LOSS})]


TIED = ("Every model of this comparison tied its input and output embeddings (the output head reuses the input "
        "embedding matrix). Tied, the deep post-norm models stalled near the unigram level; untied, post-norm may "
        "train, so what is measured here may be the tie's doing as much as post-norm's. The next recipe unties the "
        "embeddings and measures the tie as a comparison of its own, under pre-norm and post-norm.")

COMPARISONS: dict[str, Comparison] = {c.key: c for c in (
    Comparison("kv-heads", "KV heads", "KV heads",
               Claim("GQA is the sweet spot — LLaMA 2 70B, Mistral, and most modern LLMs use it because you get most "
                     "of MQA's memory savings with almost no quality loss", "000, design notes on a unified "
                     "transformer"),
               "kv_bytes_per_token",
               "Quality at long context and large batch, where the cache matters; heads 128 wide, hundreds of heads. "
               "At 4 heads of 16, MQA's one head is a large share of MHA's. The lecture's claim is about GQA: MQA and "
               "MLA are measured, not judged against it (no document mentions MLA).", _kv_entries),
    Comparison("positions", "Positions", "Positions",
               Claim("Excellent extrapolation to longer sequences", "001, tutorial from attention to modern LLMs "
                     "(of RoPE)"),
               "parameters",
               "Contexts of thousands of tokens and the scaled RoPE variants (YaRN, LLaMA 3) that were made because "
               "plain RoPE does not extrapolate; a learned table cannot read past the rows it trained.",
               _position_entries, lengths=LENGTHS, steps_factor=4),
    Comparison("norms", "Norms", "Norms",
               Claim("Harder to train, needs warmup.", "002, the reference implementation's comments (of post-norm)"),
               "parameters",
               "Depths of 24 to 100 layers, where post-norm's gradients at the bottom shrink most; the gradient clip "
               "at 1.0 this recipe shares may hide an instability an unclipped run would show.",
               _norm_entries, tied_caveat=TIED),
    Comparison("ffn", "FFN", "FFN",
               Claim("Better quality for same param count.", "002, the reference implementation's comments (of "
                     "SwiGLU)"),
               "parameters",
               "MoE's gains come with many experts (8 to 256) and billions of tokens; 4 experts in 2 layers of 64 "
               "for minutes test the mechanism, not the scale. The claim is about SwiGLU: the MoE entries are "
               "measured, not judged against it.", _ffn_entries),
    Comparison("qk-norm", "QK-norm", "The new switches",
               Claim("Normalising queries and keys keeps attention logits from growing, so training survives a "
                     "learning rate that breaks the baseline.", "OLMo 2 (Team OLMo, 2024, \"2 OLMo 2 Furious\") and "
                     "the Qwen3 technical report (2025)", lecture=False),
               "parameters",
               "Attention logits grow with width and training length; at d_head 16 they stay small, so the "
               "instability QK-norm prevents may never arise.", _qk_entries, out_of_reach=_qk_out_of_reach),
    Comparison("sinks", "Sinks", "The new switches",
               Claim("A learned sink logit gives a head somewhere to put attention it does not need, at no cost in "
                     "quality.", "gpt-oss model card (OpenAI, 2025)", lecture=False),
               "parameters",
               "Streaming and long-context behaviour, where the first token's role as a sink matters most.",
               _sink_entries, first_token=True),
    Comparison("softcap", "Soft-cap", "The new switches",
               Claim("Soft-capping attention scores and final logits stabilises training at no cost in quality.",
                     "Gemma 2 technical report (Gemma Team, 2024)", lecture=False),
               "parameters",
               "Gemma 2's caps (50 on scores, 30 on logits) only bite on logits that large; a model this small "
               "rarely reaches them.", _softcap_entries),
    Comparison("embeddings", "Tied vs untied", "Embeddings",
               Claim("Tying the output embedding to the input embedding costs nothing in quality and often "
                     "improves it, with fewer parameters.", "Press and Wolf, \"Using the Output Embedding to Improve "
                     "Language Models\" (2017)", lecture=False),
               "parameters",
               "Vocabularies of 32k to 256k tokens, where the embedding is a large share of the parameters; here "
               "it is a few hundred characters.", _embedding_entries),
    Comparison("attention-kinds", "Full vs hybrid", "Layers that keep a state",
               Claim("Three Gated DeltaNet layers to one full-attention layer read as well as full attention, with a "
                     "fixed-size state in most layers.", "Qwen3-Next model card (Qwen, 2025) and Gated DeltaNet "
                     "(Yang, Kautz and Hatamizadeh, 2024)", lecture=False),
               "kv_bytes_per_token",
               "Contexts of thousands of tokens, where a fixed state has far more to forget; here recall is read up "
               "to 4× a crop of 128 characters, and only shows once a model has learned to copy at all (an "
               "induction circuit, which small runs may never form).", _attention_kind_entries, repeat_rate=0.25,
               measure="recall"),
    Comparison("nope", "NoPE every 4th", "Positions",
               Claim("Leaving RoPE out of every fourth layer helps a model read past its trained length.",
                     "Llama 4 model card (Meta, 2025) and \"Rope to Nope and Back Again\" (Yang et al., 2025)",
                     lecture=False),
               "parameters",
               "Contexts of 128k tokens and more, where Llama 4 uses it; here 4× a crop of 128 characters.",
               _nope_entries, lengths=LENGTHS, longer_against="reference"),
    Comparison("indexer", "Indexer top-k", "Keys chosen",
               Claim("A lightning indexer that keeps each query's top-k keys attends sparsely at little or no cost in "
                     "quality.", "DeepSeek-V3.2 technical report (DeepSeek-AI, 2025)", lecture=False),
               "parameters",
               "DeepSeek-V3.2 keeps 2,048 of up to 128k keys, trains its indexer to match the dense weights first, "
               "and saves compute only at long context; here a quarter of a 128-character crop, trained from the "
               "start with the model.", _indexer_entries, measure="kept_mass"),
)}



def entry_config(recipe: Recipe, entry: Entry) -> TransformerConfig:
    return base_config(recipe, **entry.changes)


def reference_of(entries: list[Entry], entry: Entry) -> str | None:
    """The choice `entry` is measured against: its own `against`, else the first entry (None for that one, and for
    an entry that is a reference itself)."""
    if entry.against is None or entry is entries[0]:
        return None
    return entry.against or entries[0].choice
