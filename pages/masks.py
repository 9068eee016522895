"""Masks: none, causal, padding, sliding window and cross-attention, each next to the weights it produces."""
import numpy as np
import streamlit as st

from ui.figures.axes import mask_and_weights
from ui.compute.measure import cross_attention, encoder_decoder_twin, masked_attention, padded_attention, to_json
from ui.app.page import load_page
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.runtime import tokenize

MAX_SHOWN = 24  # tokens per matrix: enough to see the pattern, few enough to read every cell
url_state("mask", mask_layer=0, mask_head=0, mask_w=3, mask_text2="a dog ran")
keep_valid("mask_w", range(1, 65), 3)
st.session_state["mask_text2"] = str(st.session_state["mask_text2"])[:MAX_SHOWN]

ctx = load_page("Masks: who may look at whom", f"""
**The problem.** Attention lets every query look at every key. A decoder must not see the tokens it is about to
predict, padding added to batch texts of different lengths must be invisible, long inputs cost T² and a decoder
reading an encoder needs queries and keys from different sequences.

**The idea.** Add a mask to the scores before softmax: 0 where attention is allowed, a huge negative number where it
is not. The library uses the most negative float32, {np.finfo(np.float32).min:.7g}, rather than −inf (a row with
nothing allowed then gets uniform weights instead of NaN). `exp` of it underflows to **exactly 0.0**.

**What to look at.** Each mask (grey = masked) next to the weights the live model computes under it; the masked cells'
largest weight, which is 0.0 — not small, zero.
""")
cfg = ctx.state.config
col1, col2 = st.columns(2)
keep_valid("mask_layer", range(cfg.n_layers), 0)
keep_valid("mask_head", range(cfg.n_heads), 0)
col1.selectbox("Layer", range(cfg.n_layers), key="mask_layer", **KEEP)
col2.selectbox("Head", range(cfg.n_heads), key="mask_head", **KEEP)
layer, head = st.session_state["mask_layer"], st.session_state["mask_head"]
ids, labels = tuple(ctx.tokens.ids[:MAX_SHOWN]), ctx.tokens.labels[:MAX_SHOWN]
if len(ctx.tokens.ids) > MAX_SHOWN:
    st.caption(f"The matrices show the first {MAX_SHOWN} tokens of the input.")
if cfg.arch == "encoder-decoder":
    st.caption("This is an encoder-decoder: the self-attention masks below are applied to its encoder.")


def show(additive: np.ndarray, weights: np.ndarray, x_labels, y_labels, title: str, key: str) -> None:
    """The figure and the proof: masked cells get weight 0.0 exactly, every row still sums to 1."""
    st.plotly_chart(mask_and_weights(additive, weights[head], x_labels, y_labels, title), key=key)
    masked = additive != 0  # (T_q, T_kv)
    seen_something = ~masked.all(-1)  # a row with nothing allowed falls back to uniform weights
    on_masked = weights[:, seen_something][:, masked[seen_something]]  # every head
    col1, col2, col3 = st.columns(3)
    col1.metric("masked cells", f"{int(masked.sum())} of {masked.size}")
    col2.metric("max weight on masked cells", repr(float(on_masked.max())) if on_masked.size else "—",
                help="over every head of the layer; repr of the float32 value, not rounded")
    col3.metric("rows sum to 1, worst error", f"{float(abs(weights.sum(-1) - 1).max()):.1e}")


tabs = st.tabs(["none", "causal", "padding", "sliding window", "cross-attention"])
with tabs[0]:
    st.markdown("**No mask** (encoders, BERT): every token sees every other, before and after it.")
    additive, weights = masked_attention(ctx.state.config_json, ctx.state.seed, ids, layer, "none", 1)
    show(additive, weights, labels, labels, "no mask", "mask_none")
with tabs[1]:
    st.markdown("**Causal** (decoders, GPT): query *i* sees keys 0…*i*. Training on every position at once is then "
                "the same as predicting one token at a time.")
    additive, weights = masked_attention(ctx.state.config_json, ctx.state.seed, ids, layer, "causal", 1)
    show(additive, weights, labels, labels, "causal mask", "mask_causal")
with tabs[2]:
    st.markdown("**Padding**: a batch holds texts of different lengths, so the shorter one is filled with a pad token "
                "on the right. Its pad columns are masked for every query; the two sequences run together in one batch.")
    st.text_input("Second text of the batch", key="mask_text2", **KEEP, max_chars=MAX_SHOWN)
    try:
        second = tokenize(st.session_state["mask_text2"], cfg.vocab_size, MAX_SHOWN)
    except ValueError as exc:
        st.error(f"Second text: {exc}")
    else:
        additive, weights, pad = padded_attention(ctx.state.config_json, ctx.state.seed, (ids, tuple(second.ids)), layer)
        for row, row_labels in enumerate((labels, second.labels)):
            padded_labels = list(row_labels) + ["<pad>"] * (pad.shape[1] - len(row_labels))
            st.markdown(f"Sequence {row + 1}: {int(pad[row].sum())} real tokens, {int((pad[row] == 0).sum())} pad")
            show(additive[row], weights[row], padded_labels, padded_labels, f"sequence {row + 1} of the batch",
                 f"mask_pad_{row}")
with tabs[3]:
    st.markdown("**Sliding window** (Mistral, Longformer): in a decoder a query sees only the W most recent keys, "
                "itself included, so the cost per token is W instead of T; in an encoder it sees (W − 1) / 2 keys on "
                "each side. Information still travels further through the layers: each layer reaches W − 1 more "
                "tokens back.")
    st.number_input("Window W", min_value=1, max_value=64, key="mask_w", **KEEP)
    window = int(st.session_state["mask_w"])
    additive, weights = masked_attention(ctx.state.config_json, ctx.state.seed, ids, layer, "sliding window", window)
    show(additive, weights, labels, labels, f"sliding window, W = {window}", "mask_window")
with tabs[4]:
    st.markdown("**Cross-attention** (encoder-decoder): queries come from the decoder's T_q tokens, keys and values "
                "from the encoder's S outputs, so the matrix is T_q × S. There is no causal mask — the whole source is "
                "known — only the source's padding is masked.")
    twin = cfg if cfg.arch == "encoder-decoder" else encoder_decoder_twin(cfg)
    if twin is not cfg:
        st.caption("The sidebar's model has no decoder reading an encoder, so this tab builds an encoder-decoder with "
                   "the same axes, sizes and seed.")
    try:
        target = tokenize(st.session_state["mask_text2"], cfg.vocab_size, MAX_SHOWN)
    except ValueError as exc:
        st.error(f"Second text (the decoder's input): {exc}")
    else:
        short = ids[: max(1, len(ids) // 2)]
        additive, weights, pad = cross_attention(to_json(twin), ctx.state.seed, (ids, short), tuple(target.ids), layer)
        st.markdown(f"Decoder input: the second text ({len(target.ids)} tokens) — set it on the padding tab. Encoder "
                    f"input: a batch of the text ({len(ids)} tokens) and its first half ({len(short)} tokens), padded.")
        for row in range(2):
            keys = list(labels[: int(pad[row].sum())]) + ["<pad>"] * int((pad[row] == 0).sum())
            show(additive[row], weights[row], keys, target.labels,
                 f"source {row + 1}: T_q = {len(target.ids)} decoder queries × S = {pad.shape[1]} encoder keys",
                 f"mask_cross_{row}")
