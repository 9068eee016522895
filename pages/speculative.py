"""Speculative decoding: a small draft proposes k tokens, the trained target checks them all in one cached pass."""
import streamlit as st

from ui.app.charts import show_chart
from ui.app.page import start_page
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute import speculative_measure as measure
from ui.figures.speculative import accepted_rounds, acceptance_by_k

url_state("speculative", sd_draft=str, sd_new=32, sd_k=4)
keep_valid("sd_new", range(4, 65), 32)
keep_valid("sd_k", measure.KS, 4)

state = start_page("Speculative decoding", """
**The problem.** Greedy generation runs the whole model once per new token, and each pass mostly waits on reading
the weights and the KV cache: a pass over five tokens costs about what a pass over one does.

**The idea.** Let a small **draft** model guess the next k tokens, one cheap pass each. The **target** then reads all
k after its cached prefix in **one** pass, which gives its own choice at every place. Keep the guesses up to the first
one it disagrees with, then its own token; cut both KV caches back to what was kept. The text is exactly the target's
greedy text — a guess survives only where the target would have written it — in fewer target passes.

**What to look at.** Which guesses the target accepted, round by round; the acceptance rate and the target passes
saved for k = 1 … 8; how a draft of another vocabulary is refused.
""")
if state.error:
    st.error(f"This combination of axes is impossible: {state.error}")
    st.stop()

target = measure.sidebar_target(state.config_json, state.weights)
if target is None:
    target = measure.DEFAULT_TARGET
    st.info(f"The sidebar's model is not one of the shipped trained language decoders, so the target here is "
            f"**{target}**. Choose a preset with its language task in the sidebar to make it the target.")
options = measure.draft_options(target)
keep_valid("sd_draft", options, options[0])
col1, col2, col3 = st.columns([3, 1, 1])
col1.selectbox("Draft model", options, key="sd_draft", **KEEP,
               help="the smallest other shipped language model by default; the target's own first layers need no "
                    "training of their own; a model trained on another task reads another vocabulary")
col2.number_input("New tokens", min_value=4, max_value=64, key="sd_new", **KEEP)
col3.selectbox("k shown round by round", measure.KS, key="sd_k", **KEEP)
draft, new_tokens, k = st.session_state["sd_draft"], int(st.session_state["sd_new"]), int(st.session_state["sd_k"])
st.markdown(f"**Target:** {target} (the sidebar's text is its prompt) · **draft:** {draft}")

try:
    ids, _ = measure.prompt_tokens(target, state.text)
except ValueError as exc:  # an empty text
    st.error(str(exc))
    st.stop()
try:
    runs = measure.sweep(target, draft, ids, new_tokens)
except ValueError as exc:  # a draft of another vocabulary
    st.error(f"{draft} cannot draft for {target}: {exc}")
    st.stop()

run = next(r for r in runs if r.k == k)
name = lambda token_ids: measure.labels_of(target, token_ids)
col1, col2, col3 = st.columns(3)
col1.metric(f"Acceptance rate at k = {k}", f"{run.acceptance_rate:.0%}",
            help="proposals the target accepted, over all proposals")
col2.metric("Target passes", f"{run.target_forwards} of {run.greedy_forwards}",
            help="one per round, against plain greedy's one per new token")
col3.metric("Target passes saved", f"{1 - run.target_forwards / run.greedy_forwards:.0%}")
rounds = [(name(proposed), accepted, name([own])[0]) for proposed, accepted, own in run.rounds]
show_chart(accepted_rounds([r[0] for r in rounds], [r[1] for r in rounds], [r[2] for r in rounds],
                           f"k = {k}: {len(rounds)} rounds for {new_tokens} new tokens"), key="sd_rounds")
same = all(r.equal_to_greedy for r in runs)
st.caption(f"Generated: `{''.join(name(run.new_ids))}` — "
           + ("equal, for every k, to the target's own greedy generation." if same else
              "NOT equal to the target's own greedy generation for every k."))

st.subheader("Every k on this sentence")
show_chart(acceptance_by_k([r.k for r in runs], [r.acceptance_rate for r in runs], [r.target_forwards for r in runs],
                           runs[0].greedy_forwards, f"{draft} drafting for {target}"), key="sd_by_k")
best = min(runs, key=lambda r: (r.target_forwards, r.k))
st.markdown(f"The fewest target passes here: **{best.target_forwards}** at k = {best.k}, against "
            f"{best.greedy_forwards} for plain greedy. A longer draft is accepted less often, and every token after "
            "the first disagreement is draft work thrown away: the draft's passes, one per proposal, are the cost "
            f"(at k = {k}: {sum(len(p) for p, _, _ in run.rounds)} draft passes).")
