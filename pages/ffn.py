"""FFN and MoE: activation curves, the gate of a gated FFN (SwiGLU, GeGLU) on the live input, and a router choosing experts."""
import numpy as np
import pandas as pd
import streamlit as st

from transformer import AXES, MODEL_CARDS, axes, param_counts
from transformer.hooks import attention_stacks, hook_name
from ui.figures.block import activation_curves, expert_load, router, units_heatmap
from ui.compute.measure import activation_curves as curves
from ui.app.page import load_page
from ui.app.charts import show_chart
from ui.app.page_controls import KEEP, keep_valid, url_state

url_state("ffn", ffn_layer=0)

ctx = load_page("FFN and MoE: the per-token computation", """
**The problem.** Attention only mixes tokens; it is the feed-forward network (FFN), applied to each token on its own,
that holds most of a transformer's parameters and does most of its computation. How to spend those parameters well —
and how to have more of them without paying for all of them on every token?

**The ideas.** A nonlinearity between two projections: ReLU (2017), then the smooth GELU (GPT-2, BERT). *SwiGLU*
(PaLM, LLaMA) adds a gate: SiLU(x W_gate) ⊙ (x W_up), a learned, per-unit "how much passes"; *GeGLU* (Gemma) is the
same gate with GELU. A *mixture of experts* (Mixtral) keeps several FFNs and lets a router send each token to its
top-k: many parameters, few used per token.

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
show_chart(activation_curves(x, ys), key="ffn_curves")
st.caption("ReLU cuts negatives to exactly 0. GELU = x·Φ(x) and SiLU = x·sigmoid(x) are smooth, let small negatives "
           "through (their dip below 0) and have a gradient everywhere.")

kind = cfg.row("ffn")
st.header(f"The live model's FFN ({axes.label('ffn', cfg.ffn)})")
st.selectbox("Layer", range(cfg.n_layers), key="ffn_layer", **KEEP)
layer = st.session_state["ffn_layer"]
routed_layer = cfg.layer_is_moe(layer)  # a routed model's first dense layers keep a dense gated FFN


def _routed_words(cfg) -> str:
    """The layers that route, listed: the first ones may stay dense (DeepSeek), or every other one (Llama 4 Maverick)."""
    return ", ".join(str(i) for i in range(cfg.n_layers) if cfg.layer_is_moe(i))


def mlp(site: str) -> str:
    return hook_name(layer, f"mlp.{site}", stack)


events = {e["name"]: e for e in ctx.trace.events}
gated_names = [k for k, row in AXES["ffn"].choices.items() if row.gated and not row.routed]
if routed_layer:
    st.caption(f"Layer {layer} routes each token to experts: see the mixture of experts below.")
elif kind.gated:  # a gate: SwiGLU, GeGLU, or the dense layer of a routed model
    gate, product = arrays[mlp("hook_gate")][0], arrays[mlp("hook_post")][0]  # (T, d_ff)
    gate_op = events[mlp("hook_gate")]["op"]  # the library's words for this layer's gate, e.g. "SiLU(x W_gate)"
    if kind.routed:
        st.caption(f"Layer {layer} is one of the dense layers of this mixture of experts (layers "
                   f"{_routed_words(cfg)} route): a gated FFN every token passes through.")
    col1, col2 = st.columns(2)
    show_chart(units_heatmap(gate, labels, f"gate: {gate_op}"), key="ffn_gate", where=col1)
    show_chart(units_heatmap(product, labels, "gate ⊙ up: what reaches W_down"), key="ffn_product", where=col2)
    col1, col2 = st.columns(2)
    col1.metric("gate values near 0 (|g| < 0.05): closed", f"{(np.abs(gate) < 0.05).mean():.0%}")
    gate_row = AXES["ffn"].row(cfg.row("expert_activation").dense_kind) if kind.routed else kind
    col2.metric(f"negative gate values (the dip of {gate_row.activation.removesuffix(' gate')})",
                f"{(gate < 0).mean():.0%}")
    st.caption(f"Tokens down, the first {min(64, gate.shape[1])} of d_ff = {gate.shape[1]} hidden units across. Each "
               "unit of x W_up is multiplied by its gate: near 0 blocks it, large lets it through, negative flips it.")
else:
    pre, post = arrays[mlp("hook_pre")][0], arrays[mlp("hook_post")][0]  # (T, d_ff)
    col1, col2 = st.columns(2)
    show_chart(units_heatmap(pre, labels, "before the activation: x W_in + b"), key="ffn_pre", where=col1)
    show_chart(units_heatmap(post, labels, f"after {kind.activation}"), key="ffn_post", where=col2)
    st.metric("hidden values that are exactly 0 after the activation", f"{(post == 0).mean():.0%}")
    st.info("This model has no gate. To see a gate, choose "
            + " or ".join(f"**{name}** ({axes.label('ffn', name)})" for name in gated_names)
            + " in the sidebar's FFN box (or the LLaMA 2 preset); for routed experts choose "
            + " or ".join(f"**{k}**" for k, row in AXES["ffn"].choices.items() if row.routed) + " (or the Mixtral preset).")

st.header("Mixture of experts")
if kind.routed and not routed_layer:
    st.info(f"Layer {layer} is dense (this model keeps a gated FFN there): choose one of layers "
            f"{_routed_words(cfg)} to see its router.")
elif kind.routed:
    probs = arrays[mlp("hook_router_probs")][0]  # (T, E)
    chosen = arrays[mlp("hook_expert_indices")][0]  # (T, k)
    load = arrays[mlp("hook_expert_load")]  # (E,)
    aux = float(arrays[mlp("hook_aux_loss")])
    col1, col2 = st.columns([3, 2])
    show_chart(router(probs, chosen, labels), key="moe_router", where=col1)
    show_chart(expert_load(load), key="moe_load", where=col2)
    col2.metric("load-balancing loss E · Σ load_e · mean prob_e", f"{aux:.3f}",
                help="1.0 when load and router probability are spread evenly; higher when a few experts take most "
                     "tokens. Added to the training loss so the router learns to spread the work.")
    router_words = AXES["router"].choices[cfg.router].does
    shared = (f" Every token also passes through {cfg.n_shared_experts} shared expert"
              f"{'s' if cfg.n_shared_experts > 1 else ''}, which no router chooses." if cfg.n_shared_experts else "")
    st.caption(f"Each token goes to its top-{cfg.top_k} of {cfg.n_experts} experts (circled); router: "
               f"{axes.label('router', cfg.router)}, {router_words}." + shared
               + " Untrained, the router is close to uniform.")
    routing = pd.DataFrame({"token": [f"{t}:{label}" for t, label in enumerate(labels)],
                            **{f"expert #{j + 1}": chosen[:, j] for j in range(chosen.shape[1])},
                            **{f"p(expert {e})": np.round(probs[:, e], 3) for e in range(probs.shape[1])}})
    st.download_button("Download the routing (CSV)", on_click="ignore", file_name="routing.csv", mime="text/csv",
                       data=lambda: routing.to_csv(index=False))
else:
    st.info("The sidebar's model has a dense FFN. Choose "
            + " or ".join(f"**{k}**" for k, row in AXES["ffn"].choices.items() if row.routed)
            + " in the sidebar's FFN box (or the Mixtral preset) to see the router's probabilities, its top-k choices "
              "and the experts' load on your input.")

st.subheader("Total vs active parameters")
mixtral = MODEL_CARDS["mixtral"]
rows = []
for name, model_cfg, published in [("the sidebar's model", cfg, None),
                                   ("Mixtral 8x7B (real size)", mixtral.real["8x7B"],
                                    (mixtral.published_params["8x7B"], mixtral.published_active["8x7B"]))]:
    counts = param_counts(model_cfg)
    rows.append({"model": name, "FFN": axes.label("ffn", model_cfg.ffn),
                 "experts (top-k)": (f"{model_cfg.n_experts} (top-{model_cfg.top_k})" if model_cfg.row("ffn").routed
                                     else "—"),
                 "total": f"{counts['total']:,}", "active per token": f"{counts['active']:,}",
                 "active share": f"{counts['active'] / counts['total']:.0%}",
                 "published total / active":
                     f"{published[0] / 1e9:.1f}B / {published[1] / 1e9:.1f}B" if published else "—"})
st.dataframe(pd.DataFrame(rows), hide_index=True)
st.caption("Mixtral stores 8 SwiGLU experts per layer but each token runs 2: about 47B parameters to hold in memory, "
           "about 13B of compute per token — a 13B model's speed with far more capacity.")
