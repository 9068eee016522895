"""Every page runs inside app.py, the one place that draws the navigation, the title and the sidebar sections.

Streamlit reads a `pages/` folder next to the main script as a legacy multipage app until the process's
first st.navigation call: a fresh server whose first request is a page's own address (a shared link)
runs pages/<page>.py alone, and so does AppTest's switch_page. The page then runs app.py itself.
"""
from __future__ import annotations

import runpy
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import streamlit as st

APP = Path(__file__).resolve().parents[2] / "app.py"
_inside_app: ContextVar[bool] = ContextVar("inside_app", default=False)  # per thread, so per script run


@contextmanager
def inside_app():
    """app.py runs the page inside this block."""
    token = _inside_app.set(True)
    try:
        yield
    finally:
        _inside_app.reset(token)


def run_inside_app() -> None:
    """Outside app.py, run app.py (it runs the page the URL names, this one) and end this run here."""
    if _inside_app.get():
        return
    runpy.run_path(str(APP))  # app.py's st.navigation also ends the legacy mode for the whole server
    st.stop()
