"""transformer.analysis: output distributions, position geometry, norms with depth, cached generation
and attention under a chosen mask; transformer.costs: cost per token --
each checked against numbers worked out by hand."""
import math

import pytest
import torch

from transformer import TransformerConfig, kv_cache_bytes_per_token
from transformer.analysis import (
    allowed_matrix, attention_under_mask, cached_generation, cross_attention, depth_profile, diagonal_spread,
    kl_divergence, next_token_entropy, normalize, rope_inv_freq, rope_pairs, rope_scores,
    sinusoidal_similarity,
)
from transformer.costs import forward_flops_per_token


def test_flops_per_token_by_hand(tiny_config):
    cfg = tiny_config(ffn="gelu", position="rope", norm="rmsnorm")  # vocab 32, d 16, 4 heads, 2 layers, d_ff 64
    per_block = 4 * 16 * 16 + 2 * 16 * 64 + 2 * 16  # q, k, v, o + up, down + two RMSNorm weights
    multiplied = 2 * per_block + 16 + 32 * 16  # + final norm + the tied head's matmul
    assert forward_flops_per_token(cfg, context=10) == 2 * multiplied + 2 * (2 * 2 * 10 * 16)
    # a window of 3 caps the keys each token reads
    windowed = cfg.replace(sliding_window=3)
    assert forward_flops_per_token(windowed, 10) == 2 * multiplied + 2 * (2 * 2 * 3 * 16)
    with pytest.raises(ValueError, match="context=0"):
        forward_flops_per_token(cfg, 0)


def test_flops_count_only_the_active_experts(tiny_config):
    moe = tiny_config(ffn="moe", n_experts=4, top_k=1)
    dense = tiny_config(ffn="swiglu", d_ff=moe.d_ff)
    router = 16 * 4
    # one active SwiGLU expert + a router per layer, against one dense SwiGLU per layer
    assert forward_flops_per_token(moe, 5) - forward_flops_per_token(dense, 5) == 2 * 2 * router


def test_flops_of_llama2_7b_is_about_two_per_parameter():
    from transformer import MODEL_CARDS
    cfg = MODEL_CARDS["llama2"].real["7B"]
    flops = forward_flops_per_token(cfg, context=1)
    non_embedding = 6.74e9 - 32000 * 4096  # the published total minus the input embedding table
    assert flops == pytest.approx(2 * non_embedding, rel=0.01)


def test_entropy_and_kl_against_hand_values():
    uniform = torch.zeros(3, 8)
    assert torch.allclose(next_token_entropy(uniform), torch.full((3,), math.log(8)))
    p, q = torch.tensor([0.5, 0.5]).log(), torch.tensor([0.9, 0.1]).log()
    expected = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    assert kl_divergence(p, q).item() == pytest.approx(expected, rel=1e-5)
    assert kl_divergence(p, p).item() == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ValueError, match="same vocab_size"):
        kl_divergence(torch.zeros(4, 8), torch.zeros(4, 9))


def test_rope_scores_depend_only_on_distance():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=g), torch.randn(16, generator=g)
    scores = rope_scores(q, k, 24)  # (24, 24)
    offsets, spread = diagonal_spread(scores)
    assert len(offsets) == 2 * 24 - 1
    assert spread.max() < 1e-4 * scores.abs().max()
    # but distance matters: the values differ from one diagonal to the next
    assert scores[:, 0].max() - scores[:, 0].min() > 0.1 * scores.abs().max()


def test_sinusoidal_similarity_is_symmetric_and_relative():
    sim = sinusoidal_similarity(20, 16)
    assert torch.allclose(sim, sim.T)
    assert torch.allclose(sim.diagonal(), torch.full((20,), 8.0))  # sin^2 + cos^2 = 1 for each of the 8 pairs
    _, spread = diagonal_spread(sim)
    assert spread.max() < 1e-4


def test_rope_pairs_rotate_by_position_times_frequency():
    x = torch.arange(1.0, 9.0)  # d_head 8: pairs (1, 5), (2, 6), (3, 7), (4, 8)
    positions = torch.arange(6)
    pairs = rope_pairs(x, positions)  # (6, 4, 2)
    assert pairs.shape == (6, 4, 2)
    assert torch.allclose(pairs.norm(dim=-1), pairs[0].norm(dim=-1).expand(6, 4), atol=1e-5)  # lengths kept
    start = torch.atan2(pairs[0, :, 1], pairs[0, :, 0])
    turned = torch.atan2(pairs[:, :, 1], pairs[:, :, 0]) - start  # (6, 4)
    expected = positions[:, None] * rope_inv_freq(8)[None]
    assert torch.allclose(torch.remainder(turned - expected + math.pi, 2 * math.pi) - math.pi, torch.zeros(6, 4), atol=1e-5)


def test_layernorm_centres_rmsnorm_only_scales():
    x = torch.tensor([1.0, 2.0, 3.0, 10.0])
    ln, rms = normalize(x, "layernorm"), normalize(x, "rmsnorm")
    assert ln.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert ln.pow(2).mean().item() == pytest.approx(1.0, abs=1e-4)
    assert rms.pow(2).mean().sqrt().item() == pytest.approx(1.0, abs=1e-4)
    assert rms.mean().item() == pytest.approx(x.mean().item() / x.pow(2).mean().sqrt().item(), rel=1e-4)  # not centred
    with pytest.raises(ValueError, match="batchnorm"):
        normalize(x, "batchnorm")


def test_pre_norm_residual_grows_post_norm_stays_bounded():
    ids = torch.randint(0, 32, (1, 12), generator=torch.Generator().manual_seed(0))
    base = dict(vocab_size=32, d_model=16, n_heads=2, n_layers=8, max_len=16, ffn="gelu")
    pre = depth_profile(TransformerConfig(**base, norm_position="pre"), ids, init="variance-preserving")
    post = depth_profile(TransformerConfig(**base, norm_position="post"), ids, init="variance-preserving")
    assert len(pre.resid_norms) == 9 and len(pre.grad_norms) == 8
    assert all(b > a for a, b in zip(pre.resid_norms[1:], pre.resid_norms[2:]))  # every block adds to it
    assert pre.resid_norms[-1] > 2 * pre.resid_norms[1]
    # post-norm ends every block on a norm with weight 1: each token's vector has norm sqrt(d_model)
    assert post.resid_norms[1:] == pytest.approx([4.0] * 8, rel=1e-3)
    assert all(g > 0 and math.isfinite(g) for g in pre.grad_norms + post.grad_norms)
    with pytest.raises(ValueError, match="init='xavier'"):
        depth_profile(TransformerConfig(**base), ids, init="xavier")


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_cached_generation_matches_recomputation(tiny_model, arch):
    model = tiny_model(arch=arch, n_kv_heads=2)
    steps = cached_generation(model, torch.tensor([[3, 1, 4, 1, 5]]), n_steps=4)
    assert len(steps) == 4
    assert max(s.max_abs_diff for s in steps) < 1e-4
    self_layers = [n for n in steps[0].cache_shapes if n.endswith(".attn")]
    assert len(self_layers) == 2
    first = 5 if arch == "decoder" else 1  # the prompt, or the decoder's start token
    for i, step in enumerate(steps):
        for name in self_layers:
            assert step.cache_shapes[name] == (1, 2, first + i, 4)  # (B, G, T, d_head): G = 2 kv heads kept
    if arch == "decoder":  # float32 here: 4 bytes a value
        assert steps[-1].cache_nbytes == kv_cache_bytes_per_token(model.cfg, 4) * (5 + 3)


def test_cached_generation_refuses_an_encoder(tiny_model):
    with pytest.raises(ValueError, match="encoder-only"):
        cached_generation(tiny_model(arch="encoder"), torch.tensor([[1, 2]]), 2)


@pytest.mark.parametrize("kind", ["none", "causal", "sliding window"])
def test_masked_cells_get_exactly_zero_weight(tiny_model, kind):
    model = tiny_model()
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])
    allowed = allowed_matrix(kind, 7, window=3)
    mask, weights = attention_under_mask(model, ids, layer=1, allowed=allowed)
    assert weights.shape == (1, 4, 7, 7)
    assert torch.equal(mask[0, 0] == 0, allowed)
    assert torch.all(weights[0][:, ~allowed] == 0.0)
    assert torch.all(weights[0][:, allowed] > 0.0)
    assert torch.allclose(weights.sum(-1), torch.ones(1, 4, 7))
    assert int((~allowed).sum()) == {"none": 0, "causal": 21, "sliding window": 21 + 10}[kind]


def test_padding_columns_get_zero_weight(tiny_model):
    model = tiny_model(arch="encoder")
    ids = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 0, 0]])
    pad = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    _, weights = attention_under_mask(model, ids, layer=0, attention_mask=pad)
    assert torch.all(weights[1, :, :, 3:] == 0.0) and torch.all(weights[0] > 0)


def test_cross_attention_is_rectangular(tiny_model):
    model = tiny_model(arch="encoder-decoder")
    src, tgt = torch.tensor([[1, 2, 3, 4, 5, 6]]), torch.tensor([[0, 9, 8]])
    src_mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    mask, weights = cross_attention(model, src, tgt, layer=0, src_attention_mask=src_mask)
    assert weights.shape == (1, 4, 3, 6)
    assert torch.all(weights[..., 4:] == 0.0) and torch.all(weights[..., :4] > 0)
    with pytest.raises(ValueError, match="encoder-decoder"):
        cross_attention(tiny_model(), src, tgt, 0)
