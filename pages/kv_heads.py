"""KV heads: MHA, GQA and MQA -- who shares K and V, what the cache costs at real sizes, generation step by step,
and the cache in pages (vLLM) for a batch of requests."""
import numpy as np
import pandas as pd
import streamlit as st

import torch
from transformer import AXES, MODEL_CARDS, analysis, axes, kv_cache_bytes_per_token, param_counts
from transformer.axes.attention import WITHOUT_LATENT
from transformer.costs import kv_cache_bytes, reserved_tokens
from transformer.paged_cache import PagedKVCache
from transformer.hooks import attention_stacks, hook_name
from ui.figures.axes import cache_bytes_by_step, kv_cache_growth, kv_sharing
from ui.figures.paging import block_pool, reserved_slots
from ui.compute.layers import non_softmax_layers, softmax_layers, state_layers
from ui.compute.measure import generation_steps
from ui.compute.paging import paged_generation, parse_lengths
from ui.compute.cache_savings import cache_row
from ui.app.page import load_page
from ui.app.charts import show_chart
from ui.app.tabs import lazy_tabs, when_open
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.tokens import char_label
from ui.compute.stepper import named_shape

DTYPES = {"fp16 / bf16 (2 bytes)": 2, "fp32 (4 bytes)": 4, "int8 (1 byte)": 1}
REAL = {f"{key} {size}": (card, size, cfg) for key, card in MODEL_CARDS.items() for size, cfg in card.real.items()}
url_state("kv", kv_ctx=4096, kv_dtype=next(iter(DTYPES)), kv_model="llama2 70B", kv_steps=6,
          kv_lengths="12, 5, 9, 2", kv_block=4, kv_new=8, kv_pass=8, kv_reach=64,
          kv_tab=str)  # kv_tab: the open tab (lazy_tabs below)
keep_valid("kv_ctx", range(1, 1_048_577), 4096)
keep_valid("kv_dtype", list(DTYPES))
keep_valid("kv_model", list(REAL), "llama2 70B")
keep_valid("kv_steps", range(1, 33), 6)
keep_valid("kv_new", range(1, 33), 8)

ctx = load_page("KV heads: MHA · GQA · MQA", """
**The problem.** To generate token *t + 1* a decoder needs the keys and values of all *t* tokens before it.
Recomputing them every step is quadratic, so they are kept in a **KV cache** — which, at real sizes, can outgrow the
model's weights.

**The idea.** Let several query heads read the same key/value head. With *H* query heads and *G* kv heads
(MHA: G = H; GQA: 1 < G < H; MQA: G = 1) the cache shrinks by H / G, and so do the K and V projections.

**What to look at.** Which query heads share a kv head; how many GiB the cache takes at real sizes and long contexts;
the cache tensors growing by one token per step while the logits stay identical to a full recomputation.
""")
cfg = ctx.state.config
stack = attention_stacks(cfg.arch).output

# --- the three views, one tab each: a rerun computes and draws only the open tab's ------------------------------
# (a sidebar change generated tokens twice over, with and without the cache, and redrew every table, to show the
# sharing of the first view)
sharing_tab, memory_tab, generation_tab, paged_tab = lazy_tabs(
    ["Who reads which K and V", "KV-cache memory at real sizes", "Generation step by step", "The cache in pages"],
    key="kv_tab")

for _ in when_open(sharing_tab):
    st.header("Who reads which K and V")
    show_chart(kv_sharing(cfg.n_heads, cfg.n_kv_heads), key="kv_sharing")
    events = {e["name"]: e for e in ctx.trace.events}
    sites = ("hook_q", "hook_k", "hook_v", "hook_latent", "hook_k_rope")
    cached = softmax_layers(cfg)  # the layers that keep keys and values (a linear layer keeps a state instead)
    shown = cached[0] if cached else 0
    named = {site: named_shape(events[name]) for site in sites
             if (name := hook_name(shown, f"attn.{site}", stack)) in events}
    if not cached:
        st.info("Every layer of this model keeps a state instead of keys and values: it caches no K and V at all. "
                "The State page shows what it keeps.")
    if "hook_latent" in named:  # multi-head latent attention: the cache keeps a latent, not K and V
        rope_key = f" and the one rotated key all heads share, `hook_k_rope` {named['hook_k_rope']}" \
            if "hook_k_rope" in named else ""
        st.markdown(f"On the live model ({axes.label('kv_heads', cfg.attention_kind)}): `hook_q` {named['hook_q']}, and "
                    f"`hook_k` {named['hook_k']} and `hook_v` {named['hook_v']} for every head — but they are rebuilt "
                    f"from a latent of kv_rank = {cfg.kv_rank} numbers per token, `hook_latent` {named['hook_latent']}. "
                    f"The cache keeps only that latent{rope_key}.")
        gap = analysis.mla_absorbed_gap(ctx.model, torch.tensor([ctx.tokens.ids], device=ctx.model.device), shown)
        st.metric(f"absorbed form − explicit form, largest weight difference (layer {shown})", f"{gap:.1e}",
                  help="the inference form folds W_uk into the query and scores the cached latent directly, never "
                       "building a key: q_h·k_h = q_rope·k_rope + (q_nope,h W_uk,h^T)·c (LatentAttention.absorbed_weights)")
        st.caption("Training rebuilds each head's key from the latent; inference folds the key up-projection into the query "
                   "and reads the latent straight from the cache. The same weights, up to float rounding.")
    elif cached:
        if shown:
            st.caption(f"Layers {', '.join(str(i) for i in non_softmax_layers(cfg))} keep a state (or a convolution's "
                       f"last inputs) instead of a cache; the shapes below are layer {shown}'s, the first softmax layer.")
        st.markdown(f"On the live model ({axes.label('kv_heads', cfg.attention_kind)}): `hook_q` {named['hook_q']} but "
                    f"`hook_k` {named['hook_k']} and `hook_v` {named['hook_v']} — only G = {cfg.n_kv_heads} heads of K and V "
                    "are computed and cached. Inside attention `repeat_kv` hands each kv head to its group of query heads.")
    live_counts = param_counts(cfg)
    st.caption(f"Attention parameters of the live model: {live_counts['attention']:,} "
               f"(q and o: 2 × d_model × H × d_head; k and v: 2 × d_model × G × d_head).")

for _ in when_open(memory_tab):
    st.header("KV-cache memory at real sizes")
    col1, col2 = st.columns(2)
    col1.number_input("Context length (tokens)", min_value=1, max_value=1_048_576, step=1024, key="kv_ctx", **KEEP)
    col2.selectbox("Cache precision", list(DTYPES), key="kv_dtype", **KEEP)
    context, n_bytes = int(st.session_state["kv_ctx"]), DTYPES[st.session_state["kv_dtype"]]
    rows = []
    for label, (card, size, real) in REAL.items():
        per_token = kv_cache_bytes_per_token(real, n_bytes)
        counts = param_counts(real)
        rows.append({"model": card.name, "size": size, "attention": real.attention_kind, "layers": real.n_layers,
                     "H": real.n_heads, "G": real.n_kv_heads, "d_head": real.d_head, "KV bytes / token": per_token,
                     **cache_row(real, context, n_bytes),
                     "attention params (M)": round(counts["attention"] / 1e6, 1),
                     "weights (GiB, same precision)": round(counts["total"] * n_bytes / 2**30, 1)})
    table = pd.DataFrame(rows)
    st.dataframe(table, hide_index=True, height=36 * (len(table) + 1) + 2)
    st.caption("KV bytes per token = 2 (K and V) × layers × G × d_head × bytes per value; e.g. LLaMA 2 70B in fp16: "
               "2 × 80 × 8 × 128 × 2 = 327,680 bytes: what a token adds while every layer still holds every token. "
               "The cache at the context counts what each layer holds there: a window or a chunk its last tokens, a "
               "layer that reuses another's K and V nothing, a state layer its fixed state, a DeepSeek-V4 layer its "
               "window and one pooled key per block; a lightning indexer adds its own key per token. One sequence; "
               "a batch multiplies it.")
    st.download_button("Download the table (CSV)", on_click="ignore", file_name="kv_cache.csv", mime="text/csv",
                       data=lambda: table.to_csv(index=False))

    st.subheader("The same model as MHA, GQA and MQA")
    st.selectbox("Real model", list(REAL), key="kv_model", **KEEP,
                 format_func=lambda k: f"{REAL[k][0].label(REAL[k][1])} (H={REAL[k][2].n_heads}, G={REAL[k][2].n_kv_heads})")
    card, size, real = REAL[st.session_state["kv_model"]]
    H = real.n_heads
    divisors = [g for g in range(2, H) if H % g == 0]
    gqa = real.n_kv_heads if 1 < real.n_kv_heads < H else min(divisors, key=lambda g: abs(g - H / 8), default=None)
    # a latent-attention model (MLA) is shown beside the same model with plain K and V heads
    plain = real.replace(**WITHOUT_LATENT) if real.row("kv_heads").latent else real
    one_head = any(spec.compresses for spec in real.layer_plan())  # DeepSeek-V4: one head is key and value
    variant_cfgs = {f"{axes.label('kv_heads', v.attention_kind)} (G={v.n_kv_heads})": v
                    for v in ((real,) if one_head else
                              (plain.replace(n_kv_heads=g) for g in (H, *((gqa,) if gqa else ()), 1)))}
    if real.row("kv_heads").latent:
        variant_cfgs = {f"{axes.label('kv_heads', real.attention_kind)} (latent {real.kv_rank})": real, **variant_cfgs}
    per_token = {label: kv_cache_bytes_per_token(v, n_bytes) for label, v in variant_cfgs.items()}
    contexts = np.linspace(0, max(32_768, context), 200).astype(int)
    show_chart(kv_cache_growth(contexts, per_token, f"{card.label(size)}: KV cache for one sequence"), key="kv_growth")
    if one_head:
        st.caption(f"{card.name}'s attention keeps one head that is both key and value in every layer, beside "
                   "pooled blocks: it has no MHA or GQA variant. Its saving is in the table above.")
    elif not gqa:
        st.caption(f"H = {H} has no divisor between 1 and H, so this model has no GQA variant.")
    variant_table = pd.DataFrame([{
        "variant": label, "KV bytes / token": per_token[label],
        f"KV cache at {context:,} tokens (GiB)": round(kv_cache_bytes(v, context, n_bytes)["total"] / 2**30, 3),
        "attention params (M)": round(param_counts(v)["attention"] / 1e6, 1),
        "total params (B)": round(param_counts(v)["total"] / 1e9, 2)} for label, v in variant_cfgs.items()])
    st.dataframe(variant_table, hide_index=True)

for _ in when_open(generation_tab):
    st.header("Generation step by step, with the cache")
    if not cfg.row("arch").causal:
        st.info("An encoder-only model does not generate. Choose **decoder** or **encoder-decoder** as the Architecture "
                "in the sidebar to watch the cache grow.")
    else:
        st.number_input("New tokens", min_value=1, max_value=32, key="kv_steps", **KEEP)
        prompt = tuple(ctx.tokens.ids[:64])
        steps = generation_steps(ctx.state.config_json, ctx.state.seed, prompt, int(st.session_state["kv_steps"]))
        what = ("the decoder starts from its start token and caches its own K, V (which grow) and, once, the encoder's "
                "K, V for cross-attention (which stay)" if cfg.row("arch").cross else
                f"step 0 reads the {len(prompt)}-token prompt at once (prefill); each later step feeds only the new token")
        st.markdown(f"Greedy decoding; {what}. At every step the logits computed **with** the cache are compared with a "
                    "full recomputation **without** it.")
        step_rows = []
        for i, step in enumerate(steps):
            layer_shapes = "; ".join(f"{name}: {tuple(shape)}" for name, shape in step["cache_shapes"].items())
            shape_column = ("cached latent shape per layer (B, T, kv_rank)" if cfg.row("kv_heads").latent
                            else "cached K (= V) shape per layer (B, G, T, d_head)")
            if state_layers(cfg):
                shape_column += "; a linear layer's state (B, H, d_k, d_v)"
            step_rows.append({"step": i, "new token": char_label(chr(step["token_id"])), "id": step["token_id"],
                              shape_column: layer_shapes,
                              "cache bytes": step["cache_nbytes"],
                              "max |logits cached − uncached|": f"{step['max_abs_diff']:.2e}"})
        st.dataframe(pd.DataFrame(step_rows), hide_index=True)
        worst = max(s["max_abs_diff"] for s in steps)
        col1, col2 = st.columns(2)
        col1.metric("Largest logit difference, cached vs recomputed", f"{worst:.2e}")
        col2.metric("Cache after the last step", f"{steps[-1]['cache_nbytes'] / 1024:.1f} KiB")
        st.caption("Differences of order 1e-7 are float32 rounding: the cached path adds the same numbers in another "
                   "order. The cache here is float32 (4 bytes a value) on the classroom-size model.")
        show_chart(cache_bytes_by_step([s["cache_nbytes"] for s in steps]), key="kv_steps_bytes")


def draw_paged_cache() -> None:
    """The paged cache tab: the block pool filling pass by pass, and what each layout reserves; bad input is an
    error and nothing more."""
    st.header("The cache in pages: a block table per request")
    paged_row = next(row for row in AXES["kv_cache"].choices.values() if row.blocks)
    st.markdown(f"**{paged_row.label}** ({paged_row.examples}): {paged_row.does}. {paged_row.solves}")
    if not cfg.row("arch").causal:
        st.info("An encoder-only model does not generate, so it keeps no cache. Choose **decoder** or "
                "**encoder-decoder** as the Architecture in the sidebar.")
        return
    col1, col2, col3, col4 = st.columns(4)
    col1.text_input("Prompt lengths of the requests (tokens)", key="kv_lengths", **KEEP)
    col2.number_input("Block size (tokens per page)", max_value=64, step=1, key="kv_block", **KEEP)
    col3.number_input("New tokens per request", min_value=1, max_value=32, key="kv_new", **KEEP)
    col4.number_input("Longest a request may grow (tokens)", min_value=1, max_value=4096, key="kv_reach", **KEEP,
                      help="what the contiguous layout reserves for every request, whatever its length")
    block_size, new_tokens = int(st.session_state["kv_block"]), int(st.session_state["kv_new"])
    try:
        lengths = parse_lengths(st.session_state["kv_lengths"])
        PagedKVCache(block_size=block_size)  # a page size below 1 is refused here, by name
    except ValueError as error:
        st.error(f"Cannot page this batch: {error}")
        return
    run = paged_generation(ctx.state.config_json, ctx.state.seed, tuple(ctx.tokens.ids[:64]), tuple(lengths),
                           new_tokens, block_size)
    steps = run["steps"]
    keep_valid("kv_pass", range(1, len(steps) + 1), len(steps))
    st.slider("After forward pass", 1, len(steps), key="kv_pass", **KEEP,
              help="pass 1 reads every prompt at once; each later pass feeds each request the token it just made")
    step = steps[int(st.session_state["kv_pass"]) - 1]
    tables, stored = [list(t) for t in step["tables"]], list(step["lengths"])
    n_blocks = sum(len(t) for t in steps[-1]["tables"])  # the pool as it ends, so blocks still free show as free
    show_chart(block_pool(tables, stored, block_size, n_blocks,
                          f"The block pool after pass {st.session_state['kv_pass']}: blocks coloured by request"),
               key="kv_block_pool")
    st.dataframe(pd.DataFrame([{"request": r, "tokens stored": n, "block table (physical blocks, in order)":
                                ", ".join(map(str, t)), "empty slots in its last block": len(t) * block_size - n}
                               for r, (t, n) in enumerate(zip(tables, stored))]), hide_index=True)
    if cfg.row("arch").cross:
        st.caption("An encoder-decoder's requests all start their target from one start token, so their tables grow "
                   "alike here; the prompt lengths are the sources', which cross-attention keeps whole.")
    else:
        st.caption("Padding takes no slot: each request stores only its own tokens. Blocks go out in the order they "
                   "are asked for, so one request's blocks need not lie side by side; its table keeps their order.")
    col1, col2 = st.columns(2)
    col1.metric("Tokens identical, paged vs contiguous", "yes" if run["same_tokens"] else "no")
    col2.metric("Largest logit difference", f"{run['max_logit_diff']:.1e}")

    st.subheader("Memory reserved: contiguous against paged")
    reach = int(st.session_state["kv_reach"])
    try:
        reserved = {layout: reserved_tokens(layout, stored, reach, block_size) for layout in AXES["kv_cache"].choices}
    except ValueError as error:
        st.error(f"Cannot compare the layouts: {error}")
        return
    show_chart(reserved_slots(stored, reserved, f"Token slots per request after pass {st.session_state['kv_pass']}"),
               key="kv_reserved")
    per_token = kv_cache_bytes_per_token(cfg, cfg.row("dtype").bytes)
    columns = st.columns(len(reserved))
    for column, (layout, held) in zip(columns, reserved.items()):
        wasted = sum(held) - sum(stored)
        column.metric(f"{AXES['kv_cache'].row(layout).label}: slots reserved but empty",
                      f"{wasted:,} of {sum(held):,} ({wasted / sum(held):.0%})",
                      help=f"{wasted * per_token / 1024:.1f} KiB of this model's cache ({per_token:,} bytes a token)")
    st.caption(f"Contiguous: every request reserves the {reach} tokens it may grow to. Paged: a request holds "
               f"ceil(length / {block_size}) blocks, so at most {block_size - 1} slots of its last block stay empty. "
               "Bytes = slots × the model's KV bytes per token.")


for _ in when_open(paged_tab):
    draw_paged_cache()
