"""LFM2 opens and computes what Hugging Face computes: gated short convolutions ("conv" layers, our "short-conv"
kind) between GQA softmax layers with a QK-norm per head.

Each factory is a small random-init Lfm2ForCausalLM with every 1-D parameter (norm weights) moved off its initial
value and the convolution's taps made larger, so that a dropped or misplaced term changes the numbers. Hugging Face
runs its PyTorch convolution (``causal_conv1d_fn`` / ``causal_conv1d_update``), never an optional kernel. In float32,
on a right-padded batch: logits within 1e-4, every full-attention layer's weights within 1e-5 of HF's eager
attention; greedy generation with our cache (the convolution's last inputs, the full layers' keys and values) gives
HF's tokens without a cache.
"""

import pytest
import torch
import transformers as tf

from hf_factories import COMMON, V, _build, right_padded_batch, run_both, use_pytorch_fallbacks
from transformer import KVCache, Transformer, TransformerConfig
from transformer.costs import kv_cache_bytes
from transformer.interop import describe_hf, from_hf
from transformer.interop.hf_lfm2 import lfm2_d_ff

LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5
FALLBACKS = ("causal_conv1d_fn", "causal_conv1d_update")


def _lfm2(config: "tf.Lfm2Config", seed: int):
    model = _build(tf.Lfm2ForCausalLM, config, seed)
    with torch.no_grad():  # taps of order 1, not HF's 0.02: each convolution then moves its layer's output
        for name, p in model.named_parameters():
            if name.endswith("conv.conv.weight"):
                p.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(seed + 3))
    return model


def lfm2_small():
    # two conv layers, a full layer, a conv layer and a full layer last; GQA 4/2; a convolution of 3 taps; the MLP
    # width derived (2/3 of 192, times 1.5, rounded up to a multiple of 32: 192); tied head
    return _lfm2(tf.Lfm2Config(hidden_size=64, intermediate_size=192, num_hidden_layers=5, num_attention_heads=4,
                               num_key_value_heads=2, layer_types=["conv", "conv", "full_attention", "conv",
                                                                   "full_attention"],
                               conv_L_cache=3, block_multiple_of=32, block_ffn_dim_multiplier=1.5,
                               max_position_embeddings=64, initializer_range=0.2, **COMMON), seed=0)


def lfm2_listed_by_index():
    # full_attn_idxs instead of layer_types; MHA; the MLP width as given (no auto adjust); a convolution of 4 taps;
    # RoPE at base 5e5; its own output head
    return _lfm2(tf.Lfm2Config(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
                               num_key_value_heads=4, full_attn_idxs=[1, 3], conv_L_cache=4,
                               block_auto_adjust_ff_dim=False, tie_word_embeddings=False,
                               rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
                               max_position_embeddings=64, initializer_range=0.2, **COMMON), seed=1)


FACTORIES = {fn.__name__: fn for fn in (lfm2_small, lfm2_listed_by_index)}


@pytest.fixture(autouse=True)
def hugging_faces_pytorch_convolution(monkeypatch):
    """HF's modeling module calls its own plain PyTorch convolution, even where causal-conv1d is installed."""
    from transformers.models.lfm2 import modeling_lfm2

    use_pytorch_fallbacks(monkeypatch, modeling_lfm2, FALLBACKS)


def full_layers(ours) -> list[int]:
    return [spec.index for spec in ours.cfg.layer_plan() if spec.row.softmax]


@pytest.mark.parametrize("name", list(FACTORIES))
def test_logits_and_every_full_attention_layers_weights_match(name):
    hf_model = FACTORIES[name]()
    ours = from_hf(hf_model)
    ids, mask = right_padded_batch()
    out, logits, trace, fused = run_both(hf_model, ours, ids, mask)
    real = mask.bool()
    assert (out.logits - logits)[real].abs().max() <= LOGITS_TOL
    assert (out.logits - fused)[real].abs().max() <= LOGITS_TOL
    assert out.logits[real].std() > 1000 * LOGITS_TOL  # the comparison has teeth
    layers = full_layers(ours)
    assert len(out.attentions) == len(layers) == 2  # HF records its full-attention layers only
    for layer, hf_pattern in zip(layers, out.attentions):
        difference = (hf_pattern - trace[f"blocks.{layer}.attn.hook_pattern"]).transpose(1, 2)[real].abs().max()
        assert difference <= PATTERN_TOL, (layer, difference.item())


@pytest.mark.parametrize("name", list(FACTORIES))
def test_greedy_generation_with_our_cache_gives_hugging_faces_uncached_tokens(name):
    hf_model = FACTORIES[name]()
    ours = from_hf(hf_model)
    ids = torch.randint(1, V, (2, 6), generator=torch.Generator().manual_seed(2))
    uncached = hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=12,
                                 use_cache=False, output_logits=True, return_dict_in_generate=True)
    cache = KVCache()
    assert torch.equal(ours.generate(ids, 12, use_cache=True, cache=cache), uncached.sequences)
    assert len(set(uncached.sequences[0, 6:].tolist())) > 1  # not one token repeated: the test has teeth
    conv_layers = [block.attn for block in ours.blocks if block.spec.row.conv_only]
    assert [tuple(cache[layer][0].shape) for layer in conv_layers] == [(2, 64, ours.cfg.linear_conv_size - 1)] * len(
        conv_layers)  # the convolution's last inputs, whatever the length


@pytest.mark.parametrize("name", list(FACTORIES))
def test_the_plan_reads_back_as_hugging_faces_layer_types_and_describe_names_each_kind(name):
    hf = FACTORIES[name]()
    cfg = from_hf(hf).cfg
    assert [spec.hf_layer_type for spec in cfg.layer_plan()] == hf.config.layer_types
    assert cfg.linear_conv_size == hf.config.conv_L_cache and cfg.qk_norm == "head"
    assert cfg.d_ff == hf.model.layers[0].feed_forward.w1.out_features == lfm2_d_ff(hf.config)
    described = describe_hf(hf)
    assert described.family == "LFM2"
    plan = described.axes["layers"]
    assert "conv (gated short convolution)" in plan and "full_attention" in plan
    assert described.axes["convolution layers"].startswith(f"gated short convolution: 64 channels, each mixing its "
                                                           f"last {cfg.linear_conv_size} inputs")
    assert "linear layers" not in described.axes  # no state matrix to describe


def test_every_one_dimensional_parameter_is_off_its_initial_value():
    for factory in FACTORIES.values():
        for name, p in factory().named_parameters():
            if p.ndim == 1:
                assert p.unique().numel() == p.numel(), name


def test_a_saved_directory_opens_as_the_instance_does(tmp_path):
    hf = lfm2_small()
    hf.save_pretrained(tmp_path)
    ids = torch.randint(1, V, (1, 9), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (from_hf(str(tmp_path))(ids) - hf(ids).logits).abs().max() <= LOGITS_TOL


@pytest.mark.parametrize("changes,named", [
    (dict(conv_bias=True), "conv_bias=True"),
    (dict(layer_types=["conv", "sliding_attention"]), "layer_types ['sliding_attention']"),
])
def test_a_setting_not_built_is_refused_by_name(changes, named):
    config = tf.Lfm2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, **(dict(layer_types=["conv", "full_attention"]) | changes), **COMMON)
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
        from_hf(tf.Lfm2ForCausalLM(config))


def test_a_short_conv_layer_is_its_formula_and_padding_on_the_left_changes_nothing():
    """out_t = W_out (C_t ⊙ Σ_{i<K} w_i ⊙ (B ⊙ x̃)_{t-i}), written out tap by tap; a row padded on the left reads
    as the same row alone."""
    cfg = TransformerConfig(vocab_size=V, d_model=32, n_heads=4, n_layers=1, attention_layers="short-conv",
                            linear_kind="short-conv", linear_conv_size=3, position="none")
    model = Transformer(cfg, device="cpu").eval()
    layer = model.blocks[0].attn
    x = torch.randn(2, 7, 32, generator=torch.Generator().manual_seed(0))
    gate_in, gate_out, value = (x @ layer.in_proj.weight.T).chunk(3, dim=-1)
    u = gate_in * value  # (B, T, D)
    taps = layer.conv.weight[:, 0]  # (D, K): the last tap meets the current token
    expected = torch.zeros_like(u)
    for t in range(7):
        for i in range(3):
            if t - i >= 0:
                expected[:, t] += taps[:, 2 - i] * u[:, t - i]
    expected = (gate_out * expected) @ layer.o_proj.weight.T
    from transformer.linear_attention import StateInputs

    with torch.no_grad():
        assert torch.allclose(layer(x, StateInputs(None)), expected, atol=1e-6)
        ids = torch.randint(1, V, (1, 6), generator=torch.Generator().manual_seed(1))
        padded = torch.cat((torch.zeros(1, 3, dtype=torch.long), ids), dim=1)
        mask = torch.cat((torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 6, dtype=torch.long)), dim=1)
        assert torch.allclose(model(padded, attention_mask=mask)[:, 3:], model(ids), atol=1e-5)


def test_the_cache_bytes_of_a_conv_layer_are_its_channels_last_inputs_at_any_length():
    cfg = TransformerConfig(vocab_size=V, d_model=32, n_heads=4, n_kv_heads=2, n_layers=4,
                            attention_layers="short-conv,short-conv,softmax,short-conv", linear_kind="short-conv",
                            linear_conv_size=3)
    model = Transformer(cfg, device="cpu").eval()
    cache = KVCache()
    model.generate(torch.randint(1, V, (1, 5)), 4, cache=cache)
    held = kv_cache_bytes(cfg, cache.length, 4)
    assert cache.nbytes == held["total"]
    assert held["conv inputs"] == held["state layers"] == 3 * 32 * 2 * 4 and held["states"] == 0
    assert kv_cache_bytes(cfg, 1_000_000, 4)["state layers"] == held["state layers"]
