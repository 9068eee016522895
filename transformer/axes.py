"""Each axis and each of its choices in words: a label, what it does, the problem it solves.

The config's ``Literal`` types list the choices (config.py); this table is the one place they are
described. Choices are keyed by the config's strings; three axes have no field of their own and
are keyed by the name the library derives: KV heads by ``cfg.attention_kind``, the mask by the
architecture, padding and window, the block by ``cfg.parallel_block``.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Choice:
    label: str  # how the pages name it, e.g. "RoPE"
    does: str  # one line, lower case: what it does
    solves: str  # one sentence: the problem it solves
    examples: str = ""  # models (or the year) that made this choice


@dataclass(frozen=True)
class Axis:
    title: str
    choices: dict[str, Choice]
    problem: str = ""  # why the axis exists; written for the five axes of the Home page


AXES: dict[str, Axis] = {
    "arch": Axis("Architecture", {
        "decoder": Choice("decoder", "a causal stack that predicts each next token from the ones before it",
                          "Generates text one token at a time.", "GPT-2, LLaMA"),
        "encoder": Choice("encoder", "a bidirectional stack: every token reads the whole text",
                          "Understands a text with context on both sides (classify it, fill in masked words).", "BERT"),
        "encoder-decoder": Choice("encoder-decoder",
                                  "an encoder reads the source; a causal decoder writes the target, reading the "
                                  "encoder through cross-attention",
                                  "Turns one text into another of a different length (translation).", "2017"),
    }),
    "kv_heads": Axis("KV heads", {
        "MHA": Choice("MHA", "every head has its own K and V",
                      "Each head can look for a different relation with keys and values of its own.",
                      "2017, GPT-2, BERT"),
        "GQA": Choice("GQA", "each group of H/G query heads reads the same K and V",
                      "Shrinks the KV cache by H/G with little loss.", "LLaMA 2 70B, Mistral"),
        "MQA": Choice("MQA", "all heads read one shared K and V",
                      "The smallest KV cache: H times smaller than MHA.", "PaLM, Falcon"),
        "MLA": Choice("MLA (latent)", "every head's K and V are rebuilt from one small latent per token, plus one "
                      "RoPE key all heads share",
                      "A cache as small as MQA's that still gives every head keys and values of its own.",
                      "DeepSeek-V2, DeepSeek-V3"),
    }, problem="At generation time every past token's keys and values sit in memory. Sharing one K/V head among "
               "several query heads (GQA, MQA) shrinks that cache by H/G with little loss; a latent (MLA) shrinks it "
               "further and keeps a key per head."),
    "mask": Axis("Mask", {
        "none": Choice("none (bidirectional)", "every query sees every key, before and after it",
                       "An encoder reads the whole text at once.", "BERT"),
        "causal": Choice("causal", "a query sees only itself and the keys before it",
                         "A decoder must not see the future it learns to predict.", "GPT-2, LLaMA"),
        "cross": Choice("cross-attention", "the decoder's queries read the encoder's keys and values",
                        "Lets a decoder read the encoder.", "2017"),
        "padding": Choice("padding", "keys at padding positions are hidden from every query",
                          "Padding must be invisible: a text in a batch gets the answer it gets alone."),
        "sliding_window": Choice("sliding window", "a query sees at most W keys, itself included",
                                 "Bounds the cost of long inputs: W keys per query, however long the text.",
                                 "Mistral"),
    }, problem="Decides who may look at whom: a decoder must not see the future, padding must be invisible, a window "
               "bounds the cost of long inputs, cross-attention lets a decoder read the encoder."),
    "attention_pattern": Axis("Sparse pattern", {
        "dense": Choice("dense", "every pair the mask allows is scored: T² pairs for T tokens",
                        "Any token can read any other in one step.", "GPT-2, LLaMA"),
        "strided": Choice("strided", "a query sees the keys less than s away and every s-th key before them",
                          "About T·(s + T/s) pairs instead of T², and any two tokens are two steps apart.",
                          "Sparse Transformer (2019)"),
        "block-local": Choice("block-local", "a query sees only the keys of its own block of b tokens",
                              "T·b pairs: the cost grows linearly with the text, blocks never talk to each other "
                              "in one layer."),
        "global-local": Choice("global + local", "a local window, plus a few global tokens that see and are seen "
                               "by every token", "About T·(W + 2g) pairs, and every token is two steps from any other "
                               "through a global token.", "Longformer, BigBird (2020)"),
    }, problem="Dense attention scores T² pairs. A sparse pattern scores only some of them, so compute and memory "
               "can grow about linearly with T; information still travels across the whole text over the layers."),
    "position": Axis("Position", {
        "none": Choice("none", "no position signal: only the mask orders tokens",
                       "A baseline: shows how blind attention is to order."),
        "sinusoidal": Choice("sinusoidal", "fixed sine/cosine vectors added to the embeddings",
                             "Tells attention where each token is, with nothing to train.", "2017"),
        "learned": Choice("learned", "a trained vector per position, added to the embeddings",
                          "Lets the model learn what each position means, up to its table's length (max_len).", "GPT-2, BERT"),
        "rope": Choice("RoPE", "q and k rotated by an angle proportional to position",
                       "Scores depend on the distance between tokens only.", "LLaMA, Mistral"),
        "alibi": Choice("ALiBi", "a linear distance penalty added to the scores",
                        "Extrapolates to inputs longer than the training ones.", "BLOOM"),
    }, problem="Attention is blind to order. Add position vectors (sinusoidal, learned), rotate q and k by position "
               "(RoPE: scores depend on distance only), or penalise distance directly (ALiBi: extrapolates to longer "
               "inputs)."),
    "rope_scaling": Axis("RoPE scaling", {
        "none": Choice("none", "RoPE's frequencies as trained", "Reads as far as it was trained, no further."),
        "linear": Choice("linear (position interpolation)", "every frequency divided by the factor",
                         "A model reads s times its context: position s·p turns as p did in training.",
                         "Code LLaMA, Gemma 3"),
        "dynamic": Choice("dynamic NTK", "past the trained length, a larger base slows the low frequencies most",
                          "Nothing changes inside the trained context; beyond it, the base grows with the text.",
                          "Qwen (early)"),
        "yarn": Choice("YaRN", "fast dimensions kept, slow ones interpolated, a ramp between; cos and sin scaled up",
                       "Reads far past the context while short-range attention stays as sharp as trained.",
                       "DeepSeek-V3, gpt-oss, Qwen3"),
        "llama3": Choice("LLaMA 3", "long wavelengths interpolated, short ones kept, a smooth band between",
                         "Stretches LLaMA 3 from 8k to 128k tokens with little loss at short range.", "LLaMA 3.1"),
    }, problem="A RoPE model fails past the length it trained on: its slow dimensions reach angles it never saw. "
               "Scaling slows those dimensions so long texts land on familiar angles."),
    "qk_norm": Axis("QK-norm", {
        "none": Choice("none", "q and k as projected", "The plain recipe."),
        "head": Choice("per head", "an RMSNorm on each head's q and k, before RoPE",
                       "Scores cannot grow without bound, so training survives higher learning rates.",
                       "Qwen3, Gemma 3"),
        "full": Choice("over the projection", "an RMSNorm on all of q (and all of k) at once, before RoPE",
                       "The same bound, one norm across the heads.", "OLMo 2"),
    }, problem="Large q·k scores saturate softmax and make training unstable; normalising q and k bounds them."),
    "norm": Axis("Norm", {
        "layernorm": Choice("LayerNorm", "subtracts each vector's mean, divides by its standard deviation, scales and shifts",
                            "Keeps every token's vector at a steady scale, so deep stacks neither blow up nor vanish.",
                            "2017, GPT-2, BERT"),
        "rmsnorm": Choice("RMSNorm", "divides each vector by its root mean square and scales: no centring, no shift",
                          "The same steadying for less compute.", "LLaMA, Mistral"),
    }, problem="Deep stacks blow up or vanish without normalisation. Pre-norm keeps a clean residual path and trains "
               "deep models without warm-up tricks; RMSNorm drops the centring and is cheaper."),
    "norm_position": Axis("Placement", {
        "pre": Choice("pre", "the norm reads each sublayer's input; the residual path adds the raw output",
                      "Keeps a clean residual path, so deep models train without warm-up tricks.", "GPT-2, LLaMA"),
        "post": Choice("post", "the norm follows each residual addition",
                       "Keeps the residual stream itself normalised after every sublayer.", "2017, BERT"),
        "sandwich": Choice("sandwich", "a norm on each sublayer's input and another on its output, before the add",
                           "Pre-norm's clean residual path, with each sublayer's contribution kept at a steady scale.",
                           "Gemma 2, Gemma 3"),
        "after": Choice("after the sublayer", "the norm reads each sublayer's output, before the residual add",
                        "A clean residual path and bounded updates, with the sublayer reading the raw stream.",
                        "OLMo 2"),
    }),
    "block": Axis("Block", {
        "sequential": Choice("sequential", "the FFN reads the residual stream after attention has added to it",
                             "The FFN builds on what attention just gathered.", "2017, LLaMA"),
        "parallel": Choice("parallel attention + FFN",
                           "attention and the FFN read the same normalised input; their outputs are summed",
                           "Both sublayers' matrix products run at once: faster at large scale, at little cost.",
                           "PaLM, Falcon"),
    }),
    "ffn": Axis("FFN", {
        "relu": Choice("ReLU", "max(0, x) MLP", "A nonlinearity between two projections: without it the stack "
                       "would be one linear map.", "2017"),
        "gelu": Choice("GELU", "smooth MLP", "No hard corner at 0: small negative inputs still pass a gradient.",
                       "GPT-2, BERT"),
        "swiglu": Choice("SwiGLU", "gated linear unit", "Gates train better per parameter.", "LLaMA, PaLM"),
        "geglu": Choice("GeGLU", "gated linear unit with a GELU gate", "The same gate with GELU's smooth curve.",
                        "Gemma"),
        "moe": Choice("MoE", "router picks top-k experts per token",
                      "Adds parameters while each token pays for only top-k of them.", "Mixtral"),
    }, problem="The per-token computation. Gates (SwiGLU) train better per parameter; a mixture of experts adds "
               "parameters while each token pays for only top-k of them."),
    "router": Axis("Router", {
        "softmax": Choice("softmax", "one softmax over all experts; the top-k probabilities weigh the chosen ones",
                          "Experts compete for each token.", "Mixtral, gpt-oss"),
        "sigmoid": Choice("sigmoid", "a sigmoid per expert; a bias used only for choosing keeps the load even",
                          "Balances experts without a loss term pulling against quality.", "DeepSeek-V3"),
    }),
    "expert_activation": Axis("Expert activation", {
        "swiglu": Choice("SwiGLU", "each expert is a SwiGLU", "The dense FFN's recipe, per expert.", "Mixtral"),
        "geglu": Choice("GeGLU", "each expert is a GeGLU", "A GELU gate per expert."),
        "clamped-swiglu": Choice("clamped SwiGLU", "gate and up clamped to ±7, then (up + 1)·gate·σ(1.702·gate)",
                                 "Bounded activations keep low-precision experts stable.", "gpt-oss"),
    }),
    "scores": Axis("Scores", {
        "plain": Choice("plain", "softmax of the scaled, masked scores", "The 2017 recipe.", "2017, LLaMA"),
        "softcap": Choice("soft-capped", "scores squeezed into (-c, c) by c·tanh(s/c) before the mask",
                          "No score can grow large enough to take all of a row's weight.", "Gemma 2"),
        "sinks": Choice("with a sink", "a learned logit per head joins each row's softmax and is dropped",
                        "A head can attend to nothing: the sink takes the weight it does not want to spend.",
                        "gpt-oss"),
        "gate": Choice("gated output", "each head's output times sigmoid(x W_gate) before W_o",
                       "A head can switch itself off per token, without parking its weight on a token.",
                       "Qwen3-Next"),
    }, problem="What happens between the scores and the output: capping them, letting a row attend to nothing, or "
               "gating what a head returns."),
}


def scores_choices(cfg) -> list[str]:
    """The keys of the "scores" axis a config switches on (["plain"] when none)."""
    on = [key for key, active in (("softcap", cfg.attn_softcap is not None), ("sinks", cfg.sinks),
                                  ("gate", cfg.attn_gate)) if active]
    return on or ["plain"]


def label(axis: str, choice: str) -> str:
    """How the pages name a choice, e.g. ``label("position", "rope") == "RoPE"``."""
    return AXES[axis].choices[choice].label
