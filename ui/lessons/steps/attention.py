"""Attention itself: a soft lookup, the five lines with their √d scaling, softmax and masks, several heads side by
side."""
from __future__ import annotations

import numpy as np
import torch

from transformer.hooks import hook_name
from transformer.training.tasks import induction_targets, previous_token_targets
from ui.app.source import five_lines
from ui.compute.measure import masked_attention
from ui.compute.probe_measure import scaling_curves
from ui.compute.probe_measure import softmax_rows as softmax_row_values
from ui.figures.axes import mask_and_weights
from ui.figures.base import head_grid
from ui.figures.playground import query_bars
from ui.figures.probe import softmax_rows
from ui.lessons.live import Live
from ui.lessons.steps.lesson_model import LESSON_SEED, MAX_SHOWN, head_shares, lesson_model, token_name
from ui.lessons.steps.step import lesson_step

INDUCTION_MIN = 0.3  # a head whose weight on the token after an earlier copy averages this much is an induction head


@lesson_step(
    "soft-lookup", "Attention is a soft lookup",
    text="A dictionary lookup finds the one key equal to the query and returns its value. Attention compares the "
         "query with **every** key (q · k), turns the scores into weights that sum to 1 (softmax), and returns the "
         "weighted **mix** of all the values. A trained head learns what to look for.",
    question="Which earlier token will this head look at?", kind="token",
    try_this="In the playground, pick other query tokens and heads: some heads look at the token just before, an "
             "induction head at the token after an earlier copy of the query's token.",
    page="playground", query={"play_tab": "Where one query looks"}, uses_model=True)
def soft_lookup() -> Live:
    m = lesson_model()
    ids = torch.tensor([m.tokens.ids])
    t = ids.shape[1]
    # queries in a repeat whose token occurred exactly once before, more than two tokens back: the token after
    # that occurrence is unambiguous, the place an induction head looks
    once = torch.tensor([m.tokens.ids[:q].count(m.tokens.ids[q]) == 1 for q in range(t)])
    targets = induction_targets(ids, once[None])[0]  # (T, T)
    repeats = [q for q in range(t) if targets[q].any() and q - int(targets[q].nonzero()[0, 0]) > 2]
    pattern = targets  # (T, T) where the head we look for puts its weight
    shares = head_shares(m, pattern)  # (L, H): weight on the token after the earlier occurrence
    clearest = "induction head"
    if float(shares.max()) < INDUCTION_MIN:  # no head follows earlier copies: show the clearest head there is
        pattern, clearest = previous_token_targets(1, t)[0], "previous-token head"
        shares = head_shares(m, pattern)
    layer, head = divmod(int(shares.argmax()), shares.shape[1])
    on_pattern = (m.trace.pattern(layer)[head] * pattern.numpy()).sum(-1)  # (T,) per query
    query = max(repeats, key=lambda q: on_pattern[q]) if repeats else t - 1  # the head's clearest example
    weights = m.trace.pattern(layer)[head, query]  # (T,)
    looked = int(np.argmax(weights[: query + 1]))
    target = int(targets[query].nonzero()[0, 0]) if targets[query].any() else None
    earlier_same = [j for j in range(query) if m.tokens.ids[j] == m.tokens.ids[query]]
    candidates = sorted({looked, max(query - 1, 0), 0, query, *([target] if target is not None else []),
                         *(earlier_same[-1:])})
    choices = [token_name(m, j) for j in candidates]
    if looked == target:
        reason = (f"that is the token right after the earlier '{m.labels[query]}' — the head finds where this token "
                  "occurred before and copies what came next (an induction head)")
    elif looked == query - 1:
        reason = "the token just before it: a previous-token head"
    elif looked == query:
        reason = "its own token: at this query the head mostly keeps what the token already is"
    else:
        reason = "the query's q matched that key's k best, and softmax turned the match into most of the weight"
    figure = query_bars(weights[: query + 1], m.labels[: query + 1], m.labels[query])  # the keys it may see
    figure.update_layout(title=f"layer {layer}, head {head}: the weights of {token_name(m, query)} over the keys",
                         height=420)
    return Live(
        question=(f"The query is {token_name(m, query)} of “{m.text}”. Which token — an earlier one or the query "
                  f"itself — does head {head} of layer {layer} give the most weight?"),
        choices=choices, answer=candidates.index(looked), source="the trained model's answer" if m.trained else
        "the model's answer (untrained weights)",
        why=f"Head {head} of layer {layer} puts {weights[looked]:.0%} of its weight on {token_name(m, looked)}: {reason}.",
        figure=figure,
        query={"layer": str(layer), "head": str(head), "query": str(query)},
        caption=f"Weights of {m.weights}; the head shown is the model's clearest {clearest} on this text. "
                "Every key up to the query gets a weight; they sum to 1.")


D_HEADS = (4, 8, 16, 32, 64, 128, 256, 512)
SCALE_KEYS, SCALE_SEED, SCALE_D = 16, 0, 512


@lesson_step(
    "five-lines", "The five lines and the √d scaling",
    text="All of attention is five lines, in every model on this site:\n\n```python\n" + five_lines() + "\n```\n\n"
         "Line 1 divides the scores by √d_head. Why would a division matter, if softmax only compares scores?",
    question="What happens to the weights when d_head grows and we do not scale?", kind="choice",
    try_this="On the √d page, move d_head down to 16: the unscaled row softens too — the problem grows with d_head.",
    page="scaling", query={"scale_d": str(SCALE_D), "scale_keys": str(SCALE_KEYS), "scale_seed": str(SCALE_SEED)})
def five_lines_and_scaling() -> Live:
    curves = scaling_curves(D_HEADS, SCALE_KEYS, SCALE_SEED)
    unscaled, scaled = softmax_row_values(SCALE_D, SCALE_KEYS, SCALE_SEED)
    h_unscaled, h_scaled = curves["entropy_unscaled"][-1], curves["entropy_scaled"][-1]
    choices = ["They spread out evenly over the keys", "One key takes almost all the weight",
               "Nothing changes: softmax ignores the size of the scores"]
    answer = 1 if h_unscaled < 0.5 * h_scaled else 0 if h_unscaled > 1.05 * h_scaled else 2
    return Live(
        question=f"q and k have {SCALE_D} dimensions of random numbers and we skip the division by √d_head. What "
                 f"happens to one query's weights over {SCALE_KEYS} keys?",
        choices=choices, answer=answer,
        why=(f"q · k sums {SCALE_D} products, so its variance is about d_head (measured here: "
             f"{curves['var_unscaled'][-1]:.0f} for d_head = {SCALE_D}): "
             f"exp() then makes the largest score win ({float(unscaled.max()):.2f} of the weight, against "
             f"{float(scaled.max()):.2f} scaled) and the other keys get almost no gradient."),
        figure=softmax_rows(unscaled, scaled, SCALE_D),
        caption=f"Average entropy of a row at d_head = {SCALE_D}: {h_unscaled:.2f} nats unscaled, {h_scaled:.2f} "
                f"scaled (uniform: log {SCALE_KEYS} = {curves['max_entropy']:.2f}).")


@lesson_step(
    "masks", "Softmax and masks",
    text="Softmax turns any row of scores into weights: exp(s) / Σ exp(s). A mask adds a huge negative number to "
         "the scores of the pairs that are not allowed, **before** softmax: their exp is exactly 0, and the other "
         "weights of the row still sum to 1.",
    question="Which cells does a causal mask blank?", kind="choice",
    try_this="On the Masks page, open the sliding-window tab with W = 3: each query keeps only its 3 most recent "
             "keys.",
    page="masks", query={"mask_tab": "sliding window"}, uses_model=True)
def masks() -> Live:
    m = lesson_model()
    ids, labels = tuple(m.tokens.ids[:MAX_SHOWN]), m.labels[:MAX_SHOWN]
    additive, weights = masked_attention(m.config_json, LESSON_SEED, ids, 0, "causal", 1)
    blank = additive != 0  # (T, T) True where the mask adds the most negative float
    ones = np.ones_like(blank, dtype=bool)
    regions = {"Above the diagonal: the keys after each query": np.triu(ones, 1),
               "Below the diagonal: the keys before each query": np.tril(ones, -1),
               "The diagonal: each token itself": np.eye(len(ids), dtype=bool),
               "None: a mask only nudges the scores": ~ones}
    choices = list(regions)
    answer = int(np.argmax([(region == blank).mean() for region in regions.values()]))
    largest = float(weights[:, blank].max()) if blank.any() else 0.0
    return Live(
        question=f"A decoder reads “{''.join(labels)}” with a causal mask. Which cells of the {len(ids)} × {len(ids)} "
                 "matrix (queries down, keys across) does the mask blank?",
        choices=choices, answer=answer,
        why=(f"Query i may only see keys 0 … i: the {int(blank.sum())} cells above the diagonal get the most negative "
             f"float added before softmax, and exp of it is exactly 0.0 (largest masked weight here: {largest!r})."),
        figure=mask_and_weights(additive, weights[0], labels, labels, "causal mask and head 0's weights, layer 0"),
        query={"mask_layer": "0", "mask_head": "0"},
        caption="Grey cells are masked; on the right, white is a weight of exactly 0.")


HALF = 0.5


@lesson_step(
    "multi-head", "Multi-head attention",
    text="One head computes one weighted mix. A layer runs H heads side by side, each with its own query projection "
         "(d_head = d_model / H; under GQA, groups of heads share one K and V), and concatenates their outputs before W_o: one head can follow the previous "
         "token while another looks for earlier copies.",
    question="How many heads of this layer follow the previous token?", kind="number",
    try_this="In the playground, pick the last layer: the heads there look for the token after an earlier copy.",
    page="playground", uses_model=True)
def multi_head() -> Live:
    m = lesson_model()
    t = len(m.tokens.ids)
    shares = head_shares(m, previous_token_targets(1, t)[0])  # (L, H)
    layer = int(shares.max(-1).values.argmax())
    per_head = shares[layer]
    heads = [h for h in range(len(per_head)) if per_head[h] > HALF]
    n_heads, n_kv_heads = m.config.n_heads, m.config.n_kv_heads
    shown = ", ".join(f"head {h} {float(s):.0%}" for h, s in enumerate(per_head))
    return Live(
        question=(f"Layer {layer} has {n_heads} query heads, each with its own Q projection; they share {n_kv_heads} "
                  f"K and V heads ({n_heads // n_kv_heads} query heads each, GQA), all reading the same tokens. How "
                  "many of the query heads put more than half of their weight on the token just before each query?"),
        choices=[f"{k} head{'s' if k != 1 else ''}" for k in range(n_heads + 1)], answer=len(heads),
        source="the trained model's answer" if m.trained else "the model's answer (untrained weights)",
        why=(f"Weight on the previous token — {shown}: each head learns its own pattern, and the layer concatenates "
             "what all of them read before W_o mixes them."),
        figure=head_grid(m.trace.pattern(layer), m.labels, m.labels, m.config.n_kv_heads,
                         f"layer {layer}: every head's weights (rows: queries, columns: keys)", cols=min(n_heads, 4),
                         mask=m.trace.arrays[hook_name(layer, "attn.hook_mask")][0]),
        query={"layer": str(layer)},
        caption="A previous-token head draws the line just below the diagonal. Heads whose titles name the same kv "
                "head share their K and V (GQA).")
