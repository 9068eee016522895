"""The real-size cards whose layers keep a constant cache beside their full layers' growing keys and values: LFM2
(gated short convolutions). Their parameters against the published figures, and their cache in bytes at 4k, 128k
and 1M tokens, apart by kind of layer, worked out by hand and held by the live tensors of the classroom size."""
import pytest
import torch

from transformer import MODEL_CARDS, KVCache, Transformer, param_counts
from transformer.costs import kv_cache_bytes

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


def test_the_lfm2_classroom_caches_hold_the_formulas_bytes():
    cfg = MODEL_CARDS["lfm2"].config
    model = Transformer(cfg, device="cpu").eval()  # float32: 4 bytes a number
    cache = KVCache()
    model.generate(torch.randint(0, cfg.vocab_size, (2, 5), generator=torch.Generator().manual_seed(0)), 4,
                   cache=cache)
    held = kv_cache_bytes(cfg, cache.length, 4)
    live = [sum(t.numel() * t.element_size() for t in cache[block.attn]) for block in model.blocks]
    assert tuple(n // 2 for n in live) == held["per layer"]  # a batch of two
    assert held["conv inputs"] == 3 * cfg.d_model * (cfg.linear_conv_size - 1) * 4
