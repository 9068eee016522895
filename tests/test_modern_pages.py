"""The axis pages' views of 2024-2026, under AppTest: local/global layers on Masks, RoPE scaling on Positions,
MLA on KV heads — each figure equal to the library's numbers or the measurements' JSON."""
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from apptest_helpers import APP, assert_clean, figures_by_title
from apptest_helpers import values as decode
from transformer import MODEL_CARDS
from transformer.costs import kv_cache_bytes

MEASURED = Path(__file__).resolve().parent.parent / "assets" / "measurements" / "modern-variants.json"


def open_page(page: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(page).run()
    return assert_clean(at)


def test_masks_page_draws_the_layer_pattern_and_what_local_layers_save():
    at = open_page("pages/masks.py")
    at.sidebar.number_input(key="sliding_window").set_value(6).run()
    at.sidebar.selectbox(key="layer_pattern").set_value("alternate").run()
    assert_clean(at)
    drawn = figures_by_title(at)
    strip = {bar["name"]: bar for bar in drawn["the layer plan: what each layer does"]["data"]}
    assert strip["keys"]["text"] == ["local 6", "global", "local 6", "global"]
    assert strip["positions"]["text"] == ["RoPE"] * 4
    assert "layer 0: a local layer" in drawn and "layer 1: a global layer" in drawn
    saved = drawn["KV cache for one sequence (16-bit)"]["data"]
    gemma = MODEL_CARDS["gemma3"].real["27B"]
    expected = [kv_cache_bytes(gemma, n)["total"] / 2 ** 30 for n in (4096, 32768, 131072)]
    assert list(decode(saved[1]["y"])) == pytest.approx(expected)
    assert decode(saved[0]["y"])[-1] > 5 * decode(saved[1]["y"])[-1]  # at 128k tokens all-global holds far more


def test_layers_without_positions_chosen_in_the_sidebar_reach_the_plan_strip_and_the_link():
    at = open_page("pages/masks.py")
    at.sidebar.selectbox(key="nope_layers").set_value("every 2").run()
    assert_clean(at)
    strip = {bar["name"]: bar for bar in figures_by_title(at)["the layer plan: what each layer does"]["data"]}
    assert strip["positions"]["text"] == ["RoPE", "NoPE", "RoPE", "NoPE"]
    assert at.query_params["nope_layers"] == "every 2"  # a link keeps it
    at.sidebar.selectbox(key="position").set_value("alibi").run()  # no rotation, so no layer to leave it out of
    assert_clean(at)
    strip = {bar["name"]: bar for bar in figures_by_title(at)["the layer plan: what each layer does"]["data"]}
    assert strip["positions"]["text"] == ["ALiBi"] * 4


def test_positions_page_draws_the_scalings_and_the_measured_length_test():
    at = open_page("pages/positions.py")
    drawn = figures_by_title(at)
    waves = drawn["wavelength of each RoPE frequency, before and after scaling"]["data"]
    assert len(waves) == 5
    rows = json.loads(MEASURED.read_text())["rope_scaling"][0]["rows"]
    test = drawn["the trained RoPE model read past its context, with each scaling (no retraining)"]["data"]
    assert [list(decode(trace["y"])) for trace in test] == [list(row["bits_per_char"].values()) for row in rows]


def test_kv_heads_page_shows_the_absorbed_form_equals_the_explicit_one_for_mla():
    at = open_page("pages/kv_heads.py")
    at.sidebar.number_input(key="kv_rank").set_value(16).run()
    assert_clean(at)
    gap = next(m for m in at.metric if m.label.startswith("absorbed form"))
    assert float(gap.value) < 1e-5


def test_the_playground_says_a_nope_layer_turns_no_q_and_k_and_the_diagram_counts_the_turned_layers():
    at = open_page("pages/playground.py")
    at.sidebar.selectbox(key="nope_layers").set_value("every 2").run()
    at.session_state["play_tab"] = "Position, experts, the model"
    at.session_state["layer"] = 1  # a NoPE layer of the plan RoPE, NoPE, RoPE, NoPE
    at.run()
    assert_clean(at)
    words = " ".join(c.value for c in at.caption)
    assert "Layer 1 is a layer without positions (NoPE)" in words and "rotated by an angle" not in words
    diagram = at.get("graphviz_chart")[0].proto.spec
    assert "RoPE on q, k\\non 2 of 4 layers (the rest: no positions)" in diagram
    at.session_state["layer"] = 0
    at.run()
    assert "Layer 0 is a layer without positions" not in " ".join(c.value for c in at.caption)
