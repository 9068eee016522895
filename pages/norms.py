"""Norms: where the norms sit (pre, post, sandwich, after), measured with depth, and LayerNorm vs RMSNorm on one vector."""
import re

import numpy as np
import pandas as pd
import streamlit as st

from transformer import AXES, axes, choices
from ui.figures.block import depth_lines, norm_bars, norm_placement_dot
from ui.compute.measure import NORM_DEPTH_BASE, depth_profile, normalized
from ui.app.page import load_page
from ui.app.charts import show_chart
from ui.app.figure_cache import cached_figure
from ui.app.tabs import lazy_tabs, when_open
from ui.app.page_controls import KEEP, keep_valid, url_state

INITS = {"variance-preserving": "every matrix N(0, 1/fan_in): the bare effect of the placement",
         "library": "the library's GPT-2 init: N(0, 0.02), residual projections ÷ √(2 · layers)"}
COMPARED = ("pre", "post")  # the two placements the measurement sets side by side, with both norms
MAX_TOKENS = 16  # a short input keeps the 4 (or 5) x 24-layer measurement quick
url_state("norm", norm_depth=12, norm_init="variance-preserving", norm_vec="1, 2, 3, 10",
          norm_tab=str)  # norm_tab: the open tab (lazy_tabs below)
keep_valid("norm_depth", range(1, 25), 12)
keep_valid("norm_init", list(INITS))

ctx = load_page("Norms: LayerNorm · RMSNorm, pre or post", """
**The problem.** A residual stream is a running sum: every block adds to it. Deep stacks either let it grow without
bound or, if it is normalised on the main path, make the gradient of the early blocks pass through every norm on the way
down — the original post-norm Transformer needed a learning-rate warm-up to train at all.

**The idea.** Normalise where it helps. *Post-norm* (2017, BERT) normalises the sum, `norm(x + f(x))`; *pre-norm*
(GPT-2, LLaMA) normalises only the sublayer's input, `x + f(norm(x))`, leaving a clean identity path from the output
back to the embeddings. Newer models also normalise what each sublayer returns before it joins the stream:
*sandwich* (Gemma 2 and 3) on both sides, `x + norm(f(norm(x)))`, and *after the sublayer* (OLMo 2),
`x + norm(f(x))`. *RMSNorm* (LLaMA) drops LayerNorm's mean subtraction: one reduction fewer, and, the lecture says, "faster with
comparable performance".

**What to look at.** The residual norm and gradient norm per layer of freshly initialised models of growing depth;
what each norm does to one vector you type.
""")
cfg = ctx.state.config



def variant_label(norm: str, placement: str) -> str:
    return f"{axes.label('norm_position', placement)} · {axes.label('norm', norm)}"


# --- the three views, one tab each: a rerun computes and draws only the open tab's ------------------------------
# (a sidebar change of position or FFN measured four or five fresh 12-layer models, forward and backward, to show
# the diagrams)
placement_tab, depth_tab, vector_tab = lazy_tabs(
    ["Where the norm sits", "Residual and gradient norms with depth", "LayerNorm vs RMSNorm on one vector"],
    key="norm_tab")

for _ in when_open(placement_tab):
    st.header("Where the norm sits")
    placements = choices("norm_position")
    for start in range(0, len(placements), 2):
        for col, placement in zip(st.columns(2), placements[start:start + 2]):
            col.graphviz_chart(norm_placement_dot(placement, cfg.norm))
            choice = AXES["norm_position"].choices[placement]
            used = " ← the sidebar's model" if cfg.norm_position == placement and not cfg.parallel_block else ""
            col.caption(f"**{choice.label}**: {choice.does}" + (f" ({choice.examples})" if choice.examples else "")
                        + f".{used}")
    if cfg.parallel_block:
        st.caption(f"The sidebar's model is a {axes.label('block', 'parallel')} block: "
                   f"{AXES['block'].choices['parallel'].does}.")

for _ in when_open(depth_tab):
    st.header("Residual and gradient norms with depth, at initialisation")
    col1, col2 = st.columns(2)
    col1.slider("Depth (layers)", min_value=1, max_value=24, key="norm_depth", **KEEP)
    col2.selectbox("Initialisation", list(INITS), key="norm_init", **KEEP,
                   help="\n".join(f"- {k}: {v}" for k, v in INITS.items()))
    depth, init = int(st.session_state["norm_depth"]), st.session_state["norm_init"]
    ids = tuple(ctx.tokens.ids[:MAX_TOKENS])
    base = NORM_DEPTH_BASE
    variants = [(norm, placement) for placement in COMPARED for norm in choices("norm")]
    if cfg.norm_position not in COMPARED:  # the sidebar's placement joins the comparison, with the sidebar's norm
        variants.append((cfg.norm, cfg.norm_position))
    st.caption(f"{len(variants)} fresh decoders (d_model = {base['d_model']}, {base['n_heads']} heads, the sidebar's "
               f"{axes.label('position', cfg.position)} positions and {axes.label('ffn', cfg.ffn)} FFN), one per "
               f"placement × norm, on the first {len(ids)} tokens of the input; next-token cross-entropy, one backward pass. "
               "Dashed: the placements that normalise the residual stream itself after every sublayer.")
    if len(ids) < 2:
        st.error("The measurement predicts each next token, so it needs an input of at least 2 characters.")
    else:
        progress = st.progress(0.0, text="Measuring…")
        profiles = {}
        for i, (norm, placement) in enumerate(variants):
            label = variant_label(norm, placement)
            progress.progress(i / len(variants), text=f"Measuring {label} at depth {depth}…")
            profiles[label] = depth_profile(cfg.position, cfg.ffn, norm, placement, depth, init, ids)
        progress.empty()
        dashed = {variant_label(n, p) for n, p in variants if AXES["norm_position"].row(p).on_sum}
        col1, col2 = st.columns(2)
        show_chart(cached_figure(depth_lines, {k: p["resid_norms"] for k, p in profiles.items()},
                                 "residual stream: mean ‖x‖ per token", "L2 norm of x", "after block (0 = embedding)",
                                 dashed=dashed), key="norm_resid", where=col1)
        show_chart(cached_figure(depth_lines, {k: p["grad_norms"] for k, p in profiles.items()},
                                 "gradient norm of each block's weights", "L2 norm of the gradient (log scale)", "block",
                                 log=True, dashed=dashed), key="norm_grad", where=col2)
        rows = [{"variant": label, "after_block": i, "resid_norm": r,
                 "grad_norm_of_that_block": p["grad_norms"][i - 1] if i else None}
                for label, p in profiles.items() for i, r in enumerate(p["resid_norms"])]
        st.download_button("Download the measurements (CSV)", on_click="ignore", file_name=f"norms_depth{depth}_{init}.csv",
                           mime="text/csv", data=lambda: pd.DataFrame(rows).to_csv(index=False))
        pre, post = (profiles[variant_label("layernorm", placement)] for placement in COMPARED)
        growth = pre["resid_norms"][-1] / pre["resid_norms"][1]
        pre_grads, post_grads = (p["grad_norms"][-1] / p["grad_norms"][0] for p in (pre, post))
        col1, col2, col3, col4 = st.columns(4)
        col1.metric("pre-norm: ‖x‖, last / first block", f"{growth:.2f}×")
        col2.metric("post-norm: ‖x‖ after every block", f"{np.mean(post['resid_norms'][1:]):.3f}",
                    help=f"√d_model = {np.sqrt(base['d_model']):.3f}: a norm with weight 1 leaves each vector that long")
        col3.metric("pre-norm: gradient, last / first block", f"{pre_grads:.2f}×")
        col4.metric("post-norm: gradient, last / first block", f"{post_grads:.2f}×")
        st.markdown(f"""
- **Pre-norm**: nothing ever rescales the residual stream, so every block adds to it and ‖x‖ grows with depth
  (here {growth:.1f}× from the first block to the last). Each later block's update is a smaller share of a bigger
  stream, and its gradient is smaller with it — but every block keeps a direct identity path to the loss.
- **Post-norm**: every block ends on a norm, so ‖x‖ is pinned at √d_model = {np.sqrt(base['d_model']):.2f}. The
  gradient of an early block has to pass through every later norm (here the last block's gradient is
  {post_grads:.2f}× the first's, against {pre_grads:.2f}× with pre-norm). Xiong et al. (2020) showed that at
  initialisation post-norm puts the largest gradients near the output, which is why it needs a learning-rate warm-up.
- With the **library** init, each block's output projection is shrunk by 1/√(2 · layers) (GPT-2's remedy), which keeps
  pre-norm's growth small: switch the initialisation to compare. Depth 1 has one block: nothing to compare yet.
""")
        if cfg.norm_position not in COMPARED:
            own = profiles[variant_label(cfg.norm, cfg.norm_position)]
            choice = AXES["norm_position"].choices[cfg.norm_position]
            own_growth = own["resid_norms"][-1] / own["resid_norms"][1]
            own_grads = own["grad_norms"][-1] / own["grad_norms"][0]
            st.markdown(f"- **{choice.label}**, the sidebar's placement: {choice.does}. Every block still adds to the "
                        f"stream, but what it adds has been normalised: here ‖x‖ grows {own_growth:.2f}× from the first "
                        f"block to the last, and the last block's gradient is {own_grads:.2f}× the first's. "
                        f"{choice.solves}")

for _ in when_open(vector_tab):
    st.header("LayerNorm vs RMSNorm on one vector")
    st.text_input("A vector (numbers separated by commas or spaces)", key="norm_vec", **KEEP)
    tokens = [t for t in re.split(r"[,\s;]+", st.session_state["norm_vec"].strip()) if t]
    try:
        values = tuple(float(t) for t in tokens)
        if not 2 <= len(values) <= 32 or not all(np.isfinite(values)):
            raise ValueError(f"type between 2 and 32 finite numbers; got {len(values)}")
    except ValueError as exc:
        st.error(f"That is not a vector: {exc}. Example: 1, 2, 3, 10")
    else:
        x = np.array(values)
        out = normalized(values)
        show_chart(cached_figure(norm_bars, x, out["layernorm"], out["rmsnorm"]), key="norm_bars")
        col1, col2, col3 = st.columns(3)
        shown = {"input": x, "LayerNorm": out["layernorm"], "RMSNorm": out["rmsnorm"]}
        for col, (name, v) in zip((col1, col2, col3), shown.items()):
            col.metric(f"{name}: mean", f"{v.mean():.4f}")
            col.metric(f"{name}: RMS", f"{np.sqrt((v ** 2).mean()):.4f}")
        st.markdown("LayerNorm: (x − mean) / std → mean 0, RMS 1 (it centres *and* scales). RMSNorm: x / RMS(x) → RMS 1, "
                    "but the mean stays — the shape of the vector, including its offset, is kept. Both then multiply by a "
                    "learned weight (1 here). Add the same number to every component: LayerNorm's output does not change, "
                    "RMSNorm's does.")
