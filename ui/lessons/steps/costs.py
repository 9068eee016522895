"""What it costs: a model's parameters counted from its dimensions, how compute-optimal
models grow, and attention below N²."""
from __future__ import annotations

import numpy as np

from transformer import MODEL_CARDS, analysis, param_counts, scaling
from ui.compute.chapters_measure import sparse_attention
from ui.figures import chapters as chapter_figures
from ui.figures.axes import mask_and_weights
from ui.lessons.live import Live
from ui.lessons.steps.lesson_model import LESSON_SEED, MAX_SHOWN, lesson_model
from ui.lessons.steps.step import lesson_step, nearest


@lesson_step(
    "costs", "What a model costs",
    text="Every count follows from the dimensions: a block holds about 4·D² in attention and 8·D² in its FFN, the "
         "embeddings V·D. A token costs about 2 FLOPs per parameter forward and 6 to train on; training with Adam "
         "holds 16 bytes per parameter before a single activation.",
    question="What share of GPT-2's parameters are the embeddings?", kind="choice",
    try_this="On What a model costs, pick GPT-3 175B and a context of 2,048: compare the memory of training with "
             "the memory of generating.",
    page="costs")
def parameters() -> Live:
    card = MODEL_CARDS["gpt2"]
    size, real = next(iter(card.real.items()))
    counts = param_counts(real)
    share = counts["embedding"] / counts["total"]
    options = {0.01: "About 1%", 0.1: "About 10%", 0.3: "About 30%", 0.6: "About 60%"}
    rows = [{"model": card.label(name), **param_counts(cfg)} for name, cfg in card.real.items()]
    largest = rows[-1]
    return Live(
        question=(f"{card.label(size)} has {counts['total'] / 1e6:.0f}M parameters: a vocabulary of "
                  f"{real.vocab_size:,} tokens, D = {real.d_model}, {real.n_layers} blocks. What share of its "
                  "parameters are the embeddings (tokens and positions)?"),
        choices=list(options.values()), answer=nearest(list(options), share),
        why=(f"V·D = {real.vocab_size:,} × {real.d_model} plus {real.max_len:,} positions × {real.d_model}: "
             f"{counts['embedding'] / 1e6:.1f}M, {share:.0%}. Each block holds about 12·D² = "
             f"{12 * real.d_model ** 2 / 1e6:.1f}M, so the blocks outgrow the embedding as D grows: in "
             f"{largest['model']} it is {largest['embedding'] / largest['total']:.1%}."),
        figure=chapter_figures.parameter_shares(rows, f"{card.name}'s recipe at three sizes: where the parameters sit"),
        query={"cost_model": card.label(size)},
        caption="Counted term by term from the real dimensions (transformer.costs.param_terms).")


COMPUTE_STEP = 10  # how much more compute the question gives


@lesson_step(
    "growth", "How models grow",
    text="A training budget is about 6·N·D FLOPs for N parameters and D tokens. Hoffmann et al. (2022) fitted the "
         "loss of hundreds of runs and found the best split: grow the model and the data together, about 20 tokens "
         "per parameter; the reducible loss (above an irreducible floor) then falls as a power law of compute.",
    question="With 10× the compute, how much bigger should the model be?", kind="choice",
    try_this="On How models grow, type GPT-3's 3.14e23 FLOPs: the compute-optimal model is far smaller than 175B.",
    page="growth")
def growth() -> Live:
    base = scaling.compute_optimal(1e21)
    bigger = scaling.compute_optimal(COMPUTE_STEP * base.budget)
    ratio = bigger.params / base.params
    options = {1.0: "The same size, trained 10× longer", 3.16: "About 3× bigger", 10.0: "10× bigger",
               100.0: "100× bigger"}
    fitted = scaling.fitted_optimal(COMPUTE_STEP * base.budget).params / scaling.fitted_optimal(base.budget).params
    budgets = np.logspace(18, 26, 81)
    return Live(
        question=(f"You get {COMPUTE_STEP}× the training compute. For the lowest loss, how much bigger should the "
                  "model be?"),
        choices=list(options.values()), answer=nearest(list(options), ratio),
        why=(f"Compute-optimal models read about {scaling.TOKENS_PER_PARAM} tokens per parameter, so C = 6·N·D = "
             f"{6 * scaling.TOKENS_PER_PARAM}·N²: N grows as √C, {ratio:.2f}× for 10× the compute, and the tokens "
             f"too. The fitted law itself says {fitted:.2f}×."),
        figure=chapter_figures.loss_against_compute(budgets, scaling.frontier_loss(budgets), scaling.published_points(),
                                                    title="the fitted loss of compute-optimal models (Hoffmann et al. "
                                                          "2022)"),
        query={"grow_budget": f"{COMPUTE_STEP * base.budget:.0e}"},
        caption=scaling.CHINCHILLA_SOURCE + ".")


SPARSE_T, SPARSE_BLOCK = 4096, 64  # the question's text and block
SHOWN_BLOCK = 4  # the block drawn on the lesson text


@lesson_step(
    "sparse", "Attention below N²",
    text="Dense attention scores every pair: T² for T tokens. Sparse patterns score only some — a local window, "
         "blocks, every s-th token, a few global tokens (Sparse Transformer, Longformer, BigBird). Windows, strides "
         "and global tokens pass information further with every layer; blocks that are the same in every layer "
         "never cross a block boundary, however many layers are stacked.",
    question="What share of the pairs does block-local attention score?", kind="choice",
    try_this="On the Masks page, open the block-local tab and make the block larger than the text: the page says "
             "why that is impossible.",
    page="masks", query={"mask_tab": "block-local"}, uses_model=True)
def sparse() -> Live:
    pairs = analysis.allowed_pairs("block-local", SPARSE_T, SPARSE_BLOCK, causal=True)
    dense = SPARSE_T * (SPARSE_T + 1) // 2  # every pair a causal mask allows
    share = pairs / dense
    options = {1 / 64: "About 1/64", 1 / 8: "About 1/8", 1 / 2: "About 1/2",
               1.0: "All of them: a mask only hides pairs"}
    m = lesson_model()
    ids, labels = tuple(m.tokens.ids[:MAX_SHOWN]), m.labels[:MAX_SHOWN]
    view = sparse_attention(m.config_json, LESSON_SEED, ids, 0, "block-local", SHOWN_BLOCK, 1)
    return Live(
        question=(f"A decoder reads {SPARSE_T:,} tokens with block-local attention: each token sees only the earlier "
                  f"tokens of its own block of {SPARSE_BLOCK}. What share of the pairs full causal attention scores "
                  "does it score?"),
        choices=list(options.values()), answer=nearest(list(options), share),
        why=(f"{pairs:,} of {dense:,} pairs, {share:.1%}: T·b/2 instead of T²/2, so the cost grows linearly with T. "
             "But given as a mask to a dense kernel (torch's SDPA), every score is still computed and the masked "
             "ones thrown away: only a block-sparse kernel that skips the empty tiles turns the saving into time."),
        figure=mask_and_weights(view.additive, view.weights[0], labels, labels,
                                f"block-local, blocks of {SHOWN_BLOCK}: head 0's weights, layer 0"),
        query={"mask_block": str(SHOWN_BLOCK), "mask_layer": "0", "mask_head": "0"},
        caption=f"Weights of {m.weights} with the pattern in every layer; the fused SDPA path and the explicit "
                f"five lines agree to {view.gap:.0e}.")
