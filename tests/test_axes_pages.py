"""The axis pages and the compare page under Streamlit's AppTest: the default view, every option of each page's
own controls and of the sidebar's axes, bad input, and the page state carried by the URL."""
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from transformer import MODEL_CARDS, PRESETS, choices
from apptest_helpers import assert_clean, figures_by_title, open_page, values

pytestmark = pytest.mark.slow

PAGES = ["pages/kv_heads.py", "pages/masks.py", "pages/positions.py", "pages/norms.py", "pages/ffn.py",
         "pages/compare.py"]
# the pages whose views sit in lazy tabs (computed when open), kept in the URL: the tab key and every tab, in order
TABS = {"pages/kv_heads.py": ("kv_tab", ["Who reads which K and V", "KV-cache memory at real sizes",
                                         "Generation step by step", "The cache in pages"]),
        "pages/norms.py": ("norm_tab", ["Where the norm sits", "Residual and gradient norms with depth",
                                        "LayerNorm vs RMSNorm on one vector"]),
        "pages/compare.py": ("cmp_tab", ["Attention, side by side", "Cost", "Next-token distributions"])}






def charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def open_tab(at: AppTest, page: str, label: str) -> AppTest:
    """A reader's click on one of the page's tabs: the page reruns with it open."""
    at.session_state[TABS[page][0]] = label
    return at.run()


def every_tab(at: AppTest, page: str) -> list[dict]:
    """Open each tab of a tabbed page in turn (the first stays open), checking each run; the charts of them all."""
    if page not in TABS:
        return charts(assert_clean(at))
    drawn = []
    for label in [*TABS[page][1][1:], TABS[page][1][0]]:
        drawn += charts(assert_clean(open_tab(at, page, label)))
    return drawn




def axis_titles(spec: dict, axis: str) -> list[str]:
    layout = spec["layout"]
    return [v["title"]["text"] for k, v in layout.items() if k.startswith(axis) and isinstance(v, dict)
            and isinstance(v.get("title"), dict) and v["title"].get("text")]


@pytest.mark.parametrize("page", PAGES)
def test_default_view_draws_titled_charts(page):
    at = open_page(page, text=None)  # the default text
    assert_clean(at)
    specs = every_tab(at, page)  # a tabbed page's charts, every tab opened
    assert len(specs) >= 3
    for spec in specs:  # every chart names both of its axes
        assert axis_titles(spec, "xaxis") and axis_titles(spec, "yaxis"), spec["layout"].get("title")


@pytest.mark.parametrize("page", PAGES)
def test_every_sidebar_axis_option_runs(page):
    at = open_page(page)
    if page == "pages/norms.py":
        open_tab(at, page, TABS[page][1][1]).slider(key="norm_depth").set_value(2).run()  # quick, for every option
    preset = PRESETS["gpt2"]
    for key in ("arch", "position", "norm", "norm_position", "ffn"):
        for option in choices(key):
            at.sidebar.selectbox(key=key).set_value(option).run()
            every_tab(at, page)  # each view of a tabbed page, computed when open, runs on every option
        at.sidebar.selectbox(key=key).set_value(getattr(preset, key)).run()
    for g in (1, 2, 4):
        at.sidebar.selectbox(key="n_kv_heads").set_value(g).run()
        every_tab(at, page)
    at.sidebar.number_input(key="sliding_window").set_value(2).run()
    every_tab(at, page)


@pytest.mark.parametrize("page", PAGES)
def test_bad_sidebar_input_shows_an_error(page):
    at = open_page(page)
    at.sidebar.number_input(key="n_heads").set_value(6).run()  # d_model 64 is not divisible by 6
    assert_clean(at, errors_allowed=True)
    assert any("n_heads=6" in e.value for e in at.error)
    at.sidebar.number_input(key="n_heads").set_value(4).run()
    assert_clean(at)
    at.sidebar.text_area(key="text").set_value("").run()
    assert_clean(at, errors_allowed=True)
    assert any("empty" in e.value for e in at.error)


def test_kv_heads_controls():
    at = open_tab(open_page("pages/kv_heads.py"), "pages/kv_heads.py", "KV-cache memory at real sizes")
    for dtype in at.selectbox(key="kv_dtype").options:
        at.selectbox(key="kv_dtype").set_value(dtype).run()
        assert_clean(at)
    for context in (1, 1_048_576):
        at.number_input(key="kv_ctx").set_value(context).run()
        assert_clean(at)
    for label in at.selectbox(key="kv_model").options:  # every real model, Falcon's prime head count included
        at.selectbox(key="kv_model").set_value(label).run()
        assert_clean(at)
    open_tab(at, "pages/kv_heads.py", "Generation step by step").number_input(key="kv_steps").set_value(32).run()
    assert_clean(at)
    steps = at.dataframe[-1].value
    assert len(steps) == 32 and steps["cache bytes"].is_monotonic_increasing
    assert max(float(d) for d in steps["max |logits cached − uncached|"]) < 1e-4


def test_kv_heads_table_has_every_real_model_and_the_llama_number():
    at = open_tab(open_page("pages/kv_heads.py"), "pages/kv_heads.py", "KV-cache memory at real sizes")
    table = at.dataframe[0].value
    assert len(table) == sum(len(card.real) for card in MODEL_CARDS.values())
    llama70 = table[(table["model"] == "LLaMA 2") & (table["size"] == "70B")].iloc[0]
    assert llama70["KV bytes / token"] == 327_680


def test_masks_controls_and_zero_weight():
    at = open_page("pages/masks.py", text="the cat sat")
    zero_metrics = []
    for tab in ("none", "causal", "padding", "sliding window", "cross-attention"):  # a tab is computed when open
        at.session_state["mask_tab"] = tab
        assert_clean(at.run())
        zero_metrics += [m.value for m in at.metric if m.label == "max weight on masked cells"]
    assert zero_metrics and all(v in ("0.0", "—") for v in zero_metrics)
    assert "0.0" in zero_metrics
    for layer in at.selectbox(key="mask_layer").options:
        at.selectbox(key="mask_layer").set_value(int(layer)).run()
        assert_clean(at)
    for head in at.selectbox(key="mask_head").options:
        at.selectbox(key="mask_head").set_value(int(head)).run()
        assert_clean(at)
    at.session_state["mask_tab"] = "sliding window"
    at.run()
    for window in (1, 64):
        at.number_input(key="mask_w").set_value(window).run()
        assert_clean(at)
    at.session_state["mask_tab"] = "padding"
    at.run()
    at.text_input(key="mask_text2").set_value("a much longer second text").run()
    assert_clean(at)
    at.text_input(key="mask_text2").set_value("").run()
    assert_clean(at, errors_allowed=True)
    assert any("Second text" in e.value for e in at.error)


def test_positions_controls():
    at = open_page("pages/positions.py")
    at.session_state["pos_tab"] = "RoPE"  # a tab is computed when it is the open one
    metric = [m for m in at.run().metric if m.label.startswith("largest spread")][0]
    assert float(metric.value) < 1e-5  # RoPE: constant along diagonals
    for n in (8, 256):
        at.slider(key="pos_n").set_value(n).run()
        assert_clean(at)
    at.slider(key="pos_p").set_value(255).run()
    assert_clean(at)
    at.session_state["pos_tab"] = "ALiBi"
    at.run()
    for trained, run in ((16, 24), (4, 4), (128, 1)):
        at.number_input(key="pos_train").set_value(trained).run()
        at.number_input(key="pos_run").set_value(run).run()
        assert_clean(at)
    at.number_input(key="pos_train").set_value(8).run()
    at.number_input(key="pos_run").set_value(20).run()
    outcome = at.dataframe[0].value.set_index("position")["runs"].to_dict()
    assert outcome == {"none": "yes", "sinusoidal": "no", "learned": "no", "rope": "yes", "xpos": "yes", "alibi": "yes",
                       "t5": "yes"}


def test_the_xpos_tab_draws_rope_and_xpos_scores_by_distance_and_each_pairs_decay():
    at = open_page("pages/positions.py")
    at.query_params["position"] = "xpos"  # the sidebar's model itself turns with xPos
    at.session_state["pos_tab"] = "xPos"
    at.run()
    assert_clean(at)
    by_title = {c["layout"]["title"]["text"]: c for c in charts(at)}
    scores = by_title["the same q and k, turned to each distance"]["data"]
    assert [line["name"] for line in scores] == ["RoPE", "xPos"]
    rope, xpos = (values(line["y"]) for line in scores)
    assert rope[0] == pytest.approx(xpos[0], rel=1e-5)  # at distance 0 nothing decays
    assert np.abs(xpos[-512:]).max() < np.abs(rope[-512:]).max()  # far away, xPos's swings are the smaller
    decay = by_title["xPos: what each pair keeps, by distance"]["data"]
    fast, slow = values(decay[0]["y"]), values(decay[-1]["y"])
    assert fast[0] == 1 and fast[-1] < slow[-1] < 1  # the fast pair decays most


def test_norms_controls_and_vector():
    at = open_tab(open_page("pages/norms.py"), "pages/norms.py", "Residual and gradient norms with depth")
    at.slider(key="norm_depth").set_value(24).run()
    assert_clean(at)
    at.slider(key="norm_depth").set_value(1).run()
    for init in at.selectbox(key="norm_init").options:
        at.selectbox(key="norm_init").set_value(init.split(":")[0]).run()
        assert_clean(at)
    open_tab(at, "pages/norms.py", "LayerNorm vs RMSNorm on one vector")
    at.text_input(key="norm_vec").set_value("4 4 4 5").run()
    assert_clean(at)
    metrics = {m.label: float(m.value) for m in at.metric if m.label.endswith((": mean", ": RMS"))}
    assert metrics["LayerNorm: mean"] == pytest.approx(0.0, abs=1e-4)
    assert metrics["RMSNorm: RMS"] == pytest.approx(1.0, abs=1e-3)
    for bad in ("", "abc", "1", "1, inf"):
        at.text_input(key="norm_vec").set_value(bad).run()
        assert_clean(at, errors_allowed=True)
        assert any("not a vector" in e.value for e in at.error)


def test_ffn_controls_for_every_ffn():
    at = open_page("pages/ffn.py")
    for ffn, chart in (("swiglu", "gate: SiLU"), ("geglu", "gate: GELU"), ("moe", "router probabilities"),
                       ("relu", "after ReLU"), ("reglu", "gate: max(0, x W_gate)")):
        at.sidebar.selectbox(key="ffn").set_value(ffn).run()
        at.sidebar.number_input(key="n_layers").set_value(2).run()
        for layer in at.selectbox(key="ffn_layer").options:
            at.selectbox(key="ffn_layer").set_value(int(layer)).run()
            assert_clean(at)
            titles = [s["layout"].get("title", {}).get("text", "") for s in charts(at)]
            assert any(chart in t for t in titles), titles


def test_norms_page_draws_every_placement_and_measures_the_sidebars():
    at = open_page("pages/norms.py")  # the first tab: where the norm sits
    drawn = [c.proto.spec for c in at.get("graphviz_chart")]
    assert len(drawn) == len(choices("norm_position"))
    assert any("x + norm(sublayer(norm(x)))" in d for d in drawn)  # sandwich: a norm on each side of the sublayer
    assert any("sublayer -> norm_out;" in d and "x -> sublayer;" in d for d in drawn)  # after: on the output only
    open_tab(at, "pages/norms.py", "Residual and gradient norms with depth").slider(key="norm_depth").set_value(3).run()
    at.sidebar.selectbox(key="norm_position").set_value("sandwich").run()
    assert_clean(at)
    assert at.session_state["norm_tab"] == "Residual and gradient norms with depth"  # the open tab stays open
    resid = [s for s in charts(at) if s["layout"]["title"]["text"].startswith("residual stream")][0]
    names = [t["name"] for t in resid["data"]]
    assert len(names) == 5 and any(n.startswith("sandwich") for n in names)  # pre, post x two norms, and the sidebar's


def diff_map(at: AppTest) -> np.ndarray:
    """B − A, the third panel of the attention tab's one figure (A, B and their difference)."""
    (spec,) = charts(at)
    assert [t["name"] for t in spec["data"]] == ["A", "B", "B − A"]
    a, b, diff = (np.nan_to_num(values(t["z"])) for t in spec["data"])
    assert np.array_equal(diff, b - a)
    return diff


def test_compare_controls():
    at = open_page("pages/compare.py")
    assert np.abs(diff_map(at)).max() > 1e-3  # by default B uses RoPE where A (GPT-2) learns its positions
    for base in at.selectbox(key="cmp_base").options:
        at.selectbox(key="cmp_base").set_value(base).run()
        assert_clean(at)
    at.selectbox(key="cmp_base").set_value("A").run()
    for key in ("cmp_arch", "cmp_position", "cmp_norm", "cmp_place", "cmp_ffn", "cmp_kv"):
        for option in at.selectbox(key=key).options:
            at.selectbox(key=key).set_value(option).run()
            assert_clean(at)
        at.selectbox(key=key).set_value("same").run()
    for key in ("cmp_layer", "cmp_head"):
        for option in at.selectbox(key=key).options:
            at.selectbox(key=key).set_value(int(option)).run()
            assert_clean(at)
    # B = A exactly: the difference map is all zeros and KL(A || B) is 0
    at.selectbox(key="cmp_position").set_value("same").run()
    diff = diff_map(at)
    assert diff.shape == (5, 5) and np.all(diff == 0.0)
    specs = {s["layout"]["title"]["text"]: s for s in charts(open_tab(at, "pages/compare.py", "Next-token distributions"))
             if s["layout"].get("title")}
    kl = values(specs["how far B's prediction is from A's"]["data"][0]["y"])
    assert kl.shape == (5,) and np.abs(kl).max() < 1e-6


def test_compare_impossible_b_shows_an_error():
    at = open_page("pages/compare.py")
    at.sidebar.number_input(key="d_model").set_value(36).run()  # 4 heads of 9: fine for learned positions
    assert_clean(at, errors_allowed=True)
    assert any("Configuration B is impossible" in e.value and "odd" in e.value for e in at.error)
    at.selectbox(key="cmp_position").set_value("alibi").run()
    assert_clean(at)


def test_page_controls_come_from_the_url_and_bad_values_fall_back():
    at = open_page("pages/kv_heads.py", kv_ctx=8192, kv_model="mistral 7B", kv_steps="x",
                   kv_tab="KV-cache memory at real sizes")  # a link opens the tab it names
    assert_clean(at)
    assert at.number_input(key="kv_ctx").value == 8192
    assert at.selectbox(key="kv_model").value == "mistral 7B"
    open_tab(at, "pages/kv_heads.py", "Generation step by step")
    assert at.number_input(key="kv_steps").value == 6  # "x" is not a number: the default
    assert at.query_params["kv_ctx"] == ["8192"] or at.query_params["kv_ctx"] == "8192"
    at = open_page("pages/masks.py", mask_head=99, mask_w=3)
    assert_clean(at)
    assert at.selectbox(key="mask_head").value == 0  # no head 99: back to the first


def test_the_nope_tab_draws_the_trained_nope_layer_beside_a_rope_layer_and_refuses_a_too_short_text():
    at = open_page("pages/positions.py", text="the cat sat on the mat, and the cat sat on the mat again")
    at.session_state["pos_tab"] = "Layers without positions (NoPE)"
    assert_clean(at.run())
    titles = figures_by_title(at)
    pair = next(t for t in titles if "NoPE" in t and "RoPE" in t and "head 0" in t)
    assert "layer 3 (NoPE)" in pair and "layer 2 (RoPE, chunk of 64)" in pair
    profiles = next(f for t, f in titles.items() if t.startswith("weight on the key d tokens back"))
    assert [trace["name"] for trace in profiles["data"]] == [f"layer {i} (RoPE, chunk of 64)" for i in range(3)] + [
        "layer 3 (NoPE)"]
    table = at.dataframe[0].value
    assert list(table["kind"]) == ["RoPE, chunk of 64"] * 3 + ["NoPE"]
    assert any("read past" in t or "bits per character" in t for t in titles)  # the length test beside LLaMA 2
    at.slider(key="nope_head").set_value(3).run()
    assert_clean(at)
    at.sidebar.text_area(key="text").set_value("ab").run()
    assert_clean(at, errors_allowed=True)
    assert any("too short" in e.value for e in at.error)
