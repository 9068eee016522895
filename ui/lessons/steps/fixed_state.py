"""Back to a fixed state: linear attention drops the softmax and becomes an RNN whose state is a matrix; the delta rule
makes that state a memory that corrects itself; what a fixed state can hold against N pairs; the memory at 128k tokens
of a KV cache, a state and a hybrid at Qwen3-Next's shapes. The chapter closes the arc Before attention opened."""
from __future__ import annotations

import numpy as np
import torch

from transformer.costs import kv_cache_bytes
from transformer.linear_attention import recurrent_form
from ui.compute import state_measure as measure
from ui.figures.state import cache_against_context, capacity_curves, overwrite_reads, recall_curves, state_write
from ui.lessons.live import Live
from ui.lessons.steps.step import binary_size, lesson_step

RNN_D, RNN_T = 16, (10, 1000)  # one head of d_k = d_v = 16, read after 10 and after 1,000 tokens


@lesson_step(
    "linear-attention", "Back to a fixed state: attention without the softmax",
    text="Softmax attention keeps every past key and value: its cache grows with the text. Drop the softmax and the "
         "weights factor: q_t · Σ_j k_j v_jᵀ = q_tᵀ S_t. The past adds up into one d_k × d_v matrix per head, the "
         "**state** S, that each token writes k vᵀ into and each query reads with q: an **RNN whose hidden state is a "
         "matrix** — the fixed-size memory of the Before attention chapter, come back a matrix wide.",
    question="Does the state of a linear attention head grow with the text?", kind="choice",
    try_this="On the State page, step through the sentence and watch one head's state written token by token.",
    page="state", query={"state_tab": "The state, token by token"})
def state_size() -> Live:
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, max(RNN_T), RNN_D, generator=generator) / RNN_D ** 0.5 for _ in range(3))
    passes = {t: recurrent_form(q[:, :, :t], k[:, :, :t], v[:, :, :t], None, None, torch.zeros(1, 1, RNN_D, RNN_D),
                                keep_states=t == max(RNN_T)) for t in RNN_T}
    held = tuple(passes[t].state.numel() for t in RNN_T)  # the state the library's recurrent form carries
    short, long = RNN_T
    options = {
        f"No: d_k · d_v = {RNN_D * RNN_D:,} numbers after {short} tokens and after {long:,}": (RNN_D * RNN_D,) * 2,
        f"Yes, as a KV cache does: T · (d_k + d_v) = {short * 2 * RNN_D:,}, then {long * 2 * RNN_D:,}":
            tuple(t * 2 * RNN_D for t in RNN_T),
        f"Yes, as the weights matrix does: T · T = {short * short:,}, then {long * long:,}":
            tuple(t * t for t in RNN_T),
        f"Yes, a matrix per token: T · d_k · d_v = {short * RNN_D ** 2:,}, then {long * RNN_D ** 2:,}":
            tuple(t * RNN_D ** 2 for t in RNN_T)}
    answer = list(options.values()).index(held)
    parallel = ((q[0, 0] @ k[0, 0].T).tril() @ v[0, 0])  # (T, d_v): every read at once, (Q Kᵀ masked causal) V
    gap = float((passes[long].out[0, 0] - parallel).abs().max())
    states = passes[long].states[0, 0]  # (T, d_k, d_v)
    last = long - 1
    write = torch.outer(k[0, 0, last], v[0, 0, last])
    return Live(
        question=(f"A linear attention head (d_k = d_v = {RNN_D}) reads with q_tᵀ S_t, where S_t = S_t₋₁ + k_t v_tᵀ, "
                  f"and no softmax. How many numbers does it carry after {short} tokens, and after {long:,}?"),
        choices=list(options), answer=answer, source="the library's recurrent form",
        why=(f"The library's recurrent form carries {held[0]:,} numbers after {short} tokens and {held[1]:,} after "
             f"{long:,}: each token adds k vᵀ into the same {RNN_D} × {RNN_D} matrix, so the past is summed, never "
             f"kept token by token. The same reads come all at once from (Q Kᵀ, masked causal, no softmax) V — "
             f"largest difference {gap:.1e} over {long:,} tokens — so it trains in parallel like attention and "
             "generates like an RNN."),
        figure=state_write(states[last - 1].numpy(), write.numpy(), states[last].numpy(), f"token {long:,}"),
        caption=f"One head on random q, k and v (seed 0): the state token {long:,} found, its write k vᵀ, and the "
                "state it left — the same size as the state token 1 found.")


OVERWRITE_SIMILARITY = 0.9
CLEAN = 0.05  # a read within this of v₃ in every dimension returns v₃; a mix is off by k₁·k₃ = 0.9


@lesson_step(
    "delta-rule", "The delta rule: a memory that corrects itself",
    text="Plain linear attention only adds: a new value stored under a key like an old one lands on top of the old "
         "value, and a read returns both. The **delta rule** (DeltaNet; Gated DeltaNet in Qwen3-Next) first reads "
         "what the state already says for the new key, S_t₋₁ᵀ k_t, and writes only the correction: "
         "S_t = S_t₋₁ + β k_t (v_t − S_t₋₁ᵀ k_t)ᵀ.",
    question="After a new key that resembles an old one writes its value, what does each rule read back with it?",
    kind="choice",
    try_this="On the State page's delta rule tab, slide the similarity of k₁ and k₃ from 0 to 1 and watch the old "
             "association give way.",
    page="state", query={"state_tab": "The delta rule"})
def delta_rule() -> Live:
    result = measure.overwrite(OVERWRITE_SIMILARITY)
    v1, _, v3 = result.values
    clean = {rule: bool(np.abs(reads[1] - v3).max() < CLEAN) for rule, reads in result.reads.items()}
    outcomes = {(True, True): "Both rules return v₃",
                (False, True): "The delta rule returns v₃; plain linear attention returns v₃ mixed with v₁",
                (True, False): "Plain linear attention returns v₃; the delta rule returns v₃ mixed with v₁",
                (False, False): "Both return v₃ mixed with v₁"}
    plain, delta = result.reads["adds"], result.reads["corrects"]
    show = lambda x: "[" + ", ".join(f"{value:.2f}" for value in x) + "]"
    return Live(
        question=(f"Three pairs go into an empty 4 × 4 state, in order: (k₁, v₁); an unrelated (k₂, v₂); then (k₃, v₃) "
                  f"with a key close to the first, k₁ · k₃ = {OVERWRITE_SIMILARITY}. Keys have length 1; the values "
                  "are three different one-hot vectors. Read afterwards with the new key k₃: what comes back under "
                  "plain linear attention (S += k vᵀ) and under the delta rule (β = 1)?"),
        choices=list(outcomes.values()), answer=list(outcomes).index((clean["adds"], clean["corrects"])),
        source="the library's recurrent form",
        why=(f"Plain addition reads k₃ᵀS = v₃ + (k₁·k₃) v₁ = {show(plain[1])}: the old value leaks into the new key's "
             f"read. The delta rule predicted {OVERWRITE_SIMILARITY} v₁ for k₃ and stored only v₃ minus that, so k₃ "
             f"reads {show(delta[1])}, v₃ exactly. The price: the old key k₁ now reads {show(delta[0])}, mostly v₃ "
             f"(plain: {show(plain[0])}) — the state corrected its memory by overwriting the old association."),
        figure=overwrite_reads(result.reads, measure.RULES, result.similarity),
        query={"state_sim": str(OVERWRITE_SIMILARITY)},
        caption="Values one-hot: dimension 0 is v₁, 1 is v₂, 2 is v₃; each bar is a read after all three writes.")


CAPACITY_D = 64  # d_k = d_v of the state; N = d_k pairs are stored
HALF = 0.5


@lesson_step(
    "state-capacity", "What a fixed state can hold",
    text="A KV cache keeps every key and value as it came; a state keeps d_k × d_v numbers whatever it was told. "
         "Store N key–value pairs with random keys in one state and read every key back: the question is how many "
         "values come back. The hybrids (Qwen3-Next, Qwen3.5) keep one softmax layer in four beside three Gated "
         "DeltaNet layers; this step measures only what one state can hold, not whether one full layer in four is "
         "enough for a trained model to recall a word far back.",
    question="How many of N = d_k stored pairs does a d_k-wide state give back?", kind="choice",
    try_this="On the State page's Capacity tab, compare the two readings of 'recalled' at d_k = 16, 32 and 64.",
    page="state", query={"state_tab": "Capacity"})
def capacity() -> Live:
    result = measure.capacity(CAPACITY_D)
    row = int(np.searchsorted(result.n, CAPACITY_D))
    seeds = {rule: result.recall[rule]["reproduced"][row] for rule in measure.RULES}  # (seeds,) each
    holds = {rule: bool(share.mean() >= HALF) for rule, share in seeds.items()}
    outcomes = {(True, True): "Both rules give back at least half",
                (True, False): "Plain linear attention gives back at least half; the delta rule fewer",
                (False, True): "The delta rule gives back at least half; plain linear attention fewer",
                (False, False): "Neither rule gives back even half"}
    mean = {rule: float(share.mean()) for rule, share in seeds.items()}
    best = {rule: float(share.max()) for rule, share in seeds.items()}
    named = {rule: float(result.recall[rule]["identified"][row].mean()) for rule in measure.RULES}
    far = {rule: float(result.recall[rule]["identified"][-1].mean()) for rule in measure.RULES}
    n_far = int(result.n[-1])
    return Live(
        question=(f"Write N = {CAPACITY_D} pairs — random keys and values of length 1 — into one empty "
                  f"{CAPACITY_D} × {CAPACITY_D} state, with plain linear attention (S += k vᵀ) or the delta rule "
                  f"(β = 1). Then read every key back. Counting a pair as given back when the read lies within 0.5 of "
                  f"its value, which rules give back at least half of the {CAPACITY_D}?"),
        choices=list(outcomes.values()), answer=list(outcomes).index((holds["adds"], holds["corrects"])),
        source=f"the measured answer ({measure.SEEDS} seeds)",
        why=(f"Plain linear attention gives back {mean['adds']:.0%} and the delta rule {mean['corrects']:.0%} (best of "
             f"{measure.SEEDS} seeds: {best['adds']:.0%} and {best['corrects']:.0%}): every read carries cross-talk "
             "from the other keys, and the delta rule keeps recent pairs by wearing down old ones. Read generously — "
             f"which stored value is nearest — plain still names {named['adds']:.0%} and the delta rule "
             f"{named['corrects']:.0%} at N = {CAPACITY_D}, and {far['adds']:.0%} and {far['corrects']:.0%} at "
             f"N = {n_far}: a state keeps a blurred trace of every pair, not the pairs. A KV cache of N pairs holds "
             "every one as it came, at a cost that grows with N; hybrids keep some such layers. How well a trained "
             "hybrid recalls a word far back is a separate measurement, not made here."),
        figure=capacity_curves(result.n, {rule: result.recall[rule]["reproduced"] for rule in measure.RULES},
                               measure.RULES, CAPACITY_D, f"a {CAPACITY_D} × {CAPACITY_D} state: pairs given back "
                               "within 0.5 of their value"),
        query={"state_dk": str(CAPACITY_D)},
        caption=f"The library's recurrent form on random unit keys and values, {measure.SEEDS} seeds (the band: worst "
                "to best seed); the dashed line is N = d_k.")


RECALL_DISTANCE = 128  # the farthest measured distance inside the 20-200 character copies all three trained on


@lesson_step(
    "hybrid-recall", "Why the hybrids keep one full layer in four",
    text="A state of fixed size has to carry a phrase through everything written after it; a softmax layer reads the "
         "phrase itself, however far back. Qwen3-Next and Qwen3.5 keep one softmax layer in four beside three Gated "
         "DeltaNet layers. Three classroom models trained on the same English show what that one layer buys: softmax "
         "in every layer, the 3:1 hybrid, and Gated DeltaNet in every layer.",
    question="Which trained model gains least from a phrase read 128 characters earlier?", kind="choice",
    try_this="On the State page's recall tab, compare each model's line with its dotted control from d = 32 to "
             "d = 448.",
    page="state", query={"state_tab": "Recall at distance"})
def hybrid_recall() -> Live:
    measured = measure.recall_measured()
    distances, trained = measured["distances"], [m for m in measured["models"] if m["steps"]]
    at, far = distances.index(RECALL_DISTANCE), len(distances) - 1
    lifts = {m["label"]: measure.recall_lift(m) for m in measured["models"]}  # (distances,) each
    least, far_least = (min(trained, key=lambda m: lifts[m["label"]][i]) for i in (at, far))
    said = "; ".join(f"{label}: {lift[at]:+.0%} (at d = {distances[far]}: {lift[far]:+.0%})"
                     for label, lift in lifts.items())
    return Live(
        question=(f"Each model reads a held-out phrase of {measured['phrase_chars']} characters, then other held-out "
                  f"text, then the phrase again, its second copy starting {RECALL_DISTANCE} characters after the first. "
                  "How much the first copy helps is the share of the second copy's characters predicted exactly, "
                  "minus the same share in rows whose first phrase is another. Which model gains least?"),
        choices=[m["label"] for m in trained], answer=trained.index(least),
        source=f"measured on the trained checkpoints ({measured['rows']} phrases per distance)",
        why=(f"What the first copy adds at d = {RECALL_DISTANCE}, over the control rows: {said}. A softmax layer looks "
             "the phrase up where it was written; a Gated DeltaNet state is written by every character after it and "
             "decays, so what is left of the phrase is what survived. One softmax layer in four gives the hybrid "
             f"that lookup back, at a quarter of the full model's cache. Past the 200-character spans all three "
             f"trained to copy, the picture changes: at d = {distances[far]} the one that gains least is "
             f"{far_least['label']} (the State page's recall tab draws every distance)."),
        figure=recall_curves(distances, {m["label"]: (m["recall"]["accuracy"], m["recall"]["control_accuracy"])
                                         for m in measured["models"]}),
        caption="scripts/measure_recall.py on the shipped checkpoints; dotted lines are the control rows. The "
                "full-attention model trained 4,000 steps, the other two 3,000, on the same text and curriculum.")

MEMORY_CONTEXT, MEMORY_BYTES = 131072, 2  # 128k tokens in bf16


@lesson_step(
    "state-memory", "The memory at 128k tokens",
    text="A softmax layer's KV cache grows by the same bytes with every token; a Gated DeltaNet layer keeps its "
         "states (and its short convolution's last inputs) at one size. Qwen3-Next-80B-A3B mixes them: of its 48 "
         "layers, every fourth is softmax attention (GQA) and the other 36 are Gated DeltaNet.",
    question="How many bytes does Qwen3-Next-80B-A3B hold for one sequence of 128k tokens?", kind="number",
    try_this="On the State page's memory tab, move the context from 1k to 1M tokens and watch which line stays flat.",
    page="state", query={"state_tab": "Memory: cache against state"})
def memory_128k() -> Live:
    shapes = list(measure.SHAPES.values())  # all GQA, the 3:1 hybrid, all Gated DeltaNet
    full, hybrid, linear = (kv_cache_bytes(cfg, MEMORY_CONTEXT, MEMORY_BYTES) for cfg in shapes)
    mha = kv_cache_bytes(shapes[0].replace(n_kv_heads=shapes[0].n_heads), MEMORY_CONTEXT, MEMORY_BYTES)
    totals = sorted({held["total"] for held in (full, hybrid, linear, mha)})
    q = measure.QWEN3_NEXT
    totals_by_context = {name: parts["total"] for name, parts in measure.cache_by_context(MEMORY_BYTES).items()}
    return Live(
        question=(f"Qwen3-Next-80B-A3B has {q.n_layers} layers: every fourth is GQA ({q.n_kv_heads} kv heads of "
                  f"d_head = {q.d_head}), the other {q.n_layers - q.n_layers // 4} Gated DeltaNet ({q.state_heads} "
                  f"heads with a {q.state_d_k} × {q.state_d_v} state each). In bf16, how many bytes does it hold for "
                  f"one sequence of {MEMORY_CONTEXT:,} tokens?"),
        choices=[binary_size(b) for b in totals], answer=totals.index(hybrid["total"]),
        source="the library's count (transformer.costs.kv_cache_bytes)",
        why=(f"The {q.n_layers // 4} GQA layers hold 2 · {q.n_kv_heads} · {q.d_head} · {MEMORY_BYTES} bytes per token "
             f"each: {binary_size(hybrid['global layers'])} at {MEMORY_CONTEXT:,} tokens, and growing. The "
             f"{q.n_layers - q.n_layers // 4} Gated DeltaNet layers hold {binary_size(hybrid['state layers'])} "
             f"whatever the length. Total {binary_size(hybrid['total'])}, about a quarter of "
             f"{binary_size(full['total'])} with GQA in every layer ({binary_size(mha['total'])} with a K and V per "
             f"head); Gated DeltaNet in every layer would hold {binary_size(linear['total'])}."),
        figure=cache_against_context(measure.CONTEXTS, totals_by_context, marked=MEMORY_CONTEXT),
        query={"state_ctx": str(MEMORY_CONTEXT)},
        caption="Shapes from Qwen3-Next-80B-A3B's published config; one sequence, bf16; a batch multiplies everything.")
