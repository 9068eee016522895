"""Masks: none, causal, padding, sliding window, chunked, cross-attention, the sparse patterns (strided,
block-local, global + local) and the keys a lightning indexer keeps, each next to the weights it produces."""
import numpy as np
import pandas as pd
import streamlit as st

from ui.figures.axes import mask_and_weights
from transformer import AXES, MODEL_CARDS, axes
from transformer.costs import kv_cache_bytes
from transformer.hooks import attention_stacks, hook_name
from ui.figures import modern as modern_figs
from ui.figures.indexer import dense_beside_chosen, kept_as_k_shrinks
from ui.compute.indexer import indexer_view
from ui.compute.chapters_measure import pairs_at_length, sparse_attention
from ui.compute.layers import non_softmax_layers, softmax_layers, state_layers
from ui.compute.encoder_decoder_measure import RANDOM_SEEDS, SCORE_BATCHES, SCORE_WORDS, mirror_scores, reversal
from ui.compute.measure import cross_attention, encoder_decoder_twin, masked_attention, padded_attention
from ui.figures.base import heatmap
from ui.app.page import load_page
from ui.app.charts import show_chart
from ui.app.figure_cache import cached_figure
from ui.app.tabs import lazy_tabs, when_open
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.tokens import encode_text

MAX_SHOWN = 24  # tokens per matrix: enough to see the pattern, few enough to read every cell
# sparse pattern -> (URL key of its size, the size's label, its default)
SPARSE_SIZES = {"strided": ("mask_stride", "Stride s", 4), "block-local": ("mask_block", "Block b", 4),
                "global-local": ("mask_local", "Local window W", 3)}
MAX_SIZE = 64
LONG_TEXT = 4096  # tokens: the saving of a pattern shows at lengths real models read
LOCAL_GLOBAL_CARDS = ("gemma3", "gpt-oss")  # real models whose layers are local and global
url_state("mask", mask_layer=0, mask_head=0, mask_w=3, mask_chunk=3, mask_text2="a dog ran", mask_global=1,
          mask_word="transformer",
          mask_tab=str,  # the open tab (lazy_tabs below), so a link can open one
          mask_query=MAX_SHOWN - 1, mask_k=4,  # the indexer tab's query and its k
          **{key: default for key, _, default in SPARSE_SIZES.values()})
for key, default in (("mask_w", 3), ("mask_chunk", 3), *((key, default) for key, _, default in SPARSE_SIZES.values())):
    keep_valid(key, range(1, MAX_SIZE + 1), default)
keep_valid("mask_global", range(0, MAX_SIZE + 1), 1)
keep_valid("mask_k", range(1, MAX_SIZE + 1), 4)
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
masked_layers = softmax_layers(cfg)  # a layer that keeps a state has no mask: it reads the past through its state
if not masked_layers:
    st.info("Every layer of this model keeps a state: none computes scores, so none has a mask. Its state holds only "
            "the past, which makes it causal by construction (the State page shows it). Choose softmax or hybrid "
            "**Attention layers** in the sidebar to see masks.")
    st.stop()
if len(masked_layers) < cfg.n_layers:
    st.caption(f"Layers {', '.join(str(i) for i in non_softmax_layers(cfg))} keep a state (or convolve their last "
               "few inputs) and have no mask; the layer choice offers the softmax layers.")
col1, col2 = st.columns(2)
keep_valid("mask_layer", masked_layers, masked_layers[0])
keep_valid("mask_head", range(cfg.n_heads), 0)
col1.selectbox("Layer", masked_layers, key="mask_layer", **KEEP)
col2.selectbox("Head", range(cfg.n_heads), key="mask_head", **KEEP)
layer, head = st.session_state["mask_layer"], st.session_state["mask_head"]
ids, labels = tuple(ctx.tokens.ids[:MAX_SHOWN]), ctx.tokens.labels[:MAX_SHOWN]
if len(ctx.tokens.ids) > MAX_SHOWN:
    st.caption(f"The matrices show the first {MAX_SHOWN} tokens of the input.")
if cfg.row("arch").cross:
    st.caption("This is an encoder-decoder: the self-attention masks below are applied to its encoder.")


def show(additive: np.ndarray, weights: np.ndarray, x_labels, y_labels, title: str, key: str,
         sink: bool = cfg.sinks) -> None:
    """The figure and the proof: masked cells get weight 0.0 exactly, every row still sums to 1 (with a sink,
    to 1 minus the share the sink takes)."""
    show_chart(mask_and_weights(additive, weights[head], x_labels, y_labels, title), key=key)
    masked = additive != 0  # (T_q, T_kv)
    seen_something = ~masked.all(-1)  # a row with nothing allowed falls back to uniform weights
    on_masked = weights[:, seen_something][:, masked[seen_something]]  # every head
    col1, col2, col3 = st.columns(3)
    col1.metric("masked cells", f"{int(masked.sum())} of {masked.size}")
    col2.metric("max weight on masked cells", repr(float(on_masked.max())) if on_masked.size else "—",
                help="over every head of the layer; repr of the float32 value, not rounded")
    if sink:  # a learned logit per head joins each row's softmax and is dropped: the rows keep the rest
        sums = weights.sum(-1)
        col3.metric("rows sum to 1 − the sink's share", f"{float(sums.min()):.3f} to {float(sums.max()):.3f}",
                    help=f"{AXES['scores'].choices['sinks'].label}: {AXES['scores'].choices['sinks'].does}")
    else:
        col3.metric("rows sum to 1, worst error", f"{float(abs(weights.sum(-1) - 1).max()):.1e}")


# only the open tab is computed: three of them build a model of their own
def trained_reverser() -> None:
    """T5 at classroom size, trained here to write a word backwards: where its cross-attention looks, beside the
    same model with random weights."""
    st.markdown("**A trained encoder-decoder.** The matrices above come from random weights. Here T5 at classroom "
                "size (relative position buckets, RMSNorm before each sublayer, ReLU), trained on this machine to "
                "write a word backwards, reads your word with its encoder; to write answer letter i, the decoder "
                "has to find source letter n − 1 − i, and cross-attention is the only way it can.")
    st.text_input("A word to reverse (letters a–z)", key="mask_word", max_chars=24)
    try:
        view = reversal(str(st.session_state["mask_word"]).strip())
        scores = mirror_scores()
    except ValueError as exc:  # a word outside the task's letters or lengths; CheckpointError is a ValueError too
        st.error(f"The trained T5 cannot read this: {exc}")
        return
    trained, controls = scores["trained"], scores["random"]  # (L, H), (seeds, L, H)
    layer, head = np.unravel_index(int(trained.argmax()), trained.shape)
    st.success(f"Trained T5 ({scores['steps']:,} steps, {scores['accuracy']:.1%} of answer letters right on fresh "
               f"words) writes **{view['answer']}**.", icon=":material/school:")
    left, right = st.columns(2)
    for where, name, weights in ((left, "trained", view["trained"]), (right, "random init", view["random"])):
        show_chart(heatmap(weights[layer, head], view["source"], view["queries"],
                           f"{name}: cross-attention layer {layer}, head {head}", x_title="source (encoder)",
                           y_title="decoder input", zmin=0, zmax=1, height=380),
                   key=f"mask_reverser_{name.replace(' ', '_')}", where=where)
    st.caption(f"Weight on the mirrored source letter, the mean over {SCORE_BATCHES * SCORE_WORDS} fresh words of "
               f"every length it trained on, per layer and head: "
               "trained " + ", ".join(f"L{l}H{h} {trained[l, h]:.2f}" for l in range(trained.shape[0])
                                      for h in range(trained.shape[1]))
               + f"; random init (seeds {', '.join(map(str, RANDOM_SEEDS))}) {controls.min():.2f}–{controls.max():.2f}. "
               f"The random model spreads its weight over the whole word; the trained head draws the anti-diagonal.")


tabs = lazy_tabs(["none", "causal", "padding", "sliding window", "chunked", "cross-attention", "strided",
                  "block-local", "global + local", "indexer top-k"], key="mask_tab")
for _ in when_open(tabs[0]):
    st.markdown("**No mask** (encoders, BERT): every token sees every other, before and after it.")
    additive, weights = masked_attention(ctx.state.config_json, ctx.state.seed, ids, layer, "none", 1)
    show(additive, weights, labels, labels, "no mask", "mask_none")
for _ in when_open(tabs[1]):
    st.markdown("**Causal** (decoders, GPT): query *i* sees keys 0…*i*. Training on every position at once is then "
                "the same as predicting one token at a time.")
    additive, weights = masked_attention(ctx.state.config_json, ctx.state.seed, ids, layer, "causal", 1)
    show(additive, weights, labels, labels, "causal mask", "mask_causal")
for _ in when_open(tabs[2]):
    st.markdown("**Padding**: a batch holds texts of different lengths, so the shorter one is filled with a pad token "
                "on the right. Its pad columns are masked for every query; the two sequences run together in one batch.")
    st.text_input("Second text of the batch", key="mask_text2", **KEEP, max_chars=MAX_SHOWN)
    try:
        # the second text in the model's own tokens (its checkpoint's, or the sidebar's Tokens choice), as the first
        second = encode_text(st.session_state["mask_text2"], ctx.state.config_json, ctx.state.weights, MAX_SHOWN)
    except ValueError as exc:
        st.error(f"Second text: {exc}")
    else:
        additive, weights, pad = padded_attention(ctx.state.config_json, ctx.state.seed, (ids, tuple(second.ids)), layer)
        for row, row_labels in enumerate((labels, second.labels)):
            padded_labels = list(row_labels) + ["<pad>"] * (pad.shape[1] - len(row_labels))
            st.markdown(f"Sequence {row + 1}: {int(pad[row].sum())} real tokens, {int((pad[row] == 0).sum())} pad")
            show(additive[row], weights[row], padded_labels, padded_labels, f"sequence {row + 1} of the batch",
                 f"mask_pad_{row}")
for _ in when_open(tabs[3]):
    st.markdown("**Sliding window** (Mistral, Longformer): in a decoder a query sees only the W most recent keys, "
                "itself included, so the cost per token is W instead of T; in an encoder it sees (W − 1) / 2 keys on "
                "each side. Information still travels further through the layers: each layer reaches W − 1 more "
                "tokens back.")
    st.number_input("Window W", min_value=1, max_value=64, key="mask_w", **KEEP)
    window = int(st.session_state["mask_w"])
    additive, weights = masked_attention(ctx.state.config_json, ctx.state.seed, ids, layer, "sliding window", window)
    show(additive, weights, labels, labels, f"sliding window, W = {window}", "mask_window")
for _ in when_open(tabs[4]):
    st.markdown("**Chunked** (Llama 4): the text is cut into chunks of C tokens (positions 0…C − 1, C…2C − 1, …) "
                "and a query sees only the keys of its own chunk, up to itself (in an encoder, the whole chunk). "
                "The cost per token is at most C, as with a window of C, but the first query of a chunk sees itself "
                "alone however much text came before: nothing crosses a chunk's edge in this layer. Llama 4 chunks "
                "8,192 tokens on the three layers of every four that RoPE turns, and leaves every fourth layer full "
                "and without positions (NoPE, its queries scaled up with the position, which lowers the softmax's temperature): "
                "those layers carry what crosses a chunk's edge.")
    st.number_input("Chunk C", min_value=1, max_value=MAX_SIZE, key="mask_chunk", **KEEP)
    chunk = int(st.session_state["mask_chunk"])
    additive, weights = masked_attention(ctx.state.config_json, ctx.state.seed, ids, layer, "chunked", chunk)
    show(additive, weights, labels, labels, f"chunked, C = {chunk}", "mask_chunked")
for _ in when_open(tabs[5]):
    st.markdown("**Cross-attention** (encoder-decoder): queries come from the decoder's T_q tokens, keys and values "
                "from the encoder's S outputs, so the matrix is T_q × S. There is no causal mask — the whole source is "
                "known — only the source's padding is masked.")
    twin = cfg if cfg.row("arch").cross else encoder_decoder_twin(cfg)
    if twin is not cfg:
        st.caption("The sidebar's model has no decoder reading an encoder, so this tab builds an encoder-decoder with "
                   "the same axes, sizes and seed" + (" (multi-head latent attention is built for decoders alone: the "
                                                      "twin's heads have keys and values of their own)."
                                                      if cfg.row("kv_heads").latent else ".")
                   + (" Its layers are all softmax layers: a layer that keeps a state cannot read a source both ways."
                      if state_layers(cfg) else ""))
    try:
        # the decoder reads the source's tokens: the sidebar's model's, which the twin shares
        target = encode_text(st.session_state["mask_text2"], ctx.state.config_json, ctx.state.weights, MAX_SHOWN)
    except ValueError as exc:
        st.error(f"Second text (the decoder's input): {exc}")
    else:
        short = ids[: max(1, len(ids) // 2)]
        additive, weights, pad = cross_attention(twin.to_json(), ctx.state.seed, (ids, short), tuple(target.ids), layer)
        st.markdown(f"Decoder input: the second text ({len(target.ids)} tokens) — set it on the padding tab. Encoder "
                    f"input: a batch of the text ({len(ids)} tokens) and its first half ({len(short)} tokens), padded.")
        for row in range(2):
            keys = list(labels[: int(pad[row].sum())]) + ["<pad>"] * int((pad[row] == 0).sum())
            show(additive[row], weights[row], keys, target.labels,
                 f"source {row + 1}: T_q = {len(target.ids)} decoder queries × S = {pad.shape[1]} encoder keys",
                 f"mask_cross_{row}", sink=False)  # cross-attention has no sink
    trained_reverser()


SPARSE_TEXT = {
    "strided": "**Strided** (Sparse Transformer, 2019): a query sees the keys less than s away and every s-th key "
               "before them, about s + T/s keys instead of T. Two layers connect any two tokens: one step to a "
               "multiple of s, one step along it.",
    "block-local": "**Block-local**: the text is cut into blocks of b tokens and a query sees only its own block. "
                   "The cost is T·b, linear in T; no information crosses a block boundary, in one layer or in any "
                   "number of layers with the same blocks.",
    "global-local": "**Global + local** (Longformer, BigBird): a local window of W keys, plus the first g tokens, "
                    "which see every token and are seen by every token. Any two tokens are two steps apart through "
                    "a global token; the cost is about T·(W + 2g).",
}
n_tokens = len(ids)
dense_pairs = n_tokens * (n_tokens + 1) // 2 if cfg.row("arch").next_token else n_tokens * n_tokens
for tab, (pattern, (size_key, size_label, _)) in zip(tabs[6:9], SPARSE_SIZES.items()):
    for _ in when_open(tab):
        st.markdown(SPARSE_TEXT[pattern])
        col1, col2 = st.columns(2)
        col1.number_input(size_label, min_value=1, max_value=MAX_SIZE, key=size_key, **KEEP,
                          help=f"at most T = {n_tokens}, the tokens shown")
        if AXES["attention_pattern"].row(pattern).global_tokens:
            col2.number_input("Global tokens g", min_value=0, max_value=MAX_SIZE, key="mask_global", **KEEP)
        size, n_global = int(st.session_state[size_key]), int(st.session_state["mask_global"])
        try:
            view = sparse_attention(ctx.state.config_json, ctx.state.seed, ids, layer, pattern, size, n_global)
        except ValueError as exc:  # a size the text cannot hold: say so, and let the other tabs draw
            st.warning(str(exc))
            continue
        show(view.additive, view.weights, labels, labels, f"{AXES['attention_pattern'].choices[pattern].label}, "
             f"{size_label.split()[-1]} = {size}", f"mask_{pattern}")
        causal = cfg.row("arch").next_token
        long_pairs = pairs_at_length(pattern, LONG_TEXT, size, causal, n_global)
        long_dense = LONG_TEXT * (LONG_TEXT + 1) // 2 if causal else LONG_TEXT ** 2
        col1, col2, col3 = st.columns(3)
        col1.metric(f"pairs scored, T = {n_tokens}", f"{view.pairs} of {dense_pairs}",
                    f"{view.pairs / dense_pairs:.0%} of dense", delta_color="off", delta_arrow="off",
                    help="dense: every pair the causal mask allows (a decoder) or all T² (an encoder)")
        col2.metric(f"pairs scored, T = {LONG_TEXT:,}", f"{long_pairs:,} of {long_dense:,}",
                    f"{long_pairs / long_dense:.1%} of dense", delta_color="off", delta_arrow="off",
                    help="the same pattern on a long text: dense attention grows as T², this pattern about as T")
        col3.metric("fused SDPA vs the five lines", f"{view.gap:.1e}",
                    "agree (≤ 1e-5)" if view.gap <= 1e-5 else "differ", delta_color="off", delta_arrow="off",
                    help="largest |logit difference| when this pattern runs through one SDPA kernel and through "
                         "the explicit five lines")
        st.caption("SDPA takes the pattern as a dense mask: it still computes every score, then discards the masked "
                   "ones, so it is no faster than dense attention. Only a block-sparse kernel that skips the empty "
                   "tiles saves the time (benchmarks/sparse_masks.py).")

for _ in when_open(tabs[9]):
    st.markdown("**Indexer top-k** (DeepSeek-V3.2, GLM-5: DeepSeek Sparse Attention): a *lightning indexer* of a few "
                "narrow heads scores every earlier key, Σ_h w_h·ReLU(q_h·k), and each query attends only to the k keys "
                "it scores highest. Its heads use ReLU instead of a softmax and share one key per token, so scoring "
                "everything is cheap; attention itself then pays for k keys per query (DeepSeek: 2,048 of up to "
                "128k). Which keys did it keep, and what did the dropped ones hold?")
    col1, col2 = st.columns(2)
    keep_valid("mask_query", range(len(ids)), len(ids) - 1)
    col1.selectbox("Query", range(len(ids)), format_func=lambda i: f"{i}: {labels[i]}", key="mask_query", **KEEP)
    col2.number_input("k (keys kept per query)", min_value=1, max_value=MAX_SIZE, key="mask_k", **KEEP)
    query, top_k = int(st.session_state["mask_query"]), int(st.session_state["mask_k"])
    try:
        view = indexer_view(ctx.state.config_json, ctx.state.seed, ctx.state.weights, ids, layer, query, top_k)
    except ValueError as exc:  # a model the indexer does not fit (an encoder, a sparse pattern): say why
        st.error(f"This model cannot take an indexer: {exc}")
    else:
        st.caption("The model's own indexer, trained with it." if view.own_indexer else
                   "The sidebar's model has no indexer, so this one is new and **untrained** (seeded random weights, "
                   "4 heads): it picks keys by chance, as a fresh one would. DeepSeek trains its indexer to match "
                   "the dense weights; the best k keys below show what a perfect indexer would keep.")
        n = query + 1
        show_chart(cached_figure(dense_beside_chosen, view.dense[head], view.sparse[head], view.scores, view.chosen,
                                 list(labels[:n]), f"layer {layer}, head {head}, query {query}: "
                                                   f"{int(view.chosen.sum())} of {n} keys kept"), key="mask_indexer")
        at = min(top_k, n) - 1  # the chosen k's place in the sweep
        col1, col2, col3 = st.columns(3)
        col1.metric("dense weight the indexer's keys hold", f"{view.kept['indexer']['mass'][at]:.1%}",
                    help="mean over the layer's heads (hook_kept_mass)")
        col2.metric("the best k keys would hold", f"{view.kept['best k (by the dense weights)']['mass'][at]:.1%}")
        col3.metric("output error |z_k − z| / |z|", f"{view.kept['indexer']['error'][at]:.3f}",
                    help="the layer's concatenated heads for this query, with the indexer's keys against all keys")
        show_chart(cached_figure(kept_as_k_shrinks, view.ks, view.kept, min(top_k, n)), key="mask_indexer_sweep")
        st.caption("Each k is applied to this layer alone, from the inputs the model gave it: the weights are "
                   "renormalised over the kept keys, as softmax over them does. A query that sees at most k keys "
                   "keeps them all.")


# --- the layer plan: local and global layers (Gemma 2/3, gpt-oss), layers without positions (Llama 4) ---------
st.subheader("Local and global layers")
st.markdown("Since 2024 many long-context models mix the two: **local** layers see a sliding window of W keys, "
            "**global** layers see everything. Gemma 2 and gpt-oss alternate them, Gemma 3 puts five local layers "
            "before each global one; others (LLaMA 3.1, Qwen3, DeepSeek-V3) keep every layer global. Local layers cost W per token whatever the length, and their cache stops "
            "growing once it holds W tokens; the global layers keep the long-range path. Choose the pattern in the "
            "sidebar (**Local / global layers**, with the window W). The strip below is the model's layer plan: "
            "each layer's kind, the keys it sees, its positions (Llama 4 and SmolLM3 leave RoPE out of every "
            "fourth layer: **Layers without positions** in the sidebar), whose keys and values it reads (Gemma 4's "
            "last layers reuse an earlier layer's) and whether its FFN routes to experts (Llama 4 Maverick: every "
            "second layer).")
windows = cfg.layer_windows()
rotating = cfg.row("position").rotates_qk
dense_ffn = cfg.row("expert_activation").dense_kind if cfg.row("ffn").routed else cfg.ffn  # a dense layer's FFN
plan = modern_figs.plan_cells(cfg.layer_plan(), axes.label("position", cfg.position), rotating,
                              axes.label("ffn", dense_ffn))
show_chart(cached_figure(modern_figs.plan_strip, plan, rotating), key="mask_layer_strip")
if any(w is not None for w in windows) and any(w is None for w in windows):
    kinds = {"a local layer": next(i for i, w in enumerate(windows) if w is not None),
             "a global layer": next(i for i, w in enumerate(windows) if w is None)}
    for col, (kind, index) in zip(st.columns(2), kinds.items()):
        with col:  # the live model's own recorded mask and weights in that layer
            n = len(ids)
            stack = attention_stacks(cfg.arch).input
            additive = ctx.trace.arrays[hook_name(index, "attn.hook_mask", stack)][0, 0, :n, :n]
            weights = ctx.trace.arrays[hook_name(index, "attn.hook_pattern", stack)][0, :, :n, :n]
            show(additive, weights, labels, labels, f"layer {index}: {kind}", f"mask_kind_{index}")
st.markdown("**What the local layers save in the KV cache** (real sizes, 16-bit, one sequence): every layer global "
            "against the published pattern.")
contexts = [4096, 32768, 131072]
lines = {}
for key in LOCAL_GLOBAL_CARDS:
    card = MODEL_CARDS[key]
    size, real = next(iter(card.real.items()))
    everything = real.replace(layer_pattern="global")
    lines[f"{card.label(size)}, every layer global"] = [kv_cache_bytes(everything, n)["total"] for n in contexts]
    lines[f"{card.label(size)}, {real.layer_pattern} (W = {real.sliding_window})"] = [
        kv_cache_bytes(real, n)["total"] for n in contexts]
show_chart(cached_figure(modern_figs.kv_cache_by_context, contexts, lines), key="mask_kv_saved")
st.dataframe(pd.DataFrame([{"model and layers": name, **{f"{n:,} tokens (GiB)": round(v / 2**30, 2)
                                                          for n, v in zip(contexts, values)}}
                           for name, values in lines.items()]), hide_index=True)
st.caption("A local layer holds min(T, W) tokens, a global one all T (transformer.costs.kv_cache_bytes). "
           "This library's own KVCache keeps every token in every layer, so its generation is exact for any "
           "window; a serving stack drops what a local layer can no longer see.")
