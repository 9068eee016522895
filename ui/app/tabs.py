"""Tabs that compute only what is shown: a rerun runs the open tab's content, not the hidden ones'.

``st.tabs`` sends every tab's content on every rerun, hidden or not: a sidebar change on the Masks page
computed eight tabs (three of them building a model of their own) and the browser drew all their charts,
to show one. Given a key and ``on_change="rerun"``, Streamlit reruns the page when a reader picks another
tab and tells each tab whether it is the open one (``tab.open``); the hidden tabs then stay empty until
picked. Every view is still there, one click away, computed when it is looked at.

    tabs = lazy_tabs(["none", "causal"], key="mask_tab")
    for _ in when_open(tabs[0]):   # runs once, inside the tab, when it is open; else not at all
        show_chart(...)
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

import streamlit as st


def lazy_tabs(labels: Sequence[str], key: str) -> Sequence:
    """st.tabs that remembers the open tab (under `key`) and reruns the page when another one is picked."""
    return st.tabs(list(labels), key=key, on_change="rerun")


def when_open(tab) -> Iterator[None]:
    """Yield once, inside `tab`, when it is the open tab; yield nothing when it is hidden.

    A loop rather than a `with` block, because a `with` block cannot skip its own body.
    """
    if tab.open is not False:  # None: a tab that does not track which one is open shows its content
        with tab:
            yield
