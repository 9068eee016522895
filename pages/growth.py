"""How models grow: the compute-optimal split of a FLOP budget, a published scaling law, and a sweep measured here."""
import numpy as np
import pandas as pd
import streamlit as st

from transformer import scaling
from ui.app.page import start_page
from ui.app.charts import show_chart
from ui.app.page_controls import KEEP, url_state
from ui.compute.chapters_measure import scaling_sweep
from ui.figures import chapters as figs

url_state("grow", grow_budget="1e21")

start_page("How models grow", f"""
**The problem.** A training budget is a number of FLOPs, about 6·N·D for N parameters trained on D tokens. Spend it
on a bigger model and it reads fewer tokens; on more tokens and the model is smaller. Which split gives the lowest
loss?

**The idea.** Fit the loss of hundreds of training runs as a function of N and D, then minimise it along
6·N·D = C. Hoffmann et al. (2022) found that N and D should grow together, **about {scaling.TOKENS_PER_PARAM} tokens
per parameter**, and that the loss falls as a power law of compute: every 10× of compute cuts the reducible loss (what lies above the
irreducible floor) by the same *factor*, so each decade buys a smaller drop than the one before.

**What to look at.** Type a budget; the calculator splits it. The chart places real models on the published fit.
At the bottom, small models of several sizes that each spent the same budget on this machine: too small and it
cannot learn more, too big and it has read too little.
""")

st.subheader("Compute-optimal size for a budget")
st.text_input("Training budget (FLOPs)", key="grow_budget", **KEEP,
              help=f"a number such as 1e21 or 3.14e23 (GPT-3); from {scaling.MIN_BUDGET:g} to {scaling.MAX_BUDGET:g}")
marked = None
try:
    budget = scaling.check_budget(str(st.session_state["grow_budget"]))
    rule, fitted = scaling.compute_optimal(budget), scaling.fitted_optimal(budget)
except ValueError as exc:
    st.error(f"Budget: {exc}")
else:
    col1, col2, col3 = st.columns(3)
    col1.metric(f"parameters ({scaling.TOKENS_PER_PARAM} tokens each)", f"{rule.params:.3g}",
                f"the fit's optimum: {fitted.params:.3g}", delta_color="off", delta_arrow="off")
    col2.metric("training tokens", f"{rule.tokens:.3g}", f"the fit's optimum: {fitted.tokens:.3g}", delta_color="off",
                delta_arrow="off")
    loss = float(scaling.chinchilla_loss(fitted.params, fitted.tokens))
    col3.metric("fitted loss at the optimum", f"{loss:.3f} nats", f"{fitted.tokens_per_param:.0f} tokens per "
                "parameter", delta_color="off", delta_arrow="off")
    marked = {"flops": budget, "loss": loss}
    st.caption(f"N = √(C / (6 · {scaling.TOKENS_PER_PARAM})) and D = {scaling.TOKENS_PER_PARAM}·N, so C = 6·N·D. "
               "The "
               "fit's own optimum drifts towards more tokens per parameter as budgets grow; both answers are the "
               "paper's.")

st.subheader("Loss against compute: a published scaling law")
budgets = np.logspace(18, 26, 81)
runs = scaling.published_points()
show_chart(figs.loss_against_compute(budgets, scaling.frontier_loss(budgets), runs,
                                     marked if marked and budgets[0] <= marked["flops"] <= budgets[-1] else None,
                                     "the fitted loss of compute-optimal models"), key="grow_law")
st.markdown(f"**The formula.** {scaling.CHINCHILLA_SOURCE}. N: parameters, D: training tokens; the loss is in nats "
            "per token of the paper's MassiveText corpus, so only its shape carries over to other data.")
published = {run["name"]: run for run in runs}
above = ", ".join(f"{run['name']} {run['above_optimum']:+.3f}" for run in runs)
gopher, chinchilla, llama = published["Gopher 280B"], published["Chinchilla 70B"], published["LLaMA 2 7B"]
st.caption("Each published run sits at 6·N·D of its own size and tokens, at the fit's loss for that N and D. How far "
           f"above the line of compute-optimal models each lies, in nats: {above}. Chinchilla had about Gopher's "
           f"budget, {gopher['params'] / chinchilla['params']:.0f}× fewer parameters and "
           f"{chinchilla['tokens'] / gopher['tokens']:.1f}× the tokens. LLaMA 2 7B read "
           f"{llama['tokens'] / llama['params']:.0f} tokens per parameter, far past the optimum, at little cost in "
           "loss: a smaller model is cheaper to serve.")

st.subheader("Measured here: one budget, models of several sizes")
try:
    sweep = scaling_sweep()
except (OSError, ValueError) as exc:  # a missing or damaged file: the rest of the page still stands
    st.warning(f"The measured sweep is not available ({exc}); `python -m transformer.training.scaling_sweep` "
               "measures it again.")
else:
    settings, measured = sweep["settings"], sweep["runs"]
    optimum = scaling.compute_optimal(settings["budget"])
    best = min(measured, key=lambda run: run["bits_per_char"])
    show_chart(figs.loss_against_size(measured, optimum.params,
                                      f"held-out loss after {settings['budget']:.0e} training FLOPs each"),
               key="grow_sweep")
    st.markdown(f"Each model trained on everyday English for the same {settings['budget']:.0e} FLOPs, so the smallest "
                f"read {measured[0]['tokens'] / measured[-1]['tokens']:.0f}× more text than the largest. The lowest "
                f"held-out loss is d_model = {best['d_model']} ({best['params']:,} parameters, "
                f"{best['tokens'] / best['params']:.0f} tokens per parameter); the rule of thumb says "
                f"{optimum.params:,.0f}.")
    table = pd.DataFrame(measured)[["d_model", "params", "steps", "tokens", "flops", "bits_per_char", "cpu_seconds"]]
    st.dataframe(table.style.format({"params": "{:,}", "steps": "{:,}", "tokens": "{:,}", "flops": "{:.3g}",
                                     "bits_per_char": "{:.3f}"}), hide_index=True)
    st.caption(f"{sweep['corpus']}; LLaMA's recipe with {sweep['recipe']['n_layers']} layers, crops of "
               f"{settings['context']} characters, batch {settings['batch_size']}, one CPU thread "
               f"({sum(run['cpu_seconds'] for run in measured):.0f} s in all). Reproduce it with "
               "`python -m transformer.training.scaling_sweep` (assets/measurements/scaling-sweep.json).")
    st.download_button("Download the sweep (CSV)", on_click="ignore", file_name="scaling_sweep.csv", mime="text/csv",
                       data=lambda: table.to_csv(index=False))
