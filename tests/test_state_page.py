"""The State page, the sidebar's attention layers, and every page of the app on a hybrid model (three linear layers
to one softmax layer): each page and each of its tabs opens without a traceback or an error, on a linear layer
wherever a page picks one."""
import json
import re
from pathlib import Path

import pytest

from transformer import AXES
from ui.app.navigation import existing_pages
from ui.compute import state_measure as measure

from apptest_helpers import assert_clean, figures_by_title, open_page

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
HYBRID_LINK = dict(attention_layers="3:1", n_layers=4, position="rope")
# the layer each page offers, set to layer 0: a linear layer of the hybrid (a page that offers only softmax layers
# falls back to one of those)
LAYER_KEYS = dict(layer=0, cmp_layer=0, mask_layer=0, perm_layer=0, scale_layer=0, scores_layer=0, ffn_layer=0,
                  state_layer=0)
STATE_KINDS = [key for key, row in AXES["attention"].choices.items() if row.keeps_state]


def charts(at) -> set[str]:
    return {c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")}


def tab_key(script: str) -> str | None:
    """The session key of the page's lazy tabs (``lazy_tabs(..., key=...)``), if it has them."""
    found = re.search(r"lazy_tabs\(.*?key=\"(\w+)\"", (ROOT / script).read_text(), re.DOTALL)
    return found and found.group(1)


@pytest.mark.parametrize("script", [page.script for page in existing_pages()])
def test_every_page_and_every_tab_opens_on_a_hybrid(script):
    at = assert_clean(open_page(script, **HYBRID_LINK, **LAYER_KEYS))
    assert at.query_params["attention_layers"] == "3:1"
    key = tab_key(script)
    for label in ([tab.label for tab in at.tabs] if key else []):
        at.session_state[key] = label
        assert_clean(at.run())


# --- the State page ------------------------------------------------------------------------------------------

STATE_TABS = {"The state, token by token": {"state_write"}, "What a query reads": {"state_read", "state_implied"},
              "The delta rule": {"state_delta", "state_overwrite"}, "Memory: cache against state": {"state_memory"},
              "Capacity": {"state_capacity_identified", "state_capacity_reproduced"},
              "Recall at distance": {"state_recall"}}


def test_the_state_page_on_a_model_without_linear_layers_uses_its_hybrid_and_says_so():
    at = assert_clean(open_page("pages/state.py", text="the cat sat"))  # GPT-2's axes: softmax only
    assert any("has no linear layer" in i.value for i in at.info)
    assert any(w.value.startswith("Untrained weights (random") for w in at.warning)
    assert at.selectbox(key="state_layer").options == ["0: Gated DeltaNet", "1: Gated DeltaNet", "2: Gated DeltaNet"]
    assert charts(at) == STATE_TABS["The state, token by token"]
    at.slider(key="state_t").set_value(4).run()
    assert at.query_params["state_t"] == "4" and "token 4 'c'" in at.subheader[0].value
    for label, expected in STATE_TABS.items():
        at.session_state["state_tab"] = label
        assert charts(assert_clean(at.run())) == expected, label
        if label == "What a query reads":
            assert any("not a softmax" in w.value and "sums to" in w.value for w in at.warning)
        if label == "Capacity":
            words = " ".join(m.value for m in at.markdown)
            assert "Plain linear attention stays at 90% or more up to N = 52" in words and "What one might expect" in words
        if label == "Recall at distance":
            table = at.dataframe[0].value
            measured = measure.recall_measured()
            assert table["model"].tolist() == [m["label"] for m in measured["models"]]
            far = measured["distances"][-1]
            assert table[f"lift at d = {far}"].tolist() == [f"{measure.recall_lift(m)[-1]:+.0%}" for m in measured["models"]]


def test_the_state_page_reads_the_sidebars_own_linear_layers():
    at = assert_clean(open_page("pages/state.py", **HYBRID_LINK, linear_kind="linear", state_tab="The delta rule"))
    assert not any("has no linear layer" in i.value for i in at.info)
    assert at.selectbox(key="state_layer").options == ["0: linear attention", "1: linear attention",
                                                       "2: linear attention"]
    assert any("predicts and corrects nothing" in i.value for i in at.info)  # adding, not correcting
    assert charts(at) == {"state_overwrite"}


def test_the_memory_tab_at_128k_tokens():
    at = assert_clean(open_page("pages/state.py", state_tab="Memory: cache against state"))
    table = at.dataframe[0].value
    total = table["total at 131,072 (GiB)"].tolist()
    assert total[:3] == [12.0, 3.037, 0.049]
    assert table["states (MiB, constant)"].tolist()[:3] == [0.0, 37.69, 50.25]
    # then each state-keeping family's card as published, from its own sizes
    listed = {name.split(":")[0] for name in table["model"]}
    assert {"Qwen3.5 9B", "Qwen3.5 397B-A17B", "Kimi Linear 48B-A3B", "MiniMax-01 Text-01", "LFM2 1.2B"} <= listed
    assert table.set_index("model").loc["Kimi Linear 48B-A3B: 20 state + 7 softmax layers",
                                        "states (MiB, constant)"] == 21.41
    assert any("25.3% of the all-GQA model's bytes" in c.value for c in at.caption)


def test_the_readme_quotes_the_pages_numbers():
    row = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| **The state**"))
    at_128k = measure.cache_by_context(2, (131072,))
    full, hybrid, linear = (c["total"][0] for c in at_128k.values())
    assert f"{full / 2**30:.0f} GiB all GQA, {hybrid / 2**30:.2f} GiB for its 3:1 hybrid, " \
           f"{linear / 2**20:.0f} MiB all Gated DeltaNet" in row
    result = measure.capacity(32)
    at_32 = list(result.n).index(32)
    mean = {(rule, m): result.recall[rule][m][at_32].mean() for rule in measure.RULES for m in measure.MEASURES}
    assert (f"value for {mean['adds', 'identified']:.0%} of them but reproduces none" in row
            and mean["adds", "reproduced"] == 0)
    assert f"the delta rule names {mean['corrects', 'identified']:.0%} and reproduces " \
           f"{mean['corrects', 'reproduced']:.0%}" in row


# --- the sidebar's attention layers -----------------------------------------------------------------------------

def test_the_sidebar_offers_the_kinds_from_the_table_and_keeps_them_in_the_link():
    at = assert_clean(open_page("pages/playground.py"))
    layers = at.sidebar.selectbox(key="attention_layers")
    softmax = next(key for key, row in AXES["attention"].choices.items() if row.softmax)
    assert layers.options == ["softmax in every layer", "hybrid: 3 linear : 1 softmax",
                              "linear in every layer (no softmax)"]
    layers.set_value("3:1").run()
    assert at.query_params["attention_layers"] == "3:1" and at.query_params["preset"] == "custom"
    kind = at.sidebar.selectbox(key="linear_kind")
    assert kind.options == [AXES["attention"].row(k).label for k in STATE_KINDS]
    kind.set_value("deltanet").run()
    assert at.query_params["linear_kind"] == "deltanet"
    at.sidebar.selectbox(key="attention_layers").set_value("deltanet").run()  # "linear in every layer"
    assert_clean(at)  # GPT-2's learned positions are added to the embeddings: a model without softmax layers takes them
    at.sidebar.selectbox(key="linear_kind").set_value("linear").run()
    assert at.query_params["attention_layers"] == "linear"  # "linear in every layer" follows the kind
    at.sidebar.selectbox(key="attention_layers").set_value(softmax).run()
    assert_clean(at)  # the linear kind means nothing now: no error for it


def test_an_impossible_choice_of_layers_is_an_error_with_the_configs_words_not_a_traceback():
    at = open_page("pages/playground.py", preset="llama2", n_layers=4)  # RoPE: a setting of softmax layers
    at.sidebar.selectbox(key="attention_layers").set_value("gated-deltanet").run()
    assert not at.exception
    assert any("position='rope' is a setting of softmax layers" in e.value for e in at.error)
    assert at.sidebar.selectbox(key="attention_layers").value == "gated-deltanet"  # the sidebar stays, to fix it
    at.sidebar.selectbox(key="position").set_value("none").run()
    assert any("n_kv_heads=2 is a setting of softmax layers" in e.value for e in at.error)  # the next fix, named
    at.sidebar.selectbox(key="n_kv_heads").set_value(at.sidebar.number_input(key="n_heads").value).run()
    assert_clean(at)


# --- the playground and Compare on a linear layer ----------------------------------------------------------------

def test_the_playground_shows_a_linear_layers_implied_weights_and_says_they_are_not_a_softmax():
    at = assert_clean(open_page("pages/playground.py", **HYBRID_LINK, layer=0))
    assert any("not a softmax" in w.value and "need not sum to 1" in w.value for w in at.warning)
    assert at.selectbox(key="head").options[1] == "1 (q and k head 1)"  # a state layer's heads and what they share
    grid = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["coloraxis"]
    assert grid["cmin"] == -grid["cmax"] < 0  # centred on a white 0
    at.session_state["play_tab"] = "One head, stage by stage"
    assert charts(assert_clean(at.run())) == {"stage_hook_pattern"}
    assert at.get("latex")  # the kind's own formula for its implied weights, not the five lines
    at.session_state["play_tab"] = "Where one query looks"
    assert charts(assert_clean(at.run())) == {"query_bars"}
    at.session_state["layer"] = 3  # the softmax layer: the five lines' views again
    assert charts(assert_clean(at.run())) == {"query_bars", "query_arcs", "entropy"}
    assert "kv head" in at.selectbox(key="head").options[1]


def test_compare_puts_a_full_attention_model_beside_its_hybrid():
    at = assert_clean(open_page("pages/compare.py", n_layers=4, cmp_layers="3:1", cmp_position="same"))
    title = next(t for t in figures_by_title(at) if t.startswith("layer 0"))
    assert "A (softmax attention), B (Gated DeltaNet)" in title
    assert any("implied weights" in w.value for w in at.warning)
    at.session_state["cmp_tab"] = "Cost"
    table = assert_clean(at.run()).dataframe[0].value
    states = table.loc["states of the linear layers (fp16 bytes, whatever the length)"]
    assert states["A"] == "0" and int(states["B"].replace(",", "")) > 0


def test_one_banner_says_what_the_weights_are_when_the_page_swaps_in_a_hybrid():
    """The sidebar's trained LLaMA 2 has no linear layer: the page shows a random hybrid of it, and says so once."""
    from apptest_helpers import assert_clean, open_page

    at = assert_clean(open_page("pages/state.py", preset="llama2", n_layers=4, text="the cat sat on the mat"))
    banners = [b.value for b in (*at.success, *at.warning)]
    assert [b for b in banners if "weights" in b.lower()] == [b for b in banners if b.startswith("Untrained weights")]
    assert len([b for b in banners if "weights" in b.lower()]) == 1
    assert any("no linear layer" in i.value for i in at.info)
