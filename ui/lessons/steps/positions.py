"""Where tokens are: attention alone sees a set, four ways to tell it positions, and T5's buckets of distance."""
from __future__ import annotations

import numpy as np
import torch

from transformer import AXES, probes
from transformer.hooks import hook_name
from ui.compute.measure import rope_geometry, t5_buckets
from ui.compute.probe_measure import permutation_results, shuffle_order, shuffled_text
from ui.figures.axes import relative_bias, rope_scores
from ui.figures.probe import equivariance_bars
from ui.lessons.live import Live
from ui.lessons.steps.lesson_model import LESSON_SEED, MAX_SHOWN, PIECES, lesson_model, lesson_pieces
from ui.lessons.steps.step import lesson_step

SHUFFLE_SEED = 1


@lesson_step(
    "no-positions", "No positions: attention sees a set",
    text="Attention is a weighted sum over a set: q · k knows what a token is, not where it is. Shuffle the input "
         "of a model without positions and without a mask, and see what changes.",
    question="What happens to the outputs when the input is shuffled?", kind="choice",
    try_this="On the Why positions page, pick a causal mask: order leaks back in through who may see whom.",
    page="permutation", query={"perm_tab": "Weights put back in order"}, uses_model=True)
def no_positions() -> Live:
    m = lesson_model()
    # whole words, as the lecture shuffles them, where the family reads BPE; else one character at a time
    config_json, tokens = lesson_pieces() or (m.config_json, m.tokens)
    ids = tuple(tokens.ids[:MAX_SHOWN])
    perm = shuffle_order(tokens, len(ids), SHUFFLE_SEED)
    results = permutation_results(config_json, ids, perm, LESSON_SEED, "float32")
    tolerance = probes.rounding_tolerance(torch.float32, max(r["output_scale"] for r in results.values()))
    positions = [p for mask, p in results if not AXES["mask"].row(mask).causal]
    plain = results[("none", "none")]
    worst = max(plain["outputs"], plain["patterns"])
    choices = ["The same outputs, shuffled the same way", "Different outputs: the model notices the new order",
               "The same outputs in the original order: attention sorts them back"]
    return Live(
        question=("Take a model with no position information and no mask, shuffle the order of its input tokens, "
                  "and put its outputs back in the original order. Compared with the unshuffled run, they are …"),
        choices=choices, answer=0 if worst <= tolerance else 1,
        why=(f"Nothing in q · k says where a token is, so every token gets the same q, k and v and the same sums "
             f"in another order: the largest difference is {worst:.1e}, float rounding. Every position scheme breaks "
             "this symmetry (the other bars)."),
        figure=equivariance_bars(positions, [results[("none", p)]["outputs"] for p in positions],
                                 [results[("none", p)]["patterns"] for p in positions], tolerance,
                                 "no mask: max |difference| after un-shuffling, per position scheme"),
        query={"perm_seed": str(SHUFFLE_SEED), "perm_pos": "none", "perm_mask": "none",
               **({"tokens": PIECES} if tokens.pieces else {})},
        caption=(f"The input, shuffled: “{shuffled_text(tokens, perm)}”. Models with the lessons' sizes and random "
                 "weights; bars drawn at the floor are exactly 0."))


ROPE_POSITIONS = 24


@lesson_step(
    "positions", "Sinusoidal, learned, RoPE, ALiBi",
    text="Four ways to tell attention where tokens are: **add** a fixed wave (sinusoidal, 2017) or a trained vector "
         "(learned, GPT-2) to each embedding; **rotate** q and k by their position (RoPE, LLaMA); or **subtract** a "
         "penalty growing with distance from the scores (ALiBi, BLOOM).",
    question="On what does a RoPE score depend?", kind="choice",
    try_this="On the Positions page, ALiBi tab: make the input longer than max_len — learned positions stop with an "
             "error, RoPE and ALiBi run on.",
    page="positions", query={"pos_tab": "ALiBi"}, uses_model=True)
def four_schemes() -> Live:
    m = lesson_model()
    q = m.trace.arrays[hook_name(0, "attn.hook_q")][0, 0, -1]  # (d_head,) the last token's q, head 0, before RoPE
    k = m.trace.arrays[hook_name(0, "attn.hook_k")][0, 0, 0]  # (d_head,) the first token's k
    geo = rope_geometry(tuple(map(float, q)), tuple(map(float, k)), ROPE_POSITIONS, m.config.rope_theta)
    relative = float(geo["spread"].max()) / (float(np.abs(geo["scores"]).max()) or 1.0)
    choices = ["On m and n separately: every pair of positions differs", "Only on the distance m − n",
               "Only on the query's position m"]
    return Live(
        question=("RoPE rotates q by an angle proportional to its position m, and k by one proportional to its "
                  "position n. Put the same q and k contents at every pair of positions: the score q · k depends …"),
        choices=choices, answer=1 if relative < 1e-4 else 0,
        why=(f"Rotating q by mθ and k by nθ leaves their dot product with the angle (m − n)θ only: every diagonal "
             f"holds one value (largest spread along a diagonal: {relative:.1e} of the largest score). Sinusoidal and "
             "learned positions add vectors instead; ALiBi subtracts a penalty proportional to |m − n|."),
        figure=rope_scores(geo["scores"], "RoPE(q, m) · RoPE(k, n), the live model's q and k (layer 0, head 0)"),
        query={"pos_n": str(ROPE_POSITIONS)},
        caption="Constant along every diagonal: absolute position is gone, relative position remains.")


T5_BUCKETS, T5_MAX_DISTANCE, T5_SHOWN = 32, 128, 255  # T5's own settings; distances 0 .. 255 back


@lesson_step(
    "relative-buckets", "T5: a learned bias per bucket of distance",
    text="T5 adds a learned number to each head's scores, like ALiBi but trained, and not one number per distance: "
         "distances are grouped into **buckets**. Near distances get a bucket each; farther ones share buckets that "
         "widen logarithmically, and every distance from the maximum on shares the last one. One table per stack "
         "serves all its layers.",
    question="How many distances share a T5 decoder's last bucket?", kind="choice",
    try_this="On the Positions page, T5 tab: lower the maximum distance and watch the last plateau start sooner; "
             "switch to the encoder to see keys after the query get buckets of their own.",
    page="positions", query={"pos_tab": "T5 buckets", "t5_stack": "decoder"})
def relative_position_buckets() -> Live:
    drawn = t5_buckets(4, T5_BUCKETS, T5_MAX_DISTANCE, False, T5_SHOWN, LESSON_SEED)
    sharing = int((drawn["buckets"] == drawn["last_bucket"]).sum())
    exact = T5_BUCKETS // 2
    candidates = sorted({1, exact, T5_SHOWN + 1 - T5_MAX_DISTANCE, sharing})  # 1, 16, 128 and the computed count
    return Live(
        question=(f"A T5 decoder has {T5_BUCKETS} buckets and a maximum distance of {T5_MAX_DISTANCE}. Of the keys "
                  f"0 to {T5_SHOWN} positions behind a query, how many read the last bucket's bias?"),
        choices=[str(n) for n in candidates], answer=candidates.index(sharing),
        source="the library's buckets (transformer.positions.relative_buckets)",
        why=(f"Distances 0 to {exact - 1} have a bucket each; the other {T5_BUCKETS - exact} buckets split the "
             f"distances up to {T5_MAX_DISTANCE} by their logarithm, so the last one starts already at "
             f"{drawn['last_from']}, and from there every key reads it: {sharing} of the {T5_SHOWN + 1}, and any "
             "farther key too. Beyond that the model cannot tell far from farther."),
        figure=relative_bias(drawn["distances"], drawn["buckets"], drawn["bias"]),
        query={"t5_buckets": str(T5_BUCKETS), "t5_max_distance": str(T5_MAX_DISTANCE), "pos_n": str(T5_SHOWN + 1)},
        caption="The bias per head of an untrained table (training moves the heights, never the steps); dotted "
                "lines mark where a new bucket starts.")
