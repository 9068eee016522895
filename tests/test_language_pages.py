"""Typed text on every page: each opens on a trained language checkpoint, and no text a person may type or paste
raises, or meets a character the tokenizer cannot place."""
import json
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from apptest_helpers import APP, assert_clean, values
from test_language import BAD_TEXTS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from screenshots import page_paths  # noqa: E402

from ui.app.state import DEFAULT_TEXT  # noqa: E402
from transformer import PRESETS  # noqa: E402
from transformer.checkpoint import find_checkpoint, read_meta  # noqa: E402

pytestmark = pytest.mark.slow

PAGES = [f"pages/{stem}.py" for stem in sorted(page_paths())]


def open_default(page: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(page).run()
    return at


def open_prediction(at: AppTest) -> AppTest:
    """The playground's Prediction tab (only the open tab is computed: pages/playground.py)."""
    at.session_state["play_tab"] = "Prediction"
    return at.run()


@pytest.mark.parametrize("page", PAGES)
def test_every_page_opens_on_a_language_checkpoint_and_takes_any_text(page):
    at = open_default(page)
    assert_clean(at)
    assert at.sidebar.text_area(key="text").value == DEFAULT_TEXT
    banners = [s.value for s in at.success if "trained checkpoint" in s.value]
    if banners:  # a page that draws the sidebar's model says which weights it runs
        assert all("-language" in b and "language task" in b for b in banners), banners
    for name, text in {"empty": "", **BAD_TEXTS}.items():
        at.sidebar.text_area(key="text").set_value(text).run()
        assert not at.exception, (name, [e.value for e in at.exception])
        errors = [e.value for e in at.error]
        assert not any("has no token for" in e for e in errors), (name, errors)
        if text:
            assert not errors, (name, errors)


def test_the_playground_default_shows_a_trained_language_model_and_its_prediction():
    at = open_default("pages/playground.py")
    assert_clean(at)
    assert any("llama2-language" in s.value for s in at.success)
    assert "head_grid" in {c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")}  # the first tab
    drawn = {c.proto.id.rsplit("-", 1)[-1] for c in open_prediction(at).get("plotly_chart")}
    assert_clean(at)
    assert {"next_token", "actual_next"} <= drawn


def test_changing_the_preset_keeps_the_sentence():
    at = open_default("pages/playground.py")
    sentence = "Attention is all you need. Attention is all you need."
    at.sidebar.text_area(key="text").set_value(sentence).run()
    for preset in ("gpt2", "mistral", "bloom", "mixtral", "falcon", "palm"):
        at.sidebar.selectbox(key="preset").set_value(preset).run()
        assert_clean(at)
        assert at.sidebar.text_area(key="text").value == sentence, preset
        assert any(f"{preset}-language" in s.value for s in at.success), preset


def test_a_synthetic_task_is_offered_where_it_fits_and_brings_its_example():
    at = open_default("pages/playground.py")
    at.sidebar.selectbox(key="preset").set_value("original").run()  # no language model: its tasks are copy and reverse
    assert_clean(at)
    at.sidebar.selectbox(key="preset").set_value("llama2").run()
    choice = at.sidebar.selectbox(key="task")
    assert choice.options[0].startswith("language") and any(o.startswith("induction") for o in choice.options)
    choice.set_value("induction").run()
    assert_clean(at)
    assert any("llama2-induction" in s.value for s in at.success)
    assert at.sidebar.text_area(key="text").value != DEFAULT_TEXT  # the induction task's own letters
    at.sidebar.selectbox(key="task").set_value("language").run()
    assert at.sidebar.text_area(key="text").value == DEFAULT_TEXT


def test_bert_fills_in_a_hidden_character_on_the_playground():
    at = open_default("pages/playground.py")
    at.sidebar.selectbox(key="preset").set_value("bert").run()
    assert_clean(at)
    assert any("bert-language" in s.value and "masked-character accuracy" in s.value for s in at.success)
    at.sidebar.text_area(key="text").set_value("The cat sat on the mat.").run()
    open_prediction(at)
    at.select_slider(key="hide").set_value(1 + "The cat sat on the mat.".index("mat") + 1).run()  # the 'a' of mat
    assert_clean(at)
    assert "m▢t" in at.text[0].value
    charts = {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}
    guesses = charts["fill_in"]["data"][0]
    assert guesses["x"][0].split(":", 1)[-1] == "a" and "'a'" in charts["fill_in"]["layout"]["title"]["text"]
    assert len(values(charts["masked_each"]["data"][0]["y"])) == len("The cat sat on the mat.")
    figures = read_meta(find_checkpoint(PRESETS["bert"]))[0]["figures"]
    neighbours = [f"L{figures[key]['layer']}H{figures[key]['head']}" for key in ("previous_token_head", "next_token_head")]
    assert any(all(head in c.value for head in neighbours) for c in at.caption)  # the page names them, from the JSON
    at.multiselect(key="switched_off").set_value(neighbours).run()  # the heads on both neighbours
    assert_clean(at)
    lines = {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}["masked_each"]["data"]
    assert len(lines) == 2 and values(lines[1]["y"]).mean() < values(lines[0]["y"]).mean() - 0.1  # guesses fall


def test_a_text_past_the_trained_context_says_so_next_to_the_views():
    """LLaMA 2's induction checkpoint trained on 17 tokens: a 40-character text runs past that, and the page says
    where; a text within it draws no such note."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(preset="llama2", task="induction", text="abcab")
    at.switch_page("pages/playground.py").run()
    assert_clean(at)
    assert not [w for w in at.warning if "trained context" in str(w.value)]
    at.sidebar.text_area(key="text").set_value("abcdefghij" * 4).run()
    notes = [str(w.value) for w in at.warning if "trained context" in str(w.value)]
    assert notes and "41 tokens long" in notes[0] and "at most 17" in notes[0], notes


def test_the_continuation_panel_offers_example_prompts_that_replace_the_text():
    at = open_prediction(open_default("pages/playground.py"))
    prompts = [b for b in at.button if str(b.key).startswith("prompt_")]
    assert len(prompts) >= 3
    prompts[0].click().run()
    assert_clean(at)
    assert at.sidebar.text_area(key="text").value == prompts[0].key.removeprefix("prompt_")
    assert at.query_params["text"] == prompts[0].key.removeprefix("prompt_")


def test_the_heads_a_page_names_are_those_above_their_random_init_control():
    from ui.compute.shipped import heads_text

    figures = {"previous_token_head": {"score": 0.91, "layer": 0, "head": 3},
               "induction_head": {"score": 0.08, "layer": 2, "head": 1},
               "random_init": {"seeds": [0, 1], "previous_token_head": [0.04, 0.09], "induction_head": [0.02, 0.11]}}
    said = heads_text({"figures": figures})
    assert said == "Its previous-token head L0H3 (0.91 on held-out text; random weights 0.04–0.09)."
    assert heads_text({"figures": {"previous_token_head": figures["previous_token_head"]}}) == ""  # no control, no claim


def test_text_past_bert_s_position_table_says_how_long_it_may_be():
    at = open_default("pages/playground.py")
    at.sidebar.selectbox(key="preset").set_value("bert").run()
    at.sidebar.text_area(key="text").set_value("The children walked to the river and sat down by the water, where the "
                                               "old boat was tied up for the night.").run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "65 rows, as many as the longest sequence it trained on" in errors[0], errors
    assert "Shorten the text to 64 tokens" in errors[0]
    at.sidebar.text_area(key="text").set_value("The cat sat on the mat.").run()  # shortened, the page draws again
    assert_clean(at)
    assert at.get("plotly_chart")

