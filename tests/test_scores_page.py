"""The Scores page (QK-norm, soft-capping, sinks) and the sidebar's switches of 2024-2026, under AppTest."""
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from apptest_helpers import APP, assert_clean, figures_by_title
from apptest_helpers import values as decode

MEASURED = Path(__file__).resolve().parent.parent / "assets" / "measurements" / "modern-variants.json"


@pytest.fixture(scope="module")
def scores_page():
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/scores.py").run()
    return assert_clean(at)


def test_the_page_draws_every_view_and_the_measured_spare_weight(scores_page):
    drawn = figures_by_title(scores_page)
    assert any("scores q·k" in title for title in drawn) and any("soft-capping" in t for t in drawn)
    spare = next(f for t, f in drawn.items() if "park weight" in t)
    measured = json.loads(MEASURED.read_text())["spare_weight"]
    assert spare["data"][0]["y"] == [max(map(max, row["first_position"])) for row in measured]
    # QK-norm: the trained model's own scores beside the same weights with the norm switched on
    spreads = {m.label: float(m.value) for m in scores_page.metric}
    assert len(spreads) == 2 and all(v > 0 for v in spreads.values())


def test_a_model_without_a_sink_titles_its_heatmap_by_the_first_token_and_the_entropy_axis_ticks_each_scale(
        scores_page):
    drawn = figures_by_title(scores_page)
    assert not any("the sink's share" in title for title in drawn)  # the default model has no sink
    assert any(title.startswith("no sink here: the first token's share") for title in drawn)
    entropy = next(f for t, f in drawn.items() if "softmax entropy" in t)
    scales = list(decode(entropy["data"][0]["x"]))
    # one tick per measured scale: no unlabelled ticks between them
    assert list(decode(entropy["layout"]["xaxis"]["tickvals"])) == scales


def test_sinks_from_the_sidebar_show_each_heads_share_and_rows_that_sum_to_less_than_one(scores_page):
    at = scores_page
    at.sidebar.checkbox(key="sinks").check().run()
    assert_clean(at)
    assert at.query_params["sinks"] in ("True", ["True"])  # the link carries the switch
    share = next(m for m in at.metric if "sinks took" in m.label)
    assert 0 < float(share.value.rstrip("%")) < 100
    assert any("sink's share" in t for t in figures_by_title(at))


def test_a_cap_a_latent_and_a_bad_pattern_each_get_their_own_words(scores_page):
    at = scores_page
    at.sidebar.number_input(key="attn_softcap").set_value(5.0).run()
    assert_clean(at)
    assert any("caps its scores at c = 5" in c.value for c in at.caption)
    at.sidebar.number_input(key="kv_rank").set_value(16).run()
    assert_clean(at)
    assert any("MLA" in i.value for i in at.info)
    at.sidebar.selectbox(key="layer_pattern").set_value("alternate").run()
    assert not at.exception
    assert any("sliding_window" in e.value for e in at.error)  # a local layer needs a window: said, not raised
    at.sidebar.number_input(key="sliding_window").set_value(8).run()
    assert_clean(at)


def test_the_trained_gpt_oss_sinks_are_drawn_beside_random_init(scores_page):
    row = json.loads(MEASURED.read_text())["sinks"][0]
    figure = next(f for t, f in figures_by_title(scores_page).items() if t.startswith("what the sinks of"))
    trained, random_init = figure["data"][0], figure["data"][1]
    per_head = [share for layer in row["sink_share"] for share in layer]
    assert list(decode(trained["y"])) == per_head and len(trained["x"]) == len(per_head)
    assert list(decode(random_init["y"])) == pytest.approx(np.mean(row["random_init"]["sink_share"], axis=0).ravel().tolist())


def test_the_gpt_oss_preset_opens_its_trained_model_with_its_sinks():
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/scores.py").run()
    at.sidebar.selectbox(key="preset").set_value("gpt-oss").run()
    assert_clean(at)
    assert any("Trained weights" in s.value for s in at.success)
    share = next(m for m in at.metric if "sinks took" in m.label)
    assert 0 < float(share.value.rstrip("%")) < 100
