"""kv_cache_bytes counts what a cache really holds when some layers keep a state: the softmax layers' keys and
values, which grow with the text, and each linear layer's states and convolution inputs, which do not. Checked
against the KVCache that generate() fills, and against Qwen3-Next-80B-A3B's published shapes."""
import pytest

import torch

from transformer import AXES, KVCache, Transformer, TransformerConfig
from transformer.costs import kv_cache_bytes, kv_cache_bytes_per_token

SIZE = dict(vocab_size=40, d_model=16, n_heads=4, n_layers=4, max_len=32)
STATE_KINDS = [key for key, row in AXES["attention"].choices.items() if row.keeps_state]


def filled_cache(cfg, prompt=5, new=4, batch=2):
    torch.manual_seed(0)
    model = Transformer(cfg, device="cpu").eval()  # float32: states, keys and values at 4 bytes
    cache = KVCache()
    ids = torch.randint(0, cfg.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(1))
    model.generate(ids, new, cache=cache)
    return model, cache


@pytest.mark.parametrize("changes", [dict(linear_kind=kind) for kind in STATE_KINDS]
                         + [dict(linear_key_heads=2, linear_value_heads=4, linear_key_head_dim=6,
                                 linear_value_head_dim=3, n_kv_heads=2)],
                         ids=[*STATE_KINDS, "Qwen3-Next-like heads"])
def test_a_hybrids_cache_holds_the_formulas_bytes(changes):
    cfg = TransformerConfig(**SIZE, attention_layers="3:1", **changes)
    model, cache = filled_cache(cfg)
    held = kv_cache_bytes(cfg, cache.length, 4)
    assert cache.nbytes == 2 * held["total"]  # a batch of two sequences
    live = [sum(t.numel() * t.element_size() for t in cache[block.attn]) for block in model.blocks]
    assert tuple(n // 2 for n in live) == held["per layer"]
    assert held["state layers"] + held["global layers"] == held["total"]
    assert held["keys"] + held["values"] + held["states"] + held["conv inputs"] == held["total"]
    # the three linear layers hold the same bytes after 8 tokens as after 1: the softmax layer alone grows
    assert kv_cache_bytes(cfg, 1, 4)["state layers"] == held["state layers"]
    assert kv_cache_bytes_per_token(cfg, 4) == 1 * 2 * cfg.n_kv_heads * cfg.d_head * 4  # one softmax layer of four


def test_a_linear_only_model_holds_a_constant_and_grows_by_nothing():
    cfg = TransformerConfig(**SIZE, attention_layers="deltanet", position="none")
    _, cache = filled_cache(cfg)
    held = kv_cache_bytes(cfg, cache.length, 4)
    assert cache.nbytes == 2 * held["total"] == 2 * held["states"] == 2 * 4 * 4 * 4 * 4 * 4  # layers·H·d_k·d_v·4
    assert kv_cache_bytes_per_token(cfg) == 0
    assert kv_cache_bytes(cfg, 1_000_000)["total"] == kv_cache_bytes(cfg, 1)["total"]


def test_states_may_be_kept_at_another_precision_than_keys():
    cfg = TransformerConfig(**SIZE, attention_layers="3:1")
    bf16 = kv_cache_bytes(cfg, 100, 2)
    mixed = kv_cache_bytes(cfg, 100, 2, state_bytes_per_value=4)
    assert mixed["states"] == 2 * bf16["states"] and mixed["keys"] == bf16["keys"]
    assert mixed["conv inputs"] == bf16["conv inputs"]  # the convolution keeps the model's own inputs


def test_qwen3_next_80b_at_128k_tokens():
    """Qwen3-Next-80B-A3B's config.json: 48 layers, a full-attention layer every 4th (16 q heads, 2 kv heads of
    256), Gated DeltaNet in the others (16 key heads and 32 value heads of 128, a convolution of 4)."""
    hybrid = TransformerConfig(vocab_size=151936, d_model=2048, n_layers=48, n_heads=16, n_kv_heads=2, head_dim=256,
                               attention_layers="3:1", linear_key_heads=16, linear_value_heads=32,
                               linear_key_head_dim=128, linear_value_head_dim=128, max_len=262144)
    held = kv_cache_bytes(hybrid, 131072)
    assert held["global layers"] == 12 * 2 * 2 * 256 * 2 * 131072 == 3 * 2**30  # 3 GiB in bf16
    state, conv = 32 * 128 * 128 * 2, (2 * 16 * 128 + 32 * 128) * 3 * 2  # one layer: 1 MiB and 48 KiB
    assert held["state layers"] == 36 * (state + conv)
    full = hybrid.replace(attention_layers="softmax", linear_key_heads=None, linear_value_heads=None,
                          linear_key_head_dim=None, linear_value_head_dim=None)
    assert kv_cache_bytes(full, 131072)["total"] == 4 * held["global layers"] == 12 * 2**30


def test_a_layer_that_reads_an_earlier_layers_keys_holds_none_and_a_chunked_layer_at_most_its_chunk():
    shared = TransformerConfig(**SIZE, kv_shared_layers="last 2", n_kv_heads=2)
    _, cache = filled_cache(shared)
    held = kv_cache_bytes(shared, cache.length, 4)
    assert cache.nbytes == 2 * held["total"] and held["per layer"][2:] == (0, 0)
    assert kv_cache_bytes_per_token(shared, 4) == 2 * 2 * 2 * shared.d_head * 4  # two layers of K and V
    chunked = TransformerConfig(**SIZE, attention_chunk=4)
    assert kv_cache_bytes(chunked, 100, 4)["local layers"] == 4 * 4 * 2 * 4 * chunked.d_head * 4
    assert kv_cache_bytes(chunked, 3, 4)["total"] == kv_cache_bytes(TransformerConfig(**SIZE), 3, 4)["total"]
