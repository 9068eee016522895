"""Trade-offs, measured: each claim the lecture makes about an axis, trained here with several seeds."""
import json
import os
from pathlib import Path

import pandas as pd
import streamlit as st

from transformer.training.tournament import document
from transformer.training.tournament.statistics import NO_DIFFERENCE
from ui.app.page import start_page
from ui.app.charts import show_chart
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.figures import tradeoffs as figs

url_state("tradeoffs", trade_comparison="kv-heads")

start_page("Trade-offs, measured", """
**The problem.** The lecture makes claims about every axis: GQA and MQA shrink the KV cache "with almost no quality
loss", pre-norm "trains better", RoPE "extrapolates", SwiGLU is worth its third matrix, a mixture of experts buys
quality at the same active compute. This app shows each choice, but showing is not testing.

**What was done.** One recipe, one budget: for each comparison every entry trained the same steps on the same
tokens at the same width, with several seeds, on the everyday English the language models read; the score is
bits per character on held-out text that shares no passage with the training text. Where the seeds of two
entries overlap, the page says **no difference measured at this size**; where the measurement contradicts the
lecture, it says so.

**What to look at.** Pick a comparison: the lecture's claim beside what was measured, every seed, the cost the
choice saves or spends, and the training curves.
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

recipe = data["recipe"]
st.caption(f"Recipe: d_model {recipe['d_model']}, {recipe['n_heads']} heads, {recipe['n_layers']} layers (the norms "
           f"comparison also {recipe['deep_layers']}), crops of {recipe['context']} characters, batch "
           f"{recipe['batch_size']}, {recipe['steps']} steps ({recipe['tokens_per_run']:,} characters per run), "
           f"peak learning rate {recipe['lr']:g} after {recipe['warmup']} warm-up steps. {data['hardware']}; "
           f"{data.get('runs_trained', '?')} runs trained, {data.get('processor_seconds_total', 0) / 60:.0f} processor "
           "minutes in all (a run two comparisons share is trained once). "
           f"File: {path.relative_to(document.ROOT) if path.is_relative_to(document.ROOT) else path}.")

comparisons = {c["key"]: c for c in data["comparisons"]}
keep_valid("trade_comparison", list(comparisons))
key = st.radio("Comparison", list(comparisons), horizontal=True, key="trade_comparison", **KEEP,
               format_func=lambda k: comparisons[k]["axis"])
comp = comparisons[key]
arrays = figs.comparison_arrays(comp)

verdict = comp["verdict"]
col1, col2 = st.columns(2)
col1.markdown(f"**The lecture says.** {comp['claim']}")
col2.markdown(f"**Measured here.** {verdict}")
if not comp.get("complete", False):
    st.warning(f"Fewer than {document.MIN_SEEDS} seeds per entry so far ({comp.get('seeds_per_entry', 0)}): "
               f"a provisional verdict. `{document.COMMAND}` goes on where it stopped.")
if verdict.startswith("Disagrees"):  # a finding, not a fault of the page: a warning, never an error
    st.warning("**They disagree:** the measurement here contradicts the lecture's claim.", icon="⚖️")
elif verdict.startswith("Partly"):
    st.warning("The measurement here bears out only part of the lecture's claim.", icon="⚖️")
elif NO_DIFFERENCE in verdict:
    st.info(f"Within the seeds' spread: {NO_DIFFERENCE}.", icon="⚖️")
failed = [f"{c} (seed {s})" for c, seeds, d in zip(arrays.choices, arrays.seeds, arrays.diverged)
          for s, x in zip(seeds, d) if x]
if failed:
    st.warning(f"Diverged, shown as crosses and dashed curves: {', '.join(failed)}.")

left, right = st.columns(2)
show_chart(figs.bits_by_choice(arrays.choices, arrays.seeds, arrays.bits, arrays.diverged,
                               "Held-out bits per character, every seed",
                               (data.get("baselines") or {}).get("unigram_bits")), key="trade_bits", where=left)
show_chart(figs.cost_against_bits(arrays.choices, arrays.cost, arrays.bits, arrays.cost_axis,
                                  f"Against its cost: {figs.COST_TITLES[arrays.cost_axis]}"),
           key="trade_cost", where=right)
if arrays.cost_axis == "forward_ms":
    right.caption("Forward times were read once per entry on a shared two-core machine while other work ran: the "
                  "same model read 15 to 50 ms at different moments, so only large gaps mean anything here. "
                  "benchmarks/ holds the careful timings.")
if len(arrays.multiples) > 1:
    show_chart(figs.bits_by_length(arrays.choices, arrays.multiples, arrays.by_length, recipe["context"],
                                   "Held out at the trained length and longer"), key="trade_lengths")
    st.caption("A learned table has no row past the length it trained, so it cannot read 2× or 4×: no point there. "
               "Every length reads the same held-out characters, in longer windows.")
show_chart(figs.training_curves(arrays.choices, arrays.curves, "Training curves, every seed"),
           key="trade_curves")
st.markdown(f"**What this size cannot test.** {comp['cannot_test']} {data.get('scale_note', document.SCALE_NOTE)}")

rows = pd.DataFrame([r for r in document.summary_rows(data) if r["comparison"] == comp["axis"]])
if not rows.empty:
    table = rows[["choice", "mean", "low", "high", "seeds", "diverged", "cost"]].rename(
        columns={"mean": "bits/char (mean)", "low": "lowest seed", "high": "highest seed",
                 "cost": figs.COST_TITLES[arrays.cost_axis]})
    st.dataframe(table, hide_index=True)

st.subheader("Every comparison")
st.dataframe(pd.DataFrame([{"comparison": c["axis"], "the lecture says": c["claim"], "measured here": c["verdict"]}
                           for c in data["comparisons"]]), hide_index=True)
st.caption(f"Reproduce with `{document.COMMAND}` "
           f"(`--comparison {key}` for this one alone); the Train page reruns any single cell live.")
st.download_button("Download the measurements (JSON)", on_click="ignore", file_name=path.name,
                   mime="application/json", data=lambda: json.dumps(data, indent=1))
