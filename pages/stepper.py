"""Forward-pass stepper: every recorded step in order, with its formula, source line, shapes and values."""
import numpy as np
import streamlit as st

from ui.figures.diagram import architecture_dot
from ui.app.export import table_csv
from ui.figures.base import bars, heatmap, masked_to_nan
from ui.app.page import load_page
from ui.app.charts import show_chart
from ui.app.tabs import lazy_tabs, when_open
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.stepper import diagram_node, explain, formula, inputs_of, named_shape, shape_table, slice_2d, source_line

ctx = load_page("Forward-pass stepper",
                "Walk through the forward pass one recorded tensor at a time, in the order the model made them. "
                "Each step shows what it is, its formula, the library line that produced it, its shape and its values.")
cfg, trace = ctx.state.config, ctx.trace
events = trace.events
last = len(events) - 1

# --- which step: buttons, slider and jump list all move one index kept in the URL ----------------
url_state("stepper", step=int, step_tab=str)  # step_tab: the open tab (lazy_tabs below)
keep_valid("step", range(len(events)))


def go_to(step: int) -> None:
    st.session_state["step"] = max(0, min(last, step))


step = st.session_state["step"]
st.session_state["step_jump"] = step  # the jump list always shows where the slider is
prev_col, next_col, slider_col, jump_col = st.columns([1.3, 1.3, 4, 4], vertical_alignment="bottom")
prev_col.button("◀ Previous", key="prev", on_click=go_to, args=(step - 1,), disabled=step == 0, width="stretch")
next_col.button("Next ▶", key="next", on_click=go_to, args=(step + 1,), disabled=step == last, width="stretch")
slider_col.slider("Step", 0, last, key="step", **KEEP)
jump_col.selectbox("Jump to", range(len(events)), key="step_jump",
                   format_func=lambda i: f"{i}: {events[i]['name']}",
                   on_change=lambda: go_to(st.session_state["step_jump"]))

event = events[step]
name = event["name"]
batched = event["dims"][:1] == ["B"]
values = trace.arrays[name][0] if batched else trace.arrays[name]  # the first (only) sequence
dims = event["dims"][1:] if batched else event["dims"]

st.subheader(f"Step {step} of {last}: `{name}`")

# --- the step, where it sits, every step's shape: one tab each; a rerun computes and draws only the open tab's -----
# (a sidebar change redrew the values, the whole model's diagram and the shape trace of every step to show one step)
step_tab, diagram_tab, table_tab = lazy_tabs(["This step", "Where it sits in the model", "Shape trace"],
                                             key="step_tab")

for _ in when_open(step_tab):
    st.markdown(explain(name))
    latex = formula(name, cfg)
    if latex:
        st.latex(latex)
    st.caption(f"In the library's words: {event['op']}")

    reads = inputs_of(events, step)
    read_lines = [reads] if isinstance(reads, str) else [f"`{events[i]['name']}` {named_shape(events[i])}" for i in reads]
    st.markdown("**Shapes**  \n" + "".join(f"in: {line}  \n" for line in read_lines)
                + f"out: `{name}` **{named_shape(event)}**")
    found = source_line(ctx.model, name)
    if found:
        st.markdown(f"**Source** — `{found.path}`, line {found.line} (`{found.qualname}`)")
        st.code(found.snippet, language="python", wrap_lines=True)

    # --- the values: a 2-D slice the learner chooses ---------------------------------------------
    st.markdown("**Values**")
    side = "tgt" if name.startswith("decoder.") else "src"
    token_dims = {"T": side, "T_q": side, "T_kv": side, "S": "src"}  # axes that run over tokens get their labels
    labels_of = {"src": trace.src_labels, "tgt": trace.tgt_labels}

    def axis_labels(axis: int) -> list[str]:
        which = token_dims.get(dims[axis])
        if which and len(labels_of[which]) == values.shape[axis]:
            return labels_of[which]
        return [str(i) for i in range(values.shape[axis])]

    def axis_name(axis: int) -> str:
        return f"{dims[axis]} ({values.shape[axis]})"

    if values.ndim == 0:
        st.metric(name.rsplit(".", 1)[-1], f"{float(values):.6g}")
    elif values.ndim == 1:
        show_chart(bars(values, axis_labels(0), title=name, x_title=dims[0], y_title="value"), key="values")
    else:
        axes = list(range(values.ndim))
        rows_key, cols_key = f"rows_{step}", f"cols_{step}"
        keep_valid(rows_key, axes, default=values.ndim - 2)
        keep_valid(cols_key, axes, default=values.ndim - 1)
        pick_cols = st.columns(values.ndim)  # rows, columns, then an index for each other dimension
        pick_cols[0].selectbox("Rows", axes, key=rows_key, format_func=axis_name)
        pick_cols[1].selectbox("Columns", axes, key=cols_key, format_func=axis_name)
        rows, cols = st.session_state[rows_key], st.session_state[cols_key]
        if rows == cols:
            st.warning(f"Rows and columns are both {dims[rows]}: pick two different dimensions.")
        else:
            fixed = {}
            held = [a for a in axes if a not in (rows, cols) and values.shape[a] > 1]
            for column, axis in zip(pick_cols[2:], held):
                fixed[axis] = column.number_input(f"{dims[axis]} index", 0, values.shape[axis] - 1,
                                                  key=f"fix_{step}_{axis}")
            plane = slice_2d(values, rows, cols, fixed)
            at = ", ".join(f"{dims[a]}={fixed.get(a, 0)}" for a in axes if a not in (rows, cols))
            shown = masked_to_nan(plane)
            signed = bool(np.isfinite(shown).any() and np.nanmin(shown) < 0)  # a centred scale only for signed values
            fig = heatmap(plane, axis_labels(cols), axis_labels(rows), name + (f" at {at}" if at else ""),
                          x_title=dims[cols], y_title=dims[rows], signed=signed)
            show_chart(fig, key="values")

for _ in when_open(diagram_tab):
    st.markdown(f"**Where this step sits**: `{name}` is recorded at the highlighted node.")
    st.graphviz_chart(architecture_dot(cfg, highlight=diagram_node(name)))

# --- the shape trace of every step ----------------------------------------------------------------
for _ in when_open(table_tab):
    st.caption("Every recorded step, in order. Bytes are the recorded tensor's (float32 unless an index). "
               "min / mean / max leave out masked entries (the mask's most negative number); `masked` counts them.")
    table = shape_table(events, trace.arrays)
    st.dataframe(table, hide_index=True, key="shape_table", height=360,
                 column_config={"min": st.column_config.NumberColumn(format="%.4g"),
                                "mean": st.column_config.NumberColumn(format="%.4g"),
                                "max": st.column_config.NumberColumn(format="%.4g")})
    st.download_button("Download the shape trace (CSV)", key="download_csv", on_click="ignore", mime="text/csv",
                       file_name="shape_trace.csv", data=lambda: table_csv(table))
