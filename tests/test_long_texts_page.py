"""The Long texts page: a shipped model reads a text of thousands of tokens, every head is drawn along it, the
atlas stands beside random-init weights, a window's exact weights are its rows of the whole pattern, and bad input
gets a message with the rest of the page intact."""
import json

import numpy as np
import pytest
import torch

from apptest_helpers import assert_clean, figures_by_title, open_page, values
from transformer.long_context import row_weights
from ui.compute import long_texts as measure
from ui.figures import long_texts as figs


@pytest.fixture(scope="module")
def page():
    return assert_clean(open_page("pages/long_texts.py", text=None, lt_chars=2000, lt_length=32, lt_start=100,
                                  lt_layer=2, lt_head=1))


def test_every_head_is_drawn_along_the_whole_text_and_the_trained_length_is_marked(page):
    strips = next(c for c in page.get("plotly_chart") if c.proto.id.endswith("lt_strips"))
    spec = json.loads(strips.proto.spec)
    cfg = measure.language_models()["llama2-language"].cfg
    assert len(spec["data"][0]["y"]) == cfg.n_layers * cfg.n_heads
    n_tokens = len(measure.tokens_of("llama2-language", measure.document(2000)))
    assert values(spec["data"][0]["x"])[-1] < n_tokens <= values(spec["data"][0]["x"])[-1] + 2 * n_tokens / 600 + 1
    assert any("trained length" in str(shape) for shape in spec["layout"].get("annotations", []))
    assert any("past" in w.value or "longest text" in w.value for w in page.warning)  # 2,000 characters > 513


def test_the_atlas_is_drawn_for_the_model_and_for_random_init_weights_within_and_beyond_the_trained_length(page):
    titles = figures_by_title(page)
    roles = lambda title: {a["text"] for a in titles[title]["layout"]["annotations"]}  # noqa: E731
    assert roles("random-init weights, within the trained length") == {"broad"}
    assert "previous-token" in roles("llama2-language, within the trained length")
    assert page.radio(key="lt_atlas").options == ["within the trained length", "beyond it"]
    page.radio(key="lt_atlas").set_value("beyond it").run()
    assert_clean(page)
    titles = figures_by_title(page)
    assert roles("random-init weights, beyond it") == {"broad"} and "llama2-language, beyond it" in titles


def test_the_closer_look_is_the_heads_own_rows_of_its_whole_pattern(page):
    chart = next(c for c in page.get("plotly_chart") if c.proto.id.endswith("lt_zoom"))
    drawn = values(json.loads(chart.proto.spec)["data"][0]["z"])
    model = measure.get_model(measure.language_models()["llama2-language"].key, 0)
    ids = torch.tensor([measure.tokens_of("llama2-language", measure.document(2000))])
    expected = row_weights(model, ids, layer="blocks.2.attn", start=100, stop=132)[0, 1, :, 100:132]
    np.testing.assert_allclose(drawn, expected.numpy(), atol=1e-6)


def test_a_text_past_the_cap_is_refused_by_name_and_the_controls_stay():
    at = open_page("pages/long_texts.py", text=None, lt_source="paste a text")
    at.text_area(key="lt_pasted").set_value("a" * (measure.MAX_CHARS + 1)).run()
    assert_clean(at, errors_allowed=True)
    assert any(f"{measure.MAX_CHARS:,}" in e.value for e in at.error)
    assert at.selectbox(key="lt_model").value == "llama2-language"  # the rest of the page is still there


def test_a_learned_position_table_refuses_a_text_past_it_with_the_reason():
    at = open_page("pages/long_texts.py", text=None, lt_model="gpt2-language", lt_chars=2000)
    assert_clean(at, errors_allowed=True)
    assert any("learned table of 513 positions" in e.value for e in at.error)


def test_strips_average_stretches_of_tokens_and_keep_every_token():
    values_ = np.arange(2 * 1300, dtype=float).reshape(2, 1300)
    means, starts = figs.binned(values_, bins=600)
    assert means.shape[1] == len(starts) <= 600 and starts[0] == 0
    assert np.isclose(means[0, 0], values_[0, :3].mean()) and np.isclose(means[0, -1], values_[0, starts[-1]:].mean())


def test_the_memory_cap_is_checked_before_anything_runs():
    with pytest.raises(MemoryError, match="over this page's cap"):
        measure.check_memory("llama2-language", 50_000_000)
