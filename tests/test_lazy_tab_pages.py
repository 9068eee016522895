"""The playground, "Why this prediction?", "Why positions", the stepper, Compare, KV heads and Norms show their views
in lazy tabs (ui/app/tabs.py): a rerun computes and draws only the open tab. Every view the pages drew in one long
column is still there, one click away: each tab, opened, draws its charts; the first tab draws only its own. A lesson
step about a view in another tab links to that tab."""
import json
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

import torch
from streamlit.testing.v1 import AppTest

from transformer import AXES, probes

from apptest_helpers import APP, assert_clean, open_page, values


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


# --- the stepper ------------------------------------------------------------------------------------------------

STEPPER_TABS = {"This step": {"values"}, "Where it sits in the model": set(), "Shape trace": set()}


def test_the_stepper_opens_on_the_step_and_its_diagram_and_shape_trace_are_one_tab_away():
    at = open_page("pages/stepper.py", step=12)
    assert charts(at) == STEPPER_TABS["This step"]
    assert not at.get("graphviz_chart") and not at.main.dataframe  # the diagram and the table belong to their tabs
    assert at.latex and at.main.code  # the step's formula and source line, beside its values
    name = at.selectbox(key="step_jump").options[12].split(": ", 1)[1]
    each_tab(at, "step_tab", STEPPER_TABS)
    open_tab(at, "step_tab", "Where it sits in the model")
    (diagram,) = at.get("graphviz_chart")
    assert "digraph" in diagram.proto.spec and any(name in m.value for m in at.markdown)
    at.button(key="next").click().run()  # the step moves above the tabs; the open tab stays open
    assert_clean(at)
    assert at.session_state["step_tab"] == "Where it sits in the model" and at.query_params["step"] in ("13", ["13"])
    assert at.subheader[0].value.startswith("Step 13 of")
    table = open_tab(at, "step_tab", "Shape trace").dataframe[0].value
    assert len(table) == at.slider(key="step").max + 1
    assert {b.proto.label for b in at.get("download_button")} == {"Download the shape trace (CSV)"}


# --- Compare ----------------------------------------------------------------------------------------------------

COMPARE_TABS = {"Attention, side by side": {"cmp_patterns"}, "Cost": set(),
                "Next-token distributions": {"cmp_entropy", "cmp_kl"}}


def test_compare_opens_on_the_attention_of_both_in_one_figure_and_every_view_is_one_tab_away():
    at = open_page("pages/compare.py")  # GPT-2's learned positions; B: RoPE
    assert charts(at) == COMPARE_TABS["Attention, side by side"]  # A, B and B − A: one chart, not three
    assert not at.main.dataframe  # the cost table belongs to its tab
    (spec,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    a, b, diff = (values(t["z"]) for t in spec["data"])
    assert [t["name"] for t in spec["data"]] == ["A", "B", "B − A"] and np.array_equal(diff, b - a)
    assert {t["coloraxis"] for t in spec["data"]} == {"coloraxis", "coloraxis2"}  # weights 0..1, the difference signed
    assert (spec["layout"]["coloraxis"]["cmin"], spec["layout"]["coloraxis"]["cmax"]) == (0, 1)
    assert spec["layout"]["coloraxis2"]["cmax"] == pytest.approx(np.abs(diff).max())
    each_tab(at, "cmp_tab", COMPARE_TABS)
    table = open_tab(at, "cmp_tab", "Cost").dataframe[0].value
    assert list(table.columns) == ["A", "B"] and "KV cache per token (fp16 bytes)" in table.index
    open_tab(at, "cmp_tab", "Next-token distributions")
    at.selectbox(key="cmp_position").set_value("alibi").run()  # B's controls stay above the tabs; the tab stays open
    assert_clean(at)
    assert charts(at) == COMPARE_TABS["Next-token distributions"]
    assert at.query_params["cmp_tab"] in ("Next-token distributions", ["Next-token distributions"])  # a link keeps it


def test_compares_figure_draws_each_matrix_as_its_own_heatmap_did():
    """The three panels hold what three heatmaps held: the same values, downsampled the same way past 128 tokens."""
    from ui.figures.base import heatmap, side_by_side

    rng = np.random.default_rng(0)
    labels = [chr(97 + i % 26) for i in range(200)]
    a, b = rng.random((200, 200)), rng.random((200, 200))
    fig = side_by_side(a, b, labels, labels, "layer 0, head 0")
    for trace, alone in zip(fig.data, (heatmap(a, labels, labels), heatmap(b, labels, labels),
                                       heatmap(b - a, labels, labels, signed=True))):
        assert np.array_equal(np.asarray(trace.z), np.asarray(alone.data[0].z))
        assert list(trace.x) == list(alone.data[0].x) and list(trace.y) == list(alone.data[0].y)
    assert fig.layout.coloraxis2.cmax == heatmap(b - a, labels, labels, signed=True).data[0].zmax
    assert fig.layout.yaxis.showticklabels and not fig.layout.yaxis2.showticklabels  # A's rows, labelled once
    shorter = side_by_side(a[:5, :5], b[:6, :6], labels[:5], labels[:6])
    assert [t.name for t in shorter.data] == ["A", "B"]  # no difference between matrices of two shapes
    assert shorter.layout.yaxis2.showticklabels  # B's own tokens, labelled


# --- KV heads ---------------------------------------------------------------------------------------------------

KV_TABS = {"Who reads which K and V": {"kv_sharing"}, "KV-cache memory at real sizes": {"kv_growth"},
           "Generation step by step": {"kv_steps_bytes"}, "The cache in pages": {"kv_block_pool", "kv_reserved"}}


def test_kv_heads_opens_on_who_shares_and_the_cache_at_real_sizes_and_generation_are_one_tab_away():
    at = open_page("pages/kv_heads.py")
    assert charts(at) == KV_TABS["Who reads which K and V"]
    assert not at.main.dataframe and not at.main.number_input  # the real sizes and the generation: their tabs
    each_tab(at, "kv_tab", KV_TABS)
    steps = open_tab(at, "kv_tab", "Generation step by step").dataframe[0].value
    assert len(steps) == 6 and max(float(d) for d in steps["max |logits cached − uncached|"]) < 1e-4
    assert len(open_tab(at, "kv_tab", "KV-cache memory at real sizes").dataframe) == 2  # every real model; one's variants
    at.sidebar.selectbox(key="n_kv_heads").set_value(1).run()  # a sidebar change: nothing in this tab depends on it
    assert_clean(at)
    assert charts(at) == KV_TABS["KV-cache memory at real sizes"]


# --- Norms ------------------------------------------------------------------------------------------------------

NORMS_TABS = {"Where the norm sits": set(), "Residual and gradient norms with depth": {"norm_resid", "norm_grad"},
              "LayerNorm vs RMSNorm on one vector": {"norm_bars"}}


def test_norms_opens_on_the_placements_and_the_measurement_and_the_vector_are_one_tab_away():
    at = open_page("pages/norms.py")
    # every placement of the table drawn; nothing measured
    assert not charts(at) and len(at.get("graphviz_chart")) == len(AXES["norm_position"].choices)
    assert not at.main.metric and not at.main.slider
    each_tab(at, "norm_tab", NORMS_TABS)
    open_tab(at, "norm_tab", "Residual and gradient norms with depth")
    assert {m.label for m in at.metric} >= {"pre-norm: ‖x‖, last / first block", "post-norm: gradient, last / first block"}
    assert not at.get("graphviz_chart")


# --- lesson links into a tab ------------------------------------------------------------------------------------

TAB_KEYS = {"playground": ("play_tab", PLAYGROUND_TABS), "interpret": ("why_tab", INTERPRET_TABS),
            "permutation": ("perm_tab", PERMUTATION_TABS), "stepper": ("step_tab", STEPPER_TABS),
            "compare": ("cmp_tab", COMPARE_TABS), "kv_heads": ("kv_tab", KV_TABS), "norms": ("norm_tab", NORMS_TABS)}
LINKED_TABS = {  # the steps about a view that sits in another tab than the first: the tab their link opens
    "soft-lookup": "Where one query looks",  # one query's weights over the keys: its figure and its "try this"
    "copying-head": "Prediction",  # switch the head off and watch the second copy get harder to predict
    "no-positions": "Weights put back in order",  # pick a causal mask: that tab's Mask box, set by the link
    "block": "Residual and gradient norms with depth",  # "compare the gradient plot"
    "kv-cache": "KV-cache memory at real sizes",  # "compare the real models' caches"
}


def link_query(step) -> tuple[str, dict[str, str]]:
    link = step.link()
    return urlsplit(link).path, dict(parse_qsl(urlsplit(link).query))


def test_every_lesson_link_into_a_tabbed_page_names_one_of_its_tabs():
    from ui.lessons.steps import STEPS

    linked = {}
    for step in STEPS:
        if step.link() is None or step.page not in TAB_KEYS:
            continue
        key, tabs = TAB_KEYS[step.page]
        query = link_query(step)[1]
        assert query.get(key, next(iter(tabs))) in tabs, step.slug  # no tab key: the page's first tab
        if key in query:
            linked[step.slug] = query[key]
    assert linked == LINKED_TABS


@pytest.mark.parametrize("slug", list(LINKED_TABS))
def test_a_lesson_link_opens_the_tab_its_step_is_about(slug):
    from ui.lessons.steps import STEPS

    page, query = link_query(next(s for s in STEPS if s.slug == slug))
    key, tabs = TAB_KEYS[page]
    at = AppTest.from_file(APP, default_timeout=120)
    for name, value in {"preset": "gpt2", "n_layers": "2", "text": "the cat sat", **query}.items():
        at.query_params[name] = value
    at.switch_page(f"pages/{page}.py").run()
    assert_clean(at)
    assert at.session_state[key] == LINKED_TABS[slug] and charts(at) == tabs[LINKED_TABS[slug]]


# Masks and Positions draw views below their tabs too: a link's tab is checked by the chart only that tab draws
UNTABBED_PAGE_LINKS = {  # step -> (page, tab key, the tab its link opens, a chart only that tab draws)
    "masks": ("masks", "mask_tab", "sliding window", "mask_window"),  # "open the sliding-window tab with W = 3"
    "sparse": ("masks", "mask_tab", "block-local", "local"),  # "open the block-local tab" (its key mask_block-local)
    "positions": ("positions", "pos_tab", "ALiBi", "alibi_long"),  # "ALiBi tab: make the input longer than max_len"
}


@pytest.mark.parametrize("slug", list(UNTABBED_PAGE_LINKS))
def test_a_lesson_link_opens_the_masks_or_positions_tab_its_try_this_names(slug):
    from ui.lessons.steps import STEPS

    page, key, tab, chart = UNTABBED_PAGE_LINKS[slug]
    step = next(s for s in STEPS if s.slug == slug)
    assert link_query(step) == (page, {key: tab}) and tab in step.try_this.replace("-", " ").replace("block local",
                                                                                                     "block-local")
    at = AppTest.from_file(APP, default_timeout=120)
    for name, value in {"preset": "gpt2", "n_layers": "2", "text": "the cat sat", key: tab}.items():
        at.query_params[name] = value
    at.switch_page(f"pages/{page}.py").run()
    assert_clean(at)
    assert at.session_state[key] == tab and chart in charts(at)
    fresh = AppTest.from_file(APP, default_timeout=120)  # without the key, the first tab: not that chart
    for name, value in {"preset": "gpt2", "n_layers": "2", "text": "the cat sat"}.items():
        fresh.query_params[name] = value
    fresh.switch_page(f"pages/{page}.py").run()
    assert chart not in charts(fresh)


def test_compare_says_when_b_has_random_weights_against_a_trained_a():
    """A = the trained LLaMA 2; B = the same with one KV head, for which no checkpoint exists: one warning above the
    figures says so, before anyone reads B's flat map as what MQA does."""
    from apptest_helpers import assert_clean, open_page

    at = assert_clean(open_page("pages/compare.py", preset="llama2", n_layers=4, text="the cat sat on the mat"))
    assert any(s.value.startswith("Trained weights") for s in at.success)
    at.selectbox(key="cmp_kv").set_value("1").run()
    assert_clean(at)
    assert any("B's weights are random" in w.value and "A's are trained" in w.value for w in at.warning)
