"""What every page does first: the sidebar, the title, the checks, the model and its trace."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from transformer import Transformer

from .runtime import MAX_TOKENS, TraceData, Tokens, get_model, get_trace, tokenize
from .state import AppState, sidebar


@dataclass
class PageContext:
    state: AppState
    model: Transformer
    tokens: Tokens
    trace: TraceData


def start_page(title: str, intro: str) -> AppState:
    """Sidebar + title. Pages that draw no model (e.g. the home page) stop here."""
    state = sidebar()
    st.title(title)
    st.markdown(intro)
    return state


def load_page(title: str, intro: str) -> PageContext:
    """Sidebar, title, then the model and its recorded forward pass; on bad input an error and a stop.

    The sidebar is drawn before any check, so the widgets stay usable to fix the input.
    """
    state = start_page(title, intro)
    if state.error:
        st.error(f"This combination of axes is impossible: {state.error}")
        st.stop()
    try:
        tokens = tokenize(state.text, state.config.vocab_size)
        model = get_model(state.config_json, state.seed)
        trace = get_trace(state.config_json, state.seed, tuple(tokens.ids), tuple(tokens.labels))
    except (ValueError, MemoryError) as exc:
        st.error(str(exc))
        st.stop()
    if tokens.truncated_from:
        st.warning(f"The input has {tokens.truncated_from} characters; the views show the first {MAX_TOKENS} tokens.")
    st.info("Untrained weights (random, seed "
            f"{state.seed}): the patterns below show the mechanics, not learned behaviour.", icon="🎲")
    return PageContext(state, model, tokens, trace)
