"""Figures kept between reruns: ``cached_figure(builder, *args)`` builds ``builder(*args)`` once for those arguments.

A sidebar change reruns the whole page, and building a plotly figure (validating every trace and layout
property) is a large share of a rerun. Many figures do not depend on the widget that changed: the sinusoidal
table depends on d_model and the positions shown, ALiBi's biases on the number of heads, a measured curve on
nothing at all. Kept in ``st.cache_resource``, such a figure is built once and drawn again on every rerun.

The key is everything the figure is built from: the builder and every argument, numpy arrays by their exact
bytes (Streamlit's own hash samples an array of 500,000 values or more; two different arrays must never
share a figure). A figure is shared, read-only, by every session that draws the same numbers: nothing
draws into it afterwards (``st.plotly_chart`` serialises a copy).
"""
from __future__ import annotations

import hashlib

import numpy as np
import plotly.graph_objects as go
import streamlit as st


def _exact(array: np.ndarray) -> tuple:
    """An array's key: its shape, its dtype and a digest of every byte."""
    return array.shape, array.dtype.str, hashlib.blake2b(np.ascontiguousarray(array).tobytes(), digest_size=16).digest()


@st.cache_resource(max_entries=256, show_spinner=False, hash_funcs={np.ndarray: _exact})
def _build(_builder, name: str, args: tuple, kwargs: tuple) -> go.Figure:
    return _builder(*args, **dict(kwargs))  # `name` keys the builder (a function is not hashed)


def cached_figure(builder, *args, **kwargs) -> go.Figure:
    """``builder(*args, **kwargs)``, built once per distinct arguments and shared by every rerun and session."""
    return _build(builder, f"{builder.__module__}.{builder.__qualname__}", args, tuple(sorted(kwargs.items())))
