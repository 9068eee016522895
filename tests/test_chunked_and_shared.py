"""Llama 4's chunked attention, its temperature on the layers without positions and its L2 norm on q and k, and
Gemma 4's K and V shared across layers: each a validated field of the config and an entry of the layer plan, each
mixing with the other axes (or refused by name), recorded through hooks, fused = explicit, cached generation =
recomputation; Llama 4's layers equal Hugging Face's, and a shared layer's K and V sit in the cache once."""
import math

import pytest
import torch
import torch.nn.functional as F

from transformer import Transformer, TransformerConfig, choices, masks
from transformer.model import KVCache
from transformer.positions import temperature_scales

TINY = dict(vocab_size=32, d_model=16, n_heads=4, n_layers=4, max_len=32)

VARIANTS = {
    "chunked": dict(attention_chunk=3),
    "Llama 4": dict(nope_layers="every 4", attention_chunk=3, chunked_layers="rope", qk_norm="l2",
                    attn_temperature_scale=0.5, attn_temperature_floor=2.0),
    "shared K/V": dict(kv_shared_layers="last 2"),
    "shared K/V, local and global": dict(layer_pattern="alternate", sliding_window=3, kv_shared_layers="last 2"),
}
OTHER_AXES = {"arch": choices("arch"), "position": choices("position"), "norm_position": choices("norm_position"),
              "ffn": choices("ffn"), "n_kv_heads": (4, 2, 1), "qk_norm": choices("qk_norm"),
              "extra": ("sinks", "softcap", "MLA", "gate")}
EXTRAS = {"sinks": dict(sinks=True), "softcap": dict(attn_softcap=1.5), "gate": dict(attn_gate=True),
          "MLA": dict(kv_rank=8, rope_dim=2, head_dim=6)}
CASES = [(variant, axis, value) for variant in VARIANTS for axis, values in OTHER_AXES.items() for value in values]


def build(changes: dict, seed: int = 0) -> Transformer:
    """A tiny model with every 1-D parameter moved off its initial value, so a dropped norm weight or bias shows."""
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(**{**TINY, **changes}), device="cpu").eval()
    with torch.no_grad():
        for tensor in model.parameters():
            if tensor.dim() <= 1:
                tensor.add_(0.3 * torch.randn_like(tensor))
    return model


def padded(T: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 32, (3, T), generator=g)
    mask = torch.ones(3, T, dtype=torch.long)
    mask[1, T - 2:] = 0
    mask[2, :2] = 0
    return ids, mask


def logits(model, ids, mask=None):
    if model.cfg.row("arch").cross:
        return model(ids, ids[:, :5], attention_mask=mask)
    return model(ids, attention_mask=mask)


# --- each mixes with every other axis, or says which field to change ------------------------------------------------

@pytest.mark.parametrize("variant,axis,value", CASES, ids=[f"{v}-{a}={x}" for v, a, x in CASES])
def test_each_mixes_with_every_axis_and_fused_equals_explicit(variant, axis, value):
    changes = {**VARIANTS[variant], **(EXTRAS[value] if axis == "extra" else {axis: value})}
    try:
        model = build(changes)
    except ValueError as error:  # a combination that makes no sense names a field and what to do
        message = str(error)
        assert "=" in message and any(w in message for w in ("set ", "use ", "choose", "give", "make")), message
        return
    ids, mask = padded(10, seed=1)
    model.train()
    out = logits(model, ids, mask)
    F.cross_entropy(out.flatten(0, 1), ids[:, :out.shape[1]].flatten()).backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    with torch.no_grad():
        fused = logits(model, ids, mask)
        explicit = logits(model.set_fused(False), ids, mask)
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=0)


def cached_logits(model, ids, start: int, mask=None) -> torch.Tensor:
    """The last-position logits of ids[:, :t] for t = start .. T, fed to the model one token at a time."""
    cache = KVCache()
    positions = ((mask.cumsum(-1) - 1).clamp(min=0) if mask is not None
                 else torch.arange(ids.shape[1]).expand(ids.shape[0], -1))  # (B, T)
    out = [model(ids[:, :start], attention_mask=None if mask is None else mask[:, :start],
                 position_ids=positions[:, :start], cache=cache)[:, -1]]
    for t in range(start, ids.shape[1]):
        out.append(model(ids[:, t:t + 1], attention_mask=None if mask is None else mask[:, :t + 1],
                         position_ids=positions[:, t:t + 1], cache=cache)[:, -1])
    return torch.stack(out, dim=1)  # (B, T - start + 1, vocab)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("fused", [True, False])
def test_cached_generation_equals_recomputation(variant, fused):
    model = build(VARIANTS[variant]).set_fused(fused)
    ids = torch.randint(1, 32, (2, 13), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(2, 13, dtype=torch.long)
    mask[1, :3] = 0  # left padding: the second row starts three tokens later
    with torch.no_grad():
        full = model(ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0))  # (B, T, vocab)
        step_by_step = cached_logits(model, ids, start=4, mask=mask)
        torch.testing.assert_close(step_by_step, full[:, 3:], atol=1e-5, rtol=0)
        assert torch.equal(model.generate(ids[:, :5], 10, use_cache=True), model.generate(ids[:, :5], 10, use_cache=False))
        assert torch.equal(model.generate(ids, 6, use_cache=True, attention_mask=mask),
                           model.generate(ids, 6, use_cache=False, attention_mask=mask))


# --- chunked attention -------------------------------------------------------------------------------------------------

def test_a_chunk_sees_only_itself_and_starts_afresh_where_a_window_would_not():
    positions = torch.arange(7)
    allowed = masks.chunked(positions, positions, 3)
    expected = torch.tensor([[j <= i and j // 3 == i // 3 for j in range(7)] for i in range(7)])
    assert torch.equal(allowed, expected)
    assert allowed[3].tolist() == [False, False, False, True, False, False, False]  # a chunk's first query: itself
    assert masks.sliding_window(positions, positions, 3)[3].sum() == 3  # a window of 3 would see 1, 2, 3
    both_ways = masks.chunked(positions, positions, 3, is_causal=False)
    assert both_ways[3].tolist() == [False, False, False, True, True, True, False]  # an encoder: its whole chunk
    # one cached step at position 5 sees what the full mask's row 5 sees
    assert torch.equal(masks.chunked(positions[5:6], positions[:6], 3)[0], allowed[5, :6])


def test_the_plan_chunks_the_rope_layers_as_llama_4_and_names_them_as_hugging_face():
    cfg = TransformerConfig(**{**TINY, "n_layers": 8}, **VARIANTS["Llama 4"])
    plan = cfg.layer_plan()
    assert [s.chunk for s in plan] == [3, 3, 3, None] * 2
    assert [s.hf_layer_type for s in plan] == ["chunked_attention"] * 3 + ["full_attention"] + \
                                             ["chunked_attention"] * 3 + ["full_attention"]
    assert [s.chunk for s in TransformerConfig(**TINY, attention_chunk=4).layer_plan()] == [4] * 4
    listed = TransformerConfig(**TINY, attention_chunk=4, chunked_layers="0, 2").layer_plan()
    assert [s.chunk for s in listed] == [4, None, 4, None]
    # a chunked layer beside local ones: the plan holds both kinds of bounded keys
    mixed = TransformerConfig(**TINY, attention_chunk=4, chunked_layers="1", layer_pattern="local,global,local,global",
                              sliding_window=2).layer_plan()
    assert [s.bound for s in mixed] == ["sliding_window", "chunked", "sliding_window", None]


def test_a_chunked_layer_weighs_only_its_chunk():
    model = build(VARIANTS["Llama 4"])
    ids = torch.randint(1, 32, (1, 8), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids, names="*hook_pattern")
    i, j = torch.arange(8)[:, None], torch.arange(8)[None]
    for spec in model.cfg.layer_plan():
        pattern = trace[f"blocks.{spec.index}.attn.hook_pattern"][0]  # (H, T, T)
        visible = (j <= i) & ((i // 3 == j // 3) if spec.chunk else True)
        assert (pattern[:, ~visible] == 0).all() and (pattern[:, visible] > 0).all(), spec.index


# --- Llama 4's temperature and L2 norm --------------------------------------------------------------------------------

def test_the_temperature_is_one_then_grows_with_the_log_of_the_position():
    scales = temperature_scales(torch.arange(10)[None], scale=0.1, floor=4.0)  # (1, 1, T, 1)
    expected = [1 + 0.1 * math.log(1 + (t + 1) // 4) for t in range(10)]
    torch.testing.assert_close(scales.flatten(), torch.tensor(expected))
    assert scales.flatten()[:3].tolist() == [1.0] * 3 and scales.flatten()[3] > 1


def test_nope_layers_record_their_warmed_queries_and_rope_layers_their_weightless_l2_norm():
    model = build(VARIANTS["Llama 4"])
    ids = torch.randint(1, 32, (2, 9), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids)
    nope = [s.index for s in model.cfg.layer_plan() if not s.rotates]
    assert nope == [3]
    assert [n for n in trace.names() if n.endswith("hook_q_temperature")] == ["blocks.3.attn.hook_q_temperature"]
    scale = temperature_scales(torch.arange(9)[None], 0.5, 2.0)  # (1, 1, T, 1)
    torch.testing.assert_close(trace["blocks.3.attn.hook_q_temperature"], trace["blocks.3.attn.hook_q"] * scale)
    assert "blocks.3.attn.hook_q_norm" not in trace  # Llama 4 norms q and k on its RoPE layers only
    for raw in ("hook_q", "hook_k"):  # each head's vector over its RMS (eps = norm_eps), no weight
        x = trace[f"blocks.0.attn.{raw}"]  # (B, heads, T, d_head)
        unit = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)  # (B, heads, T, d_head)
        torch.testing.assert_close(trace[f"blocks.0.attn.{raw}_norm"], unit)
    assert not [n for n, _ in model.named_parameters() if "q_norm" in n or "k_norm" in n]  # nothing to learn
    assert model.blocks[0].attn.hook_q_norm.op == "q / rms(q), no weight"  # the row words its step


@pytest.mark.parametrize("temperature", [True, False])
def test_llama_4_layers_equal_hugging_face(temperature):
    """Hugging Face's Llama 4 text model (dense layers) with chunks, NoPE every 4th layer, the L2 norm and the
    temperature: its logits, every layer's eager attention weights, and its greedy text without a cache."""
    transformers = pytest.importorskip("transformers")
    L, D, H, G, dh = 4, 32, 4, 2, 8
    hf_cfg = transformers.Llama4TextConfig(
        vocab_size=64, hidden_size=D, intermediate_size=48, intermediate_size_mlp=48, num_hidden_layers=L,
        num_attention_heads=H, num_key_value_heads=G, head_dim=dh, moe_layers=[], attention_chunk_size=3,
        attn_temperature_tuning=temperature, floor_scale=2, attn_scale=0.5, use_qk_norm=True,
        max_position_embeddings=64, rope_parameters={"rope_type": "default", "rope_theta": 500.0},
        tie_word_embeddings=False, eos_token_id=None)
    hf_cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    hf = transformers.Llama4ForCausalLM(hf_cfg).eval()
    with torch.no_grad():
        for p in hf.parameters():
            if p.dim() == 1:
                p.add_(0.3 * torch.randn_like(p))
    cfg = TransformerConfig(vocab_size=64, d_model=D, n_heads=H, n_kv_heads=G, n_layers=L, d_ff=48, max_len=64,
                            head_dim=dh, rope_theta=500.0, nope_layers="every 4", attention_chunk=3,
                            chunked_layers="rope", qk_norm="l2", tie_embeddings=False,
                            attn_temperature_scale=0.5 if temperature else None,
                            attn_temperature_floor=2.0 if temperature else 8192.0)
    assert [s.hf_layer_type for s in cfg.layer_plan()] == hf_cfg.layer_types
    ours = Transformer(cfg, device="cpu").eval()
    half = torch.cat((torch.arange(0, dh, 2), torch.arange(1, dh, 2)))  # its RoPE turns pairs (2i, 2i+1); ours (i, i+d/2)

    def turned(w, heads):
        return w.view(heads, dh, -1)[:, half].reshape(heads * dh, -1)

    weights = {"embed.weight": hf.model.embed_tokens.weight, "unembed.weight": hf.lm_head.weight,
               "ln_final.weight": hf.model.norm.weight}
    for i, (layer, spec) in enumerate(zip(hf.model.layers, cfg.layer_plan())):
        a, f = layer.self_attn, layer.feed_forward
        weights |= {f"blocks.{i}.attn.q_proj.weight": turned(a.q_proj.weight, H) if spec.rotates else a.q_proj.weight,
                    f"blocks.{i}.attn.k_proj.weight": turned(a.k_proj.weight, G) if spec.rotates else a.k_proj.weight,
                    f"blocks.{i}.attn.v_proj.weight": a.v_proj.weight, f"blocks.{i}.attn.o_proj.weight": a.o_proj.weight,
                    f"blocks.{i}.ln1.weight": layer.input_layernorm.weight,
                    f"blocks.{i}.ln2.weight": layer.post_attention_layernorm.weight,
                    f"blocks.{i}.mlp.gate.weight": f.gate_proj.weight, f"blocks.{i}.mlp.up.weight": f.up_proj.weight,
                    f"blocks.{i}.mlp.down.weight": f.down_proj.weight}
    ours.load_state_dict({k: v.detach().clone() for k, v in weights.items()}, strict=True)
    ids = torch.randint(0, 64, (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        reference = hf(ids, output_attentions=True)
        mine, trace = ours.run_with_trace(ids)
        torch.testing.assert_close(mine, reference.logits, atol=1e-4, rtol=0)
        for i in range(L):
            torch.testing.assert_close(trace[f"blocks.{i}.attn.hook_pattern"], reference.attentions[i], atol=1e-5, rtol=0)
        expected = hf.generate(ids[:, :5], max_new_tokens=8, do_sample=False, use_cache=False)
        assert torch.equal(ours.generate(ids[:, :5], 8, use_cache=True), expected)


# --- K and V shared across layers --------------------------------------------------------------------------------------

def test_the_last_layers_read_the_last_earlier_layer_of_their_type_as_gemma_4_picks_it():
    cfg = TransformerConfig(**{**TINY, "n_layers": 6}, layer_pattern="alternate", sliding_window=3,
                            kv_shared_layers="last 3")
    assert [s.kv_from for s in cfg.layer_plan()] == [0, 1, 2, 1, 2, 1]
    assert [s.reuses_kv for s in cfg.layer_plan()] == [False] * 3 + [True] * 3
    transformers = pytest.importorskip("transformers")
    hf = transformers.Gemma4TextConfig(num_hidden_layers=6, layer_types=[s.hf_layer_type for s in cfg.layer_plan()],
                                       num_kv_shared_layers=3, hidden_size=16, num_attention_heads=2,
                                       num_key_value_heads=1, head_dim=8, intermediate_size=32, vocab_size=32)
    producers = {hf.layer_types[i]: i for i, mode in enumerate(hf.kv_sharing_modes) if mode == "store"}
    assert [producers[t] if mode == "reuse" else i for i, (t, mode) in
            enumerate(zip(hf.layer_types, hf.kv_sharing_modes))] == [s.kv_from for s in cfg.layer_plan()]
    named = TransformerConfig(**TINY, kv_shared_layers="2 from 0, 3 from 1").layer_plan()
    assert [s.kv_from for s in named] == [0, 1, 0, 1]


def test_a_sharing_layer_projects_q_alone_and_attends_over_the_earlier_layers_keys_and_values():
    model = build(dict(kv_shared_layers="3 from 1", n_kv_heads=2))
    reader, maker = model.blocks[3].attn, model.blocks[1].attn
    assert not hasattr(reader, "k_proj") and not hasattr(reader, "v_proj") and hasattr(reader, "q_proj")
    plain = build(dict(n_kv_heads=2))
    saved = sum(p.numel() for p in plain.parameters()) - sum(p.numel() for p in model.parameters())
    assert saved == maker.k_proj.weight.numel() + maker.v_proj.weight.numel()
    ids = torch.randint(1, 32, (2, 7), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids)
    assert "blocks.3.attn.hook_k" not in trace and "blocks.3.attn.hook_rot_k" not in trace
    q, k, v = trace["blocks.3.attn.hook_rot_q"], trace["blocks.1.attn.hook_rot_k"], trace["blocks.1.attn.hook_v"]
    k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)  # (B, H, T, d_head): 2 query heads per kv head
    scores = q @ k.transpose(-2, -1) / math.sqrt(model.cfg.d_head)  # (B, H, T, T)
    torch.testing.assert_close(trace["blocks.3.attn.hook_raw_scores"], scores)
    torch.testing.assert_close(trace["blocks.3.attn.hook_z"], trace["blocks.3.attn.hook_pattern"] @ v)


def test_the_cache_holds_shared_keys_and_values_once():
    ids = torch.randint(1, 32, (2, 10), generator=torch.Generator().manual_seed(0))
    sizes = {}
    for shared in ("none", "last 2"):
        model = build(dict(kv_shared_layers=shared, n_kv_heads=2))
        cache = KVCache()
        with torch.no_grad():
            model(ids, cache=cache)
        sizes[shared] = cache.nbytes
        makers = [b.attn for b in model.blocks if not b.spec.reuses_kv]
        assert list(cache.layers) == makers  # the reading layers keep nothing of their own
    per_layer = 2 * 2 * 10 * model.cfg.d_head * 2 * 4  # K and V: B=2, G=2, T=10, float32
    assert sizes == {"none": 4 * per_layer, "last 2": 2 * per_layer}


def test_a_shared_layer_reads_the_intervened_keys_of_its_source():
    """Its K and V are the earlier layer's own tensors, after that layer's hooks: an intervention there reaches it."""
    model = build(dict(kv_shared_layers="2 from 0"))
    ids = torch.randint(1, 32, (1, 6), generator=torch.Generator().manual_seed(0))
    _, clean = model.run_with_trace(ids, names="blocks.2.attn.hook_z")
    _, zeroed = model.run_with_trace(ids, names="blocks.2.attn.hook_z",
                                     interventions={"blocks.0.attn.hook_v": lambda t, e: torch.zeros_like(t)})
    assert clean["blocks.2.attn.hook_z"].abs().max() > 0 and zeroed["blocks.2.attn.hook_z"].abs().max() == 0


# --- bad settings name the layer, the numbers and the fix --------------------------------------------------------------

@pytest.mark.parametrize("changes,words", [
    (dict(attention_chunk=0), ["attention_chunk=0", "from 1"]),
    (dict(attention_chunk=64), ["attention_chunk=64", "max_len=32"]),
    (dict(chunked_layers="rope"), ["chunked_layers='rope'", "attention_chunk is None"]),
    (dict(attention_chunk=4, chunked_layers="1, 4"), ["names layer 4", "n_layers=4"]),
    (dict(attention_chunk=4, chunked_layers="rope", position="alibi"), ["no layer of this model turns"]),
    (dict(attention_chunk=4, sliding_window=3), ["layer 0 has a window of 3 keys", "chunks of attention_chunk=4"]),
    (dict(attention_chunk=4, attention_layers="3:1"), ["layer 0 is gated-deltanet", "attention_chunk=4"]),
    (dict(attention_chunk=4, attention_pattern="strided"), ["attention_pattern='strided'", "attention_chunk=None"]),
    (dict(kv_shared_layers="1 from 3"), ["layer 1 reuse the K and V of layer 3", "comes after it"]),
    (dict(kv_shared_layers="2 from 2"), ["is the layer itself"]),
    (dict(kv_shared_layers="2 from 0, 3 from 2"), ["layer 3 reuse the K and V of layer 2", "reuses another"]),
    (dict(kv_shared_layers="3 from 0", layer_pattern="alternate", sliding_window=3),
     ["layer 3 is full_attention and layer 0 sliding_attention", "set an earlier full_attention layer"]),
    (dict(kv_shared_layers="last 2", layer_pattern="global,global,local,local", sliding_window=3),
     ["layer 2 (sliding_attention)", "no layer before it"]),
    (dict(kv_shared_layers="3 from 2", nope_layers="every 4"), ["layer 2 turns its keys by RoPE at base 10000",
                                                                 "layer 3 turns its queries not at all"]),
    (dict(kv_shared_layers="3 from 2", attention_layers="1:1"), ["layer 2 is gated-deltanet", "keeps a state"]),
    (dict(kv_shared_layers="last 1", kv_rank=8, rope_dim=2, head_dim=6), ["layer 3", "kv_rank=8"]),
    (dict(kv_shared_layers="last 4"), ["leaves none of the n_layers=4", "'last 3'"]),
    (dict(kv_shared_layers="3 from 1, 3 from 0"), ["names layer 3 twice"]),
    (dict(kv_shared_layers="3 <- 1"), ["does not parse", "'5 from 3"]),
    (dict(kv_shared_layers="3 from 7"), ["names layer 7", "0 to 3"]),
    (dict(attn_temperature_scale=0.1), ["attn_temperature_scale=0.1", "nope_layers"]),
    (dict(attn_temperature_scale=0.0, nope_layers="every 4"), ["attn_temperature_scale=0.0", "greater than 0"]),
    (dict(attn_temperature_scale=0.1, attn_temperature_floor=0.5, nope_layers="every 4"),
     ["attn_temperature_floor=0.5", "at least 1"]),
    (dict(attn_temperature_floor=16.0), ["attn_temperature_floor=16.0", "attn_temperature_scale"]),
    (dict(qk_norm="l2", position="none"), ["qk_norm='l2'", "position='rope'"]),
])
def test_bad_settings_name_the_layer_the_numbers_and_the_fix(changes, words):
    with pytest.raises(ValueError) as error:
        TransformerConfig(**{**TINY, **changes})
    for word in words:
        assert word in str(error.value), (word, str(error.value))


def test_the_new_fields_survive_json():
    for changes in VARIANTS.values():
        cfg = TransformerConfig(**{**TINY, **changes})
        assert TransformerConfig.from_json(cfg.to_json()) == cfg
        assert TransformerConfig.from_json(cfg.to_json()).layer_plan() == cfg.layer_plan()
