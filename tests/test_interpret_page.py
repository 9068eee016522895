"""The "Why this prediction?" page and its two lessons: figures drawn from transformer.interpret, the view in the
URL, every bad prompt or answer a clear message, a model too large for the budget offered fewer cells; the
lessons' true answers recomputed with plain torch hooks. The figure builders are checked without a server."""
import json

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from apptest_helpers import APP, assert_clean, values
from test_interpret import patch_heads_by_hand
from transformer import PRESETS, checkpoint
from transformer.interpret import logit_difference, logit_lens
from ui.compute.interpret_measure import PAIRS, answer_token, patching_forwards, residual_rows, within_budget
from ui.compute.tokens import encode_text
from ui.figures.interpret import attribution_bars, effect_heatmaps, lens_grid
from ui.lessons import steps as lessons

PAGE = "pages/interpret.py"
PAIR = PAIRS["a word changed"]


def open_interpret(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.switch_page(PAGE).run()
    return at


def charts(at: AppTest) -> dict[str, dict]:
    return {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


# the page's tabs: only the open one is computed and drawn
LENS_TAB, ATTRIBUTION_TAB, PATCHING_TAB = TABS = ("The logit lens", "Attribution", "Activation patching")


def open_tab(at: AppTest, label: str) -> AppTest:
    at.session_state["why_tab"] = label
    return at.run()


def lesson_language_model():
    """The shipped checkpoint the lessons run on, loaded by the library alone."""
    model = lessons.lesson_model()
    for entry in checkpoint.shipped():
        meta, cfg = checkpoint.read_meta(entry.path)
        if cfg.to_dict() == model.config.to_dict():
            return checkpoint.load(entry.path)[0].eval()
    raise AssertionError("no shipped checkpoint has the lessons' config")


# --- the page ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_page() -> AppTest:
    at = open_interpret()
    assert_clean(at)
    return at


def test_the_page_draws_the_lens_attribution_and_both_patchings_on_the_trained_model(default_page):
    assert set(charts(default_page)) == {"lens"}  # the first tab; the others are computed when opened
    drawn, markdown, downloads = {}, [], set()
    for label in TABS:
        at = assert_clean(open_tab(default_page, label))
        drawn |= charts(at)
        markdown += [str(m.value) for m in at.markdown]
        downloads |= {b.proto.label for b in at.get("download_button")}
    assert set(drawn) == {"lens", "attribution", "patch_residual", "patch_heads"}
    assert any("llama2-language" in s.value for s in default_page.success)
    lens = drawn["lens"]["data"][0]
    cfg = PRESETS["llama2"]  # the default model: its English checkpoint has the preset's size
    assert len(lens["y"]) == cfg.n_layers + 1 and len(lens["x"]) == 16  # embeddings + every block; 16 positions
    assert "<br>" in lens["text"][0][0] and "top tokens" in lens["hovertemplate"]
    heads = drawn["patch_heads"]["data"]
    assert [values(t["z"]).shape for t in heads] == [(cfg.n_layers, cfg.n_heads)] * 2  # trained and random-init
    assert sum("What to look for" in m for m in markdown) == 4
    assert downloads >= {
        "Download the lens, every position (CSV)", "Download the attribution (CSV)", "The residual heatmap (PNG)",
        "The head heatmaps (PNG)", "Every effect (CSV)"}


def test_the_head_heatmap_is_the_librarys_patching_and_the_induction_head_stands_out(default_page):
    model, config_json = lesson_language_model(), lessons.lesson_model().config_json
    clean, corrupt = (torch.tensor([encode_text(t, config_json).ids]) for t in (PAIR.clean, PAIR.corrupt))
    metric = logit_difference(answer_token(PAIR.clean, PAIR.right, config_json),
                              answer_token(PAIR.corrupt, PAIR.wrong, config_json))
    with torch.no_grad():
        corrupted = float(metric(model(corrupt)))
    expected = patch_heads_by_hand(model, clean, corrupt, metric) - corrupted
    drawn = charts(assert_clean(open_tab(default_page, PATCHING_TAB)))
    trained, random_init = (values(t["z"]) for t in drawn["patch_heads"]["data"])
    np.testing.assert_allclose(trained, expected.numpy(), atol=1e-4)
    assert trained.max() > 5 * np.abs(random_init).max()  # the copying head is learned, far beyond random init


def test_the_view_lives_in_the_url():
    at = open_interpret(pair="your own", clean="abcabc", corrupt="abdabd", right="c", wrong="d", lens_end=20, attr=1)
    assert_clean(at)
    assert at.select_slider(key="lens_end").value == 20
    assert open_tab(at, ATTRIBUTION_TAB).selectbox(key="attr").value == 1
    open_tab(at, PATCHING_TAB)
    assert_clean(at)
    assert at.text_input(key="clean").value == "abcabc" and not at.text_input(key="clean").disabled
    assert at.query_params["lens_end"] in ("20", ["20"]) and at.query_params["attr"] in ("1", ["1"])  # tabs hidden
    at.selectbox(key="pair").set_value("a number changed").run()
    assert_clean(at)
    assert at.query_params["pair"] == "a number changed"
    assert at.query_params["clean"] == PAIRS["a number changed"].clean
    assert at.text_input(key="clean").disabled


@pytest.mark.parametrize("clean, corrupt, right, wrong, message", [
    ("", "abc", "a", "b", "The clean prompt is empty"),
    ("The cat sat on the mat. " * 417, "The cat sat on the mop. " * 417, "a", "o", "patching takes at most 128"),
    ("The cat sat.", "The cat sat on.", "a", "o", "The clean prompt is 13 tokens and the corrupted one 16"),
    ("a cat", "a bat", "", "b", "An answer is empty"),
    ("a cat", "a bat", "at", "b", "'at' is 2 tokens"),
    ("a cat", "a bat", "😀", "b", "several byte tokens"),
    ("a cat", "a bat", "c", "c", "the same token"),
    ("family 👨‍👩‍👧‍👦 a", "family 👨‍👩‍👧‍👦 b", "x", "y", None),  # many byte tokens, as many on each side
    ("القط جلس على", "القط جلب على", " ", "x", None),  # right to left
    ("tab\tbell\x07nul\x00", "tab\tbelL\x07nul\x00", "x", "y", None),  # control characters
    ("abc", "abd", "x", "y", None),  # prompts of another length than the pairs'
])
def test_bad_prompts_and_answers_get_a_clear_message(clean, corrupt, right, wrong, message):
    at = open_interpret(pair="your own", clean=clean, corrupt=corrupt, right=right, wrong=wrong)
    open_tab(at, PATCHING_TAB)
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    if message is None:
        assert not errors and "patch_heads" in charts(at)
    else:
        assert len(errors) == 1 and message in errors[0], errors
        assert "lens" in charts(assert_clean(open_tab(at, LENS_TAB)))  # the rest of the page still works


def test_an_encoder_is_told_the_page_needs_a_decoder():
    at = open_interpret(preset="bert")
    assert_clean(at)
    assert any("needs a decoder" in i.value for i in at.info) and not charts(at)


def test_a_model_too_large_for_the_budget_is_offered_fewer_blocks_and_positions():
    at = open_tab(open_interpret(preset="gpt2", n_layers=12, d_model=512, n_heads=8), PATCHING_TAB)
    assert_clean(at)
    (warning,) = [w.value for w in at.warning if "forward passes" in w.value]
    assert "takes 764 forward passes of this 44-token prompt" in warning
    assert "Patch fewer blocks or positions" in warning
    assert at.multiselect(key="patch_blocks").value == [11]  # what fits, offered at once
    assert {"patch_residual", "patch_heads"} <= set(charts(at))
    at.multiselect(key="patch_blocks").set_value(list(range(12))).run()
    assert_clean(at)
    assert any("over the budget" in i.value for i in at.info) and "patch_heads" not in charts(at)
    assert at.query_params["p_blocks"] == ",".join(map(str, range(12)))


def test_what_fits_a_budget():
    assert residual_rows([1, 0], 2) == [0, 1, 2] and residual_rows([0], 2) == [0]
    assert patching_forwards([0, 1], 10, 2, 4) == 3 * 10 + 2 * 2 * 4
    blocks, positions = within_budget(40, 10, 2, 4)  # all of it takes 46
    assert patching_forwards(blocks, len(positions), 2, 4) <= 40 and positions[-1] == 9
    assert within_budget(3, 10, 2, 4) == ([], [])


# --- the lessons ------------------------------------------------------------------------------------


@pytest.fixture
def lessons_page(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_DB", str(tmp_path / "poll.sqlite3"))

    def open_step(slug: str, **query) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params["step"] = str([s.slug for s in lessons.STEPS].index(slug) + 1)
        for key, value in query.items():
            at.query_params[key] = str(value)
        at.switch_page("pages/lessons.py").run()
        assert_clean(at)
        return at
    return open_step


@pytest.mark.parametrize("slug", ["logit-lens", "copying-head"])
def test_each_lesson_asks_then_reveals_its_figure(lessons_page, slug):
    live = next(s for s in lessons.STEPS if s.slug == slug).build()
    assert 2 <= len(live.choices) <= 6 and 0 <= live.answer < len(live.choices)
    for query in ({}, {"present": 1}):
        at = lessons_page(slug, **query)
        assert not at.get("plotly_chart")
        at.button(key="lesson_reveal").click().run()
        assert_clean(at)
        assert len(at.get("plotly_chart")) == 1 and any(live.why in str(m.value) for m in at.markdown)


def test_the_lens_lessons_answer_is_the_librarys_lens():
    live = next(s for s in lessons.STEPS if s.slug == "logit-lens").build()
    query = int(live.query["lens_end"])
    lens = logit_lens(lesson_language_model(), torch.tensor([lessons.lesson_model().tokens.ids]))  # (R, T, vocab)
    top = lens[:, query].argmax(-1)  # (R,)
    holds = (top == top[-1]).tolist()
    assert all(holds[live.answer:]) and (live.answer == 0 or not holds[live.answer - 1])


def test_the_copying_lessons_answer_is_the_head_torch_hooks_find_and_the_playgrounds_induction_head():
    live = next(s for s in lessons.STEPS if s.slug == "copying-head").build()
    model = lesson_language_model()
    config_json = lessons.lesson_model().config_json
    clean, corrupt = (torch.tensor([encode_text(t, config_json).ids]) for t in (PAIR.clean, PAIR.corrupt))
    metric = logit_difference(answer_token(PAIR.clean, PAIR.right, config_json),
                              answer_token(PAIR.corrupt, PAIR.wrong, config_json))
    layer, head = divmod(int(patch_heads_by_hand(model, clean, corrupt, metric).argmax()), model.cfg.n_heads)
    assert live.choices[live.answer] == f"layer {layer}, head {head}"
    assert (live.query["layer"], live.query["head"]) == (str(layer), str(head))  # the playground's induction head
    assert live.query["text"] == PAIR.clean


# --- figures, without a server -----------------------------------------------------------------------


def test_lens_grid_writes_each_cells_top_token_and_colours_by_the_final_answer():
    labels = np.array([[["a", "b"], ["c", "d"]], [["e", "f"], ["g", "h"]]], dtype=object)  # (R=2, P=2, k=2)
    probs = np.array([[[0.5, 0.2], [0.9, 0.1]], [[0.6, 0.3], [0.7, 0.2]]])
    fig = lens_grid(labels, probs, np.array([[0.1, 0.2], [0.6, 0.7]]), ["embeddings", "after block 0"], ["0:x", "1:y"])
    (trace,) = fig.data
    assert trace.text[0][1] == "c<br>0.90" and trace.customdata[1][0] == "e 0.600<br>f 0.300"
    assert (trace.zmin, trace.zmax, list(trace.y)) == (0, 1, ["embeddings", "after block 0"])


def test_effect_heatmaps_share_one_scale_that_reaches_the_clean_gap():
    fig = effect_heatmaps([("trained", np.array([[0.5, 2.0]])), ("random", np.array([[0.01, -0.02]]))],
                          ["head 0", "head 1"], ["block 0"], "head", "block", gap=4.0)
    assert len(fig.data) == 2 and {t.coloraxis for t in fig.data} == {"coloraxis"}
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (-4.0, 4.0)
    assert fig.data[0].customdata[0][1] == 0.5  # hover: the share of the gap


def test_attribution_bars_colour_by_sign():
    fig = attribution_bars(["embeddings", "L0H0", "biases"], np.array([1.0, -0.5, 0.0]))
    colours = fig.data[0].marker.color
    assert colours[0] == colours[2] != colours[1]
