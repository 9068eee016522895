"""What a model costs: parameters term by term, FLOPs per token, and memory for training and generation."""
import pandas as pd
import streamlit as st

from transformer import MODEL_CARDS, TransformerConfig, param_counts
from transformer.costs import (SYMBOLS, forward_flops_per_token, generation_bytes, memory_bytes, param_terms,
                               training_bytes, training_flops, training_flops_per_token)
from transformer.scaling import TOKENS_PER_PARAM
from ui.app.page import start_page
from ui.app.charts import show_chart
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.model_cache import get_model
from ui.figures import chapters as figs

SIDEBAR = "the sidebar's model"
# "GPT-2 small" -> (its card, "small", its real-size config)
REAL = {card.label(size): (card, size, cfg) for card in MODEL_CARDS.values() for size, cfg in card.real.items()}
MAX_CONTEXT, MAX_BATCH = 1_048_576, 4096
url_state("cost", cost_model=SIDEBAR, cost_context=2048, cost_batch=1, cost_fused=True)
keep_valid("cost_model", [SIDEBAR, *REAL], SIDEBAR)
keep_valid("cost_context", range(1, MAX_CONTEXT + 1), 2048)
keep_valid("cost_batch", range(1, MAX_BATCH + 1), 1)

state = start_page("What a model costs", """
**The problem.** "7B", "70B", "175B": where do the parameters sit, what does a token cost to run and to train on, and
why does training a model need many times the memory of its weights?

**The idea.** Every count follows from the dimensions. A block holds about **4·D²** in attention (W_q, W_k, W_v,
W_o) and **8·D²** in a feed-forward network 4·D wide; SwiGLU's three matrices are made 8D/3 wide to match. A forward
pass costs about **2 FLOPs per parameter** per token (a multiply and an add), training about **6** (the backward pass
costs twice the forward). Training with Adam in mixed precision holds **16 bytes per parameter** before a single
activation.

**What to look at.** The table derives the count term by term and, for the sidebar's model, checks it against the
built model's own tensors; pick a real model to see the same formulas at full size.
""")
col1, col2, col3, col4 = st.columns([3, 2, 1, 2])
col1.selectbox("Model", [SIDEBAR, *REAL], key="cost_model", **KEEP)
col2.number_input("Context (tokens)", min_value=1, max_value=MAX_CONTEXT, key="cost_context", **KEEP)
col3.number_input("Batch", min_value=1, max_value=MAX_BATCH, key="cost_batch", **KEEP)
col4.toggle("Fused attention", key="cost_fused", **KEEP,
            help="a fused kernel (SDPA, flash attention) keeps no T x T matrix for the backward pass")
choice = st.session_state["cost_model"]
context, batch = int(st.session_state["cost_context"]), int(st.session_state["cost_batch"])


def short(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:,.2f}{unit}"
    return f"{n:,.0f}"


def parameters(cfg: TransformerConfig, counts: dict[str, int]) -> None:
    st.subheader("Parameters, term by term")
    table = pd.DataFrame([{"part": t.part, "term": t.name, "formula (one copy)": t.formula, "one copy": t.per_copy,
                           "copies": t.copies, "parameters": t.count, "share": t.count / counts["total"]}
                          for t in param_terms(cfg)])
    st.dataframe(table.style.format({"one copy": "{:,}", "parameters": "{:,}", "share": "{:.1%}"}), hide_index=True)
    st.caption(" · ".join(f"{symbol} = {meaning}" for symbol, meaning in SYMBOLS.items()) +
               f". Here V = {cfg.vocab_size:,}, D = {cfg.d_model:,}, L = {cfg.n_layers}, H = {cfg.n_heads}, "
               f"G = {cfg.n_kv_heads}, d_h = {cfg.d_head}, F = {cfg.d_ff:,}.")
    col1, col2, col3 = st.columns(3)
    col1.metric("parameters (the formulas)", short(counts["total"]),
                f"{short(counts['active'])} used per token" if counts["active"] != counts["total"] else None,
                delta_color="off", delta_arrow="off")
    rule = 12 * cfg.n_layers * cfg.d_model ** 2 + cfg.vocab_size * cfg.d_model
    col2.metric("rule of thumb 12·L·D² + V·D", short(rule), f"{rule / counts['total'] - 1:+.1%} off",
                delta_color="off", delta_arrow="off",
                help="4·D² attention + 8·D² FFN per block, plus the embedding; GQA, MoE and SwiGLU widths move it")
    if choice == SIDEBAR:
        live_check(col3, counts["total"])
    else:
        card, size, _ = REAL[choice]
        published = card.published_params.get(size)
        if published:
            col3.metric("published", short(published), f"{counts['total'] / published - 1:+.1%} from the formulas",
                        delta_color="off", delta_arrow="off")


def live_check(col, total: int) -> None:
    """The formulas' total beside the sum over the live model's own tensors."""
    try:
        model = get_model(state.config_json, state.seed, state.weights)
    except (ValueError, OSError) as exc:
        col.warning(f"The live model did not load: {exc}")
        return
    built = sum(p.numel() for p in model.parameters())  # each tensor once: tied weights count once
    col.metric("the live model's tensors", short(built), "equal" if built == total else "differ",
               delta_color="normal" if built == total else "inverse",
               help="sum of numel() over the parameters of the model every page runs")


def flops(cfg: TransformerConfig, counts: dict[str, int]) -> None:
    st.subheader("FLOPs per token")
    col1, col2, col3 = st.columns(3)
    col1.metric(f"forward, at {context:,} keys", f"{forward_flops_per_token(cfg, context):.3g}",
                f"2·N = {2 * counts['active']:.3g}", delta_color="off", delta_arrow="off",
                help="2 x every weight the token multiplies by, plus q·K and weights·V over the keys it sees")
    col2.metric("training (forward + backward)", f"{training_flops_per_token(cfg, context):.3g}", "3 × forward",
                delta_color="off", delta_arrow="off")
    tokens = TOKENS_PER_PARAM * counts["total"]
    col3.metric(f"a compute-optimal run: {short(tokens)} tokens", f"{training_flops(counts['active'], tokens):.3g}",
                "6·N·D FLOPs", delta_color="off", delta_arrow="off",
                help=f"{TOKENS_PER_PARAM} tokens per parameter (How models grow)")


def memory(cfg: TransformerConfig) -> None:
    st.subheader("Memory")
    held = memory_bytes(cfg, context, batch, fused_attention=bool(st.session_state["cost_fused"]))
    training = {part: n for part, n in held.items() if part != "kv_cache"}
    show_chart(figs.memory_bars(training, {"weights": held["weights"], "kv_cache": held["kv_cache"]},
                                f"{choice}: batch {batch} × {context:,} tokens"), key="cost_memory")
    col1, col2 = st.columns(2)
    col1.metric("training", f"{training_bytes(held) / 1e9:,.3g} GB",
                f"weights are {held['weights'] / training_bytes(held):.0%} of it", delta_color="off", delta_arrow="off")
    col2.metric("generation", f"{generation_bytes(held) / 1e9:,.3g} GB",
                f"KV cache {held['kv_cache'] / generation_bytes(held):.0%}", delta_color="off", delta_arrow="off")
    st.caption("Training in mixed precision with Adam: 16-bit weights and gradients, and in float32 a master copy "
               "and Adam's two moments — 16 bytes per parameter (Rajbhandari et al. 2020, ZeRO). Activations: "
               "s·b·D·(34 + 5·H·s/D) bytes per block with 16-bit activations and no recomputation (Korthikanti "
               "et al. 2022); a fused kernel drops the 5·H·s/D term. Generation: 16-bit weights and the KV cache.")


cfg = state.config if choice == SIDEBAR else REAL[choice][2]
if cfg is None:
    st.error(f"The sidebar's axes describe an impossible model: {state.error} Pick a real model above, or fix the "
             "sidebar.")
else:
    counts = param_counts(cfg)
    try:
        parameters(cfg, counts)
        flops(cfg, counts)
        memory(cfg)
    except ValueError as exc:
        st.error(str(exc))

st.subheader("From the Transformer to GPT-3")
by_size = sorted(REAL.items(), key=lambda item: param_counts(item[1][2])["total"])
rows = [{"model": name, **param_counts(real)} for name, (_, _, real) in by_size]
show_chart(figs.parameter_shares(rows, "where the parameters sit, smallest model first"), key="cost_shares")
embedding_share = {row["model"]: row["embedding"] / row["total"] for row in rows}
smallest, largest = rows[0]["model"], rows[-1]["model"]
st.caption(f"The embedding is {embedding_share[smallest]:.0%} of {smallest} and {embedding_share[largest]:.1%} of "
           f"{largest}: as D grows, the blocks' 12·L·D² outgrows the V·D of the vocabulary.")
