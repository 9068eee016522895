"""Attention's choices: the kind of each layer, how many K/V heads, which keys a query sees, QK-norm, scores.

The modules that build them sit in transformer/attention.py (one per kind) and transformer/masks.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from .base import Axis, Choice


@dataclass(frozen=True, kw_only=True)
class AttentionChoice(Choice):
    keeps_state: bool  # a fixed-size state instead of a KV cache that grows with every token
    softmax: bool  # its weights come out of a softmax: each row sums to 1


ATTENTION = Axis("Attention kind", {
    "softmax": AttentionChoice("softmax attention", "each query weighs every key it may see by softmax(q·k)",
                               "Any token reads any other exactly, at a cost and a cache that grow with the text.",
                               "2017, every model to 2024", keeps_state=False, softmax=True),
}, problem="Softmax attention keeps every past key and value; a state that every token writes into keeps a fixed size "
           "instead.")  # a layer plan's row holds it (``TransformerConfig.layer_plan``)


def _check_not_latent(cfg) -> None:
    if cfg.q_rank is not None:
        raise ValueError(f"q_rank={cfg.q_rank} is part of multi-head latent attention; set kv_rank too, or q_rank=None")


def _check_latent(cfg) -> None:
    width = cfg.n_heads * cfg.d_head
    if not 1 <= cfg.kv_rank <= width:
        raise ValueError(f"kv_rank={cfg.kv_rank} must be between 1 and the heads' width n_heads * head_dim = "
                         f"{cfg.n_heads} * {cfg.d_head} = {width}: a latent wider than the keys saves nothing")
    if cfg.q_rank is not None and not 1 <= cfg.q_rank <= width:
        raise ValueError(f"q_rank={cfg.q_rank} must be between 1 and n_heads * head_dim = {width}")
    if cfg.n_kv_heads != cfg.n_heads:
        raise ValueError(f"multi-head latent attention rebuilds a key and a value for every head from its "
                         f"latent; set n_kv_heads={cfg.n_heads} (= n_heads), not {cfg.n_kv_heads}")
    if cfg.row("qk_norm").normalises or cfg.attn_gate:
        raise ValueError(f"multi-head latent attention (kv_rank={cfg.kv_rank}) normalises its own latent; "
                         f"qk_norm={cfg.qk_norm!r} and attn_gate={cfg.attn_gate} are not built for it: set "
                         "qk_norm='none' and attn_gate=False, or kv_rank=None")
    if not cfg.row("arch").next_token:
        raise ValueError(f"multi-head latent attention (kv_rank={cfg.kv_rank}) is built for decoders; "
                         f"set arch='decoder' (now {cfg.arch!r}) or kv_rank=None")
    if cfg.row("position").rotates_qk and (cfg.rope_dim is None or cfg.rope_dim == cfg.d_head):
        raise ValueError(f"MLA keeps RoPE off the latent: give it a decoupled rope_dim smaller than "
                         f"head_dim={cfg.d_head} (DeepSeek-V3: 64 of 192)")


@dataclass(frozen=True, kw_only=True)
class KVChoice(Choice):
    latent: bool = False  # K and V rebuilt from a cached low-rank latent (MLA): the cache holds the latent


KV_HEADS = Axis("KV heads", {
    "MHA": KVChoice("MHA", "every head has its own K and V",
                    "Each head can look for a different relation with keys and values of its own.", "2017, GPT-2, BERT",
                    check=_check_not_latent),
    "GQA": KVChoice("GQA", "each group of H/G query heads reads the same K and V",
                    "Shrinks the KV cache by H/G with little loss.", "LLaMA 2 70B, Mistral", check=_check_not_latent),
    "MQA": KVChoice("MQA", "all heads read one shared K and V",
                    "The smallest KV cache: H times smaller than MHA.", "PaLM, Falcon", check=_check_not_latent),
    "MLA": KVChoice("MLA (latent)", "every head's K and V are rebuilt from one small latent per token, plus one "
                    "RoPE key all heads share",
                    "A cache as small as MQA's that still gives every head keys and values of its own.",
                    "DeepSeek-V2, DeepSeek-V3", latent=True, check=_check_latent),
}, problem="At generation time every past token's keys and values sit in memory. Sharing one K/V head among "
           "several query heads (GQA, MQA) shrinks that cache by H/G with little loss; a latent (MLA) shrinks it "
           "further and keeps a key per head.")  # derived from n_kv_heads and kv_rank (``cfg.attention_kind``)

@dataclass(frozen=True, kw_only=True)
class MaskChoice(Choice):
    causal: bool = False  # hides every key after the query (transformer/masks.py builds each mask by its key)


MASK = Axis("Mask", {
    "none": MaskChoice("none (bidirectional)", "every query sees every key, before and after it",
                       "An encoder reads the whole text at once.", "BERT"),
    "causal": MaskChoice("causal", "a query sees only itself and the keys before it",
                         "A decoder must not see the future it learns to predict.", "GPT-2, LLaMA", causal=True),
    "cross": MaskChoice("cross-attention", "the decoder's queries read the encoder's keys and values",
                        "Lets a decoder read the encoder.", "2017"),
    "padding": MaskChoice("padding", "keys at padding positions are hidden from every query",
                          "Padding must be invisible: a text in a batch gets the answer it gets alone."),
    "sliding_window": MaskChoice("sliding window", "a query sees at most W keys, itself included",
                                 "Bounds the cost of long inputs: W keys per query, however long the text.",
                                 "Mistral"),
}, problem="Decides who may look at whom: a decoder must not see the future, padding must be invisible, a window "
           "bounds the cost of long inputs, cross-attention lets a decoder read the encoder.")


def _check_pattern(cfg) -> None:
    if cfg.sliding_window is not None or cfg.layer_pattern != "uniform":
        raise ValueError(f"attention_pattern={cfg.attention_pattern!r} brings its own local keys; set "
                         f"sliding_window=None (now {cfg.sliding_window}) and layer_pattern='uniform' "
                         f"(now {cfg.layer_pattern!r}), or attention_pattern='dense' to keep the window")
    if cfg.pattern_size < 1:
        raise ValueError(f"pattern_size={cfg.pattern_size} must be at least 1 (the stride, block or window "
                         f"of the {cfg.attention_pattern} pattern)")
    if cfg.n_global < 0:
        raise ValueError(f"n_global={cfg.n_global} must be 0 or more (global tokens of the global-local pattern)")


@dataclass(frozen=True, kw_only=True)
class PatternChoice(Choice):
    sparse: bool  # scores only some of the pairs the mask allows (transformer/masks.py builds each pattern)
    global_tokens: bool = False  # a few tokens see and are seen by every token (n_global of them)
    whole_blocks: bool = False  # a query's keys are whole blocks, so a block-sparse kernel can skip the rest


ATTENTION_PATTERN = Axis("Sparse pattern", {
    "dense": PatternChoice("dense", "every pair the mask allows is scored: T² pairs for T tokens",
                           "Any token can read any other in one step.", "GPT-2, LLaMA", sparse=False),
    "strided": PatternChoice("strided", "a query sees the keys less than s away and every s-th key before them",
                             "About T·(s + T/s) pairs instead of T², and any two tokens are two steps apart.",
                             "Sparse Transformer (2019)", sparse=True, check=_check_pattern),
    "block-local": PatternChoice("block-local", "a query sees only the keys of its own block of b tokens",
                                 "T·b pairs: the cost grows linearly with the text, blocks never talk to each other "
                                 "in one layer.", sparse=True, whole_blocks=True, check=_check_pattern),
    "global-local": PatternChoice("global + local", "a local window, plus a few global tokens that see and are seen "
                                  "by every token", "About T·(W + 2g) pairs, and every token is two steps from any "
                                  "other through a global token.", "Longformer, BigBird (2020)", sparse=True,
                                  global_tokens=True, check=_check_pattern),
}, problem="Dense attention scores T² pairs. A sparse pattern scores only some of them, so compute and memory "
           "can grow about linearly with T; information still travels across the whole text over the layers.",
    field="attention_pattern")


@dataclass(frozen=True, kw_only=True)
class QKNormChoice(Choice):
    normalises: bool  # an RMSNorm on q and k before RoPE
    per_head: bool = False  # one norm of d_head per head, else one over the whole projection


QK_NORM = Axis("QK-norm", {
    "none": QKNormChoice("none", "q and k as projected", "The plain recipe.", normalises=False),
    "head": QKNormChoice("per head", "an RMSNorm on each head's q and k, before RoPE",
                         "Scores cannot grow without bound, so training survives higher learning rates.",
                         "Qwen3, Gemma 3", normalises=True, per_head=True),
    "full": QKNormChoice("over the projection", "an RMSNorm on all of q (and all of k) at once, before RoPE",
                         "The same bound, one norm across the heads.", "OLMo 2", normalises=True),
}, problem="Large q·k scores saturate softmax and make training unstable; normalising q and k bounds them.",
    field="qk_norm")

@dataclass(frozen=True, kw_only=True)
class ScoresChoice(Choice):
    switch: str | None = None  # the config field that turns it on (None: the plain recipe, on when nothing else is)


SCORES = Axis("Scores", {
    "plain": ScoresChoice("plain", "softmax of the scaled, masked scores", "The 2017 recipe.", "2017, LLaMA"),
    "softcap": ScoresChoice("soft-capped", "scores squeezed into (-c, c) by c·tanh(s/c) before the mask",
                            "No score can grow large enough to take all of a row's weight.", "Gemma 2",
                            switch="attn_softcap"),
    "sinks": ScoresChoice("with a sink", "a learned logit per head joins each row's softmax and is dropped",
                          "A head can attend to nothing: the sink takes the weight it does not want to spend.",
                          "gpt-oss", switch="sinks"),
    "gate": ScoresChoice("gated output", "each head's output times sigmoid(x W_gate) before W_o",
                         "A head can switch itself off per token, without parking its weight on a token.",
                         "Qwen3-Next", switch="attn_gate"),
}, problem="What happens between the scores and the output: capping them, letting a row attend to nothing, or "
           "gating what a head returns.")  # switched on by attn_softcap, sinks and attn_gate (``scores_choices``)
