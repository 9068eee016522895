"""What a model costs and how models grow: every parameter term held against the built model, real-size
totals against published figures (within 2%), FLOPs and memory against their formulas written out by hand,
the compute-optimal calculator against Chinchilla, and the messages for impossible budgets."""
import fnmatch
import itertools
import json
import math
import re

import numpy as np
import pytest

import torch
from torch.utils.flop_counter import FlopCounterMode

from transformer import MODEL_CARDS, PRESETS, KVCache, Transformer, TransformerConfig, choices, param_counts
from transformer import scaling
from transformer.costs import (SYMBOLS, forward_flops, forward_flops_per_token, generation_bytes, keys_seen,
                               keys_seen_by_layer, kv_cache_bytes, kv_cache_bytes_per_token, memory_bytes,
                               multiplied_params, param_terms, training_bytes, training_flops,
                               training_flops_per_token)

TEST_SIZE = dict(vocab_size=40, d_model=16, n_heads=4, n_layers=2, max_len=24)
MIXES = [dict(arch=a, position=p, ffn=f, norm=n, bias=b, n_kv_heads=g)
         for a, p, f, n, b, g in itertools.product(choices("arch"), ("learned", "rope"), choices("ffn"),
                                                   choices("norm"), (False, True), (1, 2))]
# the fields of 2024-2026, each alone or with the ones it meets in a real model
MODERN = {
    "MLA with q_rank and qkv bias": dict(kv_rank=8, q_rank=8, head_dim=6, rope_dim=2, v_head_dim=4, bias=True,
                                         qkv_bias=True),
    "MLA without q_rank": dict(kv_rank=8, head_dim=6, rope_dim=2, bias=True),
    "MLA without RoPE": dict(kv_rank=8, position="alibi", v_head_dim=3, qkv_bias=True),
    "sinks, encoder-decoder": dict(arch="encoder-decoder", sinks=True, n_kv_heads=2),
    "QK-norm per head, head_dim": dict(qk_norm="head", n_kv_heads=2, head_dim=6, norm="layernorm"),
    "QK-norm full, gate, encoder-decoder": dict(arch="encoder-decoder", qk_norm="full", n_kv_heads=2, attn_gate=True,
                                                bias=True, v_head_dim=3),
    "output gate, head_dim and v_head_dim": dict(attn_gate=True, head_dim=8, v_head_dim=6),
    "qkv bias without o bias": dict(qkv_bias=True, bias=False, n_kv_heads=1),
    "o bias without qkv bias": dict(qkv_bias=False, bias=True, arch="encoder-decoder"),
    "sandwich, encoder-decoder": dict(arch="encoder-decoder", norm_position="sandwich", norm="layernorm"),
    "after": dict(norm_position="after", qk_norm="full"),
    "after, encoder-decoder": dict(arch="encoder-decoder", norm_position="after", norm="layernorm"),
    "parallel, two norms": dict(parallel_block=True, parallel_norms=2, norm="layernorm"),
    "parallel, one norm": dict(parallel_block=True, parallel_norms=1),
    "geglu with bias": dict(ffn="geglu", bias=True, gelu_approximate="tanh"),
    "MoE: shared, sigmoid, dense first, d_expert, clamped, bias": dict(
        ffn="moe", n_experts=4, top_k=2, n_shared_experts=2, router="sigmoid", first_dense_layers=1, d_expert=8,
        expert_activation="clamped-swiglu", bias=True, n_expert_groups=2, top_groups=1, n_layers=3),
    "MoE: every layer dense, geglu": dict(ffn="moe", first_dense_layers=2, expert_activation="geglu"),
    "MoE: encoder-decoder, shared": dict(arch="encoder-decoder", ffn="moe", first_dense_layers=1, n_shared_experts=1),
    "windows alternate, sinks": dict(layer_pattern="alternate", sliding_window=4, n_layers=4, sinks=True),
    "MoE: shared experts with their gate (Qwen3-Next)": dict(ffn="moe", n_shared_experts=1, shared_expert_gate=True,
                                                             bias=True),
    "hybrid 3:1 Gated DeltaNet, GQA, gate": dict(attention_layers="3:1", n_layers=4, n_kv_heads=2, attn_gate=True,
                                                  linear_key_heads=2, linear_value_heads=4, qk_norm="head"),
    "every state kind, sinks, bias": dict(attention_layers="linear,softmax,decayed-linear,deltanet", n_layers=4,
                                          sinks=True, bias=True),
    "LFM2-like: gated short convolutions, GQA, QK-norm, bias": dict(
        attention_layers="short-conv,softmax,short-conv,deltanet", n_layers=4, linear_conv_size=3, n_kv_heads=2,
        qk_norm="head", bias=True),
    "MiniMax-like: lightning layers with the sigmoid gate, normed skips, MoE": dict(
        attention_layers="3:1", n_layers=4, linear_kind="decayed-linear", linear_sigmoid_gate=True, ffn="moe",
        linear_lightning=True, norm_position="normed-skip",
        n_kv_heads=2),
    "hybrid with MLA": dict(attention_layers="1:1", linear_kind="deltanet", kv_rank=8, head_dim=6, rope_dim=2),
    "Llama 4-like: chunks, NoPE, l2 QK-norm, temperature": dict(
        n_layers=4, attention_chunk=4, chunked_layers="rope", nope_layers="every 4", qk_norm="l2",
        attn_temperature_scale=0.1, n_kv_heads=2),
    "K and V shared by the last layers, QK-norm per head": dict(n_layers=4, kv_shared_layers="last 2", n_kv_heads=2,
                                                                qk_norm="head"),
    "K and V shared, local and global": dict(n_layers=6, kv_shared_layers="last 2", layer_pattern="alternate",
                                             sliding_window=4, qk_norm="full"),
    "OLMo hybrid-like: linear layers pre-norm, full layers after, no RoPE": dict(
        attention_layers="3:1", n_layers=4, norm_position="after", linear_norm_position="pre", qk_norm="full",
        linear_read_norm_eps=1e-5, delta_beta_max=2.0, position="none", n_kv_heads=2, bias=True),
    "linear layers post-norm, last: no final norm, LayerNorm": dict(
        attention_layers="softmax,deltanet,softmax,gated-deltanet", n_layers=4, norm_position="sandwich",
        linear_norm_position="post", norm="layernorm"),
    "Gemma-like": dict(norm_position="sandwich", norm_plus_one=True, scale_embeddings=True, ffn="geglu",
                       qk_norm="head", layer_pattern="2:1", sliding_window=4, n_layers=3, logit_softcap=30.0,
                       attn_softcap=50.0),
}
# DeepSeek-V4's attention and residual streams (their FLOPs are not counted yet: not in MODERN)
V4_LIKE = {
    "DeepSeek-V4-like: pooled, indexed and window layers, grouped output, sinks, hyper-connections, hashed MoE": dict(
        n_layers=3, head_dim=8, rope_dim=4, n_kv_heads=1, q_rank=8, sliding_window=8, max_len=64,
        compress_layers="pooled 8, indexed 4, window", index_top_k=2, index_heads=2, index_head_dim=8, sinks=True,
        o_groups=2, o_rank=4, hyper_streams=3, ffn="moe", n_experts=4, top_k=2, n_shared_experts=1, hash_layers=1,
        router="sqrt-softplus"),
    "DeepSeek-V4-like: one stream, a plain output, two indexed layers": dict(
        n_layers=3, head_dim=8, rope_dim=4, n_kv_heads=1, q_rank=8, sliding_window=8, max_len=64,
        compress_layers="indexed 4, indexed 8, pooled 8", index_top_k=1, index_heads=2, index_head_dim=8)}
CONFIGS = {**{f"preset {k}": cfg for k, cfg in PRESETS.items()},
           **{f"card {k}": card.config for k, card in MODEL_CARDS.items() if k not in PRESETS},
           **{"-".join(str(v) for v in mix.values()): TransformerConfig(**TEST_SIZE, **mix) for mix in MIXES[::5]},
           **{name: TransformerConfig(**{**TEST_SIZE, **changes}) for name, changes in {**MODERN, **V4_LIKE}.items()},
           "bert head": PRESETS["bert"].replace(tie_embeddings=False)}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_term_is_exactly_the_parameters_it_names(name):
    cfg = CONFIGS[name]
    model = Transformer(cfg, device="cpu")
    named = dict(model.named_parameters())  # tied weights once
    owners = {n: [] for n in named}
    for term in param_terms(cfg):
        held = [n for n in named if any(fnmatch.fnmatch(n, pattern) for pattern in term.where)]
        assert sum(named[n].numel() for n in held) == term.count, f"{term.name}: {term.formula}"
        for n in held:
            owners[n].append(term.name)
    assert all(len(terms) == 1 for terms in owners.values()), {n: t for n, t in owners.items() if len(t) != 1}
    assert param_counts(cfg)["total"] == sum(p.numel() for p in named.values())


def test_every_formula_is_written_in_the_symbols():
    for cfg in CONFIGS.values():
        for term in param_terms(cfg):
            letters = set(re.findall(r"[A-Za-z_]+", term.formula))
            assert letters <= set(SYMBOLS), f"{term.name}: {term.formula} uses {letters - set(SYMBOLS)}"


ROUTED = [name for name, cfg in CONFIGS.items() if cfg.ffn == "moe"]


@pytest.mark.parametrize("name", ROUTED)
def test_active_leaves_out_exactly_the_experts_a_token_skips(name):
    """Active = total - (E - k) experts in every routed layer, the expert's size read off the live module; the
    router, shared experts and the dense first layers are used by every token."""
    cfg = CONFIGS[name]
    model = Transformer(cfg, device="cpu")
    skipped = 0
    for module_name, module in model.named_modules():
        if module_name.endswith("mlp") and hasattr(module, "experts"):
            expert = sum(p.numel() for p in module.experts[0].parameters())
            skipped += (cfg.n_experts - cfg.top_k) * expert
    counts = param_counts(cfg)
    assert counts["active"] == counts["total"] - skipped
    assert "choice_bias" not in dict(model.named_parameters())  # the sigmoid router's bias is a buffer


@pytest.mark.parametrize("name", [*MODERN, "preset mixtral", "preset bert", "preset deepseek-v3", "preset gpt-oss",
                                  "preset gemma3"])
def test_forward_flops_equal_torch_flop_counter(name):
    """The analytic count equals torch's own count of every matmul of the explicit path: MLA, narrower values,
    gates, the top-k experts each token went to, both stacks of an encoder-decoder."""
    cfg = CONFIGS[name]
    model = Transformer(cfg, device="cpu").eval().set_fused(False)
    ids = torch.randint(0, cfg.vocab_size, (2, 7), generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(ids, ids) if cfg.arch == "encoder-decoder" else model(ids)
    assert forward_flops(cfg, batch=2, seq=7) == counter.get_total_flops()


def test_the_block_rule_of_thumb_is_twelve_d_squared():
    """4·D² for attention and 8·D² for a 4·D FFN; SwiGLU's 8D/3 width keeps its three matrices at 8·D²."""
    d = 768
    gpt = {t.name: t.per_copy for t in param_terms(TransformerConfig(d_model=d, n_heads=12, ffn="gelu"))}
    assert gpt["W_q"] + gpt["W_k and W_v"] + gpt["W_o"] == 4 * d * d
    assert gpt["W_up"] + gpt["W_down"] == 8 * d * d
    llama = TransformerConfig(d_model=d, n_heads=12, ffn="swiglu")
    swiglu = next(t for t in param_terms(llama) if t.part == "ffn")
    assert llama.d_ff == 2048 and abs(swiglu.per_copy - 8 * d * d) / (8 * d * d) < 0.001


PUBLISHED = [("gpt2", "small", "total", 124e6), ("llama2", "7B", "total", 6.74e9), ("llama2", "70B", "total", 70e9),
             ("gpt2", "175B (GPT-3)", "total", 175e9), ("mixtral", "8x7B", "total", 46.7e9),
             ("mixtral", "8x7B", "active", 12.9e9)]


@pytest.mark.parametrize("key,size,kind,published", PUBLISHED, ids=[f"{k} {s} {w}" for k, s, w, _ in PUBLISHED])
def test_real_totals_are_within_two_percent_of_the_published(key, size, kind, published):
    counted = param_counts(MODEL_CARDS[key].real[size])[kind]
    assert abs(counted - published) / published < 0.02, f"{counted:,} vs {published:,.0f}"


def test_gpt3_is_a_real_size_with_its_published_compute():
    gpt3 = MODEL_CARDS["gpt2"].real["175B (GPT-3)"]
    assert (gpt3.n_layers, gpt3.d_model, gpt3.n_heads, gpt3.d_head, gpt3.max_len) == (96, 12288, 96, 128, 2048)
    n = param_counts(gpt3)["total"]
    assert abs(training_flops(n, 300e9) - 3.14e23) / 3.14e23 < 0.02  # Brown et al. 2020, Table D.1


def test_training_a_token_costs_three_forward_passes():
    cfg = MODEL_CARDS["llama2"].real["7B"]
    forward = forward_flops_per_token(cfg, 4096)
    assert training_flops_per_token(cfg, 4096) == 3 * forward
    n = param_counts(cfg)["total"] - param_counts(cfg)["embedding"]  # the weights a token multiplies by
    attention = 32 * 2 * 2 * 4096 * 4096  # per layer q·K^T and weights·V, over 4096 keys of 32 x 128 dimensions
    assert forward == 2 * n + attention and attention / forward < 0.15
    with pytest.raises(ValueError, match="positive"):
        training_flops(0, 1e9)


def test_memory_by_hand_for_gpt2_small():
    cfg = MODEL_CARDS["gpt2"].real["small"]
    n, s, b, d, heads, layers = param_counts(cfg)["total"], 1024, 8, 768, 12, 12
    memory = memory_bytes(cfg, context=s, batch=b, fused_attention=False)
    assert (memory["weights"], memory["gradients"], memory["optimizer"]) == (2 * n, 2 * n, 12 * n)  # ZeRO's 16 bytes
    assert memory["activations"] == layers * s * b * d * (34 + 5 * heads * s / d)  # Korthikanti et al. 2022
    assert memory_bytes(cfg, s, b)["activations"] == layers * s * b * d * 34  # fused: no s x s matrices kept
    assert memory["kv_cache"] == kv_cache_bytes_per_token(cfg) * s * b == 2 * layers * d * 2 * s * b
    assert training_bytes(memory) == 16 * n + memory["activations"]
    assert generation_bytes(memory) == 2 * n + memory["kv_cache"]
    with pytest.raises(ValueError, match="context=0"):
        memory_bytes(cfg, 0)


# --- KV cache: formulas against the caches generate() fills, and real models' local layers ------------------


def filled_cache(cfg, prompt=5, new=4, batch=2):
    """A float32 model of cfg and the KVCache its generate() filled: prompt + new - 1 tokens."""
    torch.manual_seed(0)
    model = Transformer(cfg, device="cpu").eval()
    cache = KVCache()
    ids = torch.randint(0, cfg.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(1))
    model.generate(ids, new, cache=cache)
    assert cache.length == prompt + new - 1
    return model, cache


@pytest.mark.parametrize("changes", [dict(), dict(n_kv_heads=2, head_dim=6, v_head_dim=3), dict(n_kv_heads=1)],
                         ids=["MHA", "GQA, d_v < d_h", "MQA"])
def test_the_cache_generate_fills_holds_the_formulas_bytes(changes):
    cfg = TransformerConfig(**{**TEST_SIZE, **changes})
    _, cache = filled_cache(cfg)
    G = cfg.n_kv_heads
    assert kv_cache_bytes_per_token(cfg, 4) == cfg.n_layers * (G * cfg.d_head + G * cfg.d_v) * 4  # K and V, float32
    assert cache.nbytes == 2 * cache.length * kv_cache_bytes_per_token(cfg, 4)
    held = kv_cache_bytes(cfg, cache.length, 4)
    assert cache.nbytes == 2 * held["total"] and held["global layers"] == held["total"] and held["local layers"] == 0
    assert held["keys"] + held["values"] == held["total"]
    assert sum(k.numel() * 4 for k, _ in cache.layers.values()) == 2 * held["keys"]


@pytest.mark.parametrize("q_rank", [None, 8])
def test_mla_caches_its_latent_and_one_rope_key_per_layer(q_rank):
    cfg = TransformerConfig(**TEST_SIZE, kv_rank=8, q_rank=q_rank, head_dim=6, rope_dim=2, v_head_dim=4)
    by_hand = cfg.n_layers * (8 + 2)  # numbers per token: the latent (kv_rank) and the shared rope key (d_rope)
    assert kv_cache_bytes_per_token(cfg, 4) == by_hand * 4
    _, cache = filled_cache(cfg)
    assert cache.nbytes == 2 * cache.length * by_hand * 4
    held = kv_cache_bytes(cfg, cache.length, 4)
    assert (held["latent"], held["rope keys"]) == (2 * 8 * cache.length * 4, 2 * 2 * cache.length * 4)
    assert "keys" not in held and held["total"] == held["latent"] + held["rope keys"]
    # a standard cache of the same heads would hold K and V of every head: 2 x 4 x 6 numbers against 8 + 2
    assert kv_cache_bytes_per_token(cfg.replace(kv_rank=None, q_rank=None), 4) == cfg.n_layers * 4 * (6 + 4) * 4


def test_deepseek_v3_caches_576_numbers_per_token_and_layer():
    v3 = MODEL_CARDS["deepseek-v3"].real["671B"]
    assert (v3.kv_rank, v3.d_rope, v3.n_layers) == (512, 64, 61)
    assert kv_cache_bytes_per_token(v3) == 61 * (512 + 64) * 2 == 70_272
    mha = v3.replace(kv_rank=None, q_rank=None)  # every head's K (192) and V (128) instead
    assert kv_cache_bytes_per_token(mha) == 61 * 128 * (192 + 128) * 2
    assert kv_cache_bytes_per_token(mha) / kv_cache_bytes_per_token(v3) > 70


def test_local_layers_hold_their_window_global_layers_every_token():
    """The library's KVCache keeps every token in every layer: its global layers hold exactly what
    kv_cache_bytes counts for them; its local layers hold all T tokens where a windowed cache needs only W."""
    cfg = TransformerConfig(**{**TEST_SIZE, "n_layers": 4}, layer_pattern="alternate", sliding_window=3, n_kv_heads=2)
    model, cache = filled_cache(cfg)  # 8 tokens, window 3
    T, W, per_layer_token = cache.length, 3, 2 * 2 * cfg.d_head * 4  # K and V of 2 kv heads, float32
    live = {block.window: 0 for block in model.blocks}
    for block in model.blocks:
        live[block.window] += sum(t.numel() * t.element_size() for t in cache[block.attn])
    held = kv_cache_bytes(cfg, T, 4)
    assert held["per layer"] == (W * per_layer_token, T * per_layer_token) * 2  # local, global, local, global
    assert live[None] == 2 * held["global layers"] == 2 * 2 * T * per_layer_token  # batch 2
    assert held["local layers"] == 2 * W * per_layer_token
    assert live[W] == 2 * 2 * T * per_layer_token  # the library keeps local layers' older tokens too
    assert cache.nbytes == 2 * T * kv_cache_bytes_per_token(cfg, 4)  # context=None: every layer every token
    assert kv_cache_bytes_per_token(cfg, 4, context=T) == held["total"] / T < kv_cache_bytes_per_token(cfg, 4)
    assert kv_cache_bytes_per_token(cfg, 4, context=W) == kv_cache_bytes_per_token(cfg, 4)  # no window full yet


def test_gemma3_27b_local_layers_at_4k_and_128k_tokens():
    gemma = MODEL_CARDS["gemma3"].real["27B"]
    windows = gemma.layer_windows()
    assert windows.count(None) == 10 and windows.count(1024) == 52  # layers 5, 11, ..., 59 are global
    per_layer_token = 2 * 16 * 128 * 2  # K and V of 16 kv heads of 128, bf16: 8 KiB
    at_4k = kv_cache_bytes(gemma, 4096)
    assert at_4k["global layers"] == 10 * 4096 * per_layer_token  # 320 MiB
    assert at_4k["local layers"] == 52 * 1024 * per_layer_token  # 416 MiB: more than the global layers at 4k
    at_128k = kv_cache_bytes(gemma, 131072)
    assert at_128k["global layers"] == 10 * 131072 * per_layer_token == 10 * 2**30  # 10 GiB
    assert at_128k["local layers"] == at_4k["local layers"]  # capped at the window
    assert at_128k["total"] < 0.2 * 62 * 131072 * per_layer_token  # a sixth of a cache where every layer is global
    assert kv_cache_bytes_per_token(gemma) == 62 * per_layer_token  # before any window fills
    assert kv_cache_bytes_per_token(gemma, context=131072) == at_128k["total"] / 131072


@pytest.mark.parametrize("size,layers", [("120b", 36), ("20b", 24)])
def test_gpt_oss_windowed_layers_hold_128_tokens(size, layers):
    cfg = MODEL_CARDS["gpt-oss"].real[size]
    assert cfg.layer_windows() == (128, None) * (layers // 2)
    per_layer_token = 2 * 8 * 64 * 2  # K and V of 8 kv heads of 64, bf16
    held = kv_cache_bytes(cfg, 131072)
    assert held["local layers"] == layers // 2 * 128 * per_layer_token
    assert held["global layers"] == layers // 2 * 131072 * per_layer_token
    assert held["keys"] == held["values"] == held["total"] // 2
    assert memory_bytes(cfg, 131072, batch=3)["kv_cache"] == 3 * held["total"]


# --- FLOPs per token: each layer its own keys ---------------------------------------------------------------


def test_gemma3_flops_per_token_count_each_layers_keys():
    gemma = MODEL_CARDS["gemma3"].real["27B"]
    context = 131072
    assert keys_seen_by_layer(gemma, context).count(1024) == 52
    assert keys_seen(gemma, context) == context and keys_seen(gemma, context, layer=0) == 1024
    attention = 2 * 32 * (128 + 128) * (10 * context + 52 * 1024)  # q.K and weights.V, each layer over its keys
    assert forward_flops_per_token(gemma, context) == 2 * multiplied_params(gemma) + attention
    all_global = gemma.replace(layer_pattern="global")
    assert forward_flops_per_token(all_global, context) - forward_flops_per_token(gemma, context) == \
        2 * 32 * 256 * 52 * (context - 1024)


def test_moe_and_mla_flops_per_token_count_the_active_weights_and_the_value_width():
    v3 = MODEL_CARDS["deepseek-v3"].real["671B"]
    per_key = 2 * 128 * (192 + 128)  # q.K over d_h = 192, weights.V over d_v = 128, 128 heads
    assert forward_flops_per_token(v3, 4096) == 2 * multiplied_params(v3) + 61 * per_key * 4096
    assert multiplied_params(v3) == param_counts(v3)["active"] - param_counts(v3)["embedding"]  # untied
    oss = MODEL_CARDS["gpt-oss"].real["120b"]
    assert forward_flops_per_token(oss, 100) == 2 * multiplied_params(oss) + 2 * 64 * 128 * 36 * 100  # within 128
    assert 2 * multiplied_params(oss) < 0.05 * 2 * param_counts(oss)["total"]  # 4 of 128 experts


# --- how models grow ---------------------------------------------------------------------------------


def test_the_rule_of_thumb_gives_chinchilla_for_chinchillas_budget():
    best = scaling.compute_optimal(5.76e23)  # Chinchilla's budget: 70B parameters on 1.4T tokens
    assert abs(best.params - 70e9) / 70e9 < 0.02 and abs(best.tokens - 1.4e12) / 1.4e12 < 0.02
    assert best.tokens_per_param == 20
    ten_times = scaling.compute_optimal(5.76e24)
    assert math.isclose(ten_times.params / best.params, math.sqrt(10))


def test_the_fitted_optimum_is_the_lowest_loss_on_its_budget():
    budget = 1e22
    best = scaling.fitted_optimal(budget)
    assert math.isclose(training_flops(best.params, best.tokens), budget)
    sizes = best.params * np.logspace(-1, 1, 201)
    losses = scaling.chinchilla_loss(sizes, budget / (6 * sizes))
    assert abs(sizes[np.argmin(losses)] / best.params - 1) < 0.03
    assert 1.9 < scaling.chinchilla_loss(70e9, 1.4e12) < 2.0  # the fit at Chinchilla: 1.94 nats per token


@pytest.mark.parametrize("budget,words", [(0, ["positive", "got 0"]), (-5e20, ["positive", "-5e+20"]),
                                          (1e40, ["1e+40", "at most 1e+30"]), (float("nan"), ["finite"]),
                                          (float("inf"), ["finite"]), ("a lot", ["'a lot'", "1e21"]),
                                          (10, ["at least 1e+06"])])
def test_impossible_budgets_are_refused_with_the_range(budget, words):
    for calculator in (scaling.compute_optimal, scaling.fitted_optimal):
        with pytest.raises(ValueError) as error:
            calculator(budget)
        assert all(word in str(error.value) for word in words), str(error.value)


def test_the_shipped_sweep_spent_one_budget_on_each_size():
    sweep = json.loads(scaling.SWEEP_PATH.read_text())
    runs, budget = sweep["runs"], sweep["settings"]["budget"]
    assert 3 <= len(runs) <= 4
    assert [r["params"] for r in runs] == sorted(r["params"] for r in runs)
    for run in runs:
        cfg = scaling.sweep_config(run["d_model"], run["vocab_size"], sweep["settings"]["context"])
        assert run["params"] == param_counts(cfg)["total"]
        assert abs(run["flops"] - budget) / budget < 0.05  # whole steps: within 5% of the budget
        assert 0 < run["bits_per_char"] < math.log2(run["vocab_size"])
    assert sum(r["cpu_seconds"] for r in runs) < 600  # a few minutes of one thread in all


def test_deepseek_v4_layers_hold_a_window_and_their_pooled_blocks():
    cfg = CONFIGS["DeepSeek-V4-like: pooled, indexed and window layers, grouped output, sinks, hyper-connections, "
                  "hashed MoE"]  # layers: pooled blocks of 8, indexed blocks of 4, a window alone (8 tokens)
    d_h, d_I, T = cfg.d_head, cfg.index_head_dim, 37
    held = kv_cache_bytes(cfg, T, 1)
    window = 8 * d_h  # the last 8 tokens' one key-value head, in every layer
    pooled = window + (T // 8) * d_h + (T % 8) * 2 * d_h  # 4 blocks; 5 tokens' values and gates wait for theirs
    # 9 blocks and the indexer's own keys of them; the overlapping series keep the last block's rows and 1 token's
    indexed = window + (T // 4) * (d_h + d_I) + (T % 4 + 4) * 2 * 2 * (d_h + d_I)
    assert held["per layer"] == (pooled, indexed, window)
    assert (held["compressed layers"], held["local layers"], held["global layers"]) == (pooled + indexed, window, 0)
    assert held["compressed keys"] == (4 + 9) * d_h and held["index keys"] == 9 * d_I
    # at a million tokens the pooled blocks hold 1/8 and 1/4 of what a key per token would
    million = kv_cache_bytes(cfg, 2**20, 1)["compressed keys"]
    assert million == 2**20 * d_h * (1 / 8 + 1 / 4)
    # a query sees its window and every finished block (8 + 4), or the 2 blocks its indexer keeps, or its window
    assert keys_seen_by_layer(cfg, T) == (8 + 4, 8 + 2, 8)
    # this library's cache keeps every token's head and pooling rows instead, and pools again: what it grows by
    _, cache = filled_cache(cfg, prompt=9, new=3, batch=1)
    assert cache.nbytes == cache.length * kv_cache_bytes_per_token(cfg, 4)
