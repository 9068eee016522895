"""The state: linear attention keeps one fixed-size matrix per head instead of a KV cache -- watch it written token by
token, read by a query, corrected by the delta rule; what it saves in memory and what it can hold."""
import numpy as np
import pandas as pd
import streamlit as st

from transformer import AXES
from transformer.costs import kv_cache_bytes
from ui.app.charts import show_chart
from ui.app.page import load_page, weights_banner
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.app.tabs import lazy_tabs, when_open
from ui.compute import state_measure as measure
from ui.compute.layers import softmax_layers, state_layers
from ui.compute.weights import weights_info
from ui.figures.state import (cache_against_context, capacity_curves, delta_write, implied_row, overwrite_reads,
                              read_bars, recall_curves, state_write)

PRECISIONS = {"bf16 / fp16 (2 bytes)": 2, "fp32 (4 bytes)": 4}
WIDTHS = (16, 32, 64)  # d_k of the capacity experiment
url_state("state", state_layer=int, state_head=0, state_t=0, state_sim=0.9, state_dk=32,
          state_bytes=next(iter(PRECISIONS)), state_ctx=131072, state_tab=str)  # state_tab: the open tab
keep_valid("state_sim", [round(x * 0.05, 2) for x in range(21)], 0.9)
keep_valid("state_dk", WIDTHS, 32)
keep_valid("state_bytes", list(PRECISIONS))
keep_valid("state_ctx", range(1, 1_048_577), 131072)

ctx = load_page("The state: attention with a fixed-size memory", """
**The problem.** Softmax attention keeps the keys and values of every past token, so its cache and its cost per
token grow with the text: at 128k tokens the cache of a 48-layer model can hold more bytes than an accelerator has.

**The idea.** Drop the softmax and the past adds up: q · Σ_j k_j v_jᵀ = qᵀ S. Each head keeps one d_k × d_v matrix,
the **state** S, that every token writes k vᵀ into and every query reads with q — an RNN whose hidden state is a
matrix. The **delta rule** first reads what S already says for k, and writes only the correction, so a new value
replaces an old one stored under a similar key. Hybrids (Qwen3-Next, Qwen3.5) keep one softmax layer in four.

**What to look at.** The state after each token; what a query reads; what the delta rule predicted and stored
instead; the memory of a cache against a state up to a million tokens; how many key–value pairs a state recalls.
""", banner=False)
cfg, changed = measure.hybrid_of(ctx.state.config)
config_json = cfg.to_json()
weights = ctx.state.weights if changed is None else ""  # chosen weights belong to the sidebar's model only
# one banner for the weights this page shows: the sidebar's model's, or those of the hybrid made from it
weights_banner(weights_info(config_json) if changed else weights_info(ctx.state.config_json, ctx.state.weights),
               ctx.state.seed)
if changed:
    st.info(changed, icon=":material/swap_horiz:")
layers = state_layers(cfg)
plan, kinds = cfg.layer_plan(), AXES["attention"].choices
T = len(ctx.tokens.ids)
labels = ctx.tokens.labels

col1, col2, col3 = st.columns([1, 1, 3])
keep_valid("state_layer", layers, layers[0])
keep_valid("state_head", range(cfg.state_heads), 0)
keep_valid("state_t", range(T), 0)
col1.selectbox("Linear layer", layers, key="state_layer", **KEEP,
               format_func=lambda i: f"{i}: {kinds[plan[i].kind].label}")
col2.selectbox("Head", range(cfg.state_heads), key="state_head", **KEEP)
if T > 1:
    col3.slider("Token t (step through the text)", 0, T - 1, key="state_t", **KEEP,
                help="The state after this token; its query's read; its write")
layer, head, t = st.session_state["state_layer"], st.session_state["state_head"], st.session_state["state_t"]
row = plan[layer].row
token = labels[t]

tabs = lazy_tabs(["The state, token by token", "What a query reads", "The delta rule", "Memory: cache against state",
                  "Capacity", "Recall at distance"], key="state_tab")


def recorded():
    """The chosen head of the chosen layer, token by token; a state too large for the trace's cap, a clear error."""
    try:
        return measure.head_state(config_json, ctx.state.seed, tuple(ctx.tokens.ids), layer, head, weights)
    except (ValueError, MemoryError) as exc:
        st.error(str(exc))
        st.stop()


for _ in when_open(tabs[0]):
    head_state = recorded()
    d_k, d_v = head_state.states.shape[-2:]
    st.subheader(f"Layer {layer} ({row.label}), head {head}: the state after token {t} '{token}'")
    st.latex(row.formulas["hook_state"])
    before, write, after = head_state.before(t), head_state.write(t), head_state.states[t]
    show_chart(state_write(before, write, after, token, None if head_state.decay is None else head_state.decay[t]),
               key="state_write")
    state_kib = cfg.state_heads * d_k * d_v * 4 / 1024
    st.caption(f"Each head keeps a {d_k} × {d_v} state: {d_k * d_v:,} numbers, and this layer {cfg.state_heads} of "
               f"them ({state_kib:,.1f} KiB in float32) after one token as after a million. Each token adds one "
               f"outer product, rank one: the key k_t (rows) times what it writes (columns: "
               f"{'the correction the delta rule stores' if head_state.correction is not None else 'its value v_t'})."
               f" Found + write − after, largest difference: {np.abs(before + write - after).max():.1e} "
               "(float rounding): the recorded state is exactly this sum.")

for _ in when_open(tabs[1]):
    head_state = recorded()
    st.subheader(f"What the query of token {t} '{token}' reads")
    st.latex(row.formulas["hook_z"])
    read_col, weights_col = st.columns(2)
    show_chart(read_bars(head_state.read[t], token), key="state_read", where=read_col)
    row_weights = head_state.weights[t, : t + 1]
    show_chart(implied_row(row_weights, labels[: t + 1], token), key="state_implied", where=weights_col)
    gaps = (np.abs(head_state.read_of_state(t) - head_state.read[t]).max(),
            np.abs(head_state.read_of_weights(t) - head_state.read[t]).max())
    st.warning(f"**The implied weights are not a softmax.** The read equals these weights times the values, "
               f"Σ_j w_j v_j, but no softmax made them: this row sums to {row_weights.sum():.3g}, not 1, and a weight "
               "may be larger than 1 or below 0 (under the delta rule, where a later, similar key overwrote an "
               "earlier value). The Attention playground draws them for every head on the same scale.", icon=":material/warning:")
    st.caption(f"Three ways to the same read: q_tᵀ S_t / √d_k from the recorded state and query (largest difference "
               f"from `hook_z`: {gaps[0]:.1e}); the implied weights times V ({gaps[1]:.1e}); and `hook_z` itself. "
               "The query never sees the past tokens, only the state they left.")

for _ in when_open(tabs[2]):
    head_state = recorded()
    if head_state.correction is not None:
        st.subheader(f"What the state predicted for '{token}', and what it stored instead")
        st.latex(row.formulas["hook_state"])
        show_chart(delta_write(head_state.v[t], head_state.predicted[t], head_state.correction[t],
                               float(head_state.beta[t]), token), key="state_delta")
        before_error = np.linalg.norm(head_state.v[t] - head_state.predicted[t])
        after_error = np.linalg.norm(head_state.v[t] - head_state.says_after(t))
        col1, col2, col3 = st.columns(3)
        col1.metric("β_t, the write strength", f"{float(head_state.beta[t]):.3f}")
        col2.metric("|v_t − what S said before|", f"{before_error:.3f}")
        col3.metric("|v_t − what S says after|", f"{after_error:.3f}",
                    help="S_tᵀ k_t: with β = 1 the state returns v_t exactly for k_t; with β < 1 it moves that share "
                         "of the way")
        st.caption("Plain linear attention adds v_t whatever S already holds for k_t, so a key written twice returns "
                   "the sum of both values. The delta rule subtracts the prediction first: it writes only what "
                   "is new, and moves the read for k_t a share β of the way to v_t.")
    else:
        correcting = ", ".join(f"{r.label}" for r in kinds.values() if r.delta_rule)
        st.info(f"Layer {layer} is {row.label}: it adds k vᵀ without reading first, so it predicts and corrects "
                f"nothing. Choose a delta-rule kind as the **Linear kind** in the sidebar ({correcting}) to see its "
                "prediction and correction token by token. The small experiment below runs both rules.")

    st.subheader("An old association overwritten")
    st.slider("k₁ · k₃: how much the new key resembles the old one", 0.0, 1.0, step=0.05, key="state_sim", **KEEP)
    demo = measure.overwrite(float(st.session_state["state_sim"]))
    c = demo.similarity
    st.markdown(f"Three pairs go into an empty 4 × 4 state, in order: k₁ → v₁, an unrelated k₂ → v₂, then k₃ → v₃ "
                f"with k₃ close to k₁ (k₁ · k₃ = {c:.2f}). The values are one-hot, so each bar says which value a "
                "read returns.")
    show_chart(overwrite_reads(demo.reads, measure.RULES, c), key="state_overwrite")
    adds, corrects = demo.reads["adds"], demo.reads["corrects"]
    st.markdown(
        f"- **Adding** keeps both and blurs them: k₃ reads {adds[1][2]:.2f} of v₃ and {adds[1][0]:.2f} of v₁, k₁ "
        f"reads {adds[0][0]:.2f} of v₁ and {adds[0][2]:.2f} of v₃.\n"
        f"- **The delta rule** predicted {c:.2f} · v₁ for k₃ and stored only the correction, v₃ − {c:.2f} · v₁ "
        f"(stored: [{', '.join(f'{x:.2f}' for x in demo.corrections[2])}]): k₃ now reads {corrects[1][2]:.2f} of v₃ and "
        f"{abs(corrects[1][0]):.2f} of v₁, and the old k₁ reads {corrects[0][0]:.2f} of v₁ (1 − c² = {1 - c * c:.2f}) "
        f"and {corrects[0][2]:.2f} of v₃: the new value overwrote the old one as far as the keys overlap.")

for _ in when_open(tabs[3]):
    st.subheader("Memory: a cache that grows against a state that does not")
    col1, col2 = st.columns(2)
    col1.selectbox("Precision", list(PRECISIONS), key="state_bytes", **KEEP)
    col2.number_input("Context (tokens)", min_value=1, max_value=1_048_576, step=4096, key="state_ctx", **KEEP)
    n_bytes, context = PRECISIONS[st.session_state["state_bytes"]], int(st.session_state["state_ctx"])
    curves = measure.cache_by_context(n_bytes, families=True)
    show_chart(cache_against_context(measure.CONTEXTS, {name: c["total"] for name, c in curves.items()}, context),
               key="state_memory")
    rows, totals = [], {}
    for name, shape in measure.ALL_SHAPES.items():
        held = kv_cache_bytes(shape, context, n_bytes)
        totals[name] = held["total"]
        rows.append({"model": name, "softmax layers": len(softmax_layers(shape)),
                     "linear layers": len(state_layers(shape)),
                     f"keys and values at {context:,} (GiB, grows)": round(held["global layers"] / 2**30, 3),
                     "states (MiB, constant)": round(held["state layers"] / 2**20, 2),
                     f"total at {context:,} (GiB)": round(held["total"] / 2**30, 3),
                     **{f"total at {m:,} (GiB)": round(kv_cache_bytes(shape, m, n_bytes)["total"] / 2**30, 3)
                        for m in measure.MARKED if m != context}})
    table = pd.DataFrame(rows)
    st.dataframe(table, hide_index=True)
    st.download_button("Download the table (CSV)", on_click="ignore", file_name="cache_against_state.csv",
                       mime="text/csv", data=lambda: table.to_csv(index=False))
    q = measure.QWEN3_NEXT
    full, hybrid, linear = list(totals.values())[:3]  # SHAPES' first three: all GQA, the 3:1 hybrid, all linear
    st.caption(f"From the sizes alone (`transformer.costs.kv_cache_bytes`, checked against the library's own cache): a "
               f"softmax layer holds 2 · G · d_head · T · bytes = 2 · {q.n_kv_heads} · {q.d_head} · T · {n_bytes}; "
               f"a Gated DeltaNet layer holds H · d_k · d_v · bytes = {q.state_heads} · {q.state_d_k} · "
               f"{q.state_d_v} · {n_bytes} for its states, plus its short convolution's last {q.linear_conv_size - 1} "
               f"inputs of 2 · {q.state_key_heads} · {q.state_d_k} + {q.state_heads} · {q.state_d_v} channels, "
               f"whatever T. At {context:,} tokens the hybrid holds {hybrid / full:.1%} of the all-GQA model's bytes, "
               f"the all-linear model {linear / full:.2%}. Shapes from Qwen3-Next-80B-A3B's published config, then the "
               "other state-keeping families' cards as published (their full layers may be latent attention, "
               "Kimi Linear, or few, LFM2); one sequence, a batch multiplies everything.")

for _ in when_open(tabs[4]):
    st.subheader("Capacity: how many key–value pairs a state recalls")
    st.selectbox("State width d_k (= d_v)", WIDTHS, key="state_dk", **KEEP)
    d_k = int(st.session_state["state_dk"])
    result = measure.capacity(d_k)
    st.markdown(f"Write N pairs into one empty {d_k} × {d_k} state — keys and values random vectors of length 1 — "
                f"with the library's recurrent form, then read every key back from the state after the last write. "
                f"{measure.SEEDS} seeds (the band: worst to best seed). Two readings of *recalled*:")
    columns = st.columns(2)
    for column, (measure_key, words) in zip(columns, measure.MEASURES.items()):
        curves = {rule: result.recall[rule][measure_key] for rule in measure.RULES}
        guessing = measure_key == "identified"  # naming one of N values at random gets 1/N of them
        show_chart(capacity_curves(result.n, curves, measure.RULES, d_k, measure_key, chance=guessing),
                   key=f"state_capacity_{measure_key}", where=column)
        column.caption(f"**{measure_key}**: {words}")
    lines = []
    for measure_key in measure.MEASURES:
        at = {n: int(np.searchsorted(result.n, n)) for n in (d_k, result.n[-1])}
        mean = {rule: result.recall[rule][measure_key].mean(-1) for rule in measure.RULES}
        held = {rule: measure.holds_to(result, rule, measure_key) for rule in measure.RULES}
        verdicts = [measure.paired_verdict(result, measure_key, n) for n in (d_k // 2, d_k)]
        plain, delta = "adds", "corrects"
        lines.append(
            f"**{measure_key.capitalize()}.** Plain linear attention stays at 90% or more up to N = {held[plain]}, "
            f"recalls {mean[plain][at[d_k]]:.0%} at N = d_k and {mean[plain][at[result.n[-1]]]:.0%} at N = "
            f"{result.n[-1]}; the delta rule up to N = {held[delta]}, {mean[delta][at[d_k]]:.0%} at d_k and "
            f"{mean[delta][at[result.n[-1]]]:.0%} at {result.n[-1]}. The delta rule against plain, seed by seed: "
            + "; ".join(f"at N = {v.n} {v.difference:+.0%} (95% interval {v.low:+.0%} to {v.high:+.0%}): {v.word}"
                        for v in verdicts)
            + f" (a difference within ±{measure.MARGIN:.0%} counts as none, fixed before measuring).")
        expectations = [
            ("plain linear attention loses recall before N reaches d_k", held[plain] < d_k),
            ("the delta rule holds closer to d_k than plain (more recalled at N = d_k, seed-paired)",
             verdicts[1].word == "better"),
            ("both fail past d_k (under half recalled at 3·d_k)",
             max(mean[plain][at[result.n[-1]]], mean[delta][at[result.n[-1]]]) < 0.5)]
        lines.append("What one might expect, against this measure: "
                     + "; ".join(f"{claim}: **{'yes' if held_up else 'no'}**" for claim, held_up in expectations)
                     + ".")
    st.markdown("\n\n".join(lines))
    st.caption("Why the two readings part: adding keeps every pair in the sum, each read is its value plus "
               "cross-talk from every other key (growing like √(N/d_k)), so the right value stays the nearest long "
               "after the read stops being close to it. The delta rule with β = 1 stores the newest pair exactly and "
               "shrinks the older ones a little at every write along a similar key, so it reproduces recent pairs "
               "well and forgets old ones. A state of d_k × d_v has rank at most d_k: past d_k pairs, no rule can "
               "return every value exactly.")

for _ in when_open(tabs[5]):
    st.subheader("Recall at distance: the trained models, full, hybrid and all-linear")
    try:
        measured = measure.recall_measured()
    except FileNotFoundError as exc:
        st.error(str(exc))
        st.stop()
    distances, models = measured["distances"], measured["models"]
    st.markdown(f"Each row reads a held-out phrase of {measured['phrase_chars']} characters, held-out text, and the "
                f"phrase again, its second copy starting d characters after the first; a control row's first phrase "
                f"is another. A model that recalls predicts the second copy better than the same characters in the "
                f"control rows. {measured['rows']} phrases per distance, every character of the copy but its first.")
    show_chart(recall_curves(distances, {m["label"]: (m["recall"]["accuracy"], m["recall"]["control_accuracy"])
                                         for m in models}), key="state_recall")
    table = pd.DataFrame([{"model": m["label"], "layers": ", ".join(m["layers"]), "parameters": m["parameters"],
                           "steps": m["steps"] or "", **{f"lift at d = {d}": f"{lift:+.0%}"
                                                         for d, lift in zip(distances, measure.recall_lift(m))}}
                          for m in models])
    st.dataframe(table, hide_index=True)
    far = distances[-1]
    st.markdown("**At the farthest distance**, d = " + f"{far}: " + "; ".join(
        f"{m['label']} {'recalls' if measure.recall_lift(m)[-1] >= measure.COPIES else 'does not recall'} "
        f"({measure.recall_lift(m)[-1]:+.0%} over its control rows)" for m in models)
        + f". A lift of {measure.COPIES:.0%} or more counts as recalling, fixed before measuring.")
    st.caption("Measured by `python -m scripts.measure_recall` (`transformer.training.recall`) on the shipped "
               "checkpoints, in float32. The full-attention model is Qwen3's English checkpoint: the recipe of the "
               "other two but softmax in every layer and 4,000 steps against 3,000, so a part of any gap is training; "
               "all three trained on rows where a span repeats 20 to 200 characters after itself.")
