"""Gemma 4's attention and blocks as fields of the config: per-layer input embeddings, K = V on the global layers,
the weightless value norm, the layer scalar, the global layers' own head sizes and their proportional RoPE. Each
is validated (a ValueError names the field and the fix), mixes with the other axes, is recorded through hooks,
gives fused = explicit within 1e-5 and cached generation = recomputation, and is counted by the cost formulas."""
import fnmatch
import json

import pytest
import torch
import torch.nn.functional as F

from torch.utils.flop_counter import FlopCounterMode

from transformer import MODEL_CARDS, Transformer, TransformerConfig, choices
from transformer.costs import (forward_flops, forward_flops_per_token, kv_cache_bytes, kv_cache_bytes_per_token,
                               param_counts, param_terms)
from transformer.model import KVCache

TINY = dict(vocab_size=32, d_model=16, n_heads=4, n_layers=4, max_len=32)
LOCAL_GLOBAL = dict(layer_pattern="alternate", sliding_window=3)
VARIANTS = {
    "per-layer input": dict(per_layer_dim=4, layer_scalar=True),
    "K = V, value norm": dict(k_eq_v=True, value_norm=True),
    "global head sizes, proportional RoPE": dict(LOCAL_GLOBAL, global_head_dim=8, global_kv_heads=1,
                                                 rope_scaling="proportional", rope_fraction=0.5,
                                                 rope_local_theta=100.0),
    "wide FFN on the shared layers": dict(kv_shared_layers="last 1", wide_shared_ffn=True),
    "global head sizes beside layers that keep a state": dict(attention_layers="1:1", global_head_dim=8,
                                                              global_kv_heads=2, k_eq_v=True),
    "Gemma 4": dict(LOCAL_GLOBAL, per_layer_dim=4, layer_scalar=True, k_eq_v=True, value_norm=True, n_kv_heads=2,
                    global_head_dim=8, global_kv_heads=1, rope_scaling="proportional", rope_fraction=0.25,
                    rope_local_theta=100.0, kv_shared_layers="last 2", qk_norm="head", norm_position="sandwich",
                    ffn="geglu", gelu_approximate="tanh", score_scale=1.0, scale_embeddings=True),
}
OTHER_AXES = {"arch": choices("arch"), "position": choices("position"), "norm_position": choices("norm_position"),
              "ffn": ("swiglu", "moe", "gelu"), "n_kv_heads": (4, 1), "qk_norm": choices("qk_norm"),
              "extra": ("sinks", "softcap", "MLA", "gate", "hybrid", "parallel")}
EXTRAS = {"sinks": dict(sinks=True), "softcap": dict(attn_softcap=1.5), "gate": dict(attn_gate=True),
          "MLA": dict(kv_rank=8, rope_dim=2, head_dim=6), "hybrid": dict(attention_layers="1:1"),
          "parallel": dict(parallel_block=True)}
CASES = [(variant, axis, value) for variant in VARIANTS for axis, values in OTHER_AXES.items() for value in values]


def build(changes: dict, seed: int = 0) -> Transformer:
    """A tiny model with every 1-D parameter moved off its initial value, so a dropped norm weight or scalar shows."""
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(**{**TINY, **changes}), device="cpu").eval()
    with torch.no_grad():
        for tensor in model.parameters():
            if tensor.dim() <= 1:
                tensor.add_(0.3 * torch.randn_like(tensor))
    return model


def logits(model, ids, mask=None):
    if model.cfg.row("arch").cross:
        return model(ids, ids[:, :5], attention_mask=mask)
    return model(ids, attention_mask=mask)


@pytest.mark.parametrize("variant,axis,value", CASES, ids=[f"{v}-{a}={x}" for v, a, x in CASES])
def test_each_mixes_with_every_axis_and_fused_equals_explicit(variant, axis, value):
    changes = {**VARIANTS[variant], **(EXTRAS[value] if axis == "extra" else {axis: value})}
    try:
        model = build(changes)
    except ValueError as error:  # a combination that makes no sense names a field and what to do
        message = str(error)
        assert "=" in message and any(w in message for w in ("set ", "use ", "choose", "give", "make", "pick", "needs")), message
        return
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 32, (3, 10), generator=g)
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[1, 8:] = 0
    model.train()
    out = logits(model, ids, mask)
    F.cross_entropy(out.flatten(0, 1), ids[:, :out.shape[1]].flatten()).backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    with torch.no_grad():
        fused = logits(model, ids, mask)
        explicit = logits(model.set_fused(False), ids, mask)
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=0)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("fused", [True, False])
def test_cached_generation_equals_recomputation(variant, fused):
    model = build(VARIANTS[variant]).set_fused(fused)
    ids = torch.randint(1, 32, (2, 13), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(2, 13, dtype=torch.long)
    mask[1, :3] = 0  # left padding
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        full = model(ids, attention_mask=mask, position_ids=positions)  # (B, T, vocab)
        cache = KVCache()
        steps = [model(ids[:, :4], attention_mask=mask[:, :4], position_ids=positions[:, :4], cache=cache)[:, -1]]
        for t in range(4, 13):
            steps.append(model(ids[:, t:t + 1], attention_mask=mask[:, :t + 1], position_ids=positions[:, t:t + 1],
                               cache=cache)[:, -1])
        torch.testing.assert_close(torch.stack(steps, 1), full[:, 3:], atol=1e-5, rtol=0)
        assert torch.equal(model.generate(ids, 6, use_cache=True, attention_mask=mask),
                           model.generate(ids, 6, use_cache=False, attention_mask=mask))


# --- each mechanism does what it says, recorded through its hooks ------------------------------------------------------

def test_per_layer_inputs_are_the_table_and_the_projection_of_the_embedding_gated_into_each_block():
    model = build(dict(per_layer_dim=4, scale_embeddings=True))
    ids = torch.randint(0, 32, (2, 7), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids)
    stack = model.per_layer_embed
    x = trace["hook_embed"]  # (B, T, D), scaled by sqrt(D)
    from_tokens = stack.table(ids).view(2, 7, 4, 4) * 2.0  # sqrt(per_layer_dim = 4)
    from_context = stack.norm((stack.projection(x) / 4.0).view(2, 7, 4, 4))  # 1 / sqrt(d_model = 16)
    expected = (from_context + from_tokens) / 2 ** 0.5  # (B, T, L, P)
    torch.testing.assert_close(trace["per_layer_embed.hook_per_layer_embed"], expected)
    for i, block in enumerate(model.blocks):
        after_ffn = trace[f"blocks.{i}.hook_resid_post"] - trace[f"blocks.{i}.hook_per_layer_out"]
        gate = F.gelu(block.per_layer.gate(after_ffn)) * expected[:, :, i]  # (B, T, P)
        torch.testing.assert_close(trace[f"blocks.{i}.per_layer.hook_per_layer_gate"], gate)
        torch.testing.assert_close(trace[f"blocks.{i}.hook_per_layer_out"], block.per_layer.norm(block.per_layer.up(gate)))
    with pytest.raises(ValueError, match="per_layer_dim=4 looks each token up .* pass input_ids"):
        model(inputs_embeds=torch.randn(1, 3, 16))


def test_the_layer_scalar_multiplies_the_whole_stream_leaving_the_block():
    model = build(dict(layer_scalar=True))
    ids = torch.randint(0, 32, (1, 6), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids)
    block = model.blocks[0]
    unscaled = trace["blocks.0.hook_resid_mid"] + trace["blocks.0.hook_mlp_out"]  # pre-norm: x + FFN(norm(x))
    torch.testing.assert_close(trace["blocks.0.hook_resid_post"], unscaled * block.layer_scalar)
    assert block.layer_scalar.shape == (1,) and float(block.layer_scalar.detach()) != 1.0  # moved, and it counts


def test_k_eq_v_serves_keys_and_values_from_one_projection_on_the_global_layers_only():
    model = build(dict(LOCAL_GLOBAL, k_eq_v=True, value_norm=True, qk_norm="head"))
    names = dict(model.named_parameters())
    assert "blocks.0.attn.v_proj.weight" in names and "blocks.1.attn.v_proj.weight" not in names  # local, global
    ids = torch.randint(0, 32, (1, 6), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids)
    k, v = trace["blocks.1.attn.hook_k"], trace["blocks.1.attn.hook_v"]  # (B, G, T, d_head)
    assert torch.equal(k, v)  # the values are the keys as projected ...
    normed_v = trace["blocks.1.attn.hook_v_norm"]
    torch.testing.assert_close(normed_v, v / (v.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt())  # no weight: unit RMS
    assert not torch.allclose(trace["blocks.1.attn.hook_k_norm"], normed_v)  # ... before the keys' own weighted norm
    assert not torch.equal(trace["blocks.0.attn.hook_k"], trace["blocks.0.attn.hook_v"])


def test_global_layers_have_their_own_head_width_kv_heads_and_proportional_rope():
    cfg = TransformerConfig(**TINY, **VARIANTS["global head sizes, proportional RoPE"])
    model = build(VARIANTS["global head sizes, proportional RoPE"])
    assert model.blocks[0].attn.q_proj.weight.shape == (4 * 4, 16)  # local: 4 heads of 4
    assert model.blocks[1].attn.q_proj.weight.shape == (4 * 8, 16)  # global: 4 heads of 8
    assert model.blocks[1].attn.k_proj.weight.shape == (1 * 8, 16)  # one kv head
    ids = torch.randint(0, 32, (1, 6), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids)
    angles = trace["blocks.1.attn.hook_rope_angles"][0]  # (T, d_head / 2 = 4): two pairs turn, two stand still
    assert (angles[1:, :2] != 0).all() and (angles[:, 2:] == 0).all()
    torch.testing.assert_close(angles[1, 1], torch.tensor(1e4 ** (-2 / 8)))  # spaced over the whole head of 8
    assert (trace["blocks.0.attn.hook_rope_angles"][0, 1:] != 0).all()  # the local layers turn every pair
    cache = KVCache()
    with torch.no_grad():
        model(ids[:, :3], cache=cache)  # three tokens: as many as a window holds
    assert cache.shapes() == [(1, 4, 3, 4), (1, 1, 3, 8), (1, 4, 3, 4), (1, 1, 3, 8)]
    held = kv_cache_bytes(cfg, 3, bytes_per_value=4)
    assert cache.nbytes == held["total"] == 3 * kv_cache_bytes_per_token(cfg, 4)
    assert held["per layer"] == (3 * 2 * 16 * 4, 3 * 2 * 8 * 4) * 2  # K and V: 4 heads of 4, or 1 head of 8


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_cost_term_is_exactly_the_parameters_it_names(variant):
    cfg = TransformerConfig(**TINY, **VARIANTS[variant])
    named = dict(Transformer(cfg, device="cpu").named_parameters())
    owners = {n: [] for n in named}
    for term in param_terms(cfg):
        held = [n for n in named if any(fnmatch.fnmatch(n, pattern) for pattern in term.where)]
        assert sum(named[n].numel() for n in held) == term.count, f"{term.name}: {term.formula}"
        for n in held:
            owners[n].append(term.name)
    assert all(len(terms) == 1 for terms in owners.values()), {n: t for n, t in owners.items() if len(t) != 1}
    assert param_counts(cfg)["total"] == sum(p.numel() for p in named.values())


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_forward_flops_equal_torch_flop_counter_with_each_layers_own_head_sizes(variant):
    cfg = TransformerConfig(**TINY, **VARIANTS[variant])
    model = Transformer(cfg, device="cpu").eval().set_fused(False)
    ids = torch.randint(0, cfg.vocab_size, (2, 7), generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(ids)
    assert forward_flops(cfg, batch=2, seq=7) == counter.get_total_flops()


def test_the_gemma_4_card_is_31b_and_its_cache_saves_in_the_windowed_and_the_global_layers():
    real = MODEL_CARDS["gemma4"].real["31B"]
    assert abs(param_counts(real)["total"] - 30.7e9) / 30.7e9 < 0.02
    local_layer = 1024 * 2 * 16 * 256 * 2  # a full window of K and V, 16 kv heads of 256, bf16
    for context in (4096, 131072, 1 << 20):
        held = kv_cache_bytes(real, context)
        global_layer = context * 2 * 4 * 512 * 2  # every token's K and V, 4 kv heads of 512
        assert held["local layers"] == 50 * local_layer and held["global layers"] == 10 * global_layer
        every_layer_global = kv_cache_bytes(real.replace(sliding_window=None, layer_pattern="uniform"), context)
        assert every_layer_global["total"] > held["total"]  # the windows save ...
    assert [round(kv_cache_bytes(real, t)["total"] / 2 ** 30, 2) for t in (4096, 131072, 1 << 20)] == [1.09, 10.78, 80.78]
    one_size = real.replace(global_head_dim=None, global_kv_heads=None, k_eq_v=False)
    assert kv_cache_bytes(one_size, 1 << 20)["global layers"] == 2 * held["global layers"]  # ... and 4 heads of 512
    classroom = MODEL_CARDS["gemma4"].config
    shared = kv_cache_bytes(classroom, 256)  # its last two layers reuse K and V: they hold nothing
    assert shared["per layer"][-2:] == (0, 0) and min(shared["per layer"][:-2]) > 0
    assert forward_flops_per_token(real, 4096) > forward_flops_per_token(one_size, 4096)  # wider global heads


# --- bad settings ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("changes,words", [
    (dict(per_layer_dim=0), "per_layer_dim=0 must be at least 1"),
    (dict(per_layer_dim=4, arch="encoder-decoder"), "an encoder-decoder has two stacks: set arch='decoder'"),
    (dict(global_kv_heads=3), "n_heads=4 is not divisible by global_kv_heads=3; pick global_kv_heads among"),
    (dict(global_head_dim=8, arch="encoder-decoder"), "global_head_dim=8 sizes the global self-attention layers"),
    (dict(k_eq_v=True, kv_rank=8, head_dim=6, rope_dim=2), "k_eq_v=True changes the K and V projections, but kv_rank=8"),
    (dict(value_norm=True, kv_rank=8, head_dim=6, rope_dim=2), "set kv_rank=None or value_norm off"),
    (dict(k_eq_v=True, v_head_dim=2), "k_eq_v=True makes each value its key's projection, d_head=4 wide, but v_head_dim=2"),
    (dict(wide_shared_ffn=True), "wide_shared_ffn=True widens the FFN of the layers that reuse K and V, but "
                                 "kv_shared_layers='none' names none; set kv_shared_layers"),
    (dict(wide_shared_ffn=True, kv_shared_layers="last 1", ffn="moe"), "set a dense ffn or wide_shared_ffn=False"),
    (dict(rope_fraction=0.5), "rope_fraction=0.5 is read by proportional RoPE only, but rope_scaling='none'; set"),
    (dict(rope_scaling="proportional", rope_fraction=0.0), r"rope_fraction=0.0 must be in \(0, 1\]"),
    (dict(rope_scaling="proportional", position="alibi"), "rope_scaling='proportional' stretches RoPE, but position"),
])
def test_bad_settings_name_the_field_and_the_fix(changes, words):
    with pytest.raises(ValueError, match=words):
        TransformerConfig(**{**TINY, **changes})


def test_the_new_fields_survive_json():
    cfg = TransformerConfig(**TINY, **VARIANTS["Gemma 4"])
    assert TransformerConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg
    assert cfg.layer_config(cfg.layer_plan()[0]).k_eq_v is False  # a local layer keeps its own W_v
    assert cfg.layer_config(cfg.layer_plan()[1]).d_head == 8
