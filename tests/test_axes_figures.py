"""The axis pages' figure builders draw the right numbers: each test reads the values back out of the figure."""
import math

import numpy as np
import pytest
import torch

from transformer import MODEL_CARDS, Transformer, TransformerConfig, analysis, kv_cache_bytes_per_token
from transformer.positions import alibi_bias, alibi_slopes, rope_angles, rope_inv_freq, sinusoidal_table
from ui.figures import axes as af
from ui.figures import block as bf
from ui.compute.measure import normalized

GIB = 2 ** 30


def test_kv_sharing_links_each_query_head_to_its_group():
    fig = af.kv_sharing(n_heads=8, n_kv_heads=2)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == 8
    kv_x = [t for t in fig.data if t.name == "kv heads (G)"][0].x
    for h, line in enumerate(lines):
        assert line.x[0] == h and line.y == (1, 0)
        assert line.x[1] == kv_x[h // 4]  # heads 0-3 read kv head 0, heads 4-7 kv head 1


def test_kv_cache_of_llama2_70b_by_hand():
    real = MODEL_CARDS["llama2"].real["70B"]
    per_token = kv_cache_bytes_per_token(real)
    assert per_token == 2 * 80 * 8 * 128 * 2 == 327_680  # K and V x layers x kv heads x d_head x fp16 bytes
    variants = {"MHA": kv_cache_bytes_per_token(real.replace(n_kv_heads=64)), "GQA": per_token,
                "MQA": kv_cache_bytes_per_token(real.replace(n_kv_heads=1))}
    contexts = np.array([0, 4096, 32_768])
    fig = af.kv_cache_growth(contexts, variants)
    drawn = {t.name: np.asarray(t.y) for t in fig.data}
    assert drawn["GQA"][1] == pytest.approx(4096 * 327_680 / GIB) == pytest.approx(1.25)
    assert drawn["MHA"][2] == pytest.approx(8 * drawn["GQA"][2])  # 64 kv heads instead of 8
    assert drawn["MQA"][2] == pytest.approx(drawn["GQA"][2] / 8)
    assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text


@pytest.mark.parametrize("kind", ["causal", "sliding window"])
def test_masked_cells_are_drawn_as_exactly_zero(kind):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=32, d_model=16, n_heads=2, n_layers=1, max_len=16), device="cpu")
    allowed = analysis.allowed_matrix(kind, 6, window=2)
    mask, weights = analysis.attention_under_mask(model.eval(), torch.arange(1, 7)[None], 0, allowed)
    labels = list("abcdef")
    fig = af.mask_and_weights(mask[0, 0].numpy(), weights[0, 0].numpy(), labels, labels)
    drawn_allowed, drawn_weights = np.asarray(fig.data[0].z), np.asarray(fig.data[1].z)
    assert np.array_equal(drawn_allowed == 1, allowed.numpy())
    assert np.all(drawn_weights[~allowed.numpy()] == 0.0)  # exactly, not approximately
    assert np.allclose(drawn_weights.sum(-1), 1.0)
    assert float(np.asarray(fig.data[0].customdata).min()) == np.finfo(np.float32).min  # the additive mask value


def test_rope_score_figure_is_constant_along_diagonals():
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(16, generator=g), torch.randn(16, generator=g)
    scores = analysis.rope_scores(q, k, 32).numpy()
    fig = af.rope_scores(scores, "scores")
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (32, 32)
    scale = np.abs(z).max()
    for offset in range(-31, 32):
        assert np.ptp(np.diagonal(z, offset)) < 1e-5 * scale
    assert np.ptp(z[:, 0]) > 0.1 * scale  # but different distances score differently
    offsets, spread = analysis.diagonal_spread(torch.from_numpy(scores))
    bars = af.diagonal_spread(offsets.numpy(), spread.numpy(), scale)
    assert len(bars.data[0].x) == 63 and max(bars.data[0].y) < 1e-5 * scale


def test_rope_vectors_keep_their_length_and_turn_by_the_angle():
    x = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0])  # pair 0 = (1, 0), pair 1 = (0, 1)
    pairs = analysis.rope_pairs(x, torch.arange(10)).numpy()
    fig = af.rope_vectors(pairs, position=3)
    arrows = [t for t in fig.data if t.mode == "lines+markers" and t.hovertemplate]
    tip0 = np.array([arrows[0].x[1], arrows[0].y[1]])
    assert tip0 == pytest.approx([math.cos(3.0), math.sin(3.0)], abs=1e-6)  # pair 0 turns by 1 rad per position
    assert np.hypot(arrows[1].x[1], arrows[1].y[1]) == pytest.approx(1.0, abs=1e-6)  # length kept


def test_rope_angle_lines_are_position_times_frequency():
    inv_freq = rope_inv_freq(8)  # (4,)
    angles = rope_angles(torch.arange(10)[None], inv_freq)[0].numpy()  # (10, 4)
    fig = af.rope_angles(angles, inv_freq.numpy())
    lines = [t for t in fig.data if t.name and t.name.startswith("pair")]
    assert len(lines) == 4
    for i, line in enumerate(lines):
        assert np.allclose(np.asarray(line.y), np.arange(1, 10) * inv_freq[i].item())


def test_sinusoidal_and_alibi_figures_hold_the_library_values():
    table = sinusoidal_table(20, 8).numpy()
    fig = af.position_table(table, "pe")
    z = np.asarray(fig.data[0].z, dtype=float)
    assert np.allclose(z[0], [0, 1] * 4)  # position 0: sin 0 = 0, cos 0 = 1
    assert np.allclose(z, table)
    slopes = alibi_slopes(4)
    assert np.allclose(slopes.numpy(), [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8])
    bias = alibi_bias(slopes, torch.arange(5)[None], torch.arange(5)[None])[0].numpy()
    fig = af.alibi_biases(bias)
    for h in range(4):
        distance = np.abs(np.arange(5)[:, None] - np.arange(5)[None, :])
        assert np.allclose(np.asarray(fig.data[h].z), -slopes[h].item() * distance)


def test_norm_bars_layernorm_mean_zero_rmsnorm_rms_one():
    values = (1.0, 2.0, 3.0, 10.0)
    out = normalized(values)
    fig = bf.norm_bars(np.array(values), out["layernorm"], out["rmsnorm"])
    drawn = {t.name: np.asarray(t.y, dtype=float) for t in fig.data}
    assert np.allclose(drawn["input x"], values)
    assert drawn["LayerNorm(x)"].mean() == pytest.approx(0.0, abs=1e-6)
    assert np.sqrt((drawn["LayerNorm(x)"] ** 2).mean()) == pytest.approx(1.0, abs=1e-4)
    assert np.sqrt((drawn["RMSNorm(x)"] ** 2).mean()) == pytest.approx(1.0, abs=1e-4)
    assert drawn["RMSNorm(x)"].mean() > 0.5  # not centred: the offset survives


def test_depth_lines_show_pre_norm_growth_and_post_norm_bound():
    ids = torch.randint(0, 32, (1, 10), generator=torch.Generator().manual_seed(2))
    base = dict(vocab_size=32, d_model=16, n_heads=2, n_layers=6, max_len=16, ffn="gelu", norm="rmsnorm")
    series = {f"{p}-RMSNorm": analysis.depth_profile(TransformerConfig(**base, norm_position=p), ids,
                                                     init="variance-preserving").resid_norms for p in ("pre", "post")}
    fig = bf.depth_lines(series, "resid", "norm", "layer")
    drawn = {t.name: np.asarray(t.y, dtype=float) for t in fig.data}
    pre, post = drawn["pre-RMSNorm"], drawn["post-RMSNorm"]
    assert np.all(np.diff(pre[1:]) > 0) and pre[-1] > 2 * pre[1]
    assert np.allclose(post[1:], 4.0, rtol=1e-3)  # sqrt(d_model = 16)
    assert list(fig.data[0].x) == list(range(7))


def test_activation_curves_and_router_figures():
    x = torch.linspace(-3, 3, 61)
    curves = {k: v.numpy() for k, v in analysis.activation_curves(x).items()}
    fig = bf.activation_curves(x.numpy(), curves)
    drawn = {t.name: np.asarray(t.y, dtype=float) for t in fig.data}
    assert np.allclose(drawn["ReLU"], np.maximum(x.numpy(), 0))
    assert drawn["GELU"][40] == pytest.approx(0.8413, abs=1e-3)  # x = 1: 1 * Phi(1)
    assert drawn["SiLU"][30] == pytest.approx(0.0, abs=1e-6) and drawn["SiLU"].min() < 0  # SiLU(0) = 0, dips below 0

    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    chosen = np.array([[0, 1], [2, 1]])
    fig = bf.router(probs, chosen, ["a", "b"])
    marks = fig.data[1]
    assert list(marks.x) == [0, 1, 2, 1] and list(marks.y) == ["0:a", "0:a", "1:b", "1:b"]
    load = bf.expert_load(np.array([0.25, 0.5, 0.25]))
    assert np.allclose(load.data[0].y, [0.25, 0.5, 0.25])


def test_norm_placement_diagrams():
    pre, post = bf.norm_placement_dot("pre", "rmsnorm"), bf.norm_placement_dot("post", "layernorm")
    assert "x -> norm;" in pre and "norm -> sublayer;" in pre and "add -> out;" in pre
    assert "x -> sublayer;" in post and "add -> norm;" in post and "LayerNorm" in post
    sandwich, after = bf.norm_placement_dot("sandwich", "rmsnorm"), bf.norm_placement_dot("after", "rmsnorm")
    assert "x -> norm;" in sandwich and "sublayer -> norm_out;" in sandwich and "norm_out -> add;" in sandwich
    assert "x -> sublayer;" in after and "sublayer -> norm_out;" in after and "x -> norm;" not in after
    assert [bf.placement_formula(p) for p in ("pre", "post", "sandwich", "after")] == [
        "x + sublayer(norm(x))", "norm(x + sublayer(x))", "x + norm(sublayer(norm(x)))", "x + norm(sublayer(x))"]
