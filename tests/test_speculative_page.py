"""The Speculative decoding page: its figures draw the rounds and the costs they are given, and under AppTest it
runs the sidebar's trained model against a draft, says when a draft cannot draft, and keeps working."""
import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from transformer.speculative import speculative_generate
from ui.app.navigation import PAGES
from ui.compute import speculative_measure as measure
from ui.figures.speculative import CELL_KINDS, accepted_rounds, acceptance_by_k, round_cells
from apptest_helpers import APP, assert_clean, figures_by_title, values

ACCEPTED, TARGET, DISCARDED = (CELL_KINDS[kind][0] for kind in ("accepted", "target", "discarded"))


# --- figure builders ------------------------------------------------------------------------------------------


def test_round_cells_colour_the_kept_guesses_the_targets_token_and_the_thrown_away():
    proposed = [["a", "b", "c"], ["d", "e", "f"], ["g"]]
    codes, labels = round_cells(proposed, [3, 1, 0], ["x", "y", "z"])
    assert codes.shape == (3, 4)
    np.testing.assert_array_equal(codes[0], [ACCEPTED, ACCEPTED, ACCEPTED, TARGET])  # all kept, then a bonus token
    np.testing.assert_array_equal(codes[1], [ACCEPTED, TARGET, DISCARDED, np.nan])
    np.testing.assert_array_equal(codes[2], [TARGET, np.nan, np.nan, np.nan])
    assert labels[0] == ["a", "b", "c", "x"]
    assert labels[1][:3] == ["d", "y (not e)", "f"] and labels[2][0] == "z (not g)"


def test_accepted_rounds_draws_one_row_per_round_with_a_legend_of_three_colours():
    fig = accepted_rounds([["a", "b"], ["c", "d"]], [2, 0], ["e", "f"], "rounds")
    grid = fig.data[0]
    assert np.asarray(grid.z).shape == (2, 3) and list(grid.y) == [1, 2]
    assert [t.name for t in fig.data[1:]] == ["proposed and accepted", "the target's own token",
                                            "proposed, thrown away"]
    assert fig.layout.title.text == "rounds"


def test_acceptance_by_k_draws_the_passes_the_rate_and_greedy():
    fig = acceptance_by_k([1, 2, 3], [0.9, 0.7, 0.5], [17, 13, 11], 32, "by k")
    bars, rate = fig.data
    assert list(bars.y) == [17, 13, 11] and list(rate.y) == [0.9, 0.7, 0.5] and rate.yaxis == "y2"
    assert fig.layout.shapes[0].y0 == 32 and "32 passes" in fig.layout.annotations[0].text


# --- the cached runs --------------------------------------------------------------------------------------------


def test_the_sweep_equals_the_library_and_the_targets_greedy_text():
    torch.set_num_threads(1)
    target = "llama2-language"
    draft = measure.default_draft(target)
    assert draft == "palm-language"  # the smallest shipped language model
    ids, labels = measure.prompt_tokens(target, "The cat sat on the mat")
    runs = measure.sweep(target, draft, ids, 12, (1, 4))
    assert all(run.equal_to_greedy for run in runs)
    models = measure.decoders()
    direct = speculative_generate(measure._model(models[target].key), measure._model(models[draft].key),
                                  torch.tensor([ids]), 12, 4)
    assert runs[1].acceptance_rate == direct.acceptance_rate and runs[1].target_forwards == direct.target_forwards
    assert runs[1].new_ids == tuple(direct.ids[0, len(ids):].tolist())


# --- the page ---------------------------------------------------------------------------------------------------


def open_speculative(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in {"sd_new": 8, **query}.items():
        at.query_params[key] = str(value)
    at.switch_page("pages/speculative.py").run()
    return at


def test_the_page_is_in_the_navigation():
    assert "pages/speculative.py" in {page.script for page in PAGES}


def test_the_page_runs_the_sidebars_model_and_shows_every_k():
    at = assert_clean(open_speculative())
    assert "**Target:** llama2-language" in "\n".join(m.value for m in at.markdown)  # the default sidebar model
    figures = figures_by_title(at)
    by_k = figures["palm-language drafting for llama2-language"]
    assert list(values(by_k["data"][0]["x"])) == list(measure.KS)
    runs = measure.sweep("llama2-language", "palm-language", measure.prompt_tokens(
        "llama2-language", at.sidebar.text_area(key="text").value)[0], 8)
    assert list(values(by_k["data"][0]["y"])) == [r.target_forwards for r in runs]
    rounds = next(spec for title, spec in figures.items() if title.startswith("k = 4:"))
    assert len(values(rounds["data"][0]["y"])) == runs[3].target_forwards
    assert at.metric[0].value == f"{runs[3].acceptance_rate:.0%}"
    assert "equal, for every k, to the target's own greedy generation" in at.caption[0].value


def test_a_draft_of_another_vocabulary_shows_an_error_and_the_page_keeps_working():
    at = open_speculative()
    at.selectbox(key="sd_draft").set_value("gpt2-sort").run()
    assert_clean(at, errors_allowed=True)
    assert "gpt2-sort cannot draft for llama2-language" in at.error[0].value and "12 tokens" in at.error[0].value
    at.selectbox(key="sd_draft").set_value(measure.EARLY_EXIT).run()
    assert_clean(at)
    assert figures_by_title(at)


def test_an_empty_text_shows_an_error():
    at = open_speculative()
    at.sidebar.text_area(key="text").set_value("").run()
    assert_clean(at, errors_allowed=True)
    assert at.error and "needs some text" in at.error[0].value
