"""The playground, "Why this prediction?" and "Why positions" show their views in lazy tabs (ui/app/tabs.py): a rerun
computes and draws only the open tab. Every view the pages drew in one long column is still there, one click away:
each tab, opened, draws its charts; the first tab draws only its own."""
import json

import torch
from streamlit.testing.v1 import AppTest

from transformer import probes

from apptest_helpers import APP, assert_clean, open_page


def charts(at: AppTest) -> set[str]:
    """The keys of the plotly charts drawn (the part of the element id after the last dash)."""
    return {c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")}


def open_tab(at: AppTest, key: str, label: str) -> AppTest:
    """A reader's click on a tab: the page reruns with it open."""
    at.session_state[key] = label
    return assert_clean(at.run())


def each_tab(at: AppTest, key: str, tabs: dict[str, set[str]]) -> None:
    """Open every tab in turn: each draws its own charts and no other tab's."""
    for label, expected in tabs.items():
        assert charts(open_tab(at, key, label)) == expected, label


# --- the playground ---------------------------------------------------------------------------------------

PLAYGROUND_TABS = {
    "Every head": {"head_grid"},
    "One head, stage by stage": {"stage_hook_raw_scores", "stage_hook_mask", "stage_hook_attn_scores",
                                 "stage_hook_pattern"},
    "Where one query looks": {"query_bars", "query_arcs", "entropy"},
    "Prediction": {"next_token", "actual_next"},
    "Position, experts, the model": {"rope"},
}


def test_the_playground_opens_on_every_head_and_every_view_is_one_tab_away():
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/playground.py").run()  # the default: a trained LLaMA 2 (RoPE) on English
    assert_clean(at)
    assert charts(at) == PLAYGROUND_TABS["Every head"]  # a sidebar change computes and draws this one chart
    assert [m.value for m in at.multiselect] and at.selectbox(key="head")  # the switches and controls stay above
    each_tab(at, "play_tab", PLAYGROUND_TABS)
    # the eleven charts the page drew in one column before its tabs, each in exactly one tab
    assert set().union(*PLAYGROUND_TABS.values()) == {
        "next_token", "actual_next", "head_grid", "stage_hook_raw_scores", "stage_hook_mask",
        "stage_hook_attn_scores", "stage_hook_pattern", "query_bars", "query_arcs", "entropy", "rope"}
    assert "digraph" in at.get("graphviz_chart")[0].proto.spec  # the model's diagram, in the last tab
    assert {b.proto.label for b in at.get("download_button")} >= {"The whole trace (.npz)"}
    open_tab(at, "play_tab", "One head, stage by stage")
    assert {b.proto.label for b in at.get("download_button")} >= {"Download this head's stages (PNG)"}
    assert any(m.value.startswith("**Continuation**") for m in open_tab(at, "play_tab", "Prediction").markdown)


def test_the_playgrounds_open_tab_stays_open_and_follows_a_sidebar_change():
    at = open_page("pages/playground.py", position="alibi")
    open_tab(at, "play_tab", "One head, stage by stage")
    assert "stage_hook_alibi_bias" in charts(at)
    at.sidebar.selectbox(key="position").set_value("rope").run()
    assert_clean(at)
    assert at.session_state["play_tab"] == "One head, stage by stage"
    assert charts(at) == PLAYGROUND_TABS["One head, stage by stage"]  # no ALiBi panel now, and no other tab's
    at.sidebar.selectbox(key="ffn").set_value("moe").run()
    assert {"rope", "routing"} <= charts(open_tab(at, "play_tab", "Position, experts, the model"))


# --- "Why this prediction?" ----------------------------------------------------------------------------------

INTERPRET_TABS = {"The logit lens": {"lens"}, "Attribution": {"attribution"},
                  "Activation patching": {"patch_residual", "patch_heads"}}


def test_why_this_prediction_opens_on_the_lens_and_patching_is_one_tab_away():
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/interpret.py").run()
    assert_clean(at)
    assert charts(at) == INTERPRET_TABS["The logit lens"]
    assert not at.get("text_input")  # the patching prompts belong to their tab
    each_tab(at, "why_tab", INTERPRET_TABS)
    assert {t.key for t in at.text_input} == {"clean", "corrupt", "right", "wrong"}
    at.sidebar.selectbox(key="position").set_value("alibi").run()  # the open tab stays open, and is computed again
    assert_clean(at)
    assert charts(at) == INTERPRET_TABS["Activation patching"]


# --- "Why positions" ----------------------------------------------------------------------------------------

PERMUTATION_TABS = {"No positions, no mask": set(), "Every position scheme": {"perm_bars_none", "perm_bars_causal"},
                    "Weights put back in order": {"perm_patterns"}, "A causal mask alone": {"perm_prefix"}}


def test_why_positions_opens_on_the_plain_verdict_and_every_view_is_one_tab_away():
    at = open_page("pages/permutation.py", text="the cat sat")
    assert_clean(at)
    assert not charts(at)
    metrics = {m.label: m.value for m in at.metric}
    assert set(metrics) == {"max |logits − un-shuffled logits|", "max |weights − un-shuffled weights|", "verdict"}
    caption = next(c.value for c in at.caption if "float rounding is about" in c.value)
    each_tab(at, "perm_tab", PERMUTATION_TABS)
    assert any(m.label.startswith("last token after block") for m in at.metric)  # the prefix shuffle's
    table = open_tab(at, "perm_tab", "Every position scheme").dataframe[0].value
    plain = table[(table["mask"] == "no mask (encoder)") & (table["position"] == "none")]
    # the first tab builds the plain model alone; its verdict is the table's, judged against all ten runs' logits
    assert plain["verdict"].item().split(": ")[-1] == metrics["verdict"]
    # and its rounding is that of the plain model's own logits (the ten share the largest: the bars' line)
    assert f"about {probes.rounding_tolerance(torch.float32, plain['largest |logit|'].item()):.0e} here" in caption
    rounding = [t["name"] for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]
                if t["name"].startswith("float rounding")]
    every = probes.rounding_tolerance(torch.float32, table["largest |logit|"].max())
    assert rounding == [f"float rounding ({every:.0e})"]


def test_why_positions_weights_tab_runs_only_the_run_it_shows_and_gets_the_ten_runs_numbers():
    """The weights tab asks for one run by the config the ten runs use: the same cached run, the same numbers."""
    import numpy as np

    from transformer import PRESETS, TransformerConfig
    from ui.compute import probe_measure

    config_json, ids, perm = PRESETS["gpt2"].replace(n_layers=2).to_json(), (1, 2, 3, 4, 5), (4, 2, 0, 1, 3)
    ten = probe_measure.permutation_results(config_json, ids, perm, 0, "float32")
    for (mask, position), result in ten.items():  # what pages/permutation.py asks for in its weights tab
        run_cfg = probes.equivariance_config(TransformerConfig.from_json(config_json), position, causal=mask == "causal")
        one = probe_measure.permutation_run(run_cfg.to_json(), ids, perm, 0, "float32")
        assert np.array_equal(one["weights"], result["weights"])
        assert np.array_equal(one["weights_back"], result["weights_back"])
    at = open_page("pages/permutation.py", text="the cat sat")
    open_tab(at, "perm_tab", "Weights put back in order")
    for key, value in (("perm_mask", "causal"), ("perm_pos", "alibi"), ("perm_layer", 2)):
        at.selectbox(key=key).set_value(value).run()
        assert_clean(at)
    (chart,) = at.get("plotly_chart")
    assert len(json.loads(chart.proto.spec)["data"]) == 3  # the weights, the weights put back, their difference
