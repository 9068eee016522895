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

from ui.app import state

KEEP = {"persist_state": "session"}  # the values survive a visit to another page
SIDEBAR_KEYS = (*state.OTHER_KEYS, *state.AXIS_KEYS)
_URL_KEYS = "_page_url_keys"  # session key: the running page's URL keys, which keep_valid keeps in step


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


def url_state(page: str, carry: bool = False, **keys) -> None:
    """A page's URL state in one call: `key=default` (its type parses the link) or `key=type` (no default).

    On the page's first run in a session the values come from the link; missing ones get
    their defaults; the values go back into the URL. `keep_valid` later corrects a value
    the current model does not offer, in the URL too. carry=True first re-assigns the
    sidebar's and the page's values, for a page whose widgets must reopen exactly as they were.
    """
    parsers = {key: value if isinstance(value, type) else type(value) for key, value in keys.items()}
    defaults = {key: value for key, value in keys.items() if not isinstance(value, type)}
    if carry:
        carry_over()
    init_from_url(page, parsers)
    if carry:
        carry_over(defaults)
    for key, default in defaults.items():
        st.session_state.setdefault(key, default)
    st.session_state[_URL_KEYS] = set(parsers)
    write_url()


def keep_valid(key: str, options: Sequence, default=None) -> None:
    """Before drawing a widget: a value the current model does not offer becomes `default` (or the first option)."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = options[0] if default is None else default
        if key in st.session_state.get(_URL_KEYS, ()):
            write_url([key])


def write_url(keys: Sequence[str] | None = None) -> None:
    """Put the page's current values in the URL (only the ones that changed); by default every key of url_state
    that has a value, for a page that sets one while it runs."""
    if keys is None:
        keys = [key for key in st.session_state.get(_URL_KEYS, ()) if key in st.session_state]
    for key in keys:
        value = str(st.session_state[key])
        if st.query_params.get(key) != value:
            st.query_params[key] = value
