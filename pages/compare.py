"""Compare: the sidebar's model (A) against a variant (B) on the same input, side by side and as a difference."""
import pandas as pd
import streamlit as st

from transformer import AXES, MODEL_CARDS, PRESETS, choices, costs, kv_cache_bytes_per_token, param_counts
from transformer.axes import label
from transformer.hooks import attention_stacks
from transformer.probes import with_position
from ui.figures.block import per_position
from ui.figures.base import side_by_side
from ui.compute.layers import HYBRID, SOFTMAX, with_attention_layers
from ui.compute.measure import output_comparison
from ui.app.page import load_page
from ui.app.charts import show_chart
from ui.app.tabs import lazy_tabs, when_open
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.model_cache import get_trace
from ui.compute.tokens import encode_text
from ui.compute.weights import weights_info

SAME = "same"  # an axis of B left equal to its base
FIELDS = {"cmp_arch": "arch", "cmp_position": "position", "cmp_norm": "norm", "cmp_place": "norm_position",
          "cmp_ffn": "ffn"}  # widget key -> the config field B may change
url_state("cmp", cmp_base="A", cmp_kv=SAME, cmp_layers=SAME, cmp_layer=0, cmp_head=0,
          **{k: SAME for k in FIELDS} | {"cmp_position": "rope"}, cmp_tab=str)  # cmp_tab: the open tab (lazy_tabs below)
keep_valid("cmp_base", ["A", *PRESETS], "A")
for key, field in FIELDS.items():
    keep_valid(key, [SAME, *choices(field)], SAME)

ctx = load_page("Compare two configurations", """
**The problem.** Each axis is a trade: GQA saves memory, RoPE changes how distance enters the scores, MoE adds
parameters but not compute. Seeing the trade needs two models on the same input.

**The idea.** A is the sidebar's model. B starts as A (or as a preset) and changes the axes you pick below. Both are
built from the same seed and read the same text.

**What to look at.** The same layer and head of both, and their difference; the cost of each (parameters, FLOPs,
KV cache per token); how their next-token distributions differ (entropy, and KL(A‖B) per position).
""")
cfg_a = ctx.state.config

st.header("Configuration B")
st.selectbox("B starts from", ["A", *PRESETS], key="cmp_base", **KEEP,
             format_func=lambda k: "A (the sidebar's model)" if k == "A" else f"preset: {MODEL_CARDS[k].name}")
base = cfg_a if st.session_state["cmp_base"] == "A" else PRESETS[st.session_state["cmp_base"]]
columns = st.columns(len(FIELDS) + 2)


def choice_words(field: str, value: str) -> str:
    """How a B option reads: the axis's label for a choice, "= <A's label>" for "same" (anything else as it is)."""
    if value == SAME:
        return f"= {label(field, getattr(base, field))}"
    return label(field, value) if value in AXES[field].choices else value


for col, (key, field) in zip(columns, FIELDS.items()):
    col.selectbox(AXES[field].title, [SAME, *choices(field)], key=key, **KEEP,
                  format_func=lambda v, f=field: choice_words(f, v))
kv_options = [SAME, *(str(g) for g in range(1, base.n_heads + 1) if base.n_heads % g == 0)]
keep_valid("cmp_kv", kv_options, SAME)
columns[-2].selectbox(AXES["kv_heads"].title, kv_options, key="cmp_kv", **KEEP,
                      format_func=lambda v: f"= {base.n_kv_heads}" if v == SAME else v)
# each layer's kind: softmax everywhere, the 3:1 hybrid, or the linear kind everywhere (as the sidebar offers them)
layer_words = {SOFTMAX: "softmax", HYBRID: "3 linear : 1 softmax", base.linear_kind: "all linear"}
keep_valid("cmp_layers", [SAME, *layer_words], SAME)
columns[-1].selectbox("Attention layers", [SAME, *layer_words], key="cmp_layers", **KEEP,
                      format_func=lambda v: f"= {base.attention_layers}" if v == SAME else layer_words[v],
                      help="a full-attention model against its hybrid: B's layers, with the linear kind of A (the "
                           "sidebar's Linear kind); every other weight is drawn from the same seed")
changes = {field: st.session_state[key] for key, field in FIELDS.items() if st.session_state[key] != SAME}
if st.session_state["cmp_kv"] != SAME:
    changes["n_kv_heads"] = int(st.session_state["cmp_kv"])
if AXES["arch"].row(changes.get("arch", base.arch)).cross:
    changes["parallel_block"] = False  # a parallel block has no place for cross-attention
try:
    # a position scheme (or an architecture) B cannot keep drops what only fits the old one: RoPE's details, MLA
    cfg_b = with_position(base, changes.pop("position", base.position), **changes)
    if st.session_state["cmp_layers"] != SAME:
        cfg_b = with_attention_layers(cfg_b, st.session_state["cmp_layers"])
    if ctx.tokens.pieces:  # A reads learned pieces (BPE, a Hugging Face tokenizer): B reads the same, a row for each
        cfg_b = cfg_b.replace(vocab_size=cfg_a.vocab_size)
except ValueError as exc:
    st.error(f"Configuration B is impossible: {exc}")
    st.stop()
trace_a = ctx.trace
if cfg_b == cfg_a:
    st.info("B is identical to A: change an axis above (or pick a preset) to compare.")
else:  # where B's weights come from, said once above every figure: a trained A against a random B is no fair test
    info_a, info_b = weights_info(ctx.state.config_json, ctx.state.weights), weights_info(cfg_b.to_json())
    if info_b.kind == "trained":
        st.success(f"B's weights are trained too: {info_b.label}.", icon=":material/school:")
    elif info_a.kind != "random":
        st.warning(f"B's weights are random (seed {ctx.state.seed}): no shipped checkpoint has B's axes and sizes. "
                   "A's are trained, so most of any difference below is training, not the axis you changed: "
                   "compare B with A's own axes on random weights (a preset with no checkpoint) to see the axis "
                   "alone.", icon=":material/casino:")
st.caption("Parameters created in the same order with the same shapes get the same random values, so when an axis "
           "adds no parameters (RoPE vs ALiBi, pre vs post, LayerNorm vs RMSNorm) A and B share their weights and only "
           "the axis differs.")


def b_trace():
    """B run on the text: the very same tokens when the vocabularies agree, else the text in B's own tokens (its
    checkpoint's task, or characters); on a model B cannot build or run, an error and a stop."""
    try:
        tokens_b = ctx.tokens if cfg_b.vocab_size == cfg_a.vocab_size else encode_text(ctx.state.text, cfg_b.to_json())
        return get_trace(cfg_b.to_json(), ctx.state.seed, tuple(tokens_b.ids), tuple(tokens_b.labels))
    except (ValueError, MemoryError) as exc:
        st.error(f"Configuration B is impossible: {exc}")
        st.stop()


# --- the three views, one tab each: a rerun computes and draws only the open tab's ------------------------------
# (a sidebar change ran B and drew all five charts; the cost table needs no run of B at all)
attention_tab, cost_tab, outputs_tab = lazy_tabs(["Attention, side by side", "Cost", "Next-token distributions"],
                                                 key="cmp_tab")

for _ in when_open(attention_tab):
    trace_b = b_trace()
    st.header("Attention, side by side")
    n_layers, n_heads = min(cfg_a.n_layers, cfg_b.n_layers), min(cfg_a.n_heads, cfg_b.n_heads)
    keep_valid("cmp_layer", range(n_layers), 0)
    keep_valid("cmp_head", range(n_heads), 0)
    col1, col2 = st.columns(2)
    col1.selectbox("Layer", range(n_layers), key="cmp_layer", **KEEP)
    col2.selectbox("Head", range(n_heads), key="cmp_head", **KEEP)
    layer, head = st.session_state["cmp_layer"], st.session_state["cmp_head"]
    convolutions = [name for name, cfg in (("A", cfg_a), ("B", cfg_b)) if cfg.layer_plan()[layer].row.conv_only]
    if convolutions:  # LFM2's conv layers weigh no token against another
        st.info(f"Layer {layer} of {' and '.join(convolutions)} is a gated short convolution: it has no attention "
                "weights to compare. Each channel adds up its own last few inputs by fixed weights; pick another "
                "layer.")
        continue
    weights, kinds = {}, {}
    for name, cfg, trace in (("A", cfg_a, trace_a), ("B", cfg_b, trace_b)):
        weights[name] = trace.pattern(layer, attention_stacks(cfg.arch).input)[head]  # (T, T)
        kinds[name] = cfg.layer_plan()[layer].row
    implied = [name for name, row in kinds.items() if not row.softmax]
    # A, B and their difference in one figure: one chart for the browser to draw, not three
    show_chart(side_by_side(weights["A"], weights["B"], trace_a.src_labels, trace_b.src_labels,
                            f"layer {layer}, head {head}: A ({kinds['A'].label}), B ({kinds['B'].label}) and B − A",
                            signed=bool(implied)), key="cmp_patterns")
    if implied:
        st.warning(f"Layer {layer} of {' and '.join(implied)} keeps a state: its map holds the **implied weights**, "
                   "the matrix whose product with V is the layer's read. They are not a softmax: a row need not sum "
                   "to 1 and a weight may be negative, so A and B share a scale centred on a white 0 here.", icon=":material/warning:")
    if weights["A"].shape != weights["B"].shape:
        st.caption(f"No difference map: A's matrix is {weights['A'].shape} and B's {weights['B'].shape}.")
    if cfg_a.row("arch").cross or cfg_b.row("arch").cross:
        st.caption("For an encoder-decoder the maps show its encoder's self-attention, which reads the same text.")

for _ in when_open(cost_tab):
    st.header("Cost")
    context = len(ctx.tokens.ids)
    rows = {}
    for name, cfg in (("A", cfg_a), ("B", cfg_b)):
        counts = param_counts(cfg)
        rows[name] = {
            "axes": f"{label('arch', cfg.arch)} · {label('kv_heads', cfg.attention_kind)} "
                    + (f"({cfg.n_heads} q / latent {cfg.kv_rank}) · " if cfg.row("kv_heads").latent
                       else f"({cfg.n_heads} q / {cfg.n_kv_heads} kv) · ")
                    + f"{label('position', cfg.position)} · {label('norm', cfg.norm)} "
                      f"({label('block', 'parallel') if cfg.parallel_block else label('norm_position', cfg.norm_position)})"
                      f" · {label('ffn', cfg.ffn)}",
            "parameters": f"{counts['total']:,}",
            "active parameters per token": f"{counts['active']:,}",
            f"forward FLOPs per token (context {context})": f"{costs.forward_flops_per_token(cfg, context):,}",
            "KV cache per token (fp16 bytes)": f"{kv_cache_bytes_per_token(cfg):,}",
            "states of the linear layers (fp16 bytes, whatever the length)":
                f"{costs.kv_cache_bytes(cfg, context)['state layers']:,}",
        }
    st.dataframe(pd.DataFrame(rows))
    st.caption("FLOPs per token = 2 × the parameters a token multiplies by (embedding lookups excluded, MoE: only the "
               "top-k experts) + 4 × keys seen × n_heads × d_head per attention layer (q·K and weights·V); see "
               "`transformer.costs.forward_flops_per_token`.")

for _ in when_open(outputs_tab):
    trace_b = b_trace()
    st.header("Next-token distributions")
    out = output_comparison(trace_a.logits, trace_b.logits)
    positions = trace_a.tgt_labels
    show_chart(per_position({"A": out["entropy_a"], "B": out["entropy_b"]}, positions,
                            "entropy of the next-token distribution", "entropy (nats)"), key="cmp_entropy")
    same_inputs = trace_a.tgt_labels == trace_b.tgt_labels
    if "kl" in out and same_inputs:
        show_chart(per_position({"KL(A ‖ B)": out["kl"]}, positions, "how far B's prediction is from A's",
                                "KL (nats)"), key="cmp_kl")
        st.download_button("Download entropy and KL (CSV)", on_click="ignore", file_name="compare.csv", mime="text/csv",
                           data=lambda: pd.DataFrame({"token": positions, "entropy_A": out["entropy_a"],
                                                      "entropy_B": out["entropy_b"],
                                                      "KL_A_B": out["kl"]}).to_csv(index=False))
    else:
        st.caption("KL(A‖B) needs both models to predict over the same vocabulary from the same inputs; here they "
                   "differ (an encoder-decoder's decoder reads its own greedy output).")
