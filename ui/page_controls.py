"""A page's own controls (layer, head, step ...) kept in the URL next to the sidebar's state.

The page reads its keys from the URL on its first run in a session, keeps every value
valid for the current model (a head index past the new head count falls back), and
writes the values back, so the link in the sidebar reproduces the exact view.

``carry_over`` writes values back into session state before the widgets are drawn, for a
page that wants its widgets to reopen exactly as they were even on the first run after a
page switch.
"""
from __future__ import annotations

from typing import Callable, Sequence

import streamlit as st

from . import state

KEEP = {"persist_state": "session"}  # the values survive a visit to another page
SIDEBAR_KEYS = (*state._OTHER, *state._AXES)


def carry_over(keys=SIDEBAR_KEYS) -> None:
    """Re-assign the widgets' values so a page switch does not reset them (call before any widget)."""
    for key in keys:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def init_from_url(page: str, keys: dict[str, Callable[[str], object]]) -> None:
    """On this page's first run in the session, copy its keys from the URL into the widgets' state."""
    flag = f"_{page}_url_read"
    if st.session_state.get(flag):
        return
    for key, parse in keys.items():
        if key in st.query_params:
            try:
                st.session_state[key] = parse(st.query_params[key])
            except ValueError:
                pass  # a malformed value in a link: the widget's default applies
    st.session_state[flag] = True


def keep_valid(key: str, options: Sequence, default=None) -> None:
    """Before drawing a widget: a value the current model does not offer becomes `default` (or the first option)."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = options[0] if default is None else default


def write_url(keys: Sequence[str]) -> None:
    """Put the page's current values in the URL (only the ones that changed)."""
    for key in keys:
        value = str(st.session_state[key])
        if st.query_params.get(key) != value:
            st.query_params[key] = value
