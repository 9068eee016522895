"""Attention that keeps a state: the recurrent and chunked forms agree, Gated DeltaNet is Hugging Face's, the implied
weights times V are the read, the delta rule overwrites, and the hooks record what each kind's row promises."""
import math

import pytest
import torch

from transformer import AXES, KVCache
from transformer.block import ATTENTION_MODULES
from transformer.hook_sites import SITES
from transformer.linear_attention import (FEATURE_MAPS, STATE_MODULES, LinearAttention, StateInputs, chunked_form,
                                          implied_weights, l2_normalise, recurrent_form)

KINDS = [key for key, row in AXES["attention"].choices.items() if row.keeps_state and not row.conv_only]


def linear_model(tiny_model, kind, **changes):
    """A tiny model of one linear kind in every layer, with weights large enough that every part matters."""
    model = tiny_model(attention_layers=kind, position="none", linear_chunk_size=4, **changes)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(p.numel()))
    return model


def state_inputs_for(row, B=2, H=4, T=37, d_k=8, d_v=6, seed=0):
    """q, k, v, log_decay, beta and a non-empty starting state as a kind with this row's flags makes them."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(B, H, T, d_k, generator=g), torch.randn(B, H, T, d_k, generator=g)
    v = torch.randn(B, H, T, d_v, generator=g)
    if row.feature_map:
        q, k = FEATURE_MAPS["elu+1"](q), FEATURE_MAPS["elu+1"](k)
    if row.delta_rule:
        q, k = l2_normalise(q), l2_normalise(k)
    log_decay = -torch.rand(B, H, T, generator=g) * 0.5 if row.decays else None
    beta = torch.rand(B, H, T, generator=g) * 2 if row.delta_rule else None  # up to 2: OLMo hybrid's range
    state = torch.randn(B, H, d_k, d_v, generator=g) * 0.1
    return q / math.sqrt(d_k), k, v, log_decay, beta, state


def largest_gap(a, b) -> float:
    """max |a - b| on the scale of the numbers: undecayed linear attention's read grows with the text, and float32
    holds about 7 digits of it."""
    return float((a - b).abs().max() / a.abs().max().clamp(min=1.0))


# --- the two forms ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("size", [1, 5, 16, 64])
def test_the_recurrent_form_equals_the_chunked_form(kind, size):
    q, k, v, log_decay, beta, state = state_inputs_for(AXES["attention"].row(kind))
    slow = recurrent_form(q, k, v, log_decay, beta, state)
    fast = chunked_form(q, k, v, log_decay, beta, state, size, predict=True)
    assert fast.out.shape == slow.out.shape == v.shape
    assert largest_gap(slow.out, fast.out) <= 1e-5
    assert largest_gap(slow.state, fast.state) <= 1e-5
    if beta is not None:
        assert largest_gap(slow.predicted, fast.predicted) <= 1e-5
        assert largest_gap(slow.correction, fast.correction) <= 1e-5


def test_the_gated_delta_rule_is_hugging_faces():
    qwen3_next = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    B, T, H, d_k, d_v = 2, 37, 4, 8, 6
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(B, T, H, d_k, generator=g), torch.randn(B, T, H, d_k, generator=g)
    v, beta = torch.randn(B, T, H, d_v, generator=g), torch.rand(B, T, H, generator=g)
    decay = -torch.rand(B, T, H, generator=g)
    state = torch.randn(B, H, d_k, d_v, generator=g) * 0.1
    heads = lambda t: t.transpose(1, 2)  # Hugging Face's (B, T, H, ...) -> ours (B, H, T, ...)
    ours = (l2_normalise(heads(q)) / math.sqrt(d_k), l2_normalise(heads(k)), heads(v), heads(decay), heads(beta), state)
    theirs = dict(g=decay, beta=beta, initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=True)
    ref_out, ref_state = qwen3_next.torch_chunk_gated_delta_rule(q, k, v, chunk_size=8, **theirs)
    fast = chunked_form(*ours, size=8)
    torch.testing.assert_close(heads(fast.out), ref_out, atol=1e-5, rtol=0)
    torch.testing.assert_close(fast.state, ref_state, atol=1e-5, rtol=0)
    ref_out, ref_state = qwen3_next.torch_recurrent_gated_delta_rule(q, k, v, **theirs)
    slow = recurrent_form(*ours)
    torch.testing.assert_close(heads(slow.out), ref_out, atol=1e-5, rtol=0)
    torch.testing.assert_close(slow.state, ref_state, atol=1e-5, rtol=0)


def test_the_gated_deltanet_layer_is_qwen3_nexts(tiny_config):
    """Its convolution, decay, β, grouped heads and gated norm, on Qwen3-Next's own layer with every weight moved."""
    qwen3_next = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    from transformers import Qwen3NextConfig

    D, H_k, H, d_k, d_v = 32, 2, 4, 8, 6
    theirs = qwen3_next.Qwen3NextGatedDeltaNet(Qwen3NextConfig(
        hidden_size=D, linear_num_value_heads=H, linear_num_key_heads=H_k, linear_key_head_dim=d_k,
        linear_value_head_dim=d_v, linear_conv_kernel_dim=4, rms_norm_eps=1e-6, num_hidden_layers=1,
        layer_types=["linear_attention"]), 0).eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(p.numel()))
    cfg = tiny_config(d_model=D, n_layers=1, attention_layers="gated-deltanet", position="none", norm_eps=1e-6,
                      linear_key_heads=H_k, linear_value_heads=H, linear_key_head_dim=d_k, linear_value_head_dim=d_v,
                      linear_chunk_size=8)
    ours = LinearAttention(cfg, "gated-deltanet").eval()
    per_group = H // H_k  # Hugging Face interleaves q, k, v, z (and b, a) per key head
    q, k, v, z = theirs.in_proj_qkvz.weight.view(H_k, -1, D).split([d_k, d_k, per_group * d_v, per_group * d_v], 1)
    b, a = theirs.in_proj_ba.weight.view(H_k, -1, D).split([per_group, per_group], 1)
    copies = {"q_proj.weight": q, "k_proj.weight": k, "v_proj.weight": v, "z_proj.weight": z, "b_proj.weight": b,
              "a_proj.weight": a, "conv.weight": theirs.conv1d.weight, "A_log": theirs.A_log,
              "dt_bias": theirs.dt_bias, "norm_weight": theirs.norm.weight, "o_proj.weight": theirs.out_proj.weight}
    ours.load_state_dict({name: t.reshape(ours.state_dict()[name].shape) for name, t in copies.items()})
    x = torch.randn(2, 21, D, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(ours(x, StateInputs(None)), theirs(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", KINDS)
def test_the_chunked_and_recurrent_paths_give_the_same_logits(kind, tiny_model):
    model = linear_model(tiny_model, kind)
    ids = torch.randint(0, 32, (2, 11), generator=torch.Generator().manual_seed(0))
    fast = model(ids)
    slow = model.set_fused(False)(ids)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)


# --- what the state does ------------------------------------------------------------------------------------------

def test_the_delta_rule_overwrites_an_old_association_where_plain_linear_attention_adds():
    """Store v1 under k1, then v2 under a key that resembles k1: the delta rule now returns v2 for k1, plain linear
    attention a blend of both. Its hooks show why: the state predicted v1 and stored v2 - v1 instead."""
    k1 = l2_normalise(torch.tensor([1.0, 0.2, 0.0, 0.0]))
    k2 = l2_normalise(torch.tensor([1.0, 0.25, 0.0, 0.0]))  # cos(k1, k2) > 0.99
    v1, v2 = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    k = torch.stack((k1, k2))[None, None]  # (1, 1, 2, 4)
    v = torch.stack((v1, v2))[None, None]  # (1, 1, 2, 2)
    q = k1.expand(1, 1, 2, 4)  # read with the old key after each write
    empty = torch.zeros(1, 1, 4, 2)
    delta = recurrent_form(q, k, v, None, torch.ones(1, 1, 2), empty)
    plain = recurrent_form(q, k, v, None, None, empty)
    assert torch.allclose(delta.out[0, 0, 0], v1) and torch.allclose(plain.out[0, 0, 0], v1)
    assert (delta.out[0, 0, 1] - v2).norm() < 0.01  # the new value replaced the old
    assert (plain.out[0, 0, 1] - (v1 + v2)).norm() < 0.02  # both values, added up under one key
    assert (delta.predicted[0, 0, 1] - v1).norm() < 0.01  # it expected the old value ...
    assert (delta.correction[0, 0, 1] - (v2 - v1)).norm() < 0.02  # ... and stored the difference


@pytest.mark.parametrize("kind", KINDS)
def test_the_implied_weights_times_v_are_the_read(kind, tiny_model):
    model = linear_model(tiny_model, kind)
    ids = torch.randint(0, 32, (2, 9), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids)
    for layer in range(2):
        weights = trace[f"blocks.{layer}.attn.hook_pattern"]  # (B, H, T, T)
        assert weights.shape == (2, 4, 9, 9)
        assert torch.all(weights.triu(1) == 0), "no weight on a later token"
        read = trace[f"blocks.{layer}.attn.hook_z"]  # (B, H, T, d_v)
        assert largest_gap(read, weights @ trace[f"blocks.{layer}.attn.hook_v"]) <= 1e-5
    assert not torch.allclose(weights.sum(-1), torch.ones(())), "these are no softmax weights"
    q, k, log_decay, beta = (torch.randn(1, 1, 5, 3), l2_normalise(torch.randn(1, 1, 5, 3)), None,
                             torch.ones(1, 1, 5))
    assert (implied_weights(q, k, log_decay, beta) < 0).any(), "the delta rule's weights may be negative"


def test_the_state_is_recorded_only_when_named_and_is_the_cache_after_the_last_token(tiny_model):
    model = linear_model(tiny_model, "gated-deltanet")
    ids = torch.randint(0, 32, (2, 7), generator=torch.Generator().manual_seed(0))
    name = "blocks.1.attn.hook_state"
    _, everything = model.run_with_trace(ids)
    _, globbed = model.run_with_trace(ids, names="*hook_state")
    assert name not in everything and len(globbed) == 0
    _, trace = model.run_with_trace(ids, names=[name])
    assert trace.names() == [name]
    states = trace[name]
    assert states.shape == (2, 4, 7, 4, 4) and trace.event(name).dims == ("B", "H", "T_q", "d_head", "d_v")
    cache = KVCache()
    with torch.no_grad():
        model(ids, cache=cache)
    torch.testing.assert_close(states[:, :, -1], cache[model.blocks[1].attn][0], atol=1e-6, rtol=0)


def test_a_state_too_large_for_the_trace_cap_is_refused_naming_the_cap(tiny_model):
    model = linear_model(tiny_model, "deltanet")
    ids = torch.randint(0, 32, (1, 64))
    per_head = 64 * 4 * 4 * 4  # T d_k d_v numbers of 4 bytes
    with pytest.raises(MemoryError, match=rf"max_bytes={per_head}.*fewer layers"):
        model.run_with_trace(ids, names=["blocks.0.attn.hook_state"], max_bytes=per_head)


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_records_what_its_row_promises(kind, tiny_model):
    row = AXES["attention"].row(kind)
    model = linear_model(tiny_model, kind)
    _, trace = model.run_with_trace(torch.randint(0, 32, (1, 6)))
    recorded = {name.split(".")[-1] for name in trace.names() if name.startswith("blocks.0.attn.")}
    expected = {"hook_q", "hook_k", "hook_v", "hook_pattern", "hook_z", "hook_read_norm"}
    expected |= {"hook_phi_q", "hook_phi_k"} if row.feature_map or row.delta_rule else set()
    decay_site = "hook_channel_decay" if row.channel_decay else "hook_decay"  # Kimi's: one per key channel
    expected |= {decay_site} if row.decays else set()
    expected |= {"hook_beta", "hook_predicted", "hook_correction"} if row.delta_rule else set()
    expected |= {"hook_out_gate"} if row.output_gate else set()
    assert recorded == expected
    event = trace.event("blocks.0.attn.hook_pattern")
    assert "not a softmax" in event.op and "need not sum to 1" in event.op
    if row.decays:
        decay = trace[f"blocks.0.attn.{decay_site}"]
        assert ((decay > 0) & (decay <= 1)).all()


def test_a_hybrids_layers_show_their_own_formulas(tiny_config):
    cfg = tiny_config(n_layers=4, attention_layers="3:1")
    site = SITES["hook_pattern"]
    assert "not a softmax" in site.explain and "need not sum to 1" in site.explain
    assert site.latex(cfg, "hook_pattern", "blocks.3.attn.hook_pattern") == site.formula.default  # softmax
    linear = site.latex(cfg, "hook_pattern", "blocks.0.attn.hook_pattern")
    assert linear == AXES["attention"].row("gated-deltanet").formulas["hook_pattern"] and "softmax" not in linear
    assert "\\alpha_t" in SITES["hook_state"].latex(cfg, "hook_state", "blocks.2.attn.hook_state")


def test_every_kind_has_one_builder_and_every_feature_map_one_function():
    assert set(ATTENTION_MODULES) == set(AXES["attention"].choices)
    assert set(STATE_MODULES) == set(KINDS)
    assert set(FEATURE_MAPS) == set(AXES["feature_map"].choices)
    x = torch.linspace(-3, 3, 13)
    for key, row in AXES["feature_map"].choices.items():
        assert bool((FEATURE_MAPS[key](x) > 0).all()) == row.positive, key
