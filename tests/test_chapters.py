"""The lecture's opening and closing chapters: the Before attention, What a model costs and How models grow pages,
the sparse tabs of the Masks page, and their four lesson steps, under Streamlit's AppTest with the usual bad input
(a text too long for the GRUs, letters they do not know, an empty text, budgets of 0, -1 and 10^40, a block larger
than the text, an impossible sidebar model, a malformed link); each lesson's true answer recomputed here from the
library or the shipped files, independently of the step's own code."""
import json
import math

import pytest

from apptest_helpers import SHORT_TEXT, assert_clean, open_page
from transformer import MODEL_CARDS, rnn, scaling
from transformer.costs import param_terms
from ui.lessons import steps as lessons
from ui.lessons.steps.costs import SPARSE_BLOCK, SPARSE_T

STEPS = {step.slug: step for step in lessons.STEPS}
BUDGET_ERRORS = {"0": "must be positive", "-1": "must be positive", "1e40": "at most 1e+30",
                 "10^40": "at most 1e+30", "lots": "such as 1e21"}


def metrics(at) -> dict[str, str]:
    return {m.label: str(m.value) for m in at.metric}


def errors(at) -> list[str]:
    return [e.value for e in at.error]


# --- the lesson steps ----------------------------------------------------------------------------------


def test_the_chapters_sit_where_the_lecture_has_them():
    slugs = [step.slug for step in lessons.STEPS]
    assert slugs[0] == "before-attention"  # the lecture opens with the RNN bottleneck
    after = slugs.index("real-models")
    assert slugs[after + 1: after + 4] == ["costs", "growth", "sparse"]
    for slug in ("before-attention", "costs", "growth", "sparse"):
        live = STEPS[slug].build()
        assert 2 <= len(live.choices) <= 6 and live.question and live.why and live.figure
        assert STEPS[slug].link(live, lessons.lesson_model())  # each opens its page


def test_the_bottleneck_answer_is_read_from_the_checkpoints():
    curves = {context: json.loads(rnn.shipped_path(context).with_suffix(".json").read_text())["accuracy_by_length"]
              for context in ("bottleneck", "attention")}
    longest = max(curves["attention"], key=int)
    assert curves["bottleneck"]["1"] - curves["bottleneck"][longest] > 0.3  # falls
    assert curves["attention"]["1"] - curves["attention"][longest] < 0.3  # stays
    live = STEPS["before-attention"].build()
    assert live.choices[live.answer] == "The one-vector model falls; the attention model stays near 100%"
    assert f"{curves['bottleneck'][longest]:.0%}" in live.why


def test_the_embedding_share_answer_is_the_terms_arithmetic():
    small = MODEL_CARDS["gpt2"].real["small"]
    terms = param_terms(small)
    share = sum(t.count for t in terms if t.part == "embedding") / sum(t.count for t in terms)
    assert share == pytest.approx((50257 + 1024) * 768 / 124.44e6, rel=0.01)
    live = STEPS["costs"].build()
    assert live.choices[live.answer] == "About 30%" and f"{share:.0%}" in live.why


def test_ten_times_the_compute_is_a_model_about_three_times_bigger():
    live = STEPS["growth"].build()
    assert live.choices[live.answer] == "About 3× bigger"
    assert f"{math.sqrt(10):.2f}×" in live.why
    assert scaling.CHINCHILLA_SOURCE in live.caption  # the fit is cited with the figure


def test_the_block_local_share_is_counted_by_hand():
    t, b = SPARSE_T, SPARSE_BLOCK
    by_hand = (t // b) * (b * (b + 1) // 2) / (t * (t + 1) // 2)  # each block's lower triangle, against the whole one
    live = STEPS["sparse"].build()
    assert live.choices[live.answer] == "About 1/64" and f"{by_hand:.1%}" in live.why
    assert float(live.caption.rsplit("agree to ", 1)[1].rstrip(".")) <= 1e-5  # fused and explicit, live


# --- Before attention ------------------------------------------------------------------------------------


def test_before_attention_shows_the_crossing_the_alignment_and_the_table():
    at = open_page("pages/before_attention.py")
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 2  # accuracy against length, the alignment
    shown = metrics(at)
    assert shown["additive attention"] == "attention"
    assert at.query_params["before_text"] == "attention"
    at.number_input(key="before_T").set_value(2000).run()
    assert "**the recurrent layer** is cheaper" in "\n".join(m.value for m in at.markdown)
    table = at.dataframe[-1].value
    assert list(table["sequential steps"]) == [2000, 1, 1] and list(table["path length"]) == [1999, 1000, 1]


@pytest.mark.parametrize("text,words", [("abcdefghijklmnopqrstuvwxyz", ["26 letters", "at most 24"]),
                                        ("Hello!", ["'!'", "abcdefghijklmnopqrstuvwxyz"]), ("", ["needs some text"])])
def test_before_attention_says_what_is_wrong_with_a_text_and_keeps_the_rest(text, words):
    at = open_page("pages/before_attention.py")
    at.text_input(key="before_text").set_value(text).run()
    assert_clean(at, errors_allowed=True)
    assert len(errors(at)) == 1 and all(word in errors(at)[0] for word in words), errors(at)
    assert len(at.get("plotly_chart")) == 1 and len(at.dataframe) == 2  # the curves and both tables stay


# --- What a model costs -------------------------------------------------------------------------------------


def test_costs_derive_the_sidebar_models_count_and_check_it_against_its_tensors():
    at = open_page("pages/costs.py")
    assert_clean(at)
    shown = metrics(at)
    assert shown["the live model's tensors"] == shown["parameters (the formulas)"]
    assert any(d.value["term"].tolist()[:1] == ["token embedding"] for d in at.dataframe)
    assert len(at.get("plotly_chart")) == 2  # memory, and the shares of every real model


def test_costs_of_gpt3_at_full_size():
    at = open_page("pages/costs.py")
    at.selectbox(key="cost_model").set_value("GPT-3 175B").run()
    assert_clean(at)
    shown = metrics(at)
    assert shown["parameters (the formulas)"] == "174.60B" and shown["published"] == "175.00B"
    assert at.query_params["cost_model"] == "GPT-3 175B"


def test_costs_keep_working_with_an_impossible_sidebar_and_a_bad_link():
    at = open_page("pages/costs.py", d_model=60, n_heads=8, cost_context=-5, cost_batch="many")
    assert_clean(at, errors_allowed=True)
    assert any("not divisible by n_heads=8" in e for e in errors(at))
    assert at.number_input(key="cost_context").value == 2048 and at.number_input(key="cost_batch").value == 1
    assert len(at.get("plotly_chart")) == 1  # the real models' shares still drawn
    at.selectbox(key="cost_model").set_value("LLaMA 2 70B").run()
    assert "parameters (the formulas)" in metrics(at)


# --- How models grow -------------------------------------------------------------------------------------


def test_growth_splits_a_budget_and_shows_the_law_and_the_sweep():
    at = open_page("pages/growth.py", text=None, grow_budget="3.14e23")
    assert_clean(at)
    best = scaling.compute_optimal(3.14e23)
    assert metrics(at)["parameters (20 tokens each)"] == f"{best.params:.3g}"
    assert len(at.get("plotly_chart")) == 2  # the published law and the measured sweep
    assert any(scaling.CHINCHILLA_SOURCE in m.value for m in at.markdown)


@pytest.mark.parametrize("budget", list(BUDGET_ERRORS))
def test_growth_says_what_is_wrong_with_a_budget_and_keeps_the_charts(budget):
    at = open_page("pages/growth.py", text=None)
    at.text_input(key="grow_budget").set_value(budget).run()
    assert_clean(at, errors_allowed=True)
    assert len(errors(at)) == 1 and BUDGET_ERRORS[budget] in errors(at)[0], errors(at)
    assert len(at.get("plotly_chart")) == 2


# --- the sparse tabs of the Masks page ------------------------------------------------------------------------


def test_the_sparse_tabs_count_pairs_and_agree_fused_with_explicit():
    at = open_page("pages/masks.py")
    assert_clean(at)
    n = len(SHORT_TEXT)
    gaps, pairs = [], []
    for tab in ("strided", "block-local", "global + local"):  # a tab is computed when it is the open one
        at.session_state["mask_tab"] = tab
        assert_clean(at.run())
        gaps += [float(m.value) for m in at.metric if m.label == "fused SDPA vs the five lines"]
        pairs += [str(m.value) for m in at.metric if m.label == f"pairs scored, T = {n}"]
    assert len(gaps) == 3 and max(gaps) <= 1e-5
    assert len(pairs) == 3 and all(p.endswith(f"of {n * (n + 1) // 2}") for p in pairs)  # GPT-2: causal


def test_a_block_larger_than_the_text_is_refused_and_the_other_tabs_stay():
    at = open_page("pages/masks.py")
    at.session_state["mask_tab"] = "block-local"
    charts = len(at.run().get("plotly_chart"))
    at.number_input(key="mask_block").set_value(16).run()
    assert_clean(at)
    assert [w.value for w in at.warning][1:] == [f"a block of 16 does not fit a text of T = {len(SHORT_TEXT)} tokens; "
                                             f"choose a block between 1 and {len(SHORT_TEXT)} (or type a longer text)"]
    assert len(at.get("plotly_chart")) == charts - 1 and at.query_params["mask_block"] == "16"
