"""Caches never mix sessions: every cache the pages read is keyed on everything its result depends on.

One server process holds the models, traces, measurements and figures of every session. Two sessions (or two
calls) that differ in one input must each get their own result, and a session that comes back after another
filled the caches must see exactly what it saw before.
"""
import json

import numpy as np
import plotly.graph_objects as go
import pytest

from apptest_helpers import assert_clean, open_page, values
from transformer import AXES, PRESETS, checkpoint, choices
from ui.app.figure_cache import cached_figure
from ui.compute import probe_measure, shipped


def heatmap(z: np.ndarray, title: str = "") -> go.Figure:
    return go.Figure(go.Heatmap(z=z), dict(title=title))


def drawn(fig: go.Figure) -> np.ndarray:
    return np.asarray(fig.data[0].z)


def charts(at) -> dict[str, dict]:
    """Every chart the page drew, by its key."""
    return {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


def trace_values(spec: dict) -> list[np.ndarray]:
    """What each trace draws: a heatmap's z, a bar's or a line's y."""
    return [values(trace["z"] if "z" in trace else trace["y"]) for trace in spec["data"]]


def same_values(a: dict, b: dict) -> bool:
    left, right = trace_values(a), trace_values(b)
    return len(left) == len(right) and all(x.shape == y.shape and np.array_equal(x, y, equal_nan=True)  # NaN: masked
                                           for x, y in zip(left, right))


# --- the figure cache (ui/app/figure_cache.py) -------------------------------------------------------

def test_a_cached_figure_is_built_for_its_own_arguments():
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 4)), rng.random((3, 4))
    fig_a, fig_b = cached_figure(heatmap, a, "a"), cached_figure(heatmap, b, "a")
    assert fig_a is not fig_b
    assert np.array_equal(drawn(fig_a), a) and np.array_equal(drawn(fig_b), b)
    assert cached_figure(heatmap, a.copy(), "a") is fig_a  # the same numbers: the same figure, built once
    assert cached_figure(heatmap, a, "another title") is not fig_a  # every argument is part of the key
    assert cached_figure(heatmap, a, title="t") is not cached_figure(heatmap, a, title="u")


def test_large_arrays_that_differ_in_one_value_get_their_own_figures():
    """Streamlit hashes an array of 500,000 values or more by a sample; the figure cache hashes every byte."""
    big = np.zeros(600_000, dtype=np.float32)
    other = big.copy()
    other[123_457] = 1.0
    assert cached_figure(heatmap, big[None]) is not cached_figure(heatmap, other[None])
    assert drawn(cached_figure(heatmap, other[None])).max() == 1.0


# --- the permutation page's runs (ui/compute/probe_measure.py) ---------------------------------------

def test_permutation_runs_are_their_own_for_each_config_and_ignore_the_sidebars_position():
    ids, perm = (1, 2, 3, 4, 5), (4, 2, 0, 1, 3)
    two_heads = PRESETS["gpt2"].replace(n_layers=1, n_heads=2, n_kv_heads=None)
    four_heads = two_heads.replace(n_heads=4)
    a = probe_measure.permutation_results(two_heads.to_json(), ids, perm, 0, "float32")
    b = probe_measure.permutation_results(four_heads.to_json(), ids, perm, 0, "float32")
    assert set(a) == set(b) == {(mask, p) for mask in ("none", "causal") for p in choices("position")}
    for run in a:
        assert a[run]["weights"].shape[1] == 2 and b[run]["weights"].shape[1] == 4  # (L, H, T, T)
    # every run replaces the position, so the sidebar's choice changes none of them
    other_position = two_heads.replace(position="alibi" if two_heads.position != "alibi" else "rope")
    again = probe_measure.permutation_results(other_position.to_json(), ids, perm, 0, "float32")
    for run in a:
        assert np.array_equal(again[run]["weights"], a[run]["weights"])
    # another seed: other weights
    reseeded = probe_measure.permutation_results(two_heads.to_json(), ids, perm, 1, "float32")
    assert not np.array_equal(reseeded[("none", "none")]["weights"], a[("none", "none")]["weights"])


# --- shipped weights for a config (ui/compute/shipped.py) --------------------------------------------

@pytest.mark.parametrize("cfg", [PRESETS["llama2"], PRESETS["llama2"].replace(n_layers=3), PRESETS["gpt2"]])
def test_the_shipped_checkpoints_of_a_config_follow_the_librarys_rule(cfg):
    for tokens in AXES["tokens"].choices:  # the library's rule, among the checkpoints that read these tokens
        expected = [s.info.task for s in shipped.shipped_models()
                    if checkpoint.same_model(s.cfg, cfg) and s.info.tokens == tokens]
        assert shipped.trained_tasks(cfg, tokens) == expected
        assert shipped.trained_tasks(cfg, tokens) == expected  # asked again: the kept answer is the same
    assert shipped.trained_tasks(cfg, "bpe") == ([] if cfg.n_layers == 3 else ["language"])  # LLaMA 2's, GPT-2's


def test_a_config_without_checkpoints_is_not_given_another_configs():
    assert shipped.trained_tasks(PRESETS["llama2"])  # the default preset ships language weights
    assert shipped.trained_tasks(PRESETS["llama2"].replace(n_layers=3)) == []
    assert shipped.trained_config(PRESETS["llama2"].replace(n_layers=3)) is None


# --- two sessions on one server: the model/trace cache and the figure cache -------------------------

def test_two_sessions_with_other_heads_get_their_own_heatmaps_and_keep_them():
    """The playground's head grid is drawn from the cached model's cached trace; each session sees its own."""
    first = assert_clean(open_page("pages/playground.py", n_heads=4, layer=0))
    grid = charts(first)["head_grid"]
    second = assert_clean(open_page("pages/playground.py", n_heads=2, n_kv_heads=2, layer=0))
    other_grid = charts(second)["head_grid"]
    assert len(trace_values(grid)) != len(trace_values(other_grid))  # one heatmap per head: 4 and 2
    first.run()  # back to the first session, after the second filled the caches
    assert same_values(charts(first)["head_grid"], grid)


def test_two_sessions_with_other_positions_get_their_own_traces():
    first = assert_clean(open_page("pages/playground.py", position="learned", layer=0))
    second = assert_clean(open_page("pages/playground.py", position="rope", layer=0))
    grid, other_grid = charts(first)["head_grid"], charts(second)["head_grid"]
    assert not same_values(grid, other_grid)
    first.run()
    assert same_values(charts(first)["head_grid"], grid)


def test_two_sessions_with_other_heads_get_their_own_cached_position_figures():
    """The Positions page keeps ALiBi's slopes and biases per number of heads, the sinusoidal table per d_model."""
    first = assert_clean(open_page("pages/positions.py", n_heads=4))
    second = assert_clean(open_page("pages/positions.py", n_heads=2, n_kv_heads=2, d_model=32))
    a, b = charts(first), charts(second)  # the sinusoidal tab, open by default
    for at in (first, second):
        at.session_state["pos_tab"] = "ALiBi"
        assert_clean(at.run())
    a, b = {**a, **charts(first)}, {**b, **charts(second)}
    assert len(values(a["alibi_slopes"]["data"][0]["y"])) == 4
    assert len(values(b["alibi_slopes"]["data"][0]["y"])) == 2
    assert not same_values(a["alibi_biases"], b["alibi_biases"])
    assert values(a["sin_table"]["data"][0]["z"]).shape[1] != values(b["sin_table"]["data"][0]["z"]).shape[1]
    first.run()
    again = charts(first)
    first.session_state["pos_tab"] = "sinusoidal"
    again |= charts(first.run())
    for key in ("alibi_slopes", "alibi_biases", "sin_table"):
        assert same_values(again[key], a[key]), key
