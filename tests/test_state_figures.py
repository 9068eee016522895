"""The State page's figure builders and cached computations, without a server: what each figure draws, and that the
numbers under them are the library's (a head's recorded state, the recurrent form on hand-made and random pairs, the
cache's bytes at Qwen3-Next's sizes)."""

import numpy as np
import pytest

from transformer import AXES, TransformerConfig
from ui.compute import state_measure as measure
from ui.compute.layers import HYBRID, SOFTMAX, softmax_layers, softmax_twin, state_layers, with_attention_layers
from ui.figures.base import DIVERGING, head_grid, side_by_side
from ui.figures.state import (cache_against_context, capacity_curves, delta_write, implied_row, overwrite_reads,
                              read_bars, recall_curves, state_write)

STATE_KINDS = [key for key, row in AXES["attention"].choices.items() if row.keeps_state and not row.conv_only]
DELTA_KINDS = [key for key in STATE_KINDS if AXES["attention"].row(key).delta_rule]


# --- the layers a page asks about ---------------------------------------------------------------------------

def test_a_hybrid_is_three_linear_layers_then_one_softmax_layer_and_its_twin_has_none():
    cfg = TransformerConfig(n_layers=8, attention_layers=HYBRID, linear_kind="deltanet")
    assert state_layers(cfg) == [0, 1, 2, 4, 5, 6] and softmax_layers(cfg) == [3, 7]
    twin = softmax_twin(cfg)  # the linear kind goes back to its default: the config refuses it without linear layers
    assert twin.attention_layers == SOFTMAX and state_layers(twin) == [] and twin.linear_kind != "deltanet"
    assert softmax_twin(twin) is twin
    assert with_attention_layers(twin, HYBRID).layer_plan()[0].row.keeps_state


def test_the_state_page_uses_the_sidebars_model_when_it_has_linear_layers_else_a_hybrid_of_its_sizes():
    hybrid = TransformerConfig(n_layers=4, attention_layers=HYBRID)
    assert measure.hybrid_of(hybrid) == (hybrid, None)
    plain = TransformerConfig(n_layers=2, d_model=32, n_heads=2)
    made, why = measure.hybrid_of(plain)
    assert (made.n_layers, made.d_model, made.n_heads) == (4, 32, 2) and state_layers(made) == [0, 1, 2]
    assert "no linear layer" in why
    encoder = TransformerConfig(arch="encoder", position="learned")  # no layer of an encoder can keep a state
    made, why = measure.hybrid_of(encoder)
    assert made.row("arch").next_token and state_layers(made) and "cannot take any" in why


# --- one head's state, recorded ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", STATE_KINDS)
def test_a_heads_recorded_state_is_the_sum_of_its_writes_and_every_read_agrees(kind):
    cfg = TransformerConfig(vocab_size=40, d_model=16, n_heads=2, n_layers=4, attention_layers=HYBRID,
                            linear_kind=kind, linear_key_heads=1)  # one key head serving both value heads
    ids = (1, 5, 9, 5, 9, 2, 7)
    head = measure.head_state(cfg.to_json(), 0, ids, 1, 1)
    T = len(ids)
    assert head.states.shape == (T, cfg.state_d_k, cfg.state_d_v) and head.weights.shape == (T, T)
    for t in range(T):
        assert np.abs(head.before(t) + head.write(t) - head.states[t]).max() < 1e-5
        assert np.abs(head.read_of_state(t) - head.read[t]).max() < 1e-5
        assert np.abs(head.read_of_weights(t) - head.read[t]).max() < 1e-4
    assert (head.correction is not None) == (kind in DELTA_KINDS)
    assert (head.decay is not None) == AXES["attention"].row(kind).decays
    if head.correction is not None:  # the delta rule stores β (v - prediction), and then says v for k_t (β = 1)
        assert np.allclose(head.correction, head.beta[:, None] * (head.v - head.predicted), atol=1e-5)
        step = head.says_after(0) - head.before(0).T @ head.k[0]
        assert np.allclose(step, head.k[0] @ head.k[0] * head.correction[0], atol=1e-5)


# --- an old association overwritten -----------------------------------------------------------------------------

@pytest.mark.parametrize("c", [0.0, 0.5, 0.9, 1.0])
def test_the_delta_rule_overwrites_what_a_similar_key_stored_and_adding_blurs_it(c):
    demo = measure.overwrite(c)
    v1, v3 = demo.values[0], demo.values[2]
    adds, corrects = demo.reads["adds"], demo.reads["corrects"]
    assert np.allclose(adds[1], v3 + c * v1, atol=1e-6)  # k₃ reads its value plus c of the old one
    assert np.allclose(adds[0], v1 + c * v3, atol=1e-6)
    assert np.allclose(corrects[1], v3, atol=1e-6)  # the newest pair, stored exactly
    assert np.allclose(corrects[0], (1 - c * c) * v1 + c * v3, atol=1e-6)  # the old pair, overwritten as far as k₁·k₃
    assert np.allclose(demo.corrections[2], v3 - c * v1, atol=1e-6)  # what it stored: v₃ minus what k₃ predicted


# --- capacity -------------------------------------------------------------------------------------------------

def test_capacity_at_d_k_32():
    """The numbers the page and the README quote: 32 pairs in a 32 × 32 state, 8 seeds."""
    result = measure.capacity(32)
    assert result.n[0] == 1 and result.n[-1] == 96 and {16, 32} <= set(result.n.tolist())
    mean = lambda rule, measure_key, n: float(result.recall[rule][measure_key][list(result.n).index(n)].mean())
    for rule in measure.RULES:
        assert mean(rule, "identified", 1) == mean(rule, "reproduced", 1) == 1.0  # one pair: read back exactly
    assert round(mean("adds", "identified", 32), 2) == 0.98 and round(mean("adds", "reproduced", 32), 2) == 0.0
    assert round(mean("corrects", "identified", 32), 2) == 0.78 and round(mean("corrects", "reproduced", 32), 2) == 0.23
    # seed-paired: the delta rule reproduces more pairs at d_k / 2 and d_k, and names fewer at d_k
    assert measure.paired_verdict(result, "reproduced", 16).word == "better"
    assert measure.paired_verdict(result, "reproduced", 32).word == "better"
    assert measure.paired_verdict(result, "identified", 32).word == "worse"
    assert measure.holds_to(result, "adds", "identified") > 32 > measure.holds_to(result, "corrects", "identified")


def test_a_verdict_compares_against_the_margin_fixed_in_advance():
    n = np.array([1, 2])
    same = {rule: {"identified": np.full((2, 8), 0.5)} for rule in measure.RULES}
    assert measure.paired_verdict(measure.Capacity(4, n, same), "identified", 2).word == "equivalent"
    apart = {"adds": {"identified": np.full((2, 8), 0.5)},
             "corrects": {"identified": 0.7 + 0.01 * np.arange(16).reshape(2, 8)}}
    assert measure.paired_verdict(measure.Capacity(4, n, apart), "identified", 2).word == "better"
    noisy = {"adds": {"identified": np.full((2, 8), 0.5)},
             "corrects": {"identified": 0.5 + 0.3 * np.tile([1, -1], 8).reshape(2, 8)}}
    assert measure.paired_verdict(measure.Capacity(4, n, noisy), "identified", 2).word == "undecided"


def test_memory_of_qwen3_next_shapes_at_128k():
    curves = measure.cache_by_context(2, (131072,))
    gib = {name: c["total"][0] / 2**30 for name, c in curves.items()}
    full, hybrid, linear = gib.values()
    assert full == 12.0 and round(hybrid, 2) == 3.04 and round(linear * 1024) == 50  # 50 MiB
    assert all(c["state layers"][0] == c["total"][0] - c["global layers"][0] for c in curves.values())


# --- the figures ------------------------------------------------------------------------------------------------

def test_the_state_write_draws_three_matrices_on_one_scale_centred_on_zero():
    before, write = np.ones((3, 2)), np.array([[0, -4], [0, 0], [1, 0]], dtype=float)
    fig = state_write(before, write, before + write, "a", decay=0.5)
    assert len(fig.data) == 3 and all(trace.coloraxis == "coloraxis" for trace in fig.data)
    axis = fig.layout.coloraxis
    assert (axis.cmin, axis.cmax) == (-4, 4) and axis.colorscale[0][1] == DIVERGING[0][1]
    assert "0.500" in fig.layout.annotations[0].text and "'a'" in fig.layout.annotations[2].text


def test_the_delta_bars_and_the_read():
    fig = delta_write(np.ones(4), np.zeros(4), 0.5 * np.ones(4), 0.5, "x")
    assert [trace.name.split(":")[0] for trace in fig.data] == ["vₜ", "Sᵀkₜ", "stored"]
    assert "β = 0.50" in fig.data[2].name
    assert list(read_bars(np.arange(3.0), "x").data[0].y) == [0, 1, 2]


def test_implied_weights_are_coloured_by_sign_and_their_sum_is_in_the_title():
    fig = implied_row(np.array([0.5, -0.25, 1.5]), ["a", "b", "c"], "c")
    assert fig.data[0].marker.color == (DIVERGING[-1][1], DIVERGING[0][1], DIVERGING[-1][1])
    assert "sum 1.75" in fig.layout.title.text and "not a softmax" in fig.layout.yaxis.title.text


def test_the_overwrite_figure_and_the_memory_lines():
    demo = measure.overwrite(0.9)
    fig = overwrite_reads(demo.reads, measure.RULES, 0.9)
    assert len(fig.data) == 4 and [t.showlegend for t in fig.data] == [True, True, False, False]
    contexts = np.array([1024, 1_048_576])
    fig = cache_against_context(contexts, {"grows": contexts * 2.0**20, "flat": np.full(2, 2.0**30)}, 131072)
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "log"
    assert list(fig.data[1].y) == [1.0, 1.0]  # GiB
    assert fig.layout.shapes[0].x0 == 131072 and fig.layout.annotations[0].x == np.log10(131072)


def test_the_capacity_curves_draw_a_band_a_mean_and_the_width():
    n = np.array([1, 2, 4])
    recall = {"adds": np.array([[1, 1], [1, 0.5], [0.5, 0.25]]), "corrects": np.ones((3, 2))}
    fig = capacity_curves(n, recall, measure.RULES, 2, "t", chance=True)
    band, mean = fig.data[0], fig.data[1]
    assert list(band.y) == [1, 1, 0.5, 0.25, 0.5, 1] and list(mean.y) == [1, 0.75, 0.375]
    assert fig.data[-1].name.startswith("guessing") and list(fig.data[-1].y) == [1, 0.5, 0.25]
    assert fig.layout.shapes[0].x0 == 2


def test_grids_of_implied_weights_use_a_scale_centred_on_zero():
    weights = np.array([[[1.0, 0.0], [-2.0, 0.5]]])  # one head, a negative weight
    assert (head_grid(weights, ["a", "b"], ["a", "b"], 1).layout.coloraxis.cmin) == 0
    signed = head_grid(weights, ["a", "b"], ["a", "b"], 1, signed=True).layout.coloraxis
    assert (signed.cmin, signed.cmax) == (-2, 2) and signed.colorscale[0][1] == DIVERGING[0][1]
    pair = side_by_side(weights[0], 0.5 * weights[0], ["a", "b"], ["a", "b"], signed=True).layout.coloraxis
    assert (pair.cmin, pair.cmax) == (-2, 2)
    assert side_by_side(weights[0], weights[0], ["a", "b"], ["a", "b"]).layout.coloraxis.cmin == 0


def test_the_recall_curves_draw_each_model_solid_and_its_control_dotted_in_one_colour(tmp_path):
    fig = recall_curves([32, 448], {"full": ([0.9, 0.6], [0.5, 0.5]), "linear": ([0.7, 0.5], [0.5, 0.5])})
    solid = [t for t in fig.data if t.line.dash is None]
    dotted = [t for t in fig.data if t.line.dash == "dot"]
    assert [t.name for t in solid] == ["full", "linear"] and [list(t.y) for t in dotted] == [[0.5, 0.5]] * 2
    assert [t.line.color for t in solid] == [t.line.color for t in dotted]
    assert list(fig.layout.xaxis.tickvals) == [32, 448]
    model = {"recall": {"accuracy": [0.9, 0.6], "control_accuracy": [0.5, 0.58]}}
    assert measure.recall_lift(model) == pytest.approx([0.4, 0.02])
    with pytest.raises(FileNotFoundError, match="scripts.measure_recall"):
        measure.recall_measured(tmp_path / "recall.json")
