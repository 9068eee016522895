"""Attention playground: every head's weights, one head's stages, where one query looks, and the position term."""
import numpy as np
import plotly.graph_objects as go
import streamlit as st

from transformer import AXES, axes
from transformer.attention import Attention
from transformer.positions import alibi_slopes
from ui.figures.diagram import architecture_dot
from ui.app.export import heatmaps_png, trace_npz
from ui.figures.base import arcs, head_grid
from ui.app.page import load_page
from ui.app.charts import show_chart
from ui.app.tabs import lazy_tabs, when_open
from ui.compute.model_cache import Ablation, get_trace
from ui.compute.predictions import actual_next, fill_in, masked_each, predict
from ui.compute.weights import weights_info
from ui.app.page_controls import KEEP, keep_valid, url_state, write_url
from ui.app.state import use_text
from ui.figures.playground import (KINDS_OF_ARCH, Stage, actual_next_figure, attention_view, cross_arcs,
                                   entropy_figure, head_stages, label_grid_axes, next_token_bars, query_bars,
                                   rope_figure, routing_figure, stage_figure, visible_keys)
from ui.figures.state import implied_row
from ui.app.source import five_lines, source_of


# prompts whose continuations a model of everyday English writes in words
EXAMPLE_PROMPTS = ("The children walked to the river and ", "A person who ", "She opened the door and ",
                   "A small boat used for ")

# The two figures with one trace per head or per key are the slow ones to build: each is kept for
# the numbers it draws, so clicking through heads and queries reuses them (the page never changes them).
@st.cache_resource(max_entries=64, show_spinner=False)
def layer_grid(patterns: np.ndarray, mask: np.ndarray | None, key_labels: tuple, query_labels: tuple,
               n_kv_heads: int, signed: bool = False) -> go.Figure:
    grid = head_grid(patterns, list(key_labels), list(query_labels), n_kv_heads, mask=mask, signed=signed)
    grid.update_annotations(font_size=13)  # the subplot titles, kept apart on narrow screens
    return label_grid_axes(grid, "key", "query")


@st.cache_resource(max_entries=256, show_spinner=False)
def query_arcs(weights: np.ndarray, key_labels: tuple, query_labels: tuple, query: int, cross: bool) -> go.Figure:
    if cross:
        return cross_arcs(weights, list(query_labels), list(key_labels), query)
    return arcs(weights, list(key_labels), query)


ctx = load_page("Attention playground",
                "Switch the axes in the sidebar and watch the scores, the mask and the softmax weights change. "
                "Pick a layer, a head and a query token below.")
cfg, trace, state = ctx.state.config, ctx.trace, ctx.state
url_state("playground", attn=str, layer=int, head=int, query=int, off=str, temperature=float, sample_top_k=int, sample=int,
          hide=int, play_tab=str)  # play_tab: the open tab (lazy_tabs below)

# --- parts switched off: every view on the page follows -------------------------------------------
routed = cfg.row("ffn").routed
parts = {f"L{spec.index}H{head}": ("head", spec.index, head) for spec in cfg.layer_plan()
         for head in range(0 if spec.row.conv_only else cfg.state_heads if spec.row.keeps_state else cfg.n_heads)}
if routed:  # the experts of every routed layer (a model's first dense layers have none)
    parts |= {f"L{layer}E{e}": ("expert", layer, e) for layer in range(cfg.n_layers) if cfg.layer_is_moe(layer)
              for e in range(cfg.n_experts)}
if "switched_off" not in st.session_state:
    st.session_state["switched_off"] = str(st.session_state.get("off", "")).split(",")
st.session_state["switched_off"] = [p for p in st.session_state["switched_off"] if p in parts]
st.subheader("Switch parts off")
st.multiselect("Heads (L1H2 = layer 1, head 2)" + (" and experts (L0E3 = layer 0, expert 3)" if routed else ""),
               list(parts), key="switched_off", **KEEP, placeholder="every part on",
               help="A switched-off head adds nothing to the residual stream (its output z is zeroed); "
                    "a switched-off expert is never chosen (its router logit is −∞). Every view on this page "
                    "follows.")
off = [parts[p] for p in st.session_state["switched_off"]]
ablation = Ablation(heads=tuple((l, i) for kind, l, i in off if kind == "head"),
                    experts=tuple((l, i) for kind, l, i in off if kind == "expert"))
if routed and any(len([e for l, e in ablation.experts if l == layer]) > cfg.n_experts - cfg.top_k
                  for layer in range(cfg.n_layers)):
    st.error(f"Each token needs its top {cfg.top_k} experts: switch off at most {cfg.n_experts - cfg.top_k} "
             "experts per layer.")
    ablation = Ablation(heads=ablation.heads)
st.session_state["off"] = ",".join(st.session_state["switched_off"])
if ablation:
    trace = get_trace(state.config_json, state.seed, tuple(ctx.tokens.ids), tuple(ctx.tokens.labels), state.weights,
                      ablation)
labels = {"src": trace.src_labels, "tgt": trace.tgt_labels}

# --- the page's controls, kept in the URL ---------------------------------------------------
kinds = KINDS_OF_ARCH[cfg.arch]
keep_valid("attn", kinds, default="cross" if "cross" in kinds else None)
view = attention_view(st.session_state["attn"])
query_labels, key_labels = labels[view.queries], labels[view.keys]
keep_valid("layer", range(cfg.n_layers), default=cfg.n_layers - 1)  # the last layer: the trained models' clearest heads
plan = cfg.layer_plan()
state_layer = view.module == "attn" and plan[st.session_state["layer"]].row.keeps_state
n_heads = cfg.state_heads if state_layer else cfg.n_heads  # a layer that keeps a state has its own head count
keep_valid("head", range(n_heads))
keep_valid("query", range(len(query_labels)), default=len(query_labels) - 1)  # the last token has the most to see

columns = st.columns([2, 1, 1, 2] if len(kinds) > 1 else [1, 1, 2])
if len(kinds) > 1:
    columns[0].selectbox("Attention", kinds, key="attn", **KEEP, format_func=lambda k: attention_view(k).label)
    columns = columns[1:]
group = cfg.state_heads // cfg.state_key_heads if state_layer else cfg.group_size
shared = "q and k head" if state_layer else "kv head"  # what a group of heads shares in this layer
columns[0].selectbox("Layer", range(cfg.n_layers), key="layer", **KEEP)
columns[1].selectbox("Head", range(n_heads), key="head", **KEEP, format_func=lambda h: f"{h} ({shared} {h // group})")
columns[2].selectbox("Query token", range(len(query_labels)), key="query", **KEEP,
                     format_func=lambda i: f"{i}: {query_labels[i]}")
write_url()  # "off" is set above, from the switches
layer, head, query = st.session_state["layer"], st.session_state["head"], st.session_state["query"]
if view.module == "attn" and plan[layer].row.conv_only:  # LFM2's conv layers weigh no token against another
    st.info(f"Layer {layer} is a {plan[layer].row.label}: it has no attention weights to draw. Each of its "
            f"{cfg.d_model} channels adds up its own last {cfg.linear_conv_size} inputs by fixed weights, gated in and "
            "out by the token (the hooks `attn.hook_conv_*`). Pick a softmax layer to see weights.")
    st.stop()
patterns = trace.arrays[view.hook(layer, "hook_pattern")][0]  # (H, T_q, T_kv)
# a layer that keeps a state has no scores, mask or softmax: its hook_pattern holds the implied weights
spec = plan[layer] if view.module == "attn" else None
implied = spec is not None and not spec.row.softmax
if implied:
    sums = patterns.sum(-1)  # (H, T_q)
    st.warning(f"Layer {layer} is {spec.row.label}: it keeps a state instead of weighing keys by a softmax. Its "
               "views show the **implied weights**, the matrix whose product with V is the layer's read. They are "
               f"not a softmax: a row need not sum to 1 (here the rows sum to {sums.min():.3g} … {sums.max():.3g}) "
               "and a weight may be negative (blue) or above 1. The State page shows the state itself.", icon=":material/warning:")

# --- the views, one tab each: a rerun computes and draws only the open tab's ---------------------------
# (a sidebar change redrew a dozen charts and sampled 40 tokens to show the few on screen)
grid_tab, stages_tab, query_tab, prediction_tab, position_tab = lazy_tabs(
    ["Every head", "One head, stage by stage", "Where one query looks", "Prediction", "Position, experts, the model"],
    key="play_tab")

# --- every head of the layer ---------------------------------------------------------------------
for _ in when_open(grid_tab):
    st.subheader(f"Layer {layer}: {view.label}")
    sharing = AXES["kv_heads"].choices[cfg.attention_kind].does
    if 1 < group < cfg.n_heads:  # query heads in groups: one group per row
        sharing += f"; here H/G = {group}, one group per row of the grid"
    if implied:
        st.caption(f"Implied weights of all {patterns.shape[0]} heads: blue below 0, orange above, white exactly 0 "
                   f"(every key after the query: the state holds only the past). Rows: {view.y_title}; columns: "
                   f"{view.x_title}.")
    else:
        st.caption(f"Softmax weights of all {cfg.n_heads} heads ({axes.label('kv_heads', cfg.attention_kind)}: "
                   f"{sharing}). Rows: {view.y_title}; columns: {view.x_title}. Blank cells are masked.")
    sink_name = view.hook(layer, "hook_sink_share")
    if sink_name in trace.arrays:  # a sink takes part of each row's weight: the rows sum to less than 1
        taken = trace.arrays[sink_name][0]  # (H, T_q)
        st.caption(f"This model's heads have a sink ({AXES['scores'].choices['sinks'].does}), so a row's weights "
                   f"sum to 1 minus the sink's share: here the sink takes {taken.min():.0%}–{taken.max():.0%} "
                   "of a row.")
    layer_window = cfg.layer_windows()[layer] if view.module == "attn" else None
    if layer_window and len(key_labels) <= layer_window:
        st.caption(f"The sliding window is {layer_window} tokens, so it covers this whole {len(key_labels)}-token "
                   f"text: every earlier key is inside it, and the mask is plain causal here. A text of more than "
                   f"{layer_window} tokens shows the band; the Masks page draws it at any size.")
    elif cfg.sliding_window and view.module == "attn" and layer_window is None:
        st.caption(f"Layer {layer} is a global layer: its queries see every earlier key. The local layers "
                   f"({cfg.layer_pattern!r}) keep a window of {cfg.sliding_window} tokens.")
    layer_mask = None if implied else trace.arrays[view.hook(layer, "hook_mask")][0]  # (1 or H, T_q, T_kv)
    show_chart(layer_grid(patterns, layer_mask, tuple(key_labels), tuple(query_labels),
                          cfg.state_key_heads if implied else cfg.n_kv_heads, implied), key="head_grid")

# --- one head, stage by stage, under the five lines that computed it ------------------------------
for _ in when_open(stages_tab):
    st.subheader(f"Head {head}, stage by stage")
    if implied:  # no five lines here: the layer's own formula for the matrix its read equals
        st.latex(spec.row.formulas["hook_pattern"])
        st.caption(f"{spec.row.label}: {spec.row.does}. No scores, mask or softmax are computed; the implied weights "
                   "below come from the same matrices as its chunked form, and the read is exactly them times V.")
        show_chart(stage_figure(Stage("hook_pattern", "implied weights (not a softmax)", patterns[head], "signed"),
                                key_labels, query_labels, view.x_title, view.y_title), key="stage_hook_pattern")
        continue
    st.code(five_lines(), language="python", wrap_lines=True)
    st.caption("The library's own lines (`Attention.explicit_attention`). Each heatmap below is a tensor they "
               "produced, recorded at a hook point: `hook_raw_scores` (line 1), `hook_mask` and, with ALiBi, "
               "`hook_alibi_bias` (T5: `hook_rel_bias`, added in line 2), `hook_attn_scores` (line 2's result) and `hook_pattern` (line 3).")
    with st.expander("The whole method, `Attention.explicit_attention`"):
        st.code(source_of(Attention.explicit_attention), language="python")
    stages = head_stages(trace.arrays, view, layer, head)
    per_row = 3 if len(stages) > 4 else 2
    for start in range(0, len(stages), per_row):
        for column, stage in zip(st.columns(per_row), stages[start:start + per_row]):
            show_chart(stage_figure(stage, key_labels, query_labels, view.x_title, view.y_title),
                       key=f"stage_{stage.hook}", where=column)
    st.download_button(
        "Download this head's stages (PNG)", key="download_png", on_click="ignore", mime="image/png",
        file_name=f"layer{layer}_head{head}_{st.session_state['attn']}.png",
        data=lambda: heatmaps_png([(s.title, s.matrix, s.style) for s in stages], key_labels, query_labels,
                                  title=f"{ctx.state.preset} · layer {layer} · head {head} · {view.label}",
                                  x_title=view.x_title, y_title=view.y_title))

# --- where one query looks ------------------------------------------------------------------------
for _ in when_open(query_tab):
    st.subheader(f"Query {query} '{query_labels[query]}'")
    weights = patterns[head, query]  # (T_kv,)
    if implied:  # arcs and entropy read a row as a distribution; implied weights are none
        show_chart(implied_row(weights[: query + 1], key_labels[: query + 1], query_labels[query]), key="query_bars")
        st.caption("The arcs and the entropy per head read a row as a distribution over the keys, which implied "
                   "weights are not (they may be negative and need not sum to 1): they are left out for this layer.")
        continue
    n_visible = visible_keys(trace.arrays[view.hook(layer, "hook_mask")][0, 0, query])
    bar_col, arc_col = st.columns(2)
    show_chart(query_bars(weights, key_labels, query_labels[query]), key="query_bars", where=bar_col)
    show_chart(query_arcs(weights, tuple(key_labels), tuple(query_labels), query, view.module == "cross_attn"),
               key="query_arcs", where=arc_col)
    show_chart(entropy_figure(patterns, query, n_visible), key="entropy")

# --- what the model predicts next, and what the parts switched off change -----------------------------
for _ in when_open(prediction_tab):
    predict_col, ablate_col = st.columns([1, 1])
    if cfg.row("arch").next_token:
        with predict_col:
            st.subheader("Next token")
            col1, col2, col3 = st.columns(3)
            keep_valid("temperature", [x / 10 for x in range(0, 21)], default=0.8)
            keep_valid("sample_top_k", range(1, 21), default=5)
            keep_valid("sample", range(0, 1000), default=0)
            col1.select_slider("Temperature", [x / 10 for x in range(0, 21)], key="temperature", **KEEP,
                               help="0 picks the most likely token every time; higher flattens the distribution.")
            col2.number_input("Top-k", min_value=1, max_value=20, key="sample_top_k", **KEEP,
                              help="Sample only among the k most likely tokens.")
            col3.number_input("Sample", min_value=0, max_value=999, key="sample", **KEEP,
                              help="Another seed, another sample.")
            prediction = predict(state.config_json, state.seed, tuple(ctx.tokens.ids), state.weights, ablation,
                                 st.session_state["temperature"], st.session_state["sample_top_k"], 40,
                                 st.session_state["sample"])
            show_chart(next_token_bars(prediction.top), key="next_token")
            st.markdown("**Continuation** (sampled with the KV cache, "
                        + ("greedy" if not st.session_state["temperature"]
                           else f"temperature {st.session_state['temperature']}, top-{st.session_state['sample_top_k']}")
                        + "):")
            st.text(prediction.continuation_text or "(no room left: the model's position table ends here)")
            if weights_info(state.config_json, state.weights).task == "language":
                st.caption("Try a prompt (it replaces the text in the sidebar):")
                for column, prompt in zip(st.columns(len(EXAMPLE_PROMPTS)), EXAMPLE_PROMPTS):
                    column.button(prompt.strip() + " …", key=f"prompt_{prompt}", on_click=use_text, args=(prompt,),
                                  width="stretch")
        with ablate_col:
            ids = (state.config_json, state.seed, tuple(ctx.tokens.ids), state.weights)
            show_chart(actual_next_figure(labels["src"], actual_next(*ids),
                                          actual_next(*ids, ablation) if ablation else None), key="actual_next")
            st.caption("Switch off a previous-token head (a bright stripe just below the diagonal) and watch the "
                       "probabilities fall all along the text; on a repeated sentence, switch off an induction head "
                       "and the second copy gets harder to predict (on an induction checkpoint, Trained on: induction, "
                       "it stops being predicted at all). " + weights_info(state.config_json, state.weights).heads)
    elif weights_info(state.config_json, state.weights).task == "language" and len(ctx.tokens.ids) > 1:
        # BERT: fill in a blank
        ids = tuple(ctx.tokens.ids)
        with predict_col:
            st.subheader("Fill in a hidden character")
            positions = list(range(1, len(ids)))
            keep_valid("hide", positions, default=positions[len(positions) // 2])
            st.select_slider("Character to hide", positions, key="hide", **KEEP,
                             format_func=lambda i: f"{i}: {labels['src'][i]}",
                             help="The model sees <mask> in its place and guesses it from both sides.")
            hidden = st.session_state["hide"]
            shown = "".join(labels["src"][1:hidden]) + "▢" + "".join(labels["src"][hidden + 1:])
            st.text(shown)
            show_chart(next_token_bars(fill_in(state.config_json, state.seed, ids, hidden, state.weights, ablation),
                                       title=f"guesses for the hidden {labels['src'][hidden]!r}"), key="fill_in")
        with ablate_col:
            each = (state.config_json, state.seed, ids, state.weights)
            show_chart(actual_next_figure(labels["src"], masked_each(*each), masked_each(*each, ablation) if ablation
                                          else None, title="probability of each character, hidden in turn",
                                          x_title="the character hidden"), key="masked_each")
            st.caption("BERT reads the whole text at once, so a hidden character is guessed from the characters on "
                       "both sides: switch off the heads that look at its neighbours and watch the guesses fall. "
                       + weights_info(state.config_json, state.weights).heads)
    else:
        predict_col.caption("Next-token prediction needs a decoder; this model reads the whole text at once.")

# --- the position term and the router, next to the architecture ------------------------------
for _ in when_open(position_tab):
    detail_col, diagram_col = st.columns([2, 1])
    with detail_col:
        st.subheader("Position")
        alibi_name, rope_name = view.hook(layer, "hook_alibi_bias"), view.hook(layer, "hook_rope_angles")
        learned_bias_name = view.hook(layer, "hook_rel_bias")
        if rope_name in trace.arrays:
            show_chart(rope_figure(trace.arrays[rope_name][0], query_labels), key="rope")
            part = (f" (here the first {cfg.d_rope} of each head's {cfg.d_head} dimensions; the rest pass unturned)"
                    if cfg.d_rope < cfg.d_head else "")
            st.caption(f"{axes.label('position', cfg.position)} rotates each pair of q and k dimensions by "
                       f"position × θᵢ{part}, so q·k depends on the distance between the tokens only.")
        elif alibi_name in trace.arrays:
            st.caption(f"{axes.label('position', cfg.position)} adds −m_h·|i−j| to the scores: see the bias panel in "
                       f"One head, stage by stage. Each head has its own slope; head {head}'s is "
                       f"m = {float(alibi_slopes(cfg.n_heads)[head]):.4f}.")
        elif learned_bias_name in trace.arrays:
            st.caption(f"{axes.label('position', cfg.position)} adds a learned number per head and bucket of distance "
                       "to the scores (see the bias panel in One head, stage by stage): one table per stack, the same "
                       "bias in every layer; the Positions page draws it against distance.")
        elif implied:
            st.caption(f"Layer {layer} is {spec.row.label}: it turns no q and k, as its state holds no keys to turn; "
                       "it knows order from the order in which the tokens write into its state.")
        elif spec is not None and not spec.rotates and cfg.row("position").rotates_qk:
            warmer = (" Instead, q is scaled up with its position (Llama 4's inverse temperature), keeping far "
                      "queries sharp." if cfg.attn_temperature_scale is not None else "")
            st.caption(f"Layer {layer} is a layer without positions (NoPE): unlike the model's other layers, it turns "
                       f"no q and k. It knows order only from what the {axes.label('position', cfg.position)} layers "
                       f"below wrote into its inputs, and from the causal mask.{warmer}")
        elif view.module == "cross_attn":
            st.caption("Cross-attention adds no position term: the decoder and the encoder each placed their tokens "
                       "before this step.")
        else:
            does = AXES["position"].choices[cfg.position].does
            st.caption(f"{does[:1].upper()}{does[1:]}.")

        router_name = view.ffn_hook(layer, "hook_router_probs")
        if router_name in trace.arrays:
            st.subheader(f"Mixture of experts, layer {layer}")
            show_chart(routing_figure(trace.arrays[router_name][0],
                                      trace.arrays[view.ffn_hook(layer, "hook_expert_indices")][0], query_labels),
                       key="routing")
            load = trace.arrays[view.ffn_hook(layer, "hook_expert_load")]
            st.caption("Share of token slots per expert: "
                       + ", ".join(f"expert {e} {share:.0%}" for e, share in enumerate(load)))
        st.subheader("Download")
        st.download_button("The whole trace (.npz)", key="download_npz", on_click="ignore",
                           mime="application/octet-stream", file_name="trace.npz",
                           data=lambda: trace_npz(trace.arrays))
        st.caption("Every recorded tensor by hook name: `numpy.load('trace.npz')['blocks.0.attn.hook_pattern']`.")

    with diagram_col:
        st.subheader("The model")
        highlight = {"self": "attn", "encoder": "enc_attn", "decoder": "attn",
                     "cross": "cross"}[st.session_state["attn"]]
        st.graphviz_chart(architecture_dot(cfg, highlight=highlight))
