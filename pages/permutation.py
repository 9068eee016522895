"""Why positions: without them (and without a mask) self-attention is permutation equivariant -- shuffle the input,
and the outputs are only shuffled the same way."""
import numpy as np
import pandas as pd
import streamlit as st

from transformer import AXES, TransformerConfig, axes, choices, probes
from ui.figures import probe as figs
from ui.app.export import heatmaps_png
from ui.app.page import load_page
from ui.app.charts import show_chart
from ui.app.tabs import lazy_tabs, when_open
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.layers import softmax_twin, state_layers
from ui.compute.probe_measure import (DTYPES, permutation_results, permutation_run, prefix_shuffle, shuffle_order,
                                      shuffled_text, words_to_shuffle)

MAX_SHOWN = 24  # tokens: enough to shuffle, few enough to read every cell
POSITIONS = list(choices("position"))
MASKS = {"none": "no mask (encoder)", "causal": "causal mask (decoder)"}
url_state("perm", perm_seed=1, perm_dtype="float32", perm_mask="none", perm_pos="none", perm_layer=0, perm_head=0,
          perm_tab=str)  # the open tab
keep_valid("perm_seed", range(0, 100_000), 1)
keep_valid("perm_dtype", list(DTYPES), "float32")
keep_valid("perm_mask", list(MASKS), "none")
keep_valid("perm_pos", POSITIONS, "none")

ctx = load_page("Why positions? Attention sees a set", """
**The problem.** Attention mixes values with weights softmax(q · k). Nothing in q · k says *where* a token is: with no
position information and no mask, shuffle the input tokens and each token gets the same q, k and v as before, the same
scores with the same keys — everything is just shuffled along. This is **permutation equivariance**: *dog bites man* and
*man bites dog* give the same outputs, in a different order.

**The idea.** Give the model order from outside the content: add position vectors (sinusoidal, learned), rotate q and
k by position (RoPE) or penalise distance in the scores (ALiBi). A causal mask is a second source of order: which
keys a query may see depends on where it is.

**What to look at.** Shuffle the text, run the model, put the outputs and the attention rows and columns back in the
original order, and compare: without positions and without a mask the difference is zero (exactly, or up to float
rounding); with any position scheme, or with a causal mask, it is not.
""")
cfg = ctx.state.config

ids, labels = ctx.tokens.ids[:MAX_SHOWN], ctx.tokens.labels[:MAX_SHOWN]
if len(ids) < 2:
    st.error("Shuffling needs at least two tokens: type a longer text in the sidebar.")
    st.stop()
if len(ctx.tokens.ids) > MAX_SHOWN:
    st.caption(f"The page uses the first {MAX_SHOWN} tokens of the input.")
words = words_to_shuffle(ctx.tokens, len(ids))  # None for characters; with pieces, the shuffle moves whole words
if words is not None and words < 2:
    st.error("Shuffling whole words needs at least two words: type a longer text in the sidebar.")
    st.stop()


def bump_seed() -> None:
    st.session_state["perm_seed"] = (int(st.session_state["perm_seed"]) + 1) % 100_000


col1, col2, col3 = st.columns([2, 1, 2])
col1.number_input("Shuffle seed", min_value=0, max_value=99_999, step=1, key="perm_seed", **KEEP)
col2.button(":material/shuffle: Shuffle again", on_click=bump_seed, help="the next seed: a new random order")
col3.selectbox("Precision", list(DTYPES), key="perm_dtype", **KEEP,
               help="float64 shows what float32 rounding hides: the same sums in another order round differently")
seed, dtype = int(st.session_state["perm_seed"]), st.session_state["perm_dtype"]
perm = shuffle_order(ctx.tokens, len(ids), seed)  # the new order of the T tokens: whole words where they are pieces
st.markdown(f"**Text:** `{shuffled_text(ctx.tokens, range(len(ids)))}`  \n"
            f"**Shuffled:** `{shuffled_text(ctx.tokens, perm)}`")
if words is not None:
    st.caption("The tokens are pieces of words, so the shuffle moves whole words, as in *I ate rice* and *rice ate "
               "I*: each word's pieces stay together, and the start token stays first.")
if [ids[i] for i in perm] == list(ids):
    st.warning("This shuffle only swaps equal tokens, so the shuffled text is the same text: try another seed or a "
               "text with more different tokens.")
st.info(f"Each model here has the sidebar's sizes and axes (d_model = {cfg.d_model}, {cfg.n_heads} heads, "
        f"{cfg.n_layers} layers, {axes.label('norm', cfg.norm)}, {axes.label('ffn', cfg.ffn)}) with its position scheme and mask replaced, and **random weights** "
        f"(seed {ctx.state.seed}, each matrix N(0, 1/fan_in) so the scores are of order 1) — trained weights belong to "
        "one position scheme only. Equivariance is a property of the architecture, not of the weights.", icon=":material/casino:")

if state_layers(cfg):  # a state is written in order: no linear layer can be bidirectional, or blind to order
    st.info(f"The sidebar's model has linear layers ({', '.join(str(i) for i in state_layers(cfg))}); the models "
            "here use softmax attention in every layer instead. A layer that keeps a state reads the past through "
            "one matrix written token by token: it cannot see the tokens after it, and the order of the writes "
            "already changes what it holds (with a decay or the delta rule; plain linear attention's sum does "
            "not depend on it, but it is causal all the same).")
config_json = softmax_twin(cfg).to_json()
run_args = (tuple(ids), perm, ctx.state.seed, dtype)


def every_run() -> tuple[dict, float]:
    """The ten runs (every position scheme, without and with a causal mask) and the float rounding they are judged
    against, set by the largest logit of any of them; on a configuration they refuse, an error and a stop."""
    try:
        results = permutation_results(config_json, *run_args)
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    return results, probes.rounding_tolerance(DTYPES[dtype], max(r["output_scale"] for r in results.values()))


def one_run(mask: str, position: str) -> dict:
    """One of the ten runs alone, asked for by the config permutation_results gives it: the same cached result."""
    try:
        run_cfg = probes.equivariance_config(TransformerConfig.from_json(config_json), position,
                                             causal=AXES["mask"].row(mask).causal)
        return permutation_run(run_cfg.to_json(), *run_args)
    except ValueError as exc:
        st.error(str(exc))
        st.stop()


def verdict(result: dict, tolerance: float) -> str:
    worst = max(result["outputs"], result["patterns"])
    if worst == 0.0:
        return "equivariant: exactly 0"
    if worst <= tolerance:
        return "equivariant: zero up to float rounding"
    return "not equivariant"


# --- the four views, one tab each: a rerun computes and draws only the open tab's ---------------------------
# (a sidebar change that makes new models built eleven of them and drew every chart; the first tab needs one model)
plain_tab, schemes_tab, weights_tab, prefix_tab = lazy_tabs(
    ["No positions, no mask", "Every position scheme", "Weights put back in order", "A causal mask alone"],
    key="perm_tab")

# --- no positions, no mask --------------------------------------------------------------------
for _ in when_open(plain_tab):
    st.subheader("No positions, no mask: the outputs only move")
    plain = one_run("none", "none")  # one model: a sidebar change no longer builds the other nine for this tab
    tolerance = probes.rounding_tolerance(DTYPES[dtype], plain["output_scale"])  # the rounding of this model's logits
    # The ten runs share one tolerance, from the largest logit of any (never below this one), and the verdict is the
    # same against either unless the difference lies above this one: only then are the ten needed to decide.
    judged_against = tolerance if max(plain["outputs"], plain["patterns"]) <= tolerance else every_run()[1]
    c1, c2, c3 = st.columns(3)
    c1.metric("max |logits − un-shuffled logits|",
              repr(plain["outputs"]) if plain["outputs"] == 0 else f"{plain['outputs']:.1e}",
              help=f"largest |logit| {plain['output_scale']:.3g}")
    c2.metric("max |weights − un-shuffled weights|",
              repr(plain["patterns"]) if plain["patterns"] == 0 else f"{plain['patterns']:.1e}",
              help="every layer and head, rows and columns put back in the original order")
    c3.metric("verdict", verdict(plain, judged_against).split(": ")[-1])
    st.caption(f"In {dtype}, float rounding is about {tolerance:.0e} here. A shuffled input takes the same sums in "
               "another order (softmax over the keys, matrix products over the rows), and floating-point addition is not "
               "associative: the last bits can differ. Switch to float64 to see the difference shrink by about nine "
               "orders of magnitude — it is rounding, not information about order.")

# --- every position scheme, with and without a causal mask -----------------------------------
for _ in when_open(schemes_tab):
    results, tolerance = every_run()
    st.subheader("Every position scheme, with and without a causal mask")
    col1, col2 = st.columns(2)
    for column, mask in zip((col1, col2), MASKS):
        show_chart(figs.equivariance_bars(POSITIONS, [results[(mask, p)]["outputs"] for p in POSITIONS],
                                          [results[(mask, p)]["patterns"] for p in POSITIONS], tolerance,
                                          f"{MASKS[mask]}: max |difference|"), key=f"perm_bars_{mask}", where=column)
    table = pd.DataFrame([{"mask": MASKS[mask], "position": position, "max |Δ logits|": r["outputs"],
                           "max |Δ weights|": r["patterns"], "largest |logit|": r["output_scale"],
                           "verdict": verdict(r, tolerance)}
                          for (mask, position), r in results.items()])
    st.dataframe(table.style.format({"max |Δ logits|": "{:.2e}", "max |Δ weights|": "{:.2e}",
                                     "largest |logit|": "{:.3g}"}), hide_index=True)
    st.download_button("Download the differences (CSV)", on_click="ignore", mime="text/csv",
                       file_name=f"permutation_seed{seed}_{dtype}.csv", data=lambda: table.to_csv(index=False))
    st.markdown("Any position scheme breaks the symmetry: the same token gets a different vector (sinusoidal, "
                "learned), a different rotation (RoPE) or a different distance penalty (ALiBi) at its new place. So does "
                "a causal mask alone: after the shuffle a token sees a different set of earlier tokens.")

# --- look at one layer and head ---------------------------------------------------------------
for _ in when_open(weights_tab):
    st.subheader("Weights put back in order")
    col1, col2, col3, col4 = st.columns(4)
    keep_valid("perm_layer", range(cfg.n_layers), 0)
    keep_valid("perm_head", range(cfg.n_heads), 0)
    col1.selectbox("Mask", list(MASKS), format_func=MASKS.get, key="perm_mask", **KEEP)
    col2.selectbox("Position", POSITIONS, key="perm_pos", **KEEP)
    col3.selectbox("Layer", range(cfg.n_layers), key="perm_layer", **KEEP)
    col4.selectbox("Head", range(cfg.n_heads), key="perm_head", **KEEP)
    mask, position = st.session_state["perm_mask"], st.session_state["perm_pos"]
    layer, head = int(st.session_state["perm_layer"]), int(st.session_state["perm_head"])
    chosen = one_run(mask, position)
    original, back = chosen["weights"][layer, head], chosen["weights_back"][layer, head]  # (T, T) each
    title = f"{MASKS[mask]}, {position} positions · layer {layer} · head {head}"
    show_chart(figs.unshuffled_patterns(original, back, labels, title), key="perm_patterns")
    st.caption("Left: the weights on the text. Middle: the weights on the shuffled text, with rows (queries) and "
               "columns (keys) put back in the original order. Right: their difference, white where it is zero.")
    st.download_button("Download these weights (PNG)", on_click="ignore", mime="image/png",
                       file_name=f"permutation_{mask}_{position}_layer{layer}_head{head}.png",
                       data=lambda: heatmaps_png([("on the text", original, "weights"),
                                                  ("shuffled, put back", back, "weights"),
                                                  ("difference", back - original, "signed")], labels, labels,
                                                 title=title))

# --- a causal mask is enough to know some order --------------------------------------------------
for _ in when_open(prefix_tab):
    st.subheader("A causal mask alone lets order in")
    if len(ids) < 3:
        st.info("Keeping the last token in place and shuffling the others needs at least three tokens.")
        st.stop()
    prefix_perm = probes.seeded_permutation(len(ids), seed, keep_last=True)
    prefix = prefix_shuffle(config_json, tuple(ids), tuple(prefix_perm.tolist()), ctx.state.seed, dtype)
    last = np.asarray(prefix["resid"])[:, -1]  # (L,) the last token, after each block
    st.markdown(f"A decoder with **no positions**: keep the last token last and shuffle the {len(ids) - 1} before "
                f"it (`{' '.join(labels[i] for i in prefix_perm.tolist())}`). In block 0 the last query sees every key, "
                "the same set in another order, so its output cannot change. Every other token now sees a different "
                "set of earlier tokens, so its output does change — and from block 1 on the last token reads those "
                "changed values. The mask is the only thing here that knows about order, and it is enough: stacked "
                "causal layers can work out where a token is (for example, how many tokens it can see).")
    cols = st.columns(min(len(last), 4))
    for i, value in enumerate(last[:len(cols)]):
        cols[i].metric(f"last token after block {i}: max |Δ|", repr(float(value)) if value == 0 else f"{value:.1e}")
    show_chart(figs.position_differences(np.asarray(prefix["resid"]), labels, "causal, no positions, prefix "
                                         "shuffled: max |difference| per token and block"), key="perm_prefix")
    if cfg.n_layers == 1:
        st.caption("With one layer the last token's output does not change at all: add a layer in the sidebar to see "
                   "the change reach it.")
