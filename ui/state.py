"""The shared sidebar: preset, the five axes, sizes, input text and seed — all kept in the URL.

Every page calls ``sidebar()`` first. It reads the URL once per session, draws the
widgets, writes the current state back to the URL (so a link reproduces the view)
and returns an ``AppState`` with a validated config, or the library's error message.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from urllib.parse import urlencode

import streamlit as st

from transformer import MODEL_CARDS, PRESETS, TransformerConfig, choices

DEFAULT_PRESET = "gpt2"
DEFAULT_TEXT = "the cat sat on the mat. the cat sat"
CUSTOM = "custom"
KEEP = {"persist_state": "session"}  # widget values survive page switches

# URL key -> (session key, how to read it from the URL string)
_AXES = {
    "arch": str, "position": str, "norm": str, "norm_position": str, "ffn": str,
    "n_layers": int, "d_model": int, "n_heads": int, "n_kv_heads": int,
    "n_experts": int, "top_k": int, "sliding_window": int,
}
_OTHER = {"preset": str, "text": str, "seed": int}

POSITION_HELP = {
    "none": "no position signal: only the mask orders tokens",
    "sinusoidal": "fixed sine/cosine vectors added to the embeddings (2017)",
    "learned": "a trained vector per position, added to the embeddings (GPT-2, BERT)",
    "rope": "q and k rotated by an angle proportional to position (LLaMA, Mistral)",
    "alibi": "a linear distance penalty added to the scores (BLOOM)",
}
FFN_HELP = {
    "relu": "max(0, x) MLP (2017)", "gelu": "smooth MLP (GPT-2, BERT)",
    "swiglu": "gated linear unit (LLaMA, PaLM)", "moe": "router picks top-k experts per token (Mixtral)",
}


@dataclass
class AppState:
    preset: str  # a PRESETS key, or "custom" when an axis moved away from it
    config: TransformerConfig | None  # None when the widgets describe an impossible model
    error: str | None
    text: str
    seed: int

    @property
    def config_json(self) -> str:
        return json.dumps(self.config.to_dict(), sort_keys=True)


def _preset_values(name: str) -> dict:
    cfg = PRESETS[name]
    values = {k: getattr(cfg, k) for k in _AXES}
    values["sliding_window"] = cfg.sliding_window or 0  # 0 = no window in the widget
    return values


def _init_from_url() -> None:
    """First run of a session: fill the widgets' state from the URL (or the defaults)."""
    if st.session_state.get("_state_ready"):
        return
    params = st.query_params
    preset = params.get("preset", DEFAULT_PRESET)
    if preset not in PRESETS and preset != CUSTOM:
        preset = DEFAULT_PRESET
    values = _preset_values(preset if preset in PRESETS else DEFAULT_PRESET)
    values.update(preset=preset, text=DEFAULT_TEXT, seed=0)
    for key, parse in {**_AXES, **_OTHER}.items():
        if key in params:
            try:
                values[key] = parse(params[key])
            except ValueError:
                pass  # a malformed number in a link: keep the default
    for key, value in values.items():
        st.session_state[key] = value
    st.session_state["_state_ready"] = True


def apply_preset(name: str | None = None) -> None:
    """Fill the axes with a preset's values (a widget callback: runs before the page draws)."""
    name = name or st.session_state["preset"]
    st.session_state["preset"] = name
    if name in PRESETS:
        st.session_state.update(_preset_values(name))


def _mark_custom() -> None:
    name = st.session_state["preset"]
    if name in PRESETS and _current_values() != _preset_values(name):
        st.session_state["preset"] = CUSTOM


def _current_values() -> dict:
    return {k: st.session_state[k] for k in _AXES}


def config_from_values(values: dict, preset: str) -> TransformerConfig:
    """The widgets' values on top of the preset's remaining fields (bias, eps, ...)."""
    base = PRESETS.get(preset, PRESETS[DEFAULT_PRESET])
    fields = dict(values)
    fields["sliding_window"] = fields["sliding_window"] or None
    if preset == CUSTOM:  # family-specific details only make sense inside their family
        base = TransformerConfig()
    return dataclasses.replace(base, **fields)


def sidebar() -> AppState:
    _init_from_url()
    s = st.session_state
    with st.sidebar:
        st.selectbox("Preset (real model recipe)", [*PRESETS, CUSTOM], key="preset", **KEEP, on_change=apply_preset,
                     format_func=lambda k: MODEL_CARDS[k].name if k in MODEL_CARDS else "custom (edited)")
        if s["preset"] in MODEL_CARDS:
            st.caption(MODEL_CARDS[s["preset"]].summary)
        else:
            st.caption("custom: an axis was changed away from the preset")
        st.text_area("Input text", key="text", **KEEP, height=80, help="Each character is one token.")

        st.markdown("**The five axes**")
        st.selectbox("Architecture", choices("arch"), key="arch", **KEEP, on_change=_mark_custom)
        heads = s["n_heads"]
        kv_options = [g for g in range(1, heads + 1) if heads % g == 0] or [1]
        if s["n_kv_heads"] not in kv_options:  # keep the widget valid; the config check reports the problem
            kv_options = sorted({*kv_options, s["n_kv_heads"]})
        st.selectbox("KV heads (G)", kv_options, key="n_kv_heads", **KEEP, on_change=_mark_custom,
                     format_func=lambda g: f"{g} · " + ("MHA" if g == heads else "MQA" if g == 1 else "GQA"))
        st.number_input("Sliding window W (0 = none)", min_value=0, max_value=4096, step=1, key="sliding_window", **KEEP,
                        on_change=_mark_custom)
        st.selectbox("Position", choices("position"), key="position", **KEEP, on_change=_mark_custom,
                     help="\n".join(f"- {k}: {v}" for k, v in POSITION_HELP.items()))
        col1, col2 = st.columns(2)
        col1.selectbox("Norm", choices("norm"), key="norm", **KEEP, on_change=_mark_custom)
        col2.selectbox("Placement", choices("norm_position"), key="norm_position", **KEEP, on_change=_mark_custom)
        st.selectbox("FFN", choices("ffn"), key="ffn", **KEEP, on_change=_mark_custom,
                     help="\n".join(f"- {k}: {v}" for k, v in FFN_HELP.items()))
        if s["ffn"] == "moe":
            col1, col2 = st.columns(2)
            col1.number_input("Experts", min_value=1, max_value=16, key="n_experts", **KEEP, on_change=_mark_custom)
            col2.number_input("Top-k", min_value=1, max_value=16, key="top_k", **KEEP, on_change=_mark_custom)

        st.markdown("**Sizes**")
        col1, col2, col3 = st.columns(3)
        col1.number_input("Layers", min_value=1, max_value=12, key="n_layers", **KEEP, on_change=_mark_custom)
        col2.number_input("d_model", min_value=8, max_value=512, step=8, key="d_model", **KEEP, on_change=_mark_custom)
        col3.number_input("Heads", min_value=1, max_value=16, key="n_heads", **KEEP, on_change=_mark_custom)
        st.number_input("Seed", min_value=0, max_value=2**31 - 1, key="seed", **KEEP)
        _sync_url()
        st.caption("This page's link reproduces the view:")
        st.code("?" + urlencode(dict(st.query_params)), language=None)

    config, error = None, None
    try:
        config = config_from_values(_current_values(), s["preset"])
    except ValueError as exc:
        error = str(exc)
    return AppState(s["preset"], config, error, s["text"], int(s["seed"]))


def _sync_url() -> None:
    """Write the whole state into the URL, only the keys that changed."""
    s = st.session_state
    state = {k: str(s[k]) for k in (*_OTHER, *_AXES)}
    for key, value in state.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value
