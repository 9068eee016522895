"""Why divide by sqrt(d) and why positions: the library's measurements, their figures, and the two pages."""
import json
import math

import numpy as np
import pytest
import torch

from transformer import PRESETS, Transformer, TransformerConfig, probes
from ui.app.navigation import PAGES
from ui.figures import probe as pf
from apptest_helpers import assert_clean, open_page

SMALL = TransformerConfig(vocab_size=64, d_model=32, n_heads=4, n_layers=2, max_len=32)
IDS = torch.tensor([5, 17, 3, 44, 9, 21, 30, 8, 12, 60])
MOVED = ["sinusoidal", "learned", "rope", "alibi"]


# --- scaling: the library -------------------------------------------------------------------


def test_unscaled_variance_grows_like_d_head_and_scaled_stays_at_one():
    d_heads = [4, 16, 64, 256, 512]
    curves = probes.random_score_statistics(d_heads, n_keys=16, seed=0)
    for d, unscaled, scaled in zip(d_heads, curves.var_unscaled, curves.var_scaled):
        assert 0.8 <= unscaled / d <= 1.25, (d, unscaled)
        assert 0.8 <= scaled <= 1.25, (d, scaled)
        assert scaled == pytest.approx(unscaled / d)  # the same scores, divided by sqrt(d)


def test_unscaled_softmax_saturates_and_scaled_does_not():
    curves = probes.random_score_statistics([4, 64, 512], n_keys=16, seed=0)
    assert curves.max_entropy == pytest.approx(math.log(16))
    assert curves.entropy_unscaled[0] > curves.entropy_unscaled[1] > curves.entropy_unscaled[2]
    assert curves.entropy_unscaled[-1] < 0.25  # at d = 512 one key takes nearly all the weight
    assert curves.entropy_scaled[-1] > 0.75 * curves.max_entropy
    assert max(curves.entropy_scaled) - min(curves.entropy_scaled) < 0.2  # independent of d_head
    unscaled, scaled = probes.softmax_row(512, 16, seed=0)
    assert float(unscaled.sum()) == pytest.approx(1.0) and float(scaled.sum()) == pytest.approx(1.0)
    assert float(unscaled.max()) > 0.9 and float(scaled.max()) < 0.5


def test_scores_are_what_the_model_computes_with_gqa_and_rope():
    cfg = SMALL.replace(n_heads=4, n_kv_heads=2, position="rope")
    torch.manual_seed(0)
    model = Transformer(cfg, device="cpu").eval()
    _, trace = model.run_with_trace(IDS[None])
    q_name, k_name = probes.live_qk_names(cfg, 1)
    assert (q_name, k_name) == ("blocks.1.attn.hook_rot_q", "blocks.1.attn.hook_rot_k")
    q, k = trace[q_name], trace[k_name]  # (1, 4, T, 8) and (1, 2, T, 8)
    full_k = probes.repeat_kv_heads(k, cfg.n_heads)
    assert torch.equal(full_k[:, 1], k[:, 0]) and torch.equal(full_k[:, 2], k[:, 1])  # heads 0, 1 read kv head 0
    raw = trace["blocks.1.attn.hook_raw_scores"]
    assert torch.allclose(probes.scores(q, full_k, scaled=True), raw, atol=1e-6)
    stats = probes.head_score_statistics(q, k)
    assert stats.d_head == 8 and stats.n_keys == len(IDS)
    for h in range(cfg.n_heads):
        assert stats.var_scaled[h] == pytest.approx(float(raw[0, h].double().var()), rel=1e-4)
        assert stats.var_unscaled[h] == pytest.approx(8 * stats.var_scaled[h])
        assert stats.entropy_scaled[h] == pytest.approx(float(probes.softmax_entropy(raw[0, h]).mean()), rel=1e-4)
    assert probes.live_qk_names(SMALL.replace(position="alibi"), 0)[0] == "blocks.0.attn.hook_q"
    assert probes.live_qk_names(SMALL.replace(arch="encoder-decoder"), 0)[0] == "encoder.blocks.0.attn.hook_rot_q"


def test_scaling_bad_input_raises():
    with pytest.raises(ValueError, match="n_keys=1"):
        probes.random_score_statistics([8], n_keys=1)
    with pytest.raises(ValueError, match="layer=2"):
        probes.live_qk_names(SMALL, 2)
    with pytest.raises(ValueError, match="same head size"):
        probes.scores(torch.zeros(3, 4), torch.zeros(3, 5), scaled=True)


# --- permutation: the library ---------------------------------------------------------------


def test_seeded_permutation():
    perm = probes.seeded_permutation(10, seed=3)
    assert torch.equal(perm, probes.seeded_permutation(10, seed=3))
    assert sorted(perm.tolist()) == list(range(10)) and perm.tolist() != list(range(10))
    assert torch.equal(IDS[perm][probes.unshuffle(perm)], IDS)
    kept = probes.seeded_permutation(10, seed=3, keep_last=True)
    assert kept[-1] == 9 and kept[:-1].tolist() != list(range(9))
    assert probes.seeded_permutation(2, seed=0).tolist() == [1, 0]  # never the identity


@pytest.mark.parametrize("changes", [{}, {"n_kv_heads": 1, "ffn": "moe"}, {"norm": "layernorm", "norm_position": "post",
                                                                         "ffn": "gelu", "bias": True},
                                     {"parallel_block": True, "n_kv_heads": 2}])
def test_no_positions_no_mask_is_permutation_equivariant(changes):
    cfg = probes.equivariance_config(SMALL.replace(**changes), "none", causal=False)
    assert cfg.arch == "encoder" and cfg.position == "none"
    perm = probes.seeded_permutation(len(IDS), seed=1)
    result = probes.permutation_test(cfg, IDS, perm, seed=0)
    assert result["outputs"] <= 1e-5 and result["patterns"] <= 1e-5, result  # float32: rounding only
    assert result["output_scale"] > 0.5  # the outputs themselves are far from 0
    exact = probes.permutation_test(cfg, IDS, perm, seed=0, dtype=torch.float64)
    assert exact["outputs"] <= 1e-12 and exact["patterns"] <= 1e-12, exact
    assert exact["outputs"] <= probes.rounding_tolerance(torch.float64, exact["output_scale"])


@pytest.mark.parametrize("position", MOVED)
def test_every_position_scheme_breaks_equivariance(position):
    cfg = probes.equivariance_config(SMALL, position, causal=False)
    result = probes.permutation_test(cfg, IDS, probes.seeded_permutation(len(IDS), seed=1), seed=0)
    assert result["outputs"] > 1e-3 and result["patterns"] > 1e-3, result
    assert result["outputs"] > probes.rounding_tolerance(torch.float32, result["output_scale"])


def test_a_causal_mask_alone_breaks_equivariance_and_lets_order_in_from_the_second_layer():
    cfg = probes.equivariance_config(SMALL.replace(sliding_window=3), "none", causal=True)
    assert cfg.arch == "decoder" and cfg.sliding_window is None
    full = probes.permutation_test(cfg, IDS, probes.seeded_permutation(len(IDS), seed=1), seed=0)
    assert full["outputs"] > 1e-3 and full["patterns"] > 1e-3
    # the last token kept last, the others shuffled: block 0 gives it the same set of keys, block 1 changed values
    prefix = probes.permutation_test(cfg, IDS, probes.seeded_permutation(len(IDS), seed=1, keep_last=True), seed=0,
                                     dtype=torch.float64)
    assert prefix["resid"][0][-1] <= 1e-12
    assert prefix["resid"][1][-1] > 1e-3
    assert prefix["per_layer"][0] > 1e-3  # the other rows see other keys
    assert len(prefix["per_position"]) == len(IDS)


def test_permutation_test_returns_weights_put_back_and_refuses_bad_input():
    cfg = probes.equivariance_config(SMALL, "none", causal=False)
    perm = probes.seeded_permutation(len(IDS), seed=2)
    result = probes.permutation_test(cfg, IDS, perm, seed=0, dtype=torch.float64)
    assert result["weights"].shape == (2, 4, len(IDS), len(IDS))
    assert torch.allclose(result["weights"], result["weights_back"], atol=1e-12)
    assert torch.allclose(result["weights"].sum(-1), torch.ones((), dtype=torch.float64), atol=1e-12)
    with pytest.raises(ValueError, match="exactly once"):
        probes.permutation_test(cfg, IDS, torch.zeros(len(IDS), dtype=torch.long))
    with pytest.raises(ValueError, match="one stack"):
        probes.permutation_test(SMALL.replace(arch="encoder-decoder"), IDS, perm)
    state = torch.random.get_rng_state()
    probes.permutation_test(cfg, IDS, perm, seed=5)
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's random state is left alone
    assert probes.rounding_tolerance(torch.float64) < 1e-12 < probes.rounding_tolerance(torch.float32) < 1e-3


# --- figures --------------------------------------------------------------------------------


def test_scaling_figures_draw_the_numbers():
    curves = probes.random_score_statistics([4, 16, 64], n_keys=8, seed=0)
    live = dict(d_head=16, var_unscaled=[10.0, 20.0], var_scaled=[0.625, 1.25])
    fig = pf.score_variance(curves.d_heads, curves.var_unscaled, curves.var_scaled, live)
    drawn = {t.name: t for t in fig.data}
    assert list(drawn["q · k (unscaled)"].y) == pytest.approx(curves.var_unscaled)
    assert list(drawn["theory: d_head"].y) == [4, 16, 64]
    assert list(drawn["live model, scaled (what it computes)"].x) == [16, 16]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    fig = pf.score_entropy(curves.d_heads, curves.entropy_unscaled, curves.entropy_scaled, curves.max_entropy)
    assert [t.name for t in fig.data][1:] == ["softmax(q · k)", "softmax(q · k / √d_head)"]
    assert list(fig.data[0].y) == pytest.approx([math.log(8)] * 3)
    unscaled, scaled = probes.softmax_row(64, 8, seed=0)
    fig = pf.softmax_rows(unscaled.numpy(), scaled.numpy(), 64)
    assert len(fig.data) == 2 and list(fig.data[1].y) == pytest.approx(scaled.tolist())
    fig = pf.live_entropy([0.1, 0.2], [1.0, 1.5], n_keys=5, d_head=16)
    assert [list(t.y) for t in fig.data] == [[0.1, 0.2], [1.0, 1.5]]
    for fig in (pf.score_variance([4], [4.0], [1.0]), fig):
        assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text


def test_permutation_figures_draw_the_numbers():
    fig = pf.equivariance_bars(["none", "rope"], [0.0, 1.5], [2e-7, 0.4], tolerance=1e-4)
    outputs, patterns, rounding = fig.data
    assert list(rounding.y) == [1e-4, 1e-4] and rounding.name == "float rounding (1e-04)"
    assert list(outputs.customdata) == [0.0, 1.5] and list(outputs.text) == ["0", "1.5e+00"]
    assert outputs.y[0] == pf.LOG_FLOOR  # an exact 0 stands on the floor of the log axis
    assert list(patterns.y) == pytest.approx([2e-7, 0.4]) and fig.layout.yaxis.type == "log"
    weights = np.full((3, 3), 1 / 3)
    back = weights.copy()
    back[0] += [1e-7, -1e-7, 0]
    fig = pf.unshuffled_patterns(weights, back, list("abc"), "t")
    assert len(fig.data) == 3 and fig.data[2].coloraxis == "coloraxis2"
    assert np.asarray(fig.data[2].z)[0, 0] == pytest.approx(1e-7)
    assert fig.layout.coloraxis2.cmax == pytest.approx(1e-7)
    assert pf.unshuffled_patterns(weights, weights, list("abc")).layout.coloraxis2.cmax > 0  # all zero: still a scale
    fig = pf.position_differences(np.array([[0.0, 1.0], [1e-3, 10.0]]), ["a", "b"])
    assert np.allclose(np.asarray(fig.data[0].z), [[-18, 0], [-3, 1]])
    assert list(fig.data[0].y) == ["after block 0", "after block 1"]


# --- the pages -------------------------------------------------------------------------------


def test_both_pages_are_in_the_navigation():
    assert {"pages/scaling.py", "pages/permutation.py"} <= {page.script for page in PAGES}


def test_scaling_page():
    at = open_page("pages/scaling.py", text="abcabca")
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert 0.8 <= float(metrics["unscaled variance ÷ d_head, at d_head = 512"]) <= 1.25
    assert len(at.get("plotly_chart")) == 4
    table = at.dataframe[0].value
    gpt2 = PRESETS["gpt2"]
    assert len(table) == gpt2.n_heads  # the default model's heads
    assert list(table["var(q·k)"]) == pytest.approx(list(gpt2.d_head * table["var(q·k/√d)"]))
    at.slider(key="scale_keys").set_value(64).run()
    at.selectbox(key="scale_d").set_value(8).run()
    at.selectbox(key="scale_layer").set_value(2).run()
    assert_clean(at)
    assert at.query_params["scale_keys"] in ("64", ["64"])  # the view is in the link
    assert "max log 64" in " ".join(m.label for m in at.metric)
    at.sidebar.text_area(key="text").set_value("a").run()
    assert_clean(at)
    assert any("two tokens" in i.value for i in at.info)


def open_permutation_tab(at, label: str):
    """One of the permutation page's tabs: only the open one is computed and drawn."""
    at.session_state["perm_tab"] = label
    return at.run()


def test_permutation_page():
    at = open_page("pages/permutation.py", text="the cat sat", perm_seed=5)
    assert_clean(at)
    assert at.number_input(key="perm_seed").value == 5
    assert {m.label: m.value for m in at.metric}["verdict"] == "zero up to float rounding"
    table = open_permutation_tab(at, "Every position scheme").dataframe[0].value
    verdicts = dict(zip(zip(table["mask"], table["position"]), table["verdict"]))
    assert verdicts.pop(("no mask (encoder)", "none")).startswith("equivariant")
    assert set(verdicts.values()) == {"not equivariant"}  # every position scheme, and the causal mask alone
    at.button[0].click().run()
    assert at.number_input(key="perm_seed").value == 6
    open_permutation_tab(at, "No positions, no mask")
    at.selectbox(key="perm_dtype").set_value("float64").run()
    outputs = {m.label: m.value for m in at.metric}["max |logits − un-shuffled logits|"]
    assert float(outputs) <= 1e-12
    open_permutation_tab(at, "Weights put back in order")
    for key, value in (("perm_mask", "causal"), ("perm_pos", "rope"), ("perm_layer", 2), ("perm_head", 3)):
        at.selectbox(key=key).set_value(value).run()
        assert_clean(at)
    (chart,) = at.get("plotly_chart")
    spec = json.loads(chart.proto.spec)
    assert len(spec["data"]) == 3  # the weights, the weights put back, their difference
    at.sidebar.text_area(key="text").set_value("x").run()
    assert_clean(at, errors_allowed=True)
    assert any("at least two tokens" in e.value for e in at.error)


def test_both_pages_show_an_error_for_an_impossible_model():
    for page in ("pages/scaling.py", "pages/permutation.py"):
        at = open_page(page)
        at.sidebar.number_input(key="n_heads").set_value(6).run()
        assert_clean(at, errors_allowed=True)
        assert any("n_heads=6" in e.value for e in at.error)
