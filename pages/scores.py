"""Scores: what the models of 2024-2026 put between q·k and the output — QK-norm, soft-capping, sinks."""
import json
import math
from pathlib import Path

import numpy as np
import streamlit as st
import torch

from transformer import analysis, axes
from ui.app.page import load_page
from ui.app.charts import show_chart
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.layers import non_softmax_layers, softmax_layers
from ui.figures import modern as figs

MEASURED = Path(__file__).resolve().parent.parent / "assets" / "measurements" / "modern-variants.json"
url_state("scores", scores_layer=-1, scores_cap=0.0)

ctx = load_page("Scores: QK-norm, soft-capping, sinks", """
The five lines never change, but since 2024 many models add something around line 1 and line 3 (others, such as
LLaMA 3.1 and DeepSeek-V3, add none of these three):

- **QK-norm** (Qwen3, Gemma 3, OLMo 2): an RMSNorm on q and k before RoPE. The scores can no longer grow just because
  q and k grow during training; Qwen3 and Gemma 3 use it for stable training (the Trade-offs page measures it at
  10× the learning rate).
- **Soft-capping** (Gemma 2): every score squeezed into (−c, c) by c·tanh(s/c) before the mask. That bounds a
  score's size, not softmax's saturation: at c = 50 a capped 50 against 0 still takes the whole row.
- **Sinks** (gpt-oss): a learned logit per head joins each row's softmax and is then dropped, so a head can attend
  to *nothing*. Models without one park their spare weight on the first token instead — measured below.

Switch them on in the sidebar's **Since 2023** section; every view here reads the sidebar's model.
""")
cfg, model = ctx.state.config, ctx.model
ids = torch.tensor([ctx.tokens.ids], device=model.device)
labels = ctx.tokens.labels
if not cfg.row("arch").next_token:
    st.info("These views read a decoder's self-attention; this model is an "
            f"{axes.label('arch', cfg.arch)}. Choose a decoder preset in the sidebar.")
    st.stop()

layers = softmax_layers(cfg)  # a layer that keeps a state computes no scores
if not layers:
    st.info("Every layer of this model keeps a state: none computes q·k scores or a softmax, so there is nothing "
            "here to normalise, cap or sink. Choose softmax or hybrid **Attention layers** in the sidebar.")
    st.stop()
if len(layers) < cfg.n_layers:
    st.caption(f"Layers {', '.join(str(i) for i in non_softmax_layers(cfg))} keep a state (or convolve their last "
               "few inputs) and compute no scores; the layer choice offers the softmax layers.")
keep_valid("scores_layer", layers, layers[-1])
st.selectbox("Layer", layers, key="scores_layer", **KEEP)
layer = int(st.session_state["scores_layer"])
live = analysis.scores_and_weights(model, ids, layer)
scores = live["scores"][0].float().cpu().numpy()  # (H, T, T)
causal = np.tril(np.ones(scores.shape[-2:], dtype=bool))
seen = scores[:, causal]  # (H, pairs): the scores softmax can use

# --- QK-norm ---------------------------------------------------------------------------------
st.subheader("QK-norm: scores that cannot run away")
if cfg.row("kv_heads").latent:
    st.info("This model is MLA: its latent is normalised instead (kv_norm), and QK-norm is not built for it.")
else:
    has_norm = cfg.row("qk_norm").normalises
    other = analysis.twin(model, qk_norm="none" if has_norm else "head")
    other_scores = analysis.scores_and_weights(other, ids, layer)["scores"][0].float().cpu().numpy()[:, causal]
    this_name = f"this model (QK-norm: {axes.label('qk_norm', cfg.qk_norm)})"
    other_name = "the same weights without QK-norm" if has_norm else "the same weights with QK-norm per head (weight 1)"
    show_chart(figs.score_histograms({this_name: seen, other_name: other_scores}), key="scores_qk_hist")
    c1, c2 = st.columns(2)
    c1.metric(f"score spread, {this_name}", f"{seen.std():.3f}")
    c2.metric(f"score spread, {other_name}", f"{other_scores.std():.3f}")
    scales = [1.0, 2.0, 4.0, 8.0, 16.0]
    entropy = analysis.qk_norm_entropy(cfg.d_head, scales, n_keys=64)
    show_chart(figs.entropy_by_scale(np.array(scales), {k: v.numpy() for k, v in entropy.items()}, math.log2(64)),
               key="scores_qk_entropy")
    st.caption(f"Random q and k of d_head = {cfg.d_head}, 64 keys per row, multiplied by a growing scale as weights "
               "grow in training. Without the norm the score variance grows with the scale to the fourth power "
               "(dividing by √d_head fixes the head size, not this), and softmax collapses onto one key; with it, the "
               "entropy does not move. See also *Why divide by √d*.")

# --- soft-capping ------------------------------------------------------------------------------
st.subheader("Soft-capping: c · tanh(score / c)")
largest = float(np.abs(seen).max()) if seen.size else 1.0
default_cap = cfg.attn_softcap or round(max(0.5, largest / 2), 1)
if float(st.session_state.get("scores_cap") or 0.0) <= 0.0:
    st.session_state["scores_cap"] = float(default_cap)
st.slider("Cap c", min_value=0.5, max_value=60.0, step=0.5, key="scores_cap", **KEEP,
          help="Gemma 2 caps attention scores at 50 and the final logits at 30")
cap = float(st.session_state["scores_cap"])
show_chart(figs.softcap_curve(seen, cap), key="scores_cap_curve")
squeezed = float((np.abs(seen) > cap / 2).mean())
st.caption(("This model caps its scores at c = " + f"{cfg.attn_softcap:g}; " if cfg.attn_softcap else
            "This model has no cap; the curve shows what one would do to its scores. ")
           + f"The largest score here is {largest:.2f}; {squeezed:.0%} of them lie beyond c/2, where the curve bends "
           "visibly. A cap far above every score changes nothing; one below them flattens the differences softmax reads.")

# --- sinks -------------------------------------------------------------------------------------
st.subheader("Sinks: a head may attend to nothing")
if "sink_share" in live:
    share = live["sink_share"][0].float().cpu().numpy()  # (H, T)
    show_chart(figs.sink_share(share, labels), key="scores_sink_share")
    st.metric("mean share the sinks took, this layer", f"{share.mean():.1%}")
    st.caption("Each row is a head, each column a query: the weight the head's sink logit took from that query's "
               "softmax. hook_pattern keeps its (B, H, T, T) layout, so its rows sum to 1 minus this share.")
else:
    first = live["weights"][0, :, 1:, 0].float().mean(-1).cpu().numpy()  # (H,): queries after the first
    show_chart(figs.sink_share(live["weights"][0, :, :, 0].float().cpu().numpy(), labels,
                               "no sink here: the first token's share of each query's weight"),
               key="scores_first_share")
    st.caption(f"This model has no sink. The heatmap shows the weight each head puts on the **first** token, per query: "
               f"on average {first.mean():.1%} in this layer (uniform attention would give each query 1/(its "
               "position + 1)). Trained models grow a sink of their own on the first token.")

try:
    measured = json.loads(MEASURED.read_text(encoding="utf-8"))
    spare, with_sinks = measured["spare_weight"], measured["sinks"]
except (OSError, ValueError, KeyError):
    st.error(f"{MEASURED} is missing or unreadable; `python -m scripts.measure_modern` writes it.")
    spare = with_sinks = None
for row in with_sinks or []:
    st.markdown(f"**What a trained model does with its sinks** ({row['model']}, held-out English; beside random-init "
                "weights of its shape)")
    show_chart(figs.sinks_measured(row), key=f"scores_sinks_measured_{row['model']}")
    trained = np.array(row["sink_share"])  # (layers, H)
    random_init = np.array(row["random_init"]["sink_share"])  # (seeds, layers, H)
    busiest = np.unravel_index(trained.argmax(), trained.shape)
    st.caption(f"Trained, its sinks take {trained.mean():.1%} of a row on average, and head L{busiest[0]}H{busiest[1]} "
               f"{trained.max():.0%}; random-init sinks (logit 0) take {random_init.mean():.1%}, the share one extra "
               "key of score 0 gets. The first position gets "
               f"{np.array(row['first_position']).max():.2f} at most in any head: the sink holds the weight a head "
               "does not need, where models without one park it on the first token.")
if spare is not None:
    st.markdown("**Where trained models without sinks park their spare weight** (the shipped English checkpoints, "
                "held-out text; beside the same measure on random-init weights of each shape)")
    show_chart(figs.spare_weight(spare), key="scores_spare")
    best = max(spare, key=lambda row: max(map(max, row["first_position"])))
    st.caption(f"The most any head puts on the first position: {max(map(max, best['first_position'])):.2f} "
               f"({best['model']}), against at most {best['random_init']['first_position_max']:.2f} on random "
               f"weights; on spaces up to {max(max(map(max, r['spaces'])) for r in spare):.2f}, where spaces are "
               f"{spare[0]['space_key_share']:.0%} of the keys. A sink gives that weight a place that changes nothing.")
