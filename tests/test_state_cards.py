"""The real-size cards whose layers keep a constant cache beside their full layers' growing keys and values: LFM2
(gated short convolutions) and MiniMax-01 (lightning attention: decayed linear layers). Their parameters against the
published figures, and their cache in bytes at 4k, 128k and 1M tokens, apart by kind of layer, worked out by hand and
held by the live tensors of the classroom size."""
import pytest
import torch

from transformer import MODEL_CARDS, KVCache, Transformer, TransformerConfig, param_counts
from transformer.costs import kv_cache_bytes
from transformer.presets import ACTIVE_COUNTS

CONTEXTS = (4096, 131072, 1 << 20)


def test_lfm2_1_2b_has_its_published_parameters_and_layers():
    real = MODEL_CARDS["lfm2"].real["1.2B"]
    assert param_counts(real)["total"] == 1_170_340_608  # Liquid AI's model card, to the parameter
    kinds = [spec.kind for spec in real.layer_plan()]
    assert [i for i, kind in enumerate(kinds) if kind == "softmax"] == [2, 5, 8, 10, 12, 14]
    assert kinds.count("short-conv") == 10 and real.linear_conv_size == 3 and real.d_ff == 8192


@pytest.mark.parametrize("context", CONTEXTS)
def test_lfm2_1_2b_cache_grows_in_its_six_full_layers_only(context):
    real = MODEL_CARDS["lfm2"].real["1.2B"]
    held = kv_cache_bytes(real, context)  # bf16
    assert held["global layers"] == 6 * 2 * 8 * 64 * 2 * context  # K and V of 8 heads of 64, six layers
    assert held["state layers"] == held["conv inputs"] == 10 * 2048 * 2 * 2  # 80 KiB, whatever the length
    assert held["states"] == 0 and held["total"] == held["global layers"] + held["state layers"]


def test_minimax_text_01_has_its_published_parameters_counted_as_its_report_counts_them():
    card = MODEL_CARDS["minimax"]
    real = card.real["Text-01"]
    counts = param_counts(real)
    assert abs(counts["total"] - 456e9) / 456e9 < 0.001
    # 45.9B activated leaves out the embedding and the output head: 2 x 200,064 x 6,144 = 2.46B
    assert card.counted("Text-01")["active"] == counts["active"] - 2 * 200064 * 6144
    assert abs(card.counted("Text-01")["active"] - 45.9e9) / 45.9e9 < 0.002
    assert abs(ACTIVE_COUNTS["used"](real) - 45.9e9) / 45.9e9 > 0.05  # counted with them, 5% off
    kinds = [spec.kind for spec in real.layer_plan()]
    assert kinds.count("decayed-linear") == 70 and [i for i, k in enumerate(kinds) if k == "softmax"][:2] == [7, 15]
    # the lightning layers' gate is D x 64 x 128 per layer, 3.5B in all: without it the card would miss by 0.8%
    gate = real.d_model * real.state_heads * real.state_d_v
    assert param_counts(real.replace(linear_sigmoid_gate=False))["total"] == counts["total"] - 70 * gate


@pytest.mark.parametrize("context", CONTEXTS)
def test_minimax_text_01_cache_grows_in_its_ten_full_layers_only(context):
    real = MODEL_CARDS["minimax"].real["Text-01"]
    held = kv_cache_bytes(real, context, 2, state_bytes_per_value=4)  # keys in bf16, states in float32
    assert held["global layers"] == 10 * 2 * 8 * 128 * 2 * context  # 40 KiB a token
    assert held["state layers"] == held["states"] == 70 * 64 * 128 * 128 * 4  # 280 MiB, whatever the length
    assert held["conv inputs"] == 0  # lightning attention has no short convolution


@pytest.mark.parametrize("key", ["lfm2", "minimax"])
def test_the_classroom_caches_hold_the_formulas_bytes(key):
    cfg = MODEL_CARDS[key].config
    model = Transformer(cfg, device="cpu").eval()  # float32: 4 bytes a number
    cache = KVCache()
    model.generate(torch.randint(0, cfg.vocab_size, (2, 5), generator=torch.Generator().manual_seed(0)), 4,
                   cache=cache)
    held = kv_cache_bytes(cfg, cache.length, 4)
    live = [sum(t.numel() * t.element_size() for t in cache[block.attn]) for block in model.blocks]
    assert tuple(n // 2 for n in live) == held["per layer"]  # a batch of two
    assert held["state layers"] == kv_cache_bytes(cfg, 1, 4)["state layers"]  # the same after one token as after 9


def test_the_sigmoid_gate_multiplies_a_decayed_linear_layers_normed_read():
    cfg = TransformerConfig(vocab_size=40, d_model=16, n_heads=4, n_layers=2, attention_layers="decayed-linear",
                            position="none", linear_sigmoid_gate=True)
    model = Transformer(cfg, device="cpu").eval()
    ids = torch.randint(0, 40, (1, 6), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids, names=["blocks.0.attn.hook_z", "blocks.0.attn.hook_read_gate",
                                                 "blocks.0.attn.hook_read_norm", "blocks.0.ln1.hook_normalized"])
    layer = model.blocks[0].attn
    z = trace["blocks.0.attn.hook_z"]  # (B, H, T, d_v)
    normed = z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + cfg.norm_eps) * layer.norm_weight
    x = trace["blocks.0.ln1.hook_normalized"]  # (B, T, D): what the layer reads
    gate = torch.sigmoid(x @ layer.g_proj.weight.T).view(1, 6, 4, 4).transpose(1, 2)  # (B, H, T, d_v)
    torch.testing.assert_close(trace["blocks.0.attn.hook_read_gate"], gate)
    torch.testing.assert_close(trace["blocks.0.attn.hook_read_norm"], normed * gate)
    with pytest.raises(ValueError, match="linear_sigmoid_gate=True is a setting of layers with a fixed decay"):
        TransformerConfig(attention_layers="3:1", n_layers=4, linear_kind="deltanet", linear_sigmoid_gate=True)
