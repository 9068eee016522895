"""The attention of 2024-2026: each variant mixes with every other axis, its fused path equals the explicit five
lines, KV-cache generation equals recomputation, and each does what it says (sinks take a share, MLA's absorbed
form gives the same weights, local layers see only their window, QK-norm and soft-capping bound what they bound)."""
import math

import pytest
import torch
import torch.nn.functional as F

from transformer import Transformer, TransformerConfig, choices, param_counts
from transformer.attention import LatentAttention
from transformer.model import KVCache
from transformer.positions import ROPE_SCALES, rope_inv_freq, scaled_inv_freq

TINY = dict(vocab_size=32, d_model=16, n_heads=4, n_layers=2, max_len=32)

# each variant at test size; "needs" lists what it cannot do without
VARIANTS = {
    "alternate local/global": dict(layer_pattern="alternate", sliding_window=3),
    "1:1 with a local RoPE base": dict(layer_pattern="1:1", sliding_window=3, rope_local_theta=100.0),
    "per-layer list": dict(layer_pattern="2,global"),
    "QK-norm per head": dict(qk_norm="head"),
    "QK-norm over the projection": dict(qk_norm="full"),
    "soft-capping": dict(attn_softcap=1.5, logit_softcap=2.0),
    "sinks": dict(sinks=True),
    "MLA": dict(kv_rank=8, rope_dim=2, head_dim=6, v_head_dim=4),
    "MLA with a q latent": dict(kv_rank=8, q_rank=12, rope_dim=2, head_dim=6),
    "MLA with values wider than keys": dict(kv_rank=8, rope_dim=2, head_dim=6, v_head_dim=10),
    "partial rotary": dict(rope_dim=2),
    "linear RoPE scaling": dict(rope_scaling="linear", rope_factor=2.0),
    "dynamic NTK": dict(rope_scaling="dynamic", rope_factor=2.0),
    "YaRN": dict(rope_scaling="yarn", rope_factor=4.0, rope_original_max_len=8),
    "LLaMA 3 scaling": dict(rope_scaling="llama3", rope_factor=8.0, rope_original_max_len=16),
    "sandwich norms": dict(norm_position="sandwich"),
    "norm after the sublayer": dict(norm_position="after"),
    "Gemma norm and embedding scale": dict(norm_plus_one=True, scale_embeddings=True),
    "GeGLU": dict(ffn="geglu"),
    "DeepSeek MoE": dict(ffn="moe", n_experts=4, top_k=2, router="sigmoid", n_shared_experts=1, n_expert_groups=2,
                         top_groups=1, first_dense_layers=1, d_expert=8, routed_scale=2.5),
    "gpt-oss experts": dict(ffn="moe", expert_activation="clamped-swiglu", bias=True),
    "q, k, v biases": dict(qkv_bias=True),
    "head_dim of its own": dict(head_dim=6),
    "gated attention": dict(attn_gate=True),
    "parallel block, two norms": dict(parallel_block=True, parallel_norms=2),
}

# every other axis, one at a time, over all its choices
OTHER_AXES = {"arch": choices("arch"), "position": choices("position"), "norm": choices("norm"),
              "norm_position": choices("norm_position"), "ffn": choices("ffn"), "n_kv_heads": (4, 2, 1)}
CASES = [(variant, axis, value) for variant in VARIANTS for axis, values in OTHER_AXES.items() for value in values]


def build(changes: dict, seed: int = 0) -> Transformer:
    """A tiny model with every parameter and buffer moved off its initial value, so a dropped term shows."""
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(**{**TINY, **changes}), device="cpu").eval()
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.is_floating_point() and tensor.dim() <= 1:  # norms, biases, sinks, choice biases
                tensor.add_(0.3 * torch.randn_like(tensor))
    return model


def padded(T: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 32, (3, T), generator=g)
    mask = torch.ones(3, T, dtype=torch.long)
    mask[1, T - 2:] = 0
    mask[2, :2] = 0
    return ids, mask


def logits(model, ids, mask):
    if model.cfg.arch == "encoder-decoder":
        return model(ids, ids[:, :5], attention_mask=mask)
    return model(ids, attention_mask=mask)


@pytest.mark.parametrize("variant,axis,value", CASES, ids=[f"{v}-{a}={x}" for v, a, x in CASES])
def test_each_variant_mixes_with_every_axis_and_fused_equals_explicit(variant, axis, value):
    changes = {**VARIANTS[variant], axis: value}
    try:
        model = build(changes)
    except ValueError as error:  # a combination that makes no sense says which field and what to do
        message = str(error)
        assert "=" in message and any(w in message for w in ("set ", "use ", "choose", "needs", "must")), message
        return
    assert param_counts(model.cfg)["total"] == sum(p.numel() for p in model.parameters())
    ids, mask = padded(9, seed=1)
    model.train()
    fused = logits(model, ids, mask)
    loss = F.cross_entropy(fused.flatten(0, 1), ids[:, :fused.shape[1]].flatten()) + model.aux_loss
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    with torch.no_grad():
        fused = logits(model, ids, mask)
        explicit = logits(model.set_fused(False), ids, mask)
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=0)


def cached_logits(model, ids, start: int) -> torch.Tensor:
    """The last-position logits of ids[:, :t] for t = start .. T, fed to the model one token at a time."""
    cache = KVCache()
    out = [model(ids[:, :start], cache=cache)[:, -1]]
    for t in range(start, ids.shape[1]):
        out.append(model(ids[:, t:t + 1], position_ids=torch.tensor([[t]]), cache=cache)[:, -1])
    return torch.stack(out, dim=1)  # (B, T - start + 1, vocab)


@pytest.mark.parametrize("variant", [v for v in VARIANTS])
@pytest.mark.parametrize("fused", [True, False])
def test_cached_generation_equals_recomputation(variant, fused):
    model = build(VARIANTS[variant]).set_fused(fused)
    ids = torch.randint(1, 32, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = model(ids)  # (B, T, vocab)
        step_by_step = cached_logits(model, ids, start=4)
    torch.testing.assert_close(step_by_step, full[:, 3:], atol=1e-5, rtol=0)
    with torch.no_grad():
        assert torch.equal(model.generate(ids[:, :4], 8, use_cache=True), model.generate(ids[:, :4], 8, use_cache=False))


def test_sink_takes_a_share_of_every_row_and_the_pattern_keeps_its_layout():
    model = build(VARIANTS["sinks"])
    ids = torch.randint(1, 32, (2, 7), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids)
    pattern, share = trace["blocks.1.attn.hook_pattern"], trace["blocks.1.attn.hook_sink_share"]
    assert pattern.shape == (2, 4, 7, 7) and share.shape == (2, 4, 7)
    torch.testing.assert_close(pattern.sum(-1) + share, torch.ones(2, 4, 7))
    assert (share > 0).all() and (share < 1).all()
    # a huge sink logit takes (almost) everything: that head's output vanishes
    with torch.no_grad():
        model.blocks[1].attn.sinks.fill_(50.0)
    _, trace = model.run_with_trace(ids, names="blocks.1.attn.hook_z")
    assert trace["blocks.1.attn.hook_z"].abs().max() < 1e-6


@pytest.mark.parametrize("changes", [dict(sinks=True), dict(sinks=True, layer_pattern="alternate", sliding_window=3),
                                     dict(sinks=True, **VARIANTS["MLA"])], ids=["sinks", "sinks+windows", "sinks+MLA"])
def test_training_gradients_through_the_fused_sink_equal_the_explicit_ones(changes):
    """The fused path feeds SDPA the sink as a constant bias (a bias with a gradient takes a slow kernel) and gives
    the sink its gradient from the share channel: every parameter's gradient must still be the explicit path's."""
    model = build(changes).train()
    ids, mask = padded(9, seed=2)
    grads = {}
    for fused in (True, False):
        model.zero_grad()
        model.set_fused(fused)
        out = logits(model, ids, mask)
        F.cross_entropy(out.flatten(0, 1), ids.flatten()).backward()
        grads[fused] = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    assert grads[True].keys() == grads[False].keys()
    assert any(name.endswith("sinks") and grads[False][name].abs().min() > 0 for name in grads[False])
    for name, explicit in grads[False].items():
        torch.testing.assert_close(grads[True][name], explicit, atol=1e-5, rtol=1e-4, msg=name)


def test_mla_caches_only_the_latent_and_the_rope_key_and_its_absorbed_form_gives_the_same_weights():
    model = build(VARIANTS["MLA with a q latent"])
    cfg = model.cfg
    ids = torch.randint(1, 32, (2, 9), generator=torch.Generator().manual_seed(0))
    cache = KVCache()
    with torch.no_grad():
        model(ids, cache=cache)
    attn = model.blocks[0].attn
    assert isinstance(attn, LatentAttention)
    latent, k_rope = cache[attn]
    assert latent.shape == (2, 9, cfg.kv_rank) and k_rope.shape == (2, 1, 9, cfg.d_rope)
    assert cache.nbytes == cfg.n_layers * 2 * 9 * (cfg.kv_rank + cfg.d_rope) * 4
    _, trace = model.run_with_trace(ids)
    inputs_cache = {}
    from transformer.model import self_attention_inputs
    positions = torch.arange(9)
    inputs = self_attention_inputs(cfg, model.blocks[0].spec, True, positions, positions, positions[None],
                                   positions[None], None, torch.float32, 0)
    absorbed = attn.absorbed_weights(trace["blocks.0.attn.hook_rot_q"], trace["blocks.0.attn.hook_latent"],
                                     trace["blocks.0.attn.hook_k_rope"], inputs)
    torch.testing.assert_close(absorbed, trace["blocks.0.attn.hook_pattern"], atol=1e-5, rtol=0)
    assert not inputs_cache


def test_local_layers_see_only_their_window_and_global_layers_see_everything():
    model = build(dict(layer_pattern="alternate", sliding_window=3, n_layers=4))
    assert model.cfg.layer_windows() == (3, None, 3, None)
    ids = torch.randint(1, 32, (1, 8), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids, names="*hook_pattern")
    distance = torch.arange(8)[:, None] - torch.arange(8)[None]
    for layer, window in enumerate(model.cfg.layer_windows()):
        pattern = trace[f"blocks.{layer}.attn.hook_pattern"][0]  # (H, T, T)
        visible = (distance >= 0) & (distance < (window or 99))
        assert (pattern[:, ~visible] == 0).all() and (pattern[:, visible] > 0).all()


def test_gemma3_local_layers_turn_at_their_own_base():
    model = build(VARIANTS["1:1 with a local RoPE base"])
    _, trace = model.run_with_trace(torch.arange(1, 6)[None], names="*hook_rope_angles")
    local, global_ = trace["blocks.0.attn.hook_rope_angles"], trace["blocks.1.attn.hook_rope_angles"]
    torch.testing.assert_close(local[0, 1], rope_inv_freq(4, 100.0))
    torch.testing.assert_close(global_[0, 1], rope_inv_freq(4, 10000.0))


def test_qk_norm_gives_unit_rms_times_the_weight():
    model = build(VARIANTS["QK-norm per head"])
    _, trace = model.run_with_trace(torch.arange(1, 6)[None], names=["blocks.0.attn.hook_q", "blocks.0.attn.hook_q_norm"])
    raw, normed = trace["blocks.0.attn.hook_q"], trace["blocks.0.attn.hook_q_norm"]  # (B, H, T, d_head)
    w = model.blocks[0].attn.q_norm.weight  # (d_head,): one norm shared by every head
    torch.testing.assert_close(normed, raw * torch.rsqrt(raw.pow(2).mean(-1, keepdim=True) + 1e-5) * w)
    assert ((normed / w).pow(2).mean(-1) > 0.9).all()  # about unit RMS: the norm, not the projection, sets the scale


def test_soft_capping_bounds_scores_and_logits():
    model = build(VARIANTS["soft-capping"])
    with torch.no_grad():
        model.unembed.weight.mul_(100)  # logits far beyond the cap
    ids = torch.randint(1, 32, (2, 7), generator=torch.Generator().manual_seed(0))
    logits_, trace = model.run_with_trace(ids)
    assert logits_.abs().max() <= 2.0 and logits_.abs().max() > 1.9  # tanh reaches the cap in float32
    capped = trace["blocks.0.attn.hook_capped_scores"]
    torch.testing.assert_close(capped, 1.5 * torch.tanh(trace["blocks.0.attn.hook_raw_scores"] / 1.5))


def test_rope_scalings_match_their_published_formulas():
    cfg = TransformerConfig(**TINY, head_dim=64, rope_scaling="linear", rope_factor=4.0)
    plain = rope_inv_freq(64)
    torch.testing.assert_close(scaled_inv_freq(cfg, 10)[0], plain / 4)
    # LLaMA 3.1: wavelengths shorter than 8192/4 kept, longer than 8192/1 divided by 8, a blend between
    cfg = TransformerConfig(**{**TINY, "max_len": 1024}, head_dim=64, rope_scaling="llama3", rope_factor=8.0,
                            rope_original_max_len=8192, rope_theta=500000.0)
    base = rope_inv_freq(64, 500000.0)
    scaled = scaled_inv_freq(cfg, 10)[0]
    wavelength = 2 * math.pi / base
    assert torch.equal(scaled[wavelength < 2048], base[wavelength < 2048])
    torch.testing.assert_close(scaled[wavelength > 8192], base[wavelength > 8192] / 8)
    middle = (wavelength >= 2048) & (wavelength <= 8192)
    assert middle.any() and ((scaled[middle] < base[middle]) & (scaled[middle] > base[middle] / 8)).all()
    # YaRN: the fastest dimensions kept, the slowest divided by the factor, cos and sin scaled by 0.1 ln s + 1
    cfg = TransformerConfig(**TINY, head_dim=64, rope_scaling="yarn", rope_factor=4.0, rope_original_max_len=4096)
    scaled, attention = scaled_inv_freq(cfg, 10)
    assert scaled[0] == plain[0] and torch.isclose(scaled[-1], plain[-1] / 4)
    assert attention == pytest.approx(0.1 * math.log(4) + 1)
    # dynamic NTK: nothing changes inside the trained context; beyond it, the slowest frequencies slow most
    cfg = TransformerConfig(**TINY, head_dim=64, rope_scaling="dynamic", rope_factor=2.0, rope_original_max_len=16)
    assert torch.equal(scaled_inv_freq(cfg, 16)[0], plain)
    longer = scaled_inv_freq(cfg, 64)[0]
    assert longer[0] == plain[0] and (longer[1:] < plain[1:]).all()
    assert (longer / plain)[-1] < (longer / plain)[1]
    assert set(ROPE_SCALES) | {"none"} == set(choices("rope_scaling"))


def test_partial_rotary_leaves_the_other_dimensions_alone():
    model = build(VARIANTS["partial rotary"])
    _, trace = model.run_with_trace(torch.arange(1, 6)[None], names=["blocks.0.attn.hook_q_norm", "*hook_q",
                                                                     "*hook_rot_q"])
    q, rot = trace["blocks.0.attn.hook_q"], trace["blocks.0.attn.hook_rot_q"]
    torch.testing.assert_close(rot[..., 2:], q[..., 2:])
    assert not torch.allclose(rot[..., 1:, :2], q[..., 1:, :2])


def test_deepseek_routing_picks_within_the_top_group_and_shared_experts_see_every_token():
    model = build(VARIANTS["DeepSeek MoE"])
    ids = torch.randint(1, 32, (2, 9), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids)
    assert "blocks.0.mlp.hook_expert_indices" not in trace  # the first layer is dense
    chosen = trace["blocks.1.mlp.hook_expert_indices"]  # (B, T, 2)
    assert (chosen // 2 == chosen[..., :1] // 2).all()  # both experts from one group of two
    weights = trace["blocks.1.mlp.hook_expert_weights"]
    torch.testing.assert_close(weights.sum(-1), torch.full(weights.shape[:-1], 2.5))
    assert hasattr(model.blocks[1].mlp, "shared")


@pytest.mark.parametrize("changes,words", [
    (dict(sliding_window=64), ["sliding_window=64", "max_len=32"]),
    (dict(kv_rank=64, rope_dim=2), ["kv_rank=64", "16"]),
    (dict(rope_dim=3), ["rope_dim=3", "even"]),
    (dict(rope_dim=8), ["rope_dim=8", "d_head=4"]),
    (dict(layer_pattern="5:x", sliding_window=4), ["layer_pattern='5:x'", "N:M"]),
    (dict(layer_pattern="local,glob", sliding_window=4), ["'glob'"]),
    (dict(layer_pattern="alternate"), ["sliding_window"]),
    (dict(layer_pattern="local,global,local"), ["n_layers=2"]),
    (dict(attn_softcap=0.0), ["attn_softcap=0.0", "greater than 0"]),
    (dict(logit_softcap=-1.0), ["logit_softcap=-1.0"]),
    (dict(rope_scaling="linear", rope_factor=0.5), ["rope_factor=0.5", "at least 1"]),
    (dict(n_shared_experts=1), ["n_shared_experts=1", "ffn='moe'"]),
    (dict(ffn="moe", n_experts=4, n_expert_groups=3), ["n_expert_groups=3", "n_experts=4"]),
    (dict(rope_scaling="yarn", position="alibi"), ["rope_scaling='yarn'", "position='rope'"]),
    (dict(kv_rank=8, n_kv_heads=2, rope_dim=2), ["n_kv_heads=4"]),
    (dict(kv_rank=8), ["rope_dim"]),
    (dict(norm_plus_one=True, norm="layernorm"), ["norm='rmsnorm'"]),
])
def test_bad_settings_name_the_numbers_and_the_fix(changes, words):
    with pytest.raises(ValueError) as error:
        TransformerConfig(**{**TINY, **changes})
    for word in words:
        assert word in str(error.value), (word, str(error.value))


def test_new_fields_survive_a_round_trip_through_a_dict():
    for changes in VARIANTS.values():
        cfg = TransformerConfig(**{**TINY, **changes})
        assert TransformerConfig.from_dict(cfg.to_dict()) == cfg
