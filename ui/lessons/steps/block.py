"""The block around attention: the residual stream with its norms, and the feed-forward network (gated, or a
mixture of experts)."""
from __future__ import annotations

import numpy as np

from transformer import MODEL_CARDS, axes, param_counts
from ui.compute.measure import depth_profile
from ui.figures import lesson as lesson_figures
from ui.figures.block import depth_lines
from ui.lessons.live import Live
from ui.lessons.steps.lesson_model import MAX_SHOWN, lesson_model
from ui.lessons.steps.step import lesson_step, nearest

DEPTH = 12


@lesson_step(
    "block", "The block: residual stream and norms",
    text="A block adds to a **residual stream**: x + attention(x), then x + FFN(x). A norm keeps the numbers in "
         "range; it can sit after the sum (post-norm, 2017, BERT) or before each sublayer (pre-norm, GPT-2, LLaMA). "
         "RMSNorm drops LayerNorm's mean subtraction.",
    question="Which placement keeps the residual stream's size constant?", kind="choice",
    try_this="On the Norms page, compare the gradient plot: where does each placement put the largest gradients?",
    page="norms", query={"norm_tab": "Residual and gradient norms with depth"}, uses_model=True)
def residual_and_norms() -> Live:
    m = lesson_model()
    cfg = m.config
    ids = tuple(m.tokens.ids[:MAX_SHOWN])
    name = axes.label("norm", cfg.norm)
    profiles = {placement: depth_profile(cfg.position, cfg.ffn, cfg.norm, placement, DEPTH, "variance-preserving", ids)
                for placement in ("pre", "post")}
    flat = {p: float(np.ptp(v["resid_norms"][1:]) / np.mean(v["resid_norms"][1:])) < 0.01 for p, v in profiles.items()}
    answer = {(True, True): 2, (True, False): 0, (False, True): 1, (False, False): 3}[(flat["pre"], flat["post"])]
    growth = profiles["pre"]["resid_norms"][-1] / profiles["pre"]["resid_norms"][1]
    return Live(
        question=(f"A stack of {DEPTH} blocks, freshly initialised. After which placement of the {name} does the "
                  "residual stream keep the same size ‖x‖ after every block?"),
        choices=[f"Pre-norm: x + f({name}(x))", f"Post-norm: {name}(x + f(x))", "Both", "Neither"], answer=answer,
        why=(f"Post-norm ends every block on a norm, which pins ‖x‖ at √d_model; pre-norm only normalises what enters "
             f"each sublayer, so every block adds to the stream ({growth:.1f}× from the first block to the last) — "
             "and keeps an untouched identity path for the gradient, the reason GPT-2 and LLaMA chose it (what it "
             "changed in training here: the Trade-offs page)."),
        figure=depth_lines({f"{p}-{name}": v["resid_norms"] for p, v in profiles.items()},
                           f"residual stream after each of {DEPTH} blocks, at initialisation", "mean ‖x‖ per token",
                           "after block (0 = embedding)",
                           dashed={f"{p}-{name}" for p in profiles if axes.AXES["norm_position"].row(p).on_sum}),
        query={"norm_depth": str(DEPTH), "norm_init": "variance-preserving"},
        caption="Every matrix N(0, 1/fan_in), the lessons' positions and FFN, next-token loss on the lesson text.")


@lesson_step(
    "ffn", "FFN, SwiGLU and mixtures of experts",
    text="After attention mixes tokens, a feed-forward network transforms each token on its own — and holds most "
         "of the parameters. SwiGLU gates it: SiLU(x W_gate) ⊙ (x W_up). A **mixture of experts** keeps several "
         "FFNs and routes each token to its top-k.",
    question="What share of Mixtral's parameters does one token use?", kind="choice",
    try_this="On the FFN and MoE page with the Mixtral preset, watch the router pick 2 experts for every character.",
    page="ffn", query={"preset": "mixtral"})
def ffn() -> Live:
    card = MODEL_CARDS["mixtral"]
    size, real = next(iter(card.real.items()))
    counts = param_counts(real)
    share = counts["active"] / counts["total"]
    options = {1 / 8: "About 1/8: one expert of eight", 1 / 4: "About 1/4", 1 / 2: "About 1/2", 1.0: "All of them"}
    answer = nearest(list(options), share)
    total, active = counts["total"] / 1e9, counts["active"] / 1e9
    return Live(
        question=(f"{card.label(size)} keeps {real.n_experts} SwiGLU experts in every layer and its router sends each "
                  f"token to the top {real.top_k}. What share of the model's parameters does one token use?"),
        choices=list(options.values()), answer=answer,
        why=(f"Only {real.top_k} of {real.n_experts} experts run per token, but attention, embeddings and norms are "
             f"shared by every token: {active:.1f}B of {total:.1f}B parameters ({share:.0%}) — a "
             f"{active:.0f}B model's compute with {total:.0f}B parameters of capacity."),
        figure=lesson_figures.labelled_bars(["stored (total)", "used per token (active)"], [total, active],
                                            f"{card.label(size)}: parameters, from its real dimensions", "",
                                            "parameters (billions)", [f"{total:.1f}B", f"{active:.1f}B"]),
        caption=f"Published: {card.published_params[size] / 1e9:.1f}B total, "
                f"{card.published_active[size] / 1e9:.1f}B active.")
