"""Before attention: a GRU encoder-decoder squeezes the source into one vector; additive attention removes the
bottleneck."""
import pandas as pd
import streamlit as st

from transformer import rnn
from ui.app.page import start_page
from ui.app.charts import show_chart
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.chapters_measure import CONTEXTS, accuracy_curves, gru_copies, gru_models
from ui.figures import chapters as figs
from ui.lessons.steps import STEPS

MAX_T, MAX_D = 100_000, 65_536
url_state("before", before_text="attention", before_T=20, before_D=512, before_k=3)
keep_valid("before_T", range(1, MAX_T + 1), 20)
keep_valid("before_D", range(1, MAX_D + 1), 512)
keep_valid("before_k", range(2, 16), 3)

start_page("Before attention: one vector for a whole sentence", """
**The problem.** Before 2015, a sequence-to-sequence model read its input with a recurrent network (an RNN, here a
GRU), one token after another, and handed the decoder **one fixed vector**: the encoder's last state. Every sentence,
short or long, had to fit into those d_hidden numbers.

**The idea.** Keep every encoder state, and at each output step let the decoder *score* all of them, softmax the
scores and read their weighted mix (Bahdanau, Cho and Bengio, 2015). That is attention, two years before it became
the whole model (the Transformer, 2017). Its score was *additive*, v · tanh(W s + U h), a small network; the transformer's q · k / √d is the
cheaper dot product.

**What to look at.** Two GRUs with the same 32 numbers of state, trained for seconds to copy random letter strings:
the one-vector model's accuracy **falls** with the length, the attention model's does not. Type letters and watch the
attention model read the source letter by letter: the diagonal.
""")

models = gru_models()
max_letters = models["attention"][0].cfg.max_letters
st.subheader("Accuracy against length")
show_chart(figs.accuracy_by_length(accuracy_curves(), "copying random letters: share of output letters right"),
           key="before_accuracy")
rows = [{"model": CONTEXTS[context], "parameters": meta["parameters"], "hidden size": model.cfg.d_hidden,
         "training steps": meta["training"]["steps"], "training CPU seconds": meta["train_cpu_seconds"],
         f"right at {max_letters} letters": f"{meta['accuracy_by_length'][str(max_letters)]:.0%}"}
        for context, (model, meta) in models.items()]
st.dataframe(pd.DataFrame(rows), hide_index=True)
st.caption(f"Measured when the checkpoints were trained (assets/checkpoints/gru-copy-*.json): greedy decoding of 256 "
           f"fresh random strings of each length 1 … {max_letters}, strings the models never saw. Same embedding, "
           "same GRUs, same output layer; the attention model adds W, U and v.")

st.subheader("Copy your own letters")
st.text_input(f"Letters a–z, at most {max_letters}", key="before_text", **KEEP)
text = str(st.session_state["before_text"])
try:
    copies = gru_copies(text)
except ValueError as exc:
    st.error(f"The GRUs cannot read this text: {exc}")
else:
    col1, col2 = st.columns(2)
    for col, (context, (answer, _)) in zip((col1, col2), copies.items()):
        right = sum(a == b for a, b in zip(answer, text))
        col.metric(CONTEXTS[context], answer, f"{right} of {len(text)} letters right",
                   delta_color="normal" if right == len(text) else "inverse", delta_arrow="off")
    answer, weights = copies["attention"]
    source = [*text, "<eos>"]
    show_chart(figs.alignment(weights, source, list(answer),
                              "additive attention: which source letter each output letter read"),
               key="before_alignment")
    st.caption("Each row is one output step; its weights over the encoder's states sum to 1. Copying reads the "
               "diagonal: output letter i looks at source letter i. The one-vector model has no such matrix: it "
               "reads the last state only.")

st.subheader("Recurrent, convolutional, self-attention")
col1, col2, col3 = st.columns(3)
col1.number_input("Tokens T", min_value=1, max_value=MAX_T, key="before_T", **KEEP)
col2.number_input("Width D", min_value=1, max_value=MAX_D, key="before_D", **KEEP)
col3.number_input("Kernel k", min_value=2, max_value=15, key="before_k", **KEEP)
T, D, k = (int(st.session_state[key]) for key in ("before_T", "before_D", "before_k"))
table = pd.DataFrame(rnn.layer_comparison(T, D, k))
st.dataframe(table.style.format({"multiply-adds": "{:,}", "sequential steps": "{:,}", "path length": "{:,}"}),
             hide_index=True)
cheaper = "self-attention" if T < D else "the recurrent layer" if T > D else "neither"
st.markdown(f"Per layer, self-attention costs T²·D and a recurrent layer T·D²: at T = {T:,} and D = {D:,}, "
            f"**{cheaper}** is cheaper ({'T < D' if T < D else 'T > D' if T > D else 'T = D'}). But the recurrent "
            f"layer must take its {T:,} steps one after another, and a signal from the first token crosses "
            f"{max(T - 1, 0):,} of them to reach the last; self-attention takes one step, in parallel.")
st.caption("Vaswani et al. 2017, Table 1: the attention itself, T² scores of D multiply-adds; its four projections "
           "add 4·T·D², as a dense layer around a convolution would. The path length counts contiguous kernels.")

FIXED_STATE = next(number for number, step in enumerate(STEPS, start=1) if step.slug == "linear-attention")
st.markdown(f"**Where this comes back.** Attention removed the one vector, at a cost that grows with the text. "
            f"Linear attention returns to a fixed-size state, a matrix instead of a vector: the lesson chapter "
            f"[Back to a fixed state](lessons?step={FIXED_STATE}) and the [State page](state).")
