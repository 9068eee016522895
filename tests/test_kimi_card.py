"""The Kimi Linear card: Kimi-Linear-48B-A3B's published config, its parameters counted term by term, and what its
cache holds at 4k, 128k and 1M tokens: 20 Kimi delta attention layers of constant state beside 7 latent-attention
layers whose latents grow with the text, checked against the tensors a model of its shape fills."""
import torch

from transformer import MODEL_CARDS, KVCache, Transformer
from transformer.costs import kv_cache_bytes, kv_cache_bytes_per_token, param_counts

CARD = MODEL_CARDS["kimi-linear"]
REAL = CARD.real["48B-A3B"]
MIB = 2**20


def test_the_real_size_is_the_published_config():
    plan = REAL.layer_plan()
    full = [spec.index for spec in plan if not spec.row.keeps_state]
    assert full == [3, 7, 11, 15, 19, 23, 26] and len(plan) == 27  # full_attn_layers 4, 8, ... 24, 27 from 1
    assert {spec.kind for spec in plan if spec.row.keeps_state} == {"kimi-delta"}
    assert not any(spec.rotates for spec in plan), "the latent attention turns no positions"
    assert (REAL.d_model, REAL.kv_rank, REAL.d_rope, REAL.d_head - REAL.d_rope, REAL.d_v) == (2304, 512, 64, 128, 128)
    assert (REAL.state_heads, REAL.state_key_heads, REAL.state_d_k, REAL.state_d_v) == (32, 32, 128, 128)
    assert (REAL.n_experts, REAL.top_k, REAL.n_shared_experts, REAL.first_dense_layers) == (256, 8, 1, 1)
    assert CARD.published_params == {"48B-A3B": 48e9} and CARD.published_active == {"48B-A3B": 3e9}


def test_the_parameters_term_by_term():
    V, D, H, d, L = 163840, 2304, 32, 128, 27
    kimi_delta = (4 * D * H * d  # q, k, v and o
                  + 2 * (D * d + d * H * d)  # the decay's and the gate's bottlenecks
                  + H + H * d + D * H + 3 * H * d * 4 + d)  # A, dt, β, the convolution's taps, the read norm
    latent = D * H * 192 + D * (512 + 64) + 512 + 512 * H * (128 + 128) + H * 128 * D  # q, down, norm, up, o
    routed = 26 * (256 * 3 * D * 1024 + 3 * D * 1024 + 256 * D)  # experts, shared, router (its choice bias: a buffer)
    total = 2 * V * D + 20 * kimi_delta + 7 * latent + 3 * D * 9216 + routed + (2 * L + 1) * D
    counts = param_counts(REAL)
    assert counts["total"] == total == CARD.counted("48B-A3B")["total"] == 49_122_675_072
    # as its publisher counts a token's parameters: every multiplied weight, the unembedding, not the lookup
    active = CARD.counted("48B-A3B")["active"]
    assert active == counts["active"] - counts["embedding"] == 3_106_965_888
    # "48B" and "A3B" are rounded names: within 2.5% and 4%
    assert abs(total / 48e9 - 1) < 0.025 and abs(active / 3e9 - 1) < 0.04


def test_the_cache_at_4k_128k_and_1m_tokens_keeps_the_state_apart_from_the_growing_latents():
    state = 20 * (32 * 128 * 128 + 3 * 32 * 128 * 3) * 2  # bf16: a 128 x 128 state per head, 3 inputs per channel
    for context, latents_mib in ((4096, 31.5), (131072, 1008), (1048576, 8064)):
        held = kv_cache_bytes(REAL, context)
        assert held["state layers"] == state == 21.40625 * MIB  # 20 MiB of states, 1.4 MiB of convolution inputs
        assert held["global layers"] == 7 * (512 + 64) * context * 2 == latents_mib * MIB
        assert held["latent"] + held["rope keys"] == held["global layers"]
        assert held["total"] == held["state layers"] + held["global layers"]
    assert kv_cache_bytes_per_token(REAL) == 7 * 576 * 2  # only the latent-attention layers grow


def test_a_model_of_its_shape_fills_the_cache_the_formula_counts():
    """The classroom size keeps its shape (3 Kimi delta attention : 1 latent attention, the latents, the
    convolution); after a prompt and after more tokens, every layer's live tensors are the formula's bytes, and the
    state layers hold the same bytes at both lengths."""
    cfg = CARD.config.replace(n_experts=4, top_k=1, vocab_size=40, max_len=64)
    torch.manual_seed(0)
    model = Transformer(cfg, device="cpu").eval()  # float32: latents and states at 4 bytes
    ids = torch.randint(0, cfg.vocab_size, (2, 5), generator=torch.Generator().manual_seed(1))
    cache = KVCache()
    held = []
    with torch.no_grad():
        model(ids, cache=cache)
        held.append((cache.length, cache.nbytes, [sum(t.numel() * t.element_size() for t in cache[block.attn])
                                                  for block in model.blocks]))
        model.generate(ids[:, -1:], 6, cache=cache)
        held.append((cache.length, cache.nbytes, [sum(t.numel() * t.element_size() for t in cache[block.attn])
                                                  for block in model.blocks]))
    for length, nbytes, per_layer in held:
        expected = kv_cache_bytes(cfg, length, 4)
        assert nbytes == 2 * expected["total"] and tuple(n // 2 for n in per_layer) == expected["per layer"]
    (short, _, first), (long, _, second) = held
    assert long > short and first[:3] == second[:3] and second[3] > first[3]  # the states stay, the latents grow
