"""Why divide by sqrt(d_head): the variance of q . k grows with the head size and softmax saturates without the scale."""
import math

import pandas as pd
import streamlit as st

from transformer import axes, probes
from ui.figures import probe as figs
from ui.app.page import load_page
from ui.app.charts import show_chart
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.layers import softmax_layers, state_layers
from ui.compute.probe_measure import live_statistics, scaling_curves, softmax_rows

D_HEADS = [4, 8, 16, 32, 64, 128, 256, 512]
url_state("scale", scale_keys=16, scale_seed=0, scale_d=512, scale_layer=0)
keep_valid("scale_keys", range(2, 65), 16)
keep_valid("scale_seed", range(0, 100_000), 0)
keep_valid("scale_d", D_HEADS, 512)

ctx = load_page("Why divide by √d_head?", """
**The problem.** A score is a dot product, q · k = Σ q_i k_i over d_head dimensions. If the entries of q and k are
independent with variance 1, each product has variance 1 and the sum has variance **d_head**: its typical size grows
like √d_head. Softmax of large scores saturates: the largest key takes almost all the weight, the others get nearly
0 — and nearly 0 gradient, so the head stops learning.

**The idea.** Divide by √d_head: the variance of the scores goes back to 1 whatever the head size, and softmax starts
out soft. That is the √d_k in softmax(QKᵀ / √d_k) V.

**What to look at.** The variance of random scores on the line y = d_head without the scale and flat at 1 with it; the
entropy of a row of weights collapsing towards 0 without the scale (one key takes all) and staying near its maximum,
log T, with it; one row of weights at d_head = 512; and the same numbers on the live model's own q and k.
""")
cfg = ctx.state.config

st.subheader("Random q and k with unit-variance entries")
col1, col2 = st.columns(2)
col1.slider("Keys per row (T)", min_value=2, max_value=64, key="scale_keys", **KEEP,
            help="each query's softmax runs over this many keys; the entropy is at most log T")
col2.number_input("Random seed", min_value=0, max_value=99_999, step=1, key="scale_seed", **KEEP)
n_keys, seed = int(st.session_state["scale_keys"]), int(st.session_state["scale_seed"])
d_heads = tuple(sorted({*D_HEADS, cfg.d_head}))  # the live model's head size gets a point of its own
curves = scaling_curves(d_heads, n_keys, seed)

scored = softmax_layers(cfg)  # a layer that keeps a state meets its q and k with no softmax, and no √d
keep_valid("scale_layer", scored or [0], scored[0] if scored else 0)
layer = int(st.session_state["scale_layer"])
q_name, k_name = probes.live_qk_names(cfg, layer)
live = None
if scored and ctx.trace.arrays.get(q_name) is not None and len(ctx.tokens.ids) > 1:
    live = live_statistics(ctx.trace.arrays[q_name], ctx.trace.arrays[k_name])

col1, col2 = st.columns(2)
show_chart(figs.score_variance(curves["d_heads"], curves["var_unscaled"], curves["var_scaled"],
                               live and dict(live, d_head=cfg.d_head)), key="scale_variance", where=col1)
show_chart(figs.score_entropy(curves["d_heads"], curves["entropy_unscaled"], curves["entropy_scaled"],
                              curves["max_entropy"]), key="scale_entropy", where=col2)
last = len(curves["d_heads"]) - 1
big = curves["d_heads"][last]
c1, c2, c3 = st.columns(3)
c1.metric(f"unscaled variance ÷ d_head, at d_head = {big}", f"{curves['var_unscaled'][last] / big:.3f}",
          help="the theory says 1: the variance of q · k is d_head")
c2.metric(f"scaled variance, at d_head = {big}", f"{curves['var_scaled'][last]:.3f}", help="the theory says 1")
c3.metric(f"entropy at d_head = {big}: unscaled → scaled (max log {n_keys} = {curves['max_entropy']:.2f})",
          f"{curves['entropy_unscaled'][last]:.2f} → {curves['entropy_scaled'][last]:.2f} nats")
st.caption(f"Each point: {curves['n_queries']} queries, each over {n_keys} keys of its own, every entry drawn from N(0, 1) with seed "
           f"{seed}. The scaled variance is the unscaled one divided by d_head exactly, so both curves share their "
           "sampling noise. The scaled entropy does not reach log T: scores of variance 1 still prefer some keys.")
st.download_button("Download the curves (CSV)", on_click="ignore", file_name=f"scaling_T{n_keys}_seed{seed}.csv",
                   mime="text/csv",
                   data=lambda: pd.DataFrame({k: curves[k] for k in ("d_heads", "var_unscaled", "var_scaled",
                                                                     "entropy_unscaled", "entropy_scaled")})
                   .rename(columns={"d_heads": "d_head"}).to_csv(index=False))

st.subheader("One row of weights")
st.selectbox("d_head", D_HEADS, key="scale_d", **KEEP)
d_row = int(st.session_state["scale_d"])
unscaled, scaled = softmax_rows(d_row, n_keys, seed)
show_chart(figs.softmax_rows(unscaled, scaled, d_row), key="scale_row")
st.caption(f"Unscaled, the scores of this query have a spread of about √{d_row} ≈ {math.sqrt(d_row):.0f}, so "
           f"exp(score) makes the largest key win: weight {unscaled.max():.3f}. Scaled, the spread is about 1 and "
           f"the largest weight is {scaled.max():.3f}: the other keys still count, and still get a gradient.")

st.subheader("The live model's own q and k")
if not scored:
    st.info("Every layer of this model keeps a state: no softmax reads its q · k, so there is nothing to saturate. "
            "Choose softmax or hybrid **Attention layers** in the sidebar.")
else:
    if len(scored) < cfg.n_layers:
        st.caption(f"Layers {', '.join(str(i) for i in state_layers(cfg))} keep a state (no softmax); the layer "
                   "choice offers the softmax layers.")
    st.selectbox("Layer", scored, key="scale_layer", **KEEP)
if scored and live is None:
    st.info("The live model's scores need at least two tokens: type a longer text in the sidebar.")
elif live is not None:
    notes = [f"after {axes.AXES['qk_norm'].title} ({axes.label('qk_norm', cfg.qk_norm)})"
             if cfg.row("qk_norm").normalises else "",
             f"after {axes.label('position', cfg.position)}'s rotation" if cfg.row("position").rotates_qk else ""]
    rope_note = "".join(f" {note}" for note in notes if note)
    if cfg.row("kv_heads").latent:
        rope_note += " (keys rebuilt from the latent, its shared rotated part included)"
    group = cfg.group_size
    st.markdown(f"Layer {layer}'s q and k on the sidebar's text{rope_note} (`{q_name.rsplit('.', 1)[1]}`, "
                f"`{k_name.rsplit('.', 1)[1]}`), d_head = {cfg.d_head}, T = {live['n_keys']} tokens. "
                + (f"With {cfg.n_kv_heads} kv heads for {cfg.n_heads} query heads, each k serves {group} query heads "
                   "(repeated per group, as attention does). " if group > 1 else "")
                + "Every query is scored against every key here (no mask), as in the random rows above. A model's "
                  "q and k need not have variance 1 — their size is learned — so the theory to compare with is "
                  "var(q · k) ≈ d_head · var(q) · var(k).")
    table = pd.DataFrame({
        "head": range(cfg.n_heads), "kv head": [h // group for h in range(cfg.n_heads)],
        "var(q)": live["q_var"], "var(k)": live["k_var"],
        "var(q·k)": live["var_unscaled"],
        "d·var(q)·var(k)": [cfg.d_head * a * b for a, b in zip(live["q_var"], live["k_var"])],
        "var(q·k/√d)": live["var_scaled"],
        "entropy unscaled": live["entropy_unscaled"], "entropy scaled": live["entropy_scaled"],
    })
    st.dataframe(table.style.format(precision=4), hide_index=True)
    show_chart(figs.live_entropy(live["entropy_unscaled"], live["entropy_scaled"], live["n_keys"], cfg.d_head),
               key="scale_live")
    st.caption("The live heads also appear on the variance plot above as diamonds at d_head = "
               f"{cfg.d_head} (hollow: unscaled, filled: scaled). Untrained weights give small q and k and nearly "
               "uniform rows either way; trained heads grow their q and k where they need sharp attention.")
    if cfg.score_scale is not None or cfg.attn_softcap is not None:
        own = []
        if cfg.score_scale is not None:
            own.append(f"multiplies q · k by {cfg.score_scale:.4g} rather than 1/√{cfg.d_head} = "
                       f"{1 / math.sqrt(cfg.d_head):.4g}")
        if cfg.attn_softcap is not None:
            own.append(f"then squeezes every score into (−{cfg.attn_softcap:g}, {cfg.attn_softcap:g}) "
                       f"({axes.label('scores', 'softcap')}: {axes.AXES['scores'].choices['softcap'].does})")
        st.caption("The columns above use 1/√d_head; the sidebar's model itself " + ", and ".join(own) + ".")
    st.download_button("Download the live model's numbers (CSV)", on_click="ignore", mime="text/csv",
                       file_name=f"scaling_live_layer{layer}.csv", data=lambda: table.to_csv(index=False))
