"""Trade-offs, measured: each claim about an axis, trained here with several seeds and judged by one stated rule."""
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from transformer.training.tournament import document
from transformer.training.tournament.comparisons import COMPARISONS
from transformer.training.tournament.verdict import LEARNED_BITS, MIN_SEEDS, RULE_TEXT
from ui.app.page import start_page
from ui.app.charts import show_chart
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.figures import indexer as indexer_figs
from ui.figures import tradeoffs as figs

url_state("tradeoffs", trade_comparison="kv-heads")

start_page("Trade-offs, measured", """
**The problem.** The lecture's documents make claims about the axes: GQA gives "most of MQA's memory savings with
almost no quality loss", post-norm is "Harder to train, needs warmup.", SwiGLU gives "Better quality for same param
count.". Newer switches and kinds (QK-norm, sinks, soft-capping, tied embeddings, Gated DeltaNet hybrids, NoPE
layers, a lightning indexer) come with their papers' and model cards' claims. This app shows each choice, but
showing is not testing.

**What was done.** One recipe per comparison, the same for all its entries: every entry trained the same steps on
the same tokens at the same width, with several seeds, on everyday English; the score is bits per character on
held-out text that shares no passage with the training text. One rule, stated below before any number, turns the
seeds into a verdict.

**What to look at.** Pick a comparison: the claim and its source beside what was measured, every seed against the
baselines, each entry's difference from its reference with its interval, and the training curves.
""")

# one JSON per machine it was measured on (tournament.json, tournament-<hardware>.json); the tests point elsewhere
DIRECTORY = Path(os.environ.get("ATTENTION_LAB_MEASUREMENTS", document.TOURNAMENT_PATH.parent))
files = sorted(p for p in DIRECTORY.glob("tournament*.json") if not p.name.endswith(".partial")) or \
    [DIRECTORY / document.TOURNAMENT_PATH.name]


def load(path: Path):
    try:
        return document.load(path), None
    except document.TournamentError as exc:
        return None, str(exc)


if len(files) > 1:  # one JSON per machine: each labelled with its hardware
    loaded = {path: load(path) for path in files}
    labels = {str(p): (f"{d['hardware']}" if d else f"{p.name} (unreadable)") for p, (d, _) in loaded.items()}
    chosen = Path(st.radio("Measured on", list(labels), format_func=labels.get, key="trade_file"))
    data, problem = loaded[chosen]
    path = chosen
else:
    path = files[0]
    data, problem = load(path)
if problem:
    st.error(f"The tournament's measurements are not available: {problem}")
    st.stop()

with st.expander("**The verdict rule**, the same for every comparison", expanded=True):
    st.markdown(RULE_TEXT)

recipe = data["recipe"]
tied = "tied (the output head reuses the input embedding)" if recipe.get("tie_embeddings") else "untied"
st.caption(f"Recipe shared by every comparison (each names what it changes): d_model {recipe['d_model']}, "
           f"{recipe['n_heads']} heads, {recipe['n_layers']} layers (the norms and embeddings comparisons also "
           f"{recipe['deep_layers']}, the comparisons of the newer kinds {recipe.get('frontier_layers', 4)}), "
           f"embeddings {tied}, crops of {recipe['context']} characters, "
           f"batch {recipe['batch_size']}, {recipe['steps']} steps ({recipe['tokens_per_run']:,} characters per run), "
           f"peak learning rate {recipe['lr']:g} after {recipe['warmup']} warm-up steps. Measured on: "
           f"{data['hardware']}; {data.get('runs_trained', '?')} runs trained, "
           f"{data.get('processor_seconds_total', 0) / 60:.0f} processor minutes in all (a run two comparisons share "
           f"is trained once). File: {path.relative_to(document.ROOT) if path.is_relative_to(document.ROOT) else path}."
           + (f" Its verdicts: {data['rewritten_from']}." if data.get("rewritten_from") else ""))

finished = {c["key"]: c for c in data["comparisons"] if c["complete"]}
running = [c for c in data["comparisons"] if not c["complete"]]
if running:
    st.info("Still running (not every entry has its " + f"{MIN_SEEDS} seeds yet): " + "; ".join(
        f"{c['axis']} ({c['seeds_per_entry']} of {MIN_SEEDS} seeds in its least-run entry)" for c in running)
        + f". `{document.COMMAND}` goes on where it stopped.")
absent = [spec.axis for key, spec in COMPARISONS.items() if key not in {c["key"] for c in data["comparisons"]}]
if absent:
    st.caption(f"Declared for the next run, not in this file: {', '.join(absent)}.")
if not finished:
    st.stop()

keep_valid("trade_comparison", list(finished))
key = st.radio("Comparison", list(finished), horizontal=True, key="trade_comparison", **KEEP,
               format_func=lambda k: finished[k]["axis"])
comp = finished[key]
arrays = figs.comparison_arrays(comp)
own = comp.get("recipe", recipe)
changed = [f"{own['steps']} steps, {own['warmup']} of them warm-up ({own['tokens_per_run']:,} characters per run)"
           if own["steps"] != recipe["steps"] else "",
           f"{own['repeat_rate']:.0%} of the training rows repeat a span, so copying is practised"
           if own.get("repeat_rate") else ""]
if any(changed):
    st.caption(f"**This comparison's recipe** differs from the shared one, the same for all its entries: "
               f"{'; '.join(c for c in changed if c)}.")

claim = comp["claim"]
col1, col2 = st.columns(2)
if claim["lecture"]:
    col1.markdown(f"**The lecture says** (document {claim['source']}): \u201c{claim['quote']}\u201d")
else:
    col1.markdown(f"**The claim** (not in the lecture's documents; {claim['source']}), in this project's words: "
                  f"{claim['quote']}")
col2.markdown(f"**Measured here.** {comp['verdict']}")
status = comp["claim_status"]
if status == "disagrees":  # a finding, not a fault of the page: a warning, never an error
    st.warning("**They disagree:** the measurement here contradicts the claim.", icon=":material/balance:")
elif status == "not tested at this size":
    st.info(f"**Not tested at this size:** {comp['claim_why']}.", icon=":material/balance:")
elif status == "undecided":
    st.info(f"**Undecided:** {comp['claim_why']}.", icon=":material/balance:")
if comp.get("seeds_wanted"):
    st.caption(f"Undecided after its seeds: `{document.COMMAND}` going on with this file's recipe gives these more "
               "(up to 5): " + ", ".join(
        f"{c} ({n} seeds)" for c, n in comp["seeds_wanted"].items()) + ".")
if comp.get("caveat"):
    st.warning(comp["caveat"])
failed = [f"{c} (seed {s})" for c, seeds, d in zip(arrays.choices, arrays.seeds, arrays.diverged)
          for s, x in zip(seeds, d) if x]
if failed:
    st.warning(f"Diverged, shown as crosses and dashed curves: {', '.join(failed)}.")

baselines = comp["baselines_bits"]
left, right = st.columns(2)
show_chart(figs.bits_by_choice(arrays.choices, arrays.seeds, arrays.bits, arrays.diverged,
                               "Held-out bits per character, every seed", baselines["unigram"], baselines["bigram"],
                               LEARNED_BITS), key="trade_bits", where=left)
show_chart(figs.cost_against_bits(arrays.choices, arrays.cost, arrays.bits, arrays.cost_axis,
                                  f"Against its cost: {figs.COST_TITLES[arrays.cost_axis]}"),
           key="trade_cost", where=right)
show_chart(figs.differences(*figs.difference_rows(comp), "Each entry against its reference: the seed-paired "
                                                         "difference and its 95% interval"), key="trade_differences")
if len(arrays.multiples) > 1:
    show_chart(figs.bits_by_length(arrays.choices, arrays.multiples, arrays.by_length, recipe["context"],
                                   "Held out at the trained length and longer"), key="trade_lengths")
    shared = ("Every length reads the same windows: 1× their first "
              f"{recipe['context']} characters, 2× the first {2 * recipe['context']}, 4× all of them, so a shorter "
              "read is part of every longer one." if recipe.get("length_windows") == "prefixes" else
              "Each length reads windows of its own (fewer and longer ones, spread over the held-out text): the 2× "
              "and 4× windows share only a small part of the 1× characters, so part of a difference between lengths "
              "is a difference of text. The next run reads prefixes of the same windows at every length.")
    st.caption("A learned table has no row past the length it trained, so it cannot read 2× or 4×: no point there. "
               + shared)
if comp.get("measure") == "recall":
    choices, distances, saved = figs.recall_arrays(comp)
    if distances:
        show_chart(figs.recall_by_distance(choices, distances, saved, own["context"], "Recall of a phrase read "
                                           "earlier: what its first copy saves on the second"), key="trade_recall")
        if not np.nanmax(np.abs(saved), initial=0.0) >= figs.RECALL_LEARNED:
            st.info(f"**Recall not tested at this size:** no entry learned to copy in these {own['steps']} steps: the "
                    f"first copy saves under {figs.RECALL_LEARNED:g} bits per character at every distance, for every "
                    "seed. Copying needs an induction circuit, which these runs never formed. The State page's recall "
                    "tab reads it on the trained checkpoints (3,000 to 4,000 steps with an induction warm-up), where it "
                    "tells the three kinds apart.", icon=":material/balance:")
        st.caption("Each row is a held-out phrase of 24 characters, held-out text, and the phrase again; a control row "
                   "starts with another phrase. The bits per character the first copy saves on the second (control "
                   "minus repeated) is recall: 0 means the model did not use the first copy. Past the dashed line the "
                   "model reads farther than any crop it trained on.")
if comp.get("measure") == "kept_mass":
    ks, top_k, kept = figs.kept_mass_arrays(comp)
    if ks:
        show_chart(indexer_figs.measured_mass_by_k(ks, {label: values.mean(0).tolist() for label, values in kept.items()},
                                                   top_k, "What the kept keys hold of the dense weights"),
                   key="trade_kept")
        st.caption(f"The trained indexer's top k keys against a random-init indexer of the same model, the k most "
                   f"recent keys (a window) and the best any k keys can hold: the share of the heads' dense weights "
                   f"they hold, the mean over layers, queries, heads and {len(next(iter(kept.values())))} seeds, on "
                   f"held-out crops of {own['context']} characters. It trained with k = {top_k}.")
show_chart(figs.training_curves(arrays.choices, arrays.curves, "Training curves, every seed"),
           key="trade_curves")
st.markdown(f"**What this size cannot test.** {comp['cannot_test']} {data.get('scale_note', document.SCALE_NOTE)}")

rows = pd.DataFrame([r for r in document.summary_rows(data) if r["comparison"] == comp["axis"]])
table = pd.DataFrame({
    "choice": rows["choice"], "parameters": rows["parameters"], "bits/char (mean)": rows["mean"],
    "lowest seed": rows["low"], "highest seed": rows["high"], "seeds": rows["seeds"], "diverged": rows["diverged"],
    "against": rows["against"].fillna("(reference)"),
    "difference": rows["difference"],
    "95% interval": [("–" if i is None else f"{i[0]:+.3f} to {i[1]:+.3f}") for i in rows["interval"]],
    "verdict": rows["verdict"].fillna("no verdict"),
    "learning gate": ["exempt: there to show a failure" if e.get("stress") else "applies" for e in comp["entries"]]})
if arrays.cost_axis != "parameters":
    table.insert(2, figs.COST_TITLES[arrays.cost_axis], rows["cost"])
st.dataframe(table, hide_index=True)

st.subheader("Every comparison")
st.markdown("| comparison | the claim | measured here |\n|---|---|---|\n" + "\n".join(
    f"| {c['axis']} | {document.claim_text(c['claim'])} | {c['verdict']} |" for c in data["comparisons"]))
st.caption(f"Reproduce with `{document.COMMAND}` "
           f"(`--comparison {key}` for this one alone); the Train page reruns any single cell live.")
st.download_button("Download the measurements (JSON)", on_click="ignore", file_name=path.name,
                   mime="application/json", data=lambda: json.dumps(data, indent=1))
