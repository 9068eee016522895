"""What every page does first: the sidebar, the title, the checks, the model and its trace."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from transformer import AXES, Transformer, axes

from ui.app.app_entry import run_inside_app
from ui.compute.model_cache import TraceData, get_model, get_trace
from ui.compute.tokens import MAX_TOKENS, Tokens, encode_text
from ui.compute.weights import weights_info
from ui.app.state import AppState, sidebar


@dataclass
class PageContext:
    state: AppState
    model: Transformer
    tokens: Tokens
    trace: TraceData


def start_page(title: str, intro: str) -> AppState:
    """Sidebar + title. Pages that draw no model (e.g. the home page) stop here."""
    run_inside_app()  # a shared link on a fresh server runs the page without app.py
    state = sidebar()
    st.title(title)
    st.markdown(intro)
    return state


def load_page(title: str, intro: str, banner: bool = True) -> PageContext:
    """Sidebar, title, then the model and its recorded forward pass; on bad input an error and a stop.

    The sidebar is drawn before any check, so the widgets stay usable to fix the input. banner=False leaves the
    weights' banner to a page that shows another model than the sidebar's (one banner a page, never two).
    """
    state = start_page(title, intro)
    if state.error:
        st.error(f"This combination of axes is impossible: {state.error}")
        st.stop()
    info = weights_info(state.config_json, state.weights)
    try:
        tokens = encode_text(state.text, state.config_json, state.weights)
        model = get_model(state.config_json, state.seed, state.weights)
        if model.cfg.row("position").bounds_length and len(tokens.ids) > model.cfg.max_len:
            st.error(past_position_table(len(tokens.ids), model.cfg.max_len, info.trained_tokens, model.cfg.position))
            st.stop()
        trace = get_trace(state.config_json, state.seed, tuple(tokens.ids), tuple(tokens.labels), state.weights)
    except (ValueError, MemoryError, OSError) as exc:
        st.error(str(exc))
        st.stop()
    if tokens.truncated_from:
        st.warning(f"The input has {tokens.truncated_from} tokens; the views show the first {MAX_TOKENS}.")
    if banner:
        weights_banner(info, state.seed)
    past_trained_context(info, len(tokens.ids))
    return PageContext(state, model, tokens, trace)


def past_position_table(n_tokens: int, rows: int, trained_tokens: int | None, position: str = "learned") -> str:
    """Why a position table (learned, sinusoidal) refuses this text, and what to do."""
    why = ("as many as the longest sequence it trained on" if trained_tokens == rows else "its max_len")
    computed = ", ".join(axes.label("position", name) for name, scheme in AXES["position"].choices.items()
                         if not scheme.bounds_length and (scheme.rotates_qk or scheme.score_bias))
    return (f"This text is {n_tokens} tokens long, its start token included (for the language models a token is "
            f"a character, or one byte of a character outside their table, such as an emoji). This model's "
            f"{axes.label('position', position)} position table has {rows} rows, {why}, and no row for a position "
            f"past them. Shorten the text to {rows - 1} tokens, or pick a model whose positions are computed from the "
            f"position itself ({computed}), which can read on past their training.")


def past_trained_context(info, n_tokens: int) -> None:
    """Say so where the text is longer than anything the checkpoint trained on: what it does there is untested."""
    if info.trained_tokens is not None and n_tokens > info.trained_tokens:
        st.warning(f"This text is {n_tokens} tokens long; the checkpoint trained on sequences of at most "
                   f"{info.trained_tokens} (its start token included). From token {info.trained_tokens + 1} on, the "
                   "views show the model beyond its trained context.", icon=":material/straighten:")


def weights_banner(info, seed: int) -> None:
    """Say plainly whether the weights were trained."""
    if info.kind == "trained":
        st.success(f"Trained weights: {info.label}.", icon=":material/school:")
    elif info.kind == "huggingface":
        st.success(f"Weights: {info.label}.", icon=":material/hub:")
    else:
        col1, col2 = st.columns([4, 1])
        reading = AXES["tokens"].row(info.tokens)
        missing = (f"No shipped checkpoint of these axes reads {reading.label} tokens yet." if reading.learned
                   else "No shipped checkpoint has exactly these axes and sizes.")
        col1.warning(f"Untrained weights (random, seed {seed}): the patterns show the mechanics, not learned "
                     f"behaviour. {missing}", icon=":material/casino:")
        col2.page_link("pages/train.py", label="Train this variant", icon=":material/fitness_center:")
