"""Why this prediction? The logit lens, per-part attribution of the next token, and activation patching."""
import numpy as np
import pandas as pd
import streamlit as st

from transformer.interpret import forwards_within, residual_labels
from ui.app.export import heatmaps_png, table_csv
from ui.app.page import load_page
from ui.app.charts import show_chart
from ui.app.tabs import lazy_tabs, when_open
from ui.app.page_controls import KEEP, keep_valid, url_state, write_url
from ui.compute.interpret_measure import (PAIRS, PATCH_BUDGET_FLOPS, answer_token, attribution, lens_view, patching,
                                          patching_forwards, residual_rows, within_budget)
from ui.compute.tokens import MAX_TOKENS, encode_text, token_labels
from ui.figures.interpret import attribution_bars, effect_heatmaps, lens_grid

OWN = "your own"
LENS_WIDTH = 16  # positions in the lens grid at once: every cell keeps its text legible

ctx = load_page("Why this prediction?", """
**Three ways to ask the model why.** The *logit lens* reads the residual stream after every block as if the model
stopped there. *Attribution* splits the final logit of one token into what each head and FFN (or expert) wrote.
*Activation patching* runs a corrupted prompt with one piece of the clean run put back, and measures how much of
the clean answer returns: the pieces that bring it back carry the difference.
""")
cfg, state = ctx.state.config, ctx.state
if not cfg.row("arch").next_token:
    st.info("This page explains a next-token prediction, so it needs a decoder: pick a decoder preset in the sidebar "
            "(every preset but BERT and the Original Transformer).")
    st.stop()
first_name, first = next(iter(PAIRS.items()))
url_state("interpret", lens_end=int, attr=0, pair=first_name, clean=first.clean, corrupt=first.corrupt,
          right=first.right, wrong=first.wrong, p_blocks="", p_from=int, p_to=int, why_tab=str)  # why_tab: the open tab
s = st.session_state
ids, labels = tuple(ctx.tokens.ids), ctx.tokens.labels
model_key = (state.config_json, state.seed)

def lens_table() -> pd.DataFrame:
    """Every row and position of the lens (the grid shows a window of it)."""
    lens, rows = lens_view(*model_key, ids, state.weights), residual_labels(cfg.n_layers)
    final = token_labels(lens.answers.tolist(), state.config_json, state.weights)
    return pd.DataFrame([dict(read_from=rows[r], position=i, input_token=labels[i], final_answer=final[i],
                              p_final_answer=float(lens.answer_probs[r, i]),
                              **{f"top{k + 1}": f"{lens.top_labels[r, i, k]} {lens.top_probs[r, i, k]:.4f}"
                                 for k in range(lens.top_ids.shape[-1])})
                         for r in range(len(rows)) for i in range(len(ids))])


def prompt_ids(text: str, which: str) -> tuple[int, ...]:
    if not text:
        raise ValueError(f"The {which} prompt is empty: type a few words.")
    tokens = encode_text(text, state.config_json, state.weights)
    if tokens.truncated_from:
        raise ValueError(f"The {which} prompt is {tokens.truncated_from} tokens long; patching takes at most "
                         f"{MAX_TOKENS}: shorten it.")
    return tuple(tokens.ids)


# --- the three ways, one tab each: a rerun computes and draws only the open tab's ---------------------------
# (activation patching runs the model a hundred times or more: a sidebar change no longer waits for it while the
# logit lens is shown)
lens_tab, attribution_tab, patching_tab = lazy_tabs(["The logit lens", "Attribution", "Activation patching"],
                                                    key="why_tab")

# --- the logit lens ------------------------------------------------------------------------------------
for _ in when_open(lens_tab):
    st.header("The logit lens: what the model would say after each block")
    lens = lens_view(*model_key, ids, state.weights)
    keep_valid("lens_end", range(len(ids)), default=len(ids) - 1)
    st.select_slider("Last position shown", range(len(ids)), key="lens_end", **KEEP,
                     format_func=lambda i: f"{i}: {labels[i]}",
                     help=f"The grid shows {LENS_WIDTH} positions at a time, ending here.")
    end = s["lens_end"]
    shown = list(range(max(0, end - LENS_WIDTH + 1), end + 1))
    rows = residual_labels(cfg.n_layers)
    show_chart(lens_grid(lens.top_labels[:, shown], lens.top_probs[:, shown], lens.answer_probs[:, shown], rows,
                         [f"{i}:{labels[i]}" for i in shown]), key="lens")
    st.markdown("**What to look for.** Read a column from top to bottom: the top token each block leaves in the stream "
                "at that position, and (colour) how likely the model's final answer already is there. The row where "
                "the colour turns bright is where the answer appears. In a repeated sentence, the second copy's "
                "characters appear only after the block that holds the induction head: before it, the model guesses "
                "from the current character alone; from it on, it copies what came next the first time. The bottom row "
                "is the model's own output.")
    st.download_button("Download the lens, every position (CSV)", key="download_lens", on_click="ignore", mime="text/csv",
                       file_name="logit_lens.csv", data=lambda: table_csv(lens_table()))

# --- attribution ------------------------------------------------------------------------------------------
for _ in when_open(attribution_tab):
    lens = lens_view(*model_key, ids, state.weights)
    st.header("Attribution: who writes the next token")
    offered = lens.top_ids[-1, -1].tolist()  # the model's most likely tokens after the last position
    keep_valid("attr", range(len(offered)), default=0)
    st.selectbox("Token to explain (the model's most likely next tokens)", range(len(offered)), key="attr", **KEEP,
                 format_func=lambda k: f"{lens.top_labels[-1, -1, k]} (p = {lens.top_probs[-1, -1, k]:.3f})")
    token, token_label = offered[s["attr"]], lens.top_labels[-1, -1, s["attr"]]
    try:
        parts = attribution(*model_key, ids, token, state.weights)
    except ValueError as exc:  # a post-norm model has no linear path from a part to the logit
        st.info(str(exc))
    else:
        logit_words = (f"logit {parts.logit:.2f} = the sum of the bars" if parts.capped_logit is None else
                       f"logit before the soft cap {parts.logit:.2f} = the sum of the bars; {parts.capped_logit:.2f} after it")
        show_chart(attribution_bars(parts.labels, parts.values,
                                    f"direct effect on the logit of {token_label!r} after the last token "
                                    f"({logit_words})"), key="attribution")
        st.markdown("**What to look for.** Each bar is what one part wrote into the residual stream, read along the "
                    "unembedding row of the chosen token through the final norm's scale: orange pushes the token up, blue "
                    "down, and the bars add up to its logit. A tall head bar names the head that writes the answer; a "
                    "tall FFN (or expert) bar suggests the answer comes from what the FFN stores more than from copied context. Compare the "
                    f"heads with random-init weights of the same shape, whose largest head bar here is "
                    f"{parts.control_largest_head:.2f}: only a bar well above that is the trained model's doing. Direct "
                    "effects miss what a part does through later parts; patching, in the next tab, catches that.")
        st.download_button("Download the attribution (CSV)", key="download_attribution", on_click="ignore",
                           mime="text/csv", file_name="attribution.csv",
                           data=lambda: table_csv(pd.DataFrame({"part": parts.labels, "direct_effect": parts.values})))

# --- activation patching -------------------------------------------------------------------------------------
for _ in when_open(patching_tab):
    st.header("Activation patching: which layer, position and head carry the difference")
    keep_valid("pair", [*PAIRS, OWN])
    st.selectbox("Prompts", [*PAIRS, OWN], key="pair", **KEEP,
                 help="A ready-made pair changes one thing the answer depends on; pick 'your own' to type two prompts.")
    own = s["pair"] == OWN
    if not own:  # a ready-made pair fills the prompts and answers (and 'your own' starts from them)
        pair = PAIRS[s["pair"]]
        s.update(clean=pair.clean, corrupt=pair.corrupt, right=pair.right, wrong=pair.wrong)
        write_url(["clean", "corrupt", "right", "wrong"])
    clean_col, corrupt_col = st.columns(2)
    clean_col.text_input("Clean prompt", key="clean", disabled=not own, **KEEP)
    corrupt_col.text_input("Corrupted prompt (the same length, one thing changed)", key="corrupt", disabled=not own, **KEEP)
    clean_col.text_input("Its answer (one token)", key="right", disabled=not own, **KEEP)
    corrupt_col.text_input("The corrupted prompt's answer (one token)", key="wrong", disabled=not own, **KEEP)


    try:
        clean_ids, corrupt_ids = prompt_ids(s["clean"], "clean"), prompt_ids(s["corrupt"], "corrupted")
        if len(clean_ids) != len(corrupt_ids):
            raise ValueError(f"The clean prompt is {len(clean_ids)} tokens and the corrupted one {len(corrupt_ids)}: "
                             "patching swaps activations position by position, so both need the same number of tokens. "
                             "Change characters rather than add or remove them (an emoji or accented letter may be "
                             "several tokens).")
        right = answer_token(s["clean"], s["right"], state.config_json, state.weights)
        wrong = answer_token(s["corrupt"], s["wrong"], state.config_json, state.weights)
        if right == wrong:
            raise ValueError("The two answers are the same token, so their logit difference is always 0: give the "
                             "corrupted prompt's own answer.")
    except ValueError as exc:
        st.error(str(exc))
        st.stop()

    T, L, H = len(clean_ids), cfg.n_layers, cfg.n_heads
    budget = forwards_within(ctx.model, T, PATCH_BUDGET_FLOPS)
    blocks, positions = list(range(L)), list(range(T))
    needed = patching_forwards(blocks, T, L, H)
    if needed > budget:
        st.warning(f"Patching every layer, position and head takes {needed:,} forward passes of this {T}-token prompt "
                   f"(the residual grid, and every head of the model and of its random-init control); the page's budget "
                   f"is {budget:,} (about {PATCH_BUDGET_FLOPS / 1e9:.0f} GFLOP for this model). Patch fewer blocks or "
                   "positions:")
        fitting_blocks, fitting_positions = within_budget(budget, T, L, H)
        keep_valid("p_from", positions, default=fitting_positions[0] if fitting_positions else T - 1)
        keep_valid("p_to", positions, default=T - 1)
        if "patch_blocks" not in s:  # the multiselect's list starts from the link's "0,2", else from what fits
            s["patch_blocks"] = [int(b) for b in s["p_blocks"].split(",") if b.isdigit()] or fitting_blocks
        s["patch_blocks"] = [b for b in s["patch_blocks"] if b < L]
        block_col, from_col, to_col = st.columns([2, 1, 1])
        block_col.multiselect("Blocks", blocks, key="patch_blocks", **KEEP)
        s["p_blocks"] = ",".join(map(str, s["patch_blocks"]))
        write_url(["p_blocks"])
        from_col.number_input("From position", 0, T - 1, key="p_from", **KEEP)
        to_col.number_input("To position", 0, T - 1, key="p_to", **KEEP)
        blocks, positions = sorted(s["patch_blocks"]), list(range(s["p_from"], s["p_to"] + 1))
        needed = patching_forwards(blocks, len(positions), L, H)
        if not blocks or not positions or needed > budget:
            st.info(f"This choice takes {needed:,} forward passes, over the budget of {budget:,}, or leaves nothing to "
                    "patch: choose fewer blocks or positions, at least one of each.")
            st.stop()

    rows = residual_rows(blocks, L)
    result = patching(*model_key, clean_ids, corrupt_ids, right, wrong, state.weights, tuple(rows), tuple(positions),
                      tuple(blocks))
    clean_labels = token_labels(clean_ids, state.config_json, state.weights)
    corrupt_labels = token_labels(corrupt_ids, state.config_json, state.weights)
    # each position's clean token, and the corrupted one where they differ
    columns = [f"{i}:{c}" if c == k else f"{i}:{c}→{k}" for i, (c, k) in enumerate(zip(clean_labels, corrupt_labels))]
    row_labels = [residual_labels(L)[r] for r in rows]
    st.caption(f"Metric: logit of {s['right']!r} minus logit of {s['wrong']!r} after the last token. Clean run minus "
               f"corrupted run: {result.gap:+.2f} (random-init weights of the same shape: {result.control_gap:+.2f}). "
               "Each cell shows how much of that gap patching one piece brings back.")
    if abs(result.gap) < 1e-3:
        st.warning("The two prompts give the model the same logit difference: there is nothing to restore. Change "
                   "something the answer depends on.")

    residual = result.residual
    show_chart(effect_heatmaps([("", residual)], [columns[p] for p in positions], row_labels,
                               "position (clean→corrupted where they differ)", "stream", result.gap,
                               "patching the residual stream, one layer and position at a time"), key="patch_residual")
    st.markdown("**What to look for.** Before the first block, only the positions where the prompts differ matter "
                "(the stream there is just the token): patching one of them brings the clean answer back. Follow the "
                "bright cells down: the information stays at the changed position for a block or two, then jumps to "
                "the last position — the row where it jumps is where attention moved it. In the last row only the "
                "final position matters, because the answer is read there.")

    heads = result.heads
    show_chart(effect_heatmaps([("trained weights", heads), ("random-init weights, same shape", result.control_heads)],
                               [f"head {h} · kv {h // cfg.group_size}" for h in range(H)],
                               [f"block {b}" for b in blocks], "head", "block", result.gap,
                               "patching one head's output (all positions, before W_o)"), key="patch_heads")
    best_block, best_head = divmod(int(np.argmax(heads)), H)
    st.markdown(f"**What to look for.** One bright cell means one head carries the difference: here block "
                f"{blocks[best_block]}, head {best_head}, bringing back {heads.max():+.2f} of the {result.gap:+.2f}. On a "
                "copied word it is the induction head the playground shows looking at the token after the earlier copy. "
                "The right panel is the same patching on random-init weights of the same shape: whatever a trained head "
                "does beyond that is learned. With GQA, heads sharing a kv head are patched one at a time and can differ.")
    title = f"patching: {s['clean']!r} vs {s['corrupt']!r}"
    png_col, heads_png_col, csv_col = st.columns(3)
    png_col.download_button("The residual heatmap (PNG)", key="download_residual_png", on_click="ignore",
                            mime="image/png", file_name="patching_residual.png",
                            data=lambda: heatmaps_png([("residual stream", residual, "signed")],
                                                      [columns[p] for p in positions], row_labels, title=title,
                                                      x_title="position", y_title="stream"))
    heads_png_col.download_button("The head heatmaps (PNG)", key="download_heads_png", on_click="ignore",
                                  mime="image/png", file_name="patching_heads.png",
                                  data=lambda: heatmaps_png([("trained", heads, "signed"),
                                                             ("random init", result.control_heads, "signed")],
                                                            [str(h) for h in range(H)], [str(b) for b in blocks],
                                                            title=title, x_title="head", y_title="block"))
    csv_col.download_button("Every effect (CSV)", key="download_patching", on_click="ignore", mime="text/csv",
                       file_name="patching.csv", data=lambda: table_csv(pd.DataFrame(
                           [dict(kind="residual", row=row_labels[i], column=columns[p], effect=float(residual[i, j]))
                            for i in range(len(rows)) for j, p in enumerate(positions)]
                           + [dict(kind=kind, row=f"block {b}", column=f"head {h}", effect=float(values[i, h]))
                              for kind, values in (("head", heads), ("head, random init", result.control_heads))
                              for i, b in enumerate(blocks) for h in range(H)])))
