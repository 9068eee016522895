"""FFN and MoE: activation curves, the SwiGLU gate on the live input, and a router choosing experts."""
import numpy as np
import pandas as pd
import streamlit as st

from transformer import MODEL_CARDS, param_counts
from transformer.hooks import attention_stacks, hook_name
from ui.figures.block import activation_curves, expert_load, router, units_heatmap
from ui.compute.measure import activation_curves as curves
from ui.app.page import load_page
from ui.app.page_controls import KEEP, keep_valid, url_state

url_state("ffn", ffn_layer=0)

ctx = load_page("FFN and MoE: the per-token computation", """
**The problem.** Attention only mixes tokens; it is the feed-forward network (FFN), applied to each token on its own,
that holds most of a transformer's parameters and does most of its computation. How to spend those parameters well —
and how to have more of them without paying for all of them on every token?

**The ideas.** A nonlinearity between two projections: ReLU (2017), then the smooth GELU (GPT-2, BERT). *SwiGLU*
(PaLM, LLaMA) adds a gate: SiLU(x W_gate) ⊙ (x W_up), a learned, per-unit "how much passes". A *mixture of experts*
(Mixtral) keeps several FFNs and lets a router send each token to its top-k: many parameters, few used per token.

**What to look at.** The curves; the gate's values on your input; the router's choices, the experts' load and the
load-balancing loss; total against active parameters.
""")
cfg = ctx.state.config
stack = attention_stacks(cfg.arch).input  # an encoder-decoder: its encoder's FFNs
labels = ctx.trace.src_labels
arrays = ctx.trace.arrays
keep_valid("ffn_layer", range(cfg.n_layers), 0)

st.header("Activation functions")
x, ys = curves(-4.0, 4.0, 161)
st.plotly_chart(activation_curves(x, ys), key="ffn_curves")
st.caption("ReLU cuts negatives to exactly 0. GELU = x·Φ(x) and SiLU = x·sigmoid(x) are smooth, let small negatives "
           "through (their dip below 0) and have a gradient everywhere.")

st.header(f"The live model's FFN ({cfg.ffn})")
st.selectbox("Layer", range(cfg.n_layers), key="ffn_layer", **KEEP)


def mlp(site: str) -> str:
    return hook_name(st.session_state["ffn_layer"], f"mlp.{site}", stack)


if cfg.ffn == "swiglu":
    gate, product = arrays[mlp("hook_gate")][0], arrays[mlp("hook_post")][0]  # (T, d_ff)
    col1, col2 = st.columns(2)
    col1.plotly_chart(units_heatmap(gate, labels, "gate: SiLU(x W_gate)"), key="ffn_gate")
    col2.plotly_chart(units_heatmap(product, labels, "gate ⊙ up: what reaches W_down"), key="ffn_product")
    col1, col2 = st.columns(2)
    col1.metric("gate values near 0 (|g| < 0.05): closed", f"{(np.abs(gate) < 0.05).mean():.0%}")
    col2.metric("negative gate values (SiLU's dip)", f"{(gate < 0).mean():.0%}")
    st.caption(f"Tokens down, the first {min(64, gate.shape[1])} of d_ff = {cfg.d_ff} hidden units across. Each unit "
               "of x W_up is multiplied by its gate: near 0 blocks it, large lets it through, negative flips it.")
elif cfg.ffn in ("relu", "gelu"):
    pre, post = arrays[mlp("hook_pre")][0], arrays[mlp("hook_post")][0]  # (T, d_ff)
    col1, col2 = st.columns(2)
    col1.plotly_chart(units_heatmap(pre, labels, "before the activation: x W_in + b"), key="ffn_pre")
    col2.plotly_chart(units_heatmap(post, labels, f"after {cfg.ffn.upper()}"), key="ffn_post")
    st.metric("hidden values that are exactly 0 after the activation", f"{(post == 0).mean():.0%}")
    st.info("This model has no gate. To see SwiGLU's gate, choose **swiglu** in the sidebar's FFN box (or the "
            "LLaMA 2 preset); for routed experts choose **moe** (or the Mixtral preset).")

st.header("Mixture of experts")
if cfg.ffn == "moe":
    probs = arrays[mlp("hook_router_probs")][0]  # (T, E)
    chosen = arrays[mlp("hook_expert_indices")][0]  # (T, k)
    load = arrays[mlp("hook_expert_load")]  # (E,)
    aux = float(arrays[mlp("hook_aux_loss")])
    col1, col2 = st.columns([3, 2])
    col1.plotly_chart(router(probs, chosen, labels), key="moe_router")
    col2.plotly_chart(expert_load(load), key="moe_load")
    col2.metric("load-balancing loss E · Σ load_e · mean prob_e", f"{aux:.3f}",
                help="1.0 when load and router probability are spread evenly; higher when a few experts take most "
                     "tokens. Added to the training loss so the router learns to spread the work.")
    st.caption(f"Each token goes to its top-{cfg.top_k} of {cfg.n_experts} experts (circled); their probabilities, "
               "renormalised to sum to 1, weight the experts' outputs. Untrained, the router is close to uniform.")
    routing = pd.DataFrame({"token": [f"{t}:{label}" for t, label in enumerate(labels)],
                            **{f"expert #{j + 1}": chosen[:, j] for j in range(chosen.shape[1])},
                            **{f"p(expert {e})": np.round(probs[:, e], 3) for e in range(probs.shape[1])}})
    st.download_button("Download the routing (CSV)", on_click="ignore", file_name="routing.csv", mime="text/csv",
                       data=lambda: routing.to_csv(index=False))
else:
    st.info("The sidebar's model has a dense FFN. Choose **moe** in the sidebar's FFN box (or the Mixtral preset) to see "
            "the router's probabilities, its top-k choices and the experts' load on your input.")

st.subheader("Total vs active parameters")
mixtral = MODEL_CARDS["mixtral"]
rows = []
for name, model_cfg, published in [("the sidebar's model", cfg, None),
                                   ("Mixtral 8x7B (real size)", mixtral.real["8x7B"],
                                    (mixtral.published_params["8x7B"], mixtral.published_active["8x7B"]))]:
    counts = param_counts(model_cfg)
    rows.append({"model": name, "FFN": model_cfg.ffn,
                 "experts (top-k)": f"{model_cfg.n_experts} (top-{model_cfg.top_k})" if model_cfg.ffn == "moe" else "—",
                 "total": f"{counts['total']:,}", "active per token": f"{counts['active']:,}",
                 "active share": f"{counts['active'] / counts['total']:.0%}",
                 "published total / active":
                     f"{published[0] / 1e9:.1f}B / {published[1] / 1e9:.1f}B" if published else "—"})
st.dataframe(pd.DataFrame(rows), hide_index=True)
st.caption("Mixtral stores 8 SwiGLU experts per layer but each token runs 2: about 47B parameters to hold in memory, "
           "about 13B of compute per token — a 13B model's speed with far more capacity.")
