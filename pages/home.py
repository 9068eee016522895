"""Home: the five lines, the five axes and the problem each choice solves, the real-model table."""
import streamlit as st

from transformer import AXES, MODEL_CARDS, PRESETS, kv_cache_bytes_per_token, param_counts
from ui.app.page import start_page
from ui.app.source import five_lines
from ui.app.state import apply_preset

state = start_page("Attention Lab", "The original Transformer and LLaMA are the same skeleton. The core never changes:")
if state.error:  # home draws no model, but says so when the sidebar describes an impossible one
    st.error(f"This combination of axes is impossible: {state.error}")

st.code(five_lines(), language="python")
st.caption("These are the library's own lines (`Attention.explicit_attention` in transformer/attention.py); "
           "every page runs them.")

st.subheader("Everything else is a choice along five axes")
for name in ("kv_heads", "mask", "position", "norm", "ffn"):
    axis = AXES[name]
    options = " · ".join(choice.label for choice in axis.choices.values())
    if name == "norm":  # the five axes count a norm and its placement as one
        options += ", " + " or ".join(choice.label for choice in AXES["norm_position"].choices.values())
    st.markdown(f"**{axis.title}** — {options}  \n{axis.problem}")
st.caption("Words in quotation marks are the lecture's. [Trade-offs, measured](tradeoffs) trains small models with "
           "each choice and says which of those claims held at this lab's size, which did not, and which it cannot "
           "test.")

st.subheader("Real models as choices on the axes")
st.caption("Open a row to load that model's recipe at classroom size. Sizes are the real models'; "
           "KV cache is per token in fp16.")
header = st.columns([2, 1, 4, 2, 2, 1])
for col, label in zip(header, ["Model", "Year", "Axes", "Parameters (real)", "KV cache / token", ""]):
    col.markdown(f"**{label}**")
for key, card in MODEL_CARDS.items():
    size, real = next(iter(card.real.items()))
    counts = param_counts(real)
    row = st.columns([2, 1, 4, 2, 2, 1])
    row[0].write(card.name)
    row[1].write(str(card.year))
    row[2].write(card.summary)
    active = f" ({counts['active'] / 1e9:.1f}B active)" if real.row("ffn").routed else ""
    row[3].write(f"{size}: {counts['total'] / 1e9:.2f}B{active}" if counts["total"] >= 1e9 else f"{size}: {counts['total'] / 1e6:.0f}M")
    row[4].write(f"{kv_cache_bytes_per_token(real) / 1024:.0f} KiB")
    if key not in PRESETS:  # a card with real sizes only: no preset (and no trained checkpoint) to load yet
        row[5].button("Open", key=f"open_{key}", disabled=True,
                      help=f"{card.name} has no classroom preset in the playground yet; its real sizes are on "
                           "What a model costs and KV heads")
    elif row[5].button("Open", key=f"open_{key}", help=f"Load the {card.name} preset in the playground",
                       on_click=apply_preset, args=(key,)):
        st.switch_page("pages/playground.py")
