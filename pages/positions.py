"""Positions: sinusoidal, learned, RoPE, xPos, ALiBi and T5's buckets -- what each adds, and what happens past the
trained length."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st
import torch

from transformer import analysis, axes
from transformer.hooks import attention_stacks, hook_name
from transformer.positions import rope_inv_freq
from transformer.probes import with_position
from ui.figures import axes as figs
from ui.figures import modern as modern_figs
from ui.compute.measure import (alibi, beyond_trained_length, cosine_similarity, learned_checkpoint, learned_table,
                                length_extrapolation, rope_geometry, rotary_decay, sinusoidal, t5_buckets)
from ui.app.page import load_page
from ui.app.charts import show_chart
from ui.app.figure_cache import cached_figure
from ui.app.tabs import lazy_tabs, when_open
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.layers import softmax_layers, softmax_twin
from ui.compute.model_cache import get_model
from ui.compute.nope_measure import LONGER_THAN, NOPE_MODEL, nope_view
from ui.compute.shipped import shipped_models
from ui.compute.tokens import encode_text
from ui.figures.base import side_by_side

url_state("pos", pos_n=48, pos_p=3, pos_train=16, pos_run=24, t5_buckets=32, t5_max_distance=128, t5_stack="encoder",
          rope_scale_factor=4.0, rope_scale_model="llama2-language",
          pos_tab=str)  # pos_tab: the open tab (lazy_tabs below), so a link can open one
keep_valid("pos_n", range(8, 257), 48)
keep_valid("pos_train", range(2, 129), 16)
keep_valid("pos_run", range(1, 257), 24)
keep_valid("pos_p", range(st.session_state["pos_n"]), 0)
T5_STACKS = {"encoder": True, "decoder": False}  # T5's stacks: whether their buckets are split by sign
keep_valid("t5_stack", list(T5_STACKS), "encoder")
MODERN_MEASURED = Path(__file__).resolve().parent.parent / "assets" / "measurements" / "modern-variants.json"

ctx = load_page("Positions: where is each token?", """
**The problem.** Attention is a weighted sum over a set: shuffle the keys and values together and every output stays
the same. Without help, "the cat sat on the mat" and "the mat sat on the cat" look alike to it.

**The ideas.** *Add* a position vector to each token's embedding (sinusoidal: fixed waves; learned: a trained table),
*rotate* q and k by an angle that grows with position (RoPE: the score then depends on the distance m − n only;
xPos: the turn also decays with distance), or
*penalise* distance straight in the scores (ALiBi: nothing to learn, and a bias defined at any length; T5: a learned
bias per head for each bucket of distances, the buckets logarithmic). The lecture
says RoPE has "excellent extrapolation to longer sequences" and ALiBi "generalizes very well to longer sequences than
seen during training"; the length test below and [Trade-offs, measured](tradeoffs) show what this lab's models did.

**What to look at.** The sinusoidal waves and their distance-only similarity; the learned table; RoPE's rotating pairs
and its diagonals, constant to float precision; ALiBi's straight-line biases, and which schemes survive an input longer
than `max_len`.
""")
cfg = ctx.state.config
# RoPE and ALiBi act inside softmax attention: a layer that keeps a state turns no q and k and adds no bias, so the
# models this page builds to compare the schemes have softmax in every layer, and the live q and k come from the
# first softmax layer where the sidebar's model has one
twin = softmax_twin(cfg)
first = (softmax_layers(cfg) or [0])[0]
st.caption(f"The sidebar's model uses **{axes.label('position', cfg.position)}** positions; this page shows all of them, "
           f"at the sidebar's sizes (d_model = {cfg.d_model}, d_head = {cfg.d_head}, H = {cfg.n_heads}).")
st.slider("Positions shown", min_value=8, max_value=256, key="pos_n", **KEEP)
n_positions = int(st.session_state["pos_n"])

# only the open tab is computed: ALiBi's builds five models past their trained length
sin_tab, learned_tab, rope_tab, xpos_tab, alibi_tab, t5_tab, nope_tab = lazy_tabs(
    [*(axes.label("position", p) for p in ("sinusoidal", "learned", "rope", "xpos", "alibi", "t5")),
     "Layers without positions (NoPE)"], key="pos_tab")

for _ in when_open(sin_tab):
    st.markdown("PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)): each pair of dimensions is a "
                "clock running at its own speed, fast on the left, slow on the right — a binary counter made smooth.")
    table, similarity = sinusoidal(n_positions, cfg.d_model)
    col1, col2 = st.columns(2)
    show_chart(cached_figure(figs.position_table, table, "position vectors (position × dimension)"), key="sin_table",
               where=col1)
    show_chart(cached_figure(figs.position_similarity, similarity, "PE[m] · PE[n]"), key="sin_similarity", where=col2)
    _, spread = analysis.diagonal_spread(analysis.sinusoidal_similarity(n_positions, cfg.d_model))
    st.markdown(f"The dot product of two position vectors is Σ cos((m − n)·ω_i): it depends on the distance only — "
                f"every diagonal holds one value (largest spread along a diagonal: {float(spread.max()):.1e}) — and "
                "falls off with distance, so nearby positions look alike.")

for _ in when_open(learned_tab):
    found = learned_checkpoint()
    if found:
        name, table = found
        st.markdown(f"The position table of the trained checkpoint **{name}** (rows past the lengths it trained on stay "
                    "near their random start).")
    else:
        learned_cfg = cfg if cfg.row("position").table_param_terms else with_position(cfg, "learned")
        table = learned_table(learned_cfg.to_json(), ctx.state.seed)
        st.warning("No trained checkpoint with learned positions is available, so this is the table of the current "
                   "model's configuration with learned positions — **untrained: random numbers**. Training shapes it: "
                   "nearby rows become similar. Note its hard limit: it has exactly max_len rows.", icon=":material/casino:")
    shown = table[:n_positions]
    col1, col2 = st.columns(2)
    show_chart(cached_figure(figs.position_table, shown, f"learned table, first {len(shown)} of {len(table)} rows"),
               key="learned_table", where=col1)
    show_chart(cached_figure(figs.position_similarity, cosine_similarity(shown), "cosine similarity of rows"),
               key="learned_similarity", where=col2)

for _ in when_open(rope_tab):
    # the dimensions RoPE turns: all of a head's, or the first d_rope of them (partial RoPE, MLA's decoupled part)
    d_rot = cfg.d_rope or cfg.d_head
    if d_rot % 2:
        st.error(f"RoPE rotates pairs of dimensions, but d_head = {cfg.d_head} is odd: choose d_model and heads that "
                 "give an even head dimension to see it.")
    else:
        stack = attention_stacks(cfg.arch).input
        q = ctx.trace.arrays[hook_name(first, "attn.hook_q", stack)][0, 0, -1, :d_rot]  # last token, head 0, before RoPE
        k = ctx.trace.arrays[hook_name(first, "attn.hook_k", stack)][0, 0, 0, :d_rot]  # first token, kv head 0
        geo = rope_geometry(tuple(map(float, q)), tuple(map(float, k)), n_positions, cfg.rope_theta)
        part = (f"the first {d_rot} of each head's d_head = {cfg.d_head} dimensions (the rest pass unturned)"
                if d_rot < cfg.d_head else f"each head's d_head = {cfg.d_head} dimensions")
        st.markdown(f"RoPE splits {part} into {d_rot // 2} pairs "
                    f"(dimension i with i + {d_rot // 2}) and turns pair i by position × θ^(−2i/d), "
                    f"θ = {cfg.rope_theta:g}. The first pairs spin fast (local order), the last barely move "
                    "(long range).")
        if cfg.row("rope_scaling").rescales:
            st.caption(f"The sidebar's model stretches these frequencies with "
                       f"{axes.label('rope_scaling', cfg.rope_scaling)} (factor {cfg.rope_factor:g}): "
                       f"{axes.AXES['rope_scaling'].choices[cfg.rope_scaling].does}. Shown here as trained, unscaled.")
        show_chart(cached_figure(figs.rope_angles, geo["angles"], rope_inv_freq(d_rot, cfg.rope_theta).numpy()),
                   key="rope_angles")
        keep_valid("pos_p", range(n_positions), 0)
        st.slider("Position of the query", min_value=0, max_value=n_positions - 1, key="pos_p", **KEEP)
        show_chart(figs.rope_vectors(geo["pairs"], int(st.session_state["pos_p"])), key="rope_vectors")
        st.caption("The vector is the live model's q of the last input token (layer 0, head 0) before rotation; "
                   "only its angle changes with position — its length, and so its content, stays.")
        st.subheader("q · k depends only on the distance m − n")
        st.markdown("Put the same q content at every position m and the same k content (the first token's k) at every "
                    "position n, rotate each by its position, and take the dot product.")
        scale = float(np.abs(geo["scores"]).max())
        col1, col2 = st.columns(2)
        show_chart(figs.rope_scores(geo["scores"], "RoPE(q, m) · RoPE(k, n)"), key="rope_scores", where=col1)
        show_chart(figs.diagonal_spread(geo["offsets"], geo["spread"], scale), key="rope_spread", where=col2)
        st.metric("largest spread along any diagonal, relative to the largest score",
                  f"{float(geo['spread'].max()) / scale:.1e}")
        st.caption("Constant along diagonals up to float32 rounding: rotating q by mω and k by nω leaves their dot "
                   "product with the angle (m − n)ω only. Absolute position is gone; relative position remains.")
        st.download_button("Download the spread per diagonal (CSV)", on_click="ignore", file_name="rope_diagonals.csv",
                           mime="text/csv",
                           data=lambda: pd.DataFrame({"distance_m_minus_n": geo["offsets"], "max_minus_min": geo["spread"]})
                           .to_csv(index=False))

for _ in when_open(xpos_tab):
    st.markdown(f"xPos turns q and k as RoPE does, and also scales them: pair i of q by ζ_i^(t/512), of k by "
                f"ζ_i^(−t/512), with ζ_i = (2i/d + 0.4) / 1.4 below 1. In q · k the two meet as ζ_i^((m − n)/512): the "
                f"score still depends on the distance only, and each pair's share shrinks with it, the fast-turning "
                "pairs (whose oscillation at long range is noise) fastest.")
    d_rot = cfg.d_rope or cfg.d_head
    if d_rot % 2:
        st.error(f"xPos turns pairs of dimensions, but d_head = {cfg.d_head} is odd: choose d_model and heads that "
                 "give an even head dimension to see it.")
    else:
        stack = attention_stacks(cfg.arch).input
        q = ctx.trace.arrays[hook_name(first, "attn.hook_q", stack)][0, 0, -1, :d_rot]  # last token, head 0, unturned
        k = ctx.trace.arrays[hook_name(first, "attn.hook_k", stack)][0, 0, 0, :d_rot]  # first token, kv head 0
        decay = rotary_decay(tuple(map(float, q)), tuple(map(float, k)), 2048, cfg.rope_theta)
        col1, col2 = st.columns(2)
        show_chart(cached_figure(figs.score_by_distance, decay["distances"], decay["scores"]), key="xpos_scores",
                   where=col1)
        show_chart(cached_figure(figs.pair_decay, decay["distances"], decay["decay"]), key="xpos_decay", where=col2)
        st.caption(f"The live model's q of the last token and k of the first (layer 0, head 0), placed at every "
                   f"distance up to 2,048 tokens (θ = {cfg.rope_theta:g}). RoPE's score keeps swinging as far as it "
                   f"goes; xPos's swings die down. At 2,048 tokens the fastest pair keeps "
                   f"{float(decay['decay'][0, -1]):.3f} of its share, the slowest {float(decay['decay'][-1, -1]):.3f}.")

for _ in when_open(alibi_tab):
    st.markdown("ALiBi adds −m_h × |i − j| to head h's scores: nothing is added to the embeddings and nothing is "
                "learned. Each head has its own slope, so some heads look far and others stay local.")
    slopes, bias = alibi(cfg.n_heads, 12)
    col1, col2 = st.columns([1, 2])
    show_chart(cached_figure(figs.alibi_slopes, slopes), key="alibi_slopes", where=col1)
    show_chart(cached_figure(figs.alibi_biases, bias), key="alibi_biases", where=col2)

    st.subheader("Longer than trained")
    st.markdown("Each scheme gets `max_len` = the trained length, then an input longer than that. A table with "
                "max_len rows has no row for position max_len: learned (and, in this library, sinusoidal) positions "
                "stop with a clear error. RoPE and ALiBi compute their angle or bias from the position itself, so they "
                "run; ALiBi's penalty simply extends to the new distances.")
    col1, col2 = st.columns(2)
    col1.number_input("Trained length (max_len)", min_value=2, max_value=128, key="pos_train", **KEEP)
    col2.number_input("Input length", min_value=1, max_value=256, key="pos_run", **KEEP)
    trained, run = int(st.session_state["pos_train"]), int(st.session_state["pos_run"])
    ids = tuple(ctx.tokens.ids[i % len(ctx.tokens.ids)] for i in range(run))  # the text, repeated to length
    results = beyond_trained_length(twin.to_json(), ctx.state.seed, ids, trained)
    st.dataframe(pd.DataFrame([{"position": name, "runs": "yes" if r["error"] is None else "no",
                                "message": r["error"] or f"{run} tokens processed"} for name, r in results.items()]),
                 hide_index=True)
    if run <= trained:
        st.info(f"The input ({run} tokens) fits in max_len = {trained}: make it longer to see the difference.")
    weights = results["alibi"]["pattern"]  # (H, T, T)
    show_chart(cached_figure(figs.grid_heatmap, weights[0], list(range(run)), list(range(run)),
                                 f"ALiBi, head 0 of the last layer, {run} tokens (trained length {trained})",
                                 "key position", "query position", zmin=0), key="alibi_long")

for _ in when_open(t5_tab):
    st.markdown("T5 adds a learned number to head h's score for each *bucket* of distance j − i, like ALiBi but "
                "learned, one table per stack shared by all its layers. Half a direction's buckets hold one distance "
                "each; the rest cover longer and longer spans (logarithmic) up to the maximum distance, and every "
                "distance past it shares the last bucket. An encoder's buckets are split by sign (keys before and "
                "after the query); a decoder's look back only.")
    col1, col2, col3 = st.columns(3)
    col1.number_input("Buckets (relative_buckets)", min_value=0, max_value=128, key="t5_buckets", **KEEP)
    col2.number_input("Maximum distance (relative_max_distance)", min_value=0, max_value=1024, key="t5_max_distance",
                      **KEEP)
    col3.radio("Stack", list(T5_STACKS), key="t5_stack", horizontal=True, **KEEP)
    try:
        drawn = t5_buckets(cfg.n_heads, int(st.session_state["t5_buckets"]), int(st.session_state["t5_max_distance"]),
                           T5_STACKS[st.session_state["t5_stack"]], n_positions, ctx.state.seed)
    except ValueError as e:
        st.error(str(e))
    else:
        show_chart(cached_figure(figs.relative_bias, drawn["distances"], drawn["buckets"], drawn["bias"]),
                   key="t5_bias")
        sharing = int((drawn["buckets"] == drawn["last_bucket"]).sum())
        st.caption(f"The table here is untrained (N(0, 1) numbers, seed {ctx.state.seed}): training moves the heights, "
                   f"never the steps. The last bucket ({drawn['last_bucket']}) starts at distance "
                   f"{drawn['last_from']}; {sharing} of the {len(drawn['distances'])} distances shown read it, and so "
                   f"does every longer one. {axes.label('position', 'alibi')}'s penalty, by contrast, keeps growing "
                   "with every step.")

for _ in when_open(nope_tab):
    st.markdown("Llama 4 and SmolLM3 leave RoPE out of every fourth layer. Such a layer's scores carry no distance at "
                "all: a query knows only that it sees itself and what came before (the causal mask), and whatever "
                "the layers under it wrote. Llama 4's other layers see only their own chunk of the text, so its "
                "NoPE layers are the only ones that reach further back. Below, the shipped Llama 4-style model "
                "(NoPE in its last layer, chunks of 64 characters in the three below) reads the sidebar's text.")
    shipped = next((m for m in shipped_models() if Path(m.path).name == NOPE_MODEL), None)
    if shipped is None:
        st.info(f"The {NOPE_MODEL} checkpoint is not among the shipped ones; `python scripts/train_checkpoints.py "
                f"--only {NOPE_MODEL}` trains it.")
    else:
        nope_model = get_model(shipped.key, ctx.state.seed)
        nope_tokens = encode_text(ctx.state.text, shipped.key)
        if len(nope_tokens.ids) < 4:
            st.error("The sidebar's text is too short to measure: write at least four characters.")
        else:
            view = nope_view(nope_model, torch.tensor([nope_tokens.ids]), ctx.state.seed)
            layers = view["layers"]
            nope_layer, rope_layer = layers[view["nope"][-1]], layers[view["rope"][-1]]
            head = st.slider("Head", 0, nope_model.cfg.n_heads - 1, 0, key="nope_head")
            show_chart(side_by_side(rope_layer["pattern"][head], nope_layer["pattern"][head], nope_tokens.labels,
                                    nope_tokens.labels,
                                    f"A: layer {rope_layer['layer']} ({rope_layer['kind']}) · B: layer "
                                    f"{nope_layer['layer']} ({nope_layer['kind']}) · head {head}"), key="nope_patterns")
            show_chart(modern_figs.distance_profiles({f"layer {l['layer']} ({l['kind']})": l["profile"]
                                                      for l in layers}), key="nope_profiles")
            st.dataframe(pd.DataFrame([{"layer": l["layer"], "kind": l["kind"],
                                        **{f"{k} (trained)": round(v, 3) for k, v in l["summary"].items()},
                                        **{f"{k} (random init)": round(v, 3) for k, v in l["random summary"].items()}}
                                       for l in layers]), hide_index=True)
            st.caption(f"Means over {nope_model.cfg.n_heads} heads and every query but the first, on "
                       f"{len(nope_tokens.ids)} tokens; random init: the same shapes, seed {ctx.state.seed}, which "
                       "spread their weight evenly over what they see. A chunked layer's weight past its chunk is 0 "
                       "by its mask, not by learning.")
    longer = {row["model"]: row for row in length_extrapolation() if row["model"] in (NOPE_MODEL, LONGER_THAN)}
    if len(longer) == 2:
        st.markdown("**Reading longer text.** Both models trained on 512-character crops at the same size; the "
                    "Llama 4-style one differs in more than its NoPE layer (chunks, experts, L2 QK-norm), so this "
                    "compares the two designs as a whole.")
        show_chart(cached_figure(figs.length_extrapolation, [longer[LONGER_THAN], longer[NOPE_MODEL]]),
                   key="nope_length")

# --- trained models read text longer than any they saw ---------------------------------------------------
st.subheader("Reading text two and four times longer than trained on")
st.markdown("Each shipped language model saw crops of one length (256 or 512 characters, in the table). Held-out text "
            "cut into windows twice and four times as long shows which position schemes carry over. A learned table "
            "as long as the trained context (GPT-2 on English: 513 rows) has no row for a longer text, so the model "
            "refuses it with a clear error and has no line here; one kept longer would have untrained rows past it. "
            "sinusoidal vectors exist for every position but the model never met them; RoPE's angles and ALiBi's "
            "penalties are computed from the distance itself, so the model meets distances it knows.")
rows = length_extrapolation()
if rows:
    show_chart(cached_figure(figs.length_extrapolation, rows), key="length_extrapolation")
    table = pd.DataFrame([{"position": r["position"], "model": r["model"], "trained on (characters)": r["context"],
                           **r["lengths"]} for r in rows])
    st.dataframe(table, hide_index=True)
    st.download_button("Download the table (CSV)", data=lambda: table.to_csv(index=False), file_name="length_extrapolation.csv",
                       mime="text/csv", on_click="ignore", key="download_extrapolation")
else:
    st.info("No shipped language checkpoint recorded its length extrapolation; "
            "`python scripts/train_checkpoints.py` measures it.")


# --- RoPE scaling: what many long-context models do ----------------------------------------------
st.subheader("Stretching RoPE past its trained length: scaling at inference")
st.markdown("Above, RoPE's error grows fast past the trained length: its slow dimensions reach angles it never saw. "
            "Many long-context models rescale the frequencies instead (LLaMA 3.1, Qwen, DeepSeek-V3, gpt-oss), most "
            "with some training at the longer length; others raise the base and train long (Code LLaMA). "
            "**Linear** (position interpolation) slows "
            "every one; **dynamic NTK** raises the base only once the text is longer than trained; **YaRN** keeps the "
            "fast dimensions, interpolates the slow ones with a ramp between, and scales cos and sin up a little; "
            "**LLaMA 3** interpolates long wavelengths, keeps short ones and blends a band between. Choose one in the "
            "sidebar (RoPE scaling, factor), or compare them here.")
if not cfg.row("position").rotates_qk:
    st.info(f"The sidebar's model uses {axes.label('position', cfg.position)} positions; the wavelengths below are "
            "those of a RoPE head of the same size.")
keep_valid("rope_scale_factor", [2.0, 4.0, 8.0, 16.0, 32.0], 4.0)
st.select_slider("Stretch factor", [2.0, 4.0, 8.0, 16.0, 32.0], key="rope_scale_factor", **KEEP)
factor = float(st.session_state["rope_scale_factor"])
trained = 512
rope_cfg = twin if twin.row("position").rotates_qk else twin.replace(position="rope")
waves = analysis.rope_wavelengths(rope_cfg.replace(rope_scaling="none", rope_factor=1.0), factor, trained)
wavelengths = {axes.label("rope_scaling", k): v.numpy() for k, v in waves.items()}
show_chart(cached_figure(modern_figs.rope_wavelengths, wavelengths, trained), key="rope_wavelengths")
st.caption(f"d_rope = {rope_cfg.d_rope} rotated dimensions"
           + (f" of d_head = {rope_cfg.d_head} (partial rotary: the other {rope_cfg.d_head - rope_cfg.d_rope} carry "
              "no position at all)" if rope_cfg.d_rope != rope_cfg.d_head else "")
           + f", base θ = {rope_cfg.rope_theta:g}, trained on {trained} tokens, stretched ×{factor:g} (dynamic NTK read "
           f"at {int(factor * trained):,} tokens). A wavelength above the dashed line never completed a turn in training.")
try:
    measured = json.loads(MODERN_MEASURED.read_text(encoding="utf-8"))["rope_scaling"]
except (OSError, ValueError, KeyError):
    st.error(f"{MODERN_MEASURED} is missing or unreadable; `python -m scripts.measure_modern` writes it.")
else:
    names = [m["model"] for m in measured]
    keep_valid("rope_scale_model", names, names[0] if names else None)
    if names:
        st.selectbox("Trained RoPE model", names, key="rope_scale_model", **KEEP)
        chosen = next(m for m in measured if m["model"] == st.session_state["rope_scale_model"])
        show_chart(cached_figure(modern_figs.scaling_length_test, chosen["rows"]), key="rope_scaling_test")
        plain = next(r for r in chosen["rows"] if not axes.row("rope_scaling", r["scaling"]).rescales)["bits_per_char"]
        best = min((r for r in chosen["rows"] if axes.row("rope_scaling", r["scaling"]).rescales),
                   key=lambda r: r["bits_per_char"]["4x"])
        st.caption(f"{chosen['model']}, trained on {chosen['context']} characters, read held-out English with each "
                   f"scaling and no retraining. At 4× its context: {plain['4x']:.2f} bits per character plain, "
                   f"{best['bits_per_char']['4x']:.2f} with {axes.label('rope_scaling', best['scaling'])} "
                   f"×{best['factor']:g}. Linear interpolation slows the fast dimensions too, which this model uses to "
                   "find the character before: without fine-tuning it loses even the trained length. Measured by "
                   "`python -m scripts.measure_modern`.")
