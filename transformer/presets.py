"""Real models as choices along the five axes: classroom-size presets with their real sizes alongside.

``MODEL_CARDS[name]`` holds a small config with the family's axes, the real-size configs (for parameter
and KV-cache arithmetic) and the published parameter counts; ``PRESETS[name]`` is the small config of
the families that ship trained checkpoints (the models of 2024-2026 are cards only, for now).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .config import TransformerConfig
from .costs.params import multiplied_params, param_counts

# how a publisher counted "active parameters": every parameter one token uses, the embedding table included
# (Mixtral, DeepSeek-V3, Qwen3), only those it multiplies by, the embedding lookup left out (gpt-oss), or neither
# the embedding nor the output head (MiniMax-01)
ACTIVE_COUNTS = {"used": lambda cfg: param_counts(cfg)["active"], "multiplied": multiplied_params,
                 "non-embedding": lambda cfg: _without_embeddings(param_counts(cfg))}


def _without_embeddings(counts: dict[str, int]) -> int:
    """The active parameters less the token embedding and the output head (tied: the one table, once)."""
    return counts["active"] - counts["embedding"] - counts["head"]


@dataclass(frozen=True)
class ModelCard:
    key: str
    name: str
    year: int
    summary: str  # the axes in one line
    config: TransformerConfig  # classroom size
    real: dict[str, TransformerConfig] = field(default_factory=dict)  # size name -> real dimensions
    published_params: dict[str, float] = field(default_factory=dict)  # size name -> published total parameters
    published_active: dict[str, float] = field(default_factory=dict)  # MoE: parameters used per token
    active_counts: str = "used"  # how its publisher counted the active parameters: a key of ACTIVE_COUNTS
    size_names: dict[str, str] = field(default_factory=dict)  # a size that is a model of its own -> its name

    def label(self, size: str) -> str:
        """How the pages name a real size: "LLaMA 2 70B", or the size's own name (GPT-2's 175B is "GPT-3 175B")."""
        return self.size_names.get(size, f"{self.name} {size}")

    def counted(self, size: str) -> dict[str, int]:
        """A real size's total and active parameters, counted as its publisher counted them."""
        cfg = self.real[size]
        return {"total": param_counts(cfg)["total"], "active": ACTIVE_COUNTS[self.active_counts](cfg)}


CLASSROOM = dict(vocab_size=128, d_model=64, n_heads=4, n_layers=2, max_len=256)  # sizes a laptop trains in minutes
# the families whose language model reads everyday English: wide and deep enough for previous-token and
# induction heads on real sentences (4 heads of 32), and still under 50 ms for a page's forward of 256 characters
ENGLISH_SIZE = dict(d_model=128, n_layers=4)
# their gated FFNs (SwiGLU, GeGLU, the experts of Mixtral) keep LLaMA 2's width, 176, not 8/3 x 128 = 344: they
# compare with one another, and each step costs about two thirds as much, which keeps Mixtral's two experts per
# character inside the training budget
ENGLISH_GATED = dict(ENGLISH_SIZE, d_ff=176)


def _card(key, name, year, summary, axes: dict, real: dict[str, dict], published=None, active=None,
          classroom: dict | None = None, active_counts: str = "used", size_names: dict | None = None) -> ModelCard:
    """`axes` hold for every size; `classroom` adds what only the classroom size sets (its own small widths): the
    one place a classroom size is written, which the shipped checkpoints were trained at (scripts/train_checkpoints.py
    changes none of them)."""
    small = TransformerConfig(**{**CLASSROOM, **axes, **(classroom or {})})
    real_cfgs = {size: TransformerConfig(**{**axes, **dims}) for size, dims in real.items()}
    return ModelCard(key, name, year, summary, small, real_cfgs, published or {}, active or {}, active_counts,
                     size_names or {})


_ORIGINAL = dict(arch="encoder-decoder", position="sinusoidal", norm="layernorm", norm_position="post", ffn="relu", bias=True)
_GPT2 = dict(arch="decoder", position="learned", norm="layernorm", norm_position="pre", ffn="gelu", gelu_approximate="tanh", bias=True)
_BERT = dict(arch="encoder", position="learned", norm="layernorm", norm_position="post", ffn="gelu", bias=True,
             embed_norm=True, head_transform=True, head_bias=True)
_LLAMA = dict(arch="decoder", position="rope", norm="rmsnorm", norm_position="pre", ffn="swiglu", tie_embeddings=False)
_PALM = dict(arch="decoder", position="rope", norm="layernorm", norm_position="pre", ffn="swiglu", parallel_block=True)
_FALCON = dict(arch="decoder", position="rope", norm="layernorm", norm_position="pre", ffn="gelu", parallel_block=True)
_BLOOM = dict(arch="decoder", position="alibi", norm="layernorm", norm_position="pre", ffn="gelu", gelu_approximate="tanh",
              bias=True, embed_norm=True)
# T5: pre-RMSNorm without biases, scores not divided by sqrt(d_head), learned relative position buckets (32 up to
# distance 128, one table per stack); v1.0's ReLU FFN and tied head (rescaled by d_model**-0.5 before it)
_T5 = dict(arch="encoder-decoder", position="t5", norm="rmsnorm", norm_position="pre", ffn="relu", score_scale=1.0,
           norm_eps=1e-6, head_input_scale=None)
_T5_REAL = dict(vocab_size=32128, max_len=512, relative_buckets=32, relative_max_distance=128)

_CARDS = [
    _card("original", "Original Transformer", 2017, "encoder-decoder · MHA · sinusoidal · post-LayerNorm · ReLU", _ORIGINAL,
          {"base": dict(vocab_size=37000, d_model=512, n_heads=8, n_layers=6, d_ff=2048, max_len=512)}, {"base": 65e6}),
    _card("gpt2", "GPT-2", 2019, "decoder · MHA · learned · pre-LayerNorm · GELU", _GPT2,
          {"small": dict(vocab_size=50257, d_model=768, n_heads=12, n_layers=12, d_ff=3072, max_len=1024),
           "xl": dict(vocab_size=50257, d_model=1600, n_heads=25, n_layers=48, d_ff=6400, max_len=1024),
           # GPT-3 is GPT-2's recipe at 175B (Brown et al. 2020, Table 2.1); its alternating locally banded
           # sparse layers change no parameter
           "175B (GPT-3)": dict(vocab_size=50257, d_model=12288, n_heads=96, n_layers=96, d_ff=49152, max_len=2048)},
          {"small": 124e6, "xl": 1.558e9, "175B (GPT-3)": 175e9}, classroom=ENGLISH_SIZE,
          size_names={"175B (GPT-3)": "GPT-3 175B"}),
    _card("bert", "BERT", 2018, "encoder · MHA · learned · post-LayerNorm · GELU", _BERT,
          {"base": dict(vocab_size=30522, d_model=768, n_heads=12, n_layers=12, d_ff=3072, max_len=512, norm_eps=1e-12)},
          {"base": 110e6}, classroom=ENGLISH_SIZE),
    _card("llama2", "LLaMA 2", 2023, "decoder · MHA (7B) / GQA (70B) · RoPE · pre-RMSNorm · SwiGLU",
          _LLAMA,
          {"7B": dict(vocab_size=32000, d_model=4096, n_heads=32, n_kv_heads=32, n_layers=32, d_ff=11008, max_len=4096),
           "70B": dict(vocab_size=32000, d_model=8192, n_heads=64, n_kv_heads=8, n_layers=80, d_ff=28672, max_len=4096)},
          {"7B": 6.74e9, "70B": 68.98e9}, classroom=dict(ENGLISH_GATED, n_kv_heads=2)),
    # Mistral 7B v0.1: trained at 8,192 tokens with a 4,096-token window in every layer (v0.2 has 32k and no window)
    _card("mistral", "Mistral", 2023, "decoder · GQA · RoPE · sliding window · pre-RMSNorm · SwiGLU",
          _LLAMA,
          {"7B": dict(vocab_size=32000, d_model=4096, n_heads=32, n_kv_heads=8, n_layers=32, d_ff=14336, max_len=8192,
                      sliding_window=4096)},
          {"7B": 7.24e9},
          # its window covers half of the 512 characters its English model trained on, as Mistral 7B's 4,096 of 8,192
          classroom=dict(ENGLISH_GATED, n_kv_heads=2, sliding_window=256)),
    _card("palm", "PaLM", 2022, "decoder · MQA · RoPE · parallel block · pre-LayerNorm · SwiGLU",
          {**_PALM, "n_kv_heads": 1},
          {"8B": dict(vocab_size=256000, d_model=4096, n_heads=16, n_kv_heads=1, n_layers=32, d_ff=16384, max_len=2048),
           "62B": dict(vocab_size=256000, d_model=8192, n_heads=32, n_kv_heads=1, n_layers=64, d_ff=32768, max_len=2048)},
          {"8B": 8.63e9, "62B": 62.5e9}, classroom=ENGLISH_GATED),
    _card("mixtral", "Mixtral", 2023, "decoder · GQA · RoPE · pre-RMSNorm · MoE (8 SwiGLU experts, top-2)",
          {**_LLAMA, "ffn": "moe", "top_k": 2},
          {"8x7B": dict(vocab_size=32000, d_model=4096, n_heads=32, n_kv_heads=8, n_layers=32, d_ff=14336, max_len=32768,
                        n_experts=8, top_k=2, rope_theta=1e6)},
          {"8x7B": 46.7e9}, {"8x7B": 12.9e9}, classroom=dict(ENGLISH_GATED, n_kv_heads=2, n_experts=4)),
    _card("falcon", "Falcon", 2023, "decoder · MQA · RoPE · parallel block · pre-LayerNorm · GELU",
          {**_FALCON, "n_kv_heads": 1},
          {"7B": dict(vocab_size=65024, d_model=4544, n_heads=71, n_kv_heads=1, n_layers=32, d_ff=18176, max_len=2048)},
          {"7B": 6.92e9}, classroom=ENGLISH_SIZE),
    _card("bloom", "BLOOM", 2022, "decoder · MHA · ALiBi · pre-LayerNorm (+ embedding norm) · GELU", _BLOOM,
          {"560M": dict(vocab_size=250880, d_model=1024, n_heads=16, n_layers=24, d_ff=4096, max_len=2048),
           "176B": dict(vocab_size=250880, d_model=14336, n_heads=112, n_layers=70, d_ff=57344, max_len=2048)},
          {"560M": 559e6, "176B": 176e9},
          # 10 heads of 16 at d_model 160 (ALiBi's steepest slope 2^-0.5): at 8 heads of 16 in 128 its English model's
          # best previous-token head put 0.44 on the character before, at this size 0.65 (docs/checkpoints.md)
          classroom=dict(ENGLISH_SIZE, d_model=160, n_heads=10)),
]

# --- the models of 2024-2026 -----------------------------------------------------------------------------
# Real sizes from each model's published config (Hugging Face config.json and the technical reports); the totals
# they publish are matched within 2% by param_counts. Their classroom configs build and run; those whose English
# language model ships are presets too (TRAINED_RECENT: every preset ships a language model, docs/checkpoints.md),
# the others are model cards only.

_LLAMA3 = dict(_LLAMA, rope_theta=500000.0)
_LLAMA31_LONG = dict(max_len=131072, rope_scaling="llama3", rope_factor=8.0, rope_original_max_len=8192)
_OLMO2 = dict(_LLAMA, norm_position="after", qk_norm="full", rope_theta=500000.0, norm_eps=1e-6)
_QWEN3 = dict(_LLAMA, qk_norm="head", rope_theta=1e6, norm_eps=1e-6)
# three Gated DeltaNet layers to one gated full-attention layer; q and k normed per head, RoPE on a quarter of each head
_QWEN3_5 = dict(_LLAMA, attention_layers="3:1", linear_kind="gated-deltanet", attn_gate=True, qk_norm="head",
                norm_plus_one=True, rope_theta=1e7, norm_eps=1e-6)
_QWEN3_5_REAL = dict(vocab_size=248320, d_model=4096, head_dim=256, rope_dim=64, linear_key_heads=16,
                     linear_key_head_dim=128, linear_value_head_dim=128, max_len=262144)
_GEMMA3 = dict(arch="decoder", position="rope", norm="rmsnorm", norm_position="sandwich", norm_plus_one=True,
               ffn="geglu", gelu_approximate="tanh", qk_norm="head", scale_embeddings=True, tie_embeddings=True,
               layer_pattern="5:1", rope_theta=1e6, rope_local_theta=10000.0, norm_eps=1e-6)
# Gemma 4: Gemma 3's sandwich and GeGLU, with plain-w RMSNorms, q.k unscaled, values normed, a scalar per block;
# its global layers turn a quarter of their frequencies (proportional RoPE at 1M), the local ones all (10k)
_GEMMA4 = dict(arch="decoder", position="rope", norm="rmsnorm", norm_position="sandwich", ffn="geglu",
               gelu_approximate="tanh", qk_norm="head", value_norm=True, layer_scalar=True, scale_embeddings=True,
               tie_embeddings=True, score_scale=1.0, layer_pattern="5:1", rope_theta=1e6, rope_local_theta=10000.0,
               rope_scaling="proportional", rope_fraction=0.25, norm_eps=1e-6, logit_softcap=30.0, k_eq_v=True)
_DEEPSEEK_V3 = dict(_LLAMA, ffn="moe", router="sigmoid", routed_scale=2.5, n_shared_experts=1, norm_eps=1e-6)
_GPT_OSS = dict(_LLAMA, ffn="moe", expert_activation="clamped-swiglu", bias=True, sinks=True, layer_pattern="alternate",
                norm_eps=1e-5)
_GPT_OSS_REAL = dict(vocab_size=201088, d_model=2880, n_heads=64, head_dim=64, n_kv_heads=8, d_ff=2880, d_expert=2880,
                     top_k=4, sliding_window=128, max_len=131072, rope_theta=150000.0, rope_scaling="yarn",
                     rope_factor=32.0, rope_original_max_len=4096, yarn_truncate=False)
# LFM2: gated short convolutions (3 taps) with GQA softmax layers at 2, 5, 8, 10, 12 and 14 of 16; tied embeddings
_LFM2 = dict(arch="decoder", position="rope", norm="rmsnorm", norm_position="pre", ffn="swiglu", qk_norm="head",
             rope_theta=1e6, linear_kind="short-conv", linear_conv_size=3)
_LFM2_LAYERS = ",".join("softmax" if i in (2, 5, 8, 10, 12, 14) else "short-conv" for i in range(16))
# MiniMax-01: seven lightning-attention layers (decayed linear in lightning's form, its read gated by sigmoid(x W_g))
# to one GQA softmax layer, and 32 experts in every layer; each residual path carries its sublayer's normed input
# (the released model also scales it by DeepNorm's alpha, 3.56, which is not built: it changes no parameter count)
_MINIMAX = dict(arch="decoder", position="rope", norm="rmsnorm", norm_position="normed-skip", ffn="moe", top_k=2,
                tie_embeddings=False, attention_layers="7:1", linear_kind="decayed-linear", linear_lightning=True,
                linear_sigmoid_gate=True, linear_read_norm_eps=1e-6, rope_theta=1e7)
_DEEPSEEK_YARN_MSCALE = 0.1 * math.log(40) + 1  # DeepSeek-V3 scales the scores, not cos and sin, by YaRN's factor
# Kimi Linear: Kimi delta attention with latent attention that turns no positions (every full layer in nope_layers
# keeps its shared key part unrotated), in DeepSeek-V3's blocks; its latent norms keep HF's eps of 1e-6
_KIMI_LINEAR = dict(_LLAMA, linear_kind="kimi-delta", ffn="moe", router="sigmoid", router_norm=True, routed_scale=2.446,
                    n_shared_experts=1, first_dense_layers=1, norm_eps=1e-5, latent_norm_eps=1e-6)
_KIMI_FULL_LAYERS = (3, 7, 11, 15, 19, 23, 26)  # full_attn_layers 4, 8, ..., 24 and 27, counted from 1 there
_DEEPSEEK_V3_REAL = dict(vocab_size=129280, d_model=7168, n_heads=128, head_dim=192, rope_dim=64, v_head_dim=128,
                         kv_rank=512, q_rank=1536, n_layers=61, d_ff=18432, d_expert=2048, n_experts=256, top_k=8,
                         n_expert_groups=8, top_groups=4, first_dense_layers=3, max_len=163840, rope_scaling="yarn",
                         rope_factor=40.0, rope_original_max_len=4096, yarn_attention_factor=1.0,
                         score_scale=_DEEPSEEK_YARN_MSCALE ** 2 / math.sqrt(192))
# DeepSeek's classroom size: a latent of 64 numbers (+ an 8-number rotated key) per token where 4 heads of 32 would
# cache 256; 8 small experts (a quarter of the width, as V3's 2,048 of 7,168)
_DEEPSEEK_CLASSROOM = dict(ENGLISH_GATED, head_dim=32, rope_dim=8, v_head_dim=32, kv_rank=64, q_rank=96, n_experts=8,
                           top_k=2, n_expert_groups=4, top_groups=2, d_expert=32, first_dense_layers=1)
# DeepSeek Sparse Attention's classroom indexer: 4 heads of 16 keep 32 keys of up to 256 per query
_DSA_CLASSROOM = dict(index_top_k=32, index_heads=4, index_head_dim=16)

# DeepSeek-V4: every layer's attention one head that is key and value, a window beside pooled blocks, per-head sinks
# and a grouped low-rank output; 4 residual streams mixed by hyper-connections; experts routed by sqrt(softplus),
# the first 3 layers by a fixed table of token ids. Flash's layers: 2 pooled by 128, then indexed-4 and pooled-128 by turns
_DEEPSEEK_V4 = dict(position="rope", norm="rmsnorm", norm_eps=1e-6, n_kv_heads=1, sinks=True, hyper_streams=4,
                    ffn="moe", router="sqrt-softplus", router_norm=True, routed_scale=1.5, n_shared_experts=1,
                    expert_activation="limited-swiglu", expert_limit=10.0, hash_layers=3, compress_rope_theta=160000.0,
                    tie_embeddings=False)
_V4_FLASH_LAYERS = ["pooled 128"] * 2 + ["indexed 4" if i % 2 else "pooled 128" for i in range(41)]
_DEEPSEEK_V4_FLASH = dict(vocab_size=129280, d_model=4096, n_heads=64, head_dim=512, rope_dim=64, q_rank=1024,
                          n_layers=43, sliding_window=128, compress_layers=", ".join(_V4_FLASH_LAYERS), o_groups=8,
                          o_rank=1024, n_experts=256, top_k=6, d_ff=2048, d_expert=2048, index_top_k=512,
                          index_heads=64, index_head_dim=128, max_len=1048576)
# the classroom's: a window of 32 beside blocks of 16 (pooled) and of 4 (an indexer keeps 8 of them)
_DEEPSEEK_V4_CLASSROOM = dict(n_layers=4, head_dim=32, rope_dim=8, q_rank=32, sliding_window=32,
                              compress_layers="pooled 16, indexed 4, pooled 16, window", index_top_k=8, index_heads=4,
                              index_head_dim=16, o_groups=2, o_rank=16, n_experts=8, top_k=2, d_expert=32,
                              hash_layers=1)

# Llama 4: every fourth layer leaves RoPE out (and sees every earlier token), the other three see only their own
# chunk of 8,192 tokens; a token's queries on the NoPE layers warm with its position; q and k L2-normed on the RoPE
# layers; one routed expert of 16 (Scout) or 128 (Maverick) per token, by a sigmoid score, beside one shared expert
_LLAMA4 = dict(_LLAMA, ffn="moe", router="sigmoid", router_norm=False, router_scales_input=True, top_k=1,
               n_shared_experts=1, qk_norm="l2",
               nope_layers="every 4", chunked_layers="rope", attn_temperature_scale=0.1, rope_theta=500000.0)
_LLAMA4_REAL = dict(vocab_size=202048, d_model=5120, n_heads=40, n_kv_heads=8, head_dim=128, n_layers=48,
                    d_ff=16384, d_expert=8192, attention_chunk=8192)
# SmolLM3: LLaMA's block with GQA, a tied embedding, and every fourth layer without RoPE
_SMOLLM3 = dict(_LLAMA, tie_embeddings=True, nope_layers="every 4", rope_theta=5e6, norm_eps=1e-6)
# OLMo 3: OLMo 2's block, three sliding-window layers (4,096) to one full layer; the full layers' RoPE stretched by
# YaRN (x8 from 8,192 tokens), the sliding layers' plain at the same base
_OLMO3 = dict(_OLMO2, layer_pattern="3:1", rope_local_theta=500000.0, rope_scaling="yarn", rope_factor=8.0,
              rope_original_max_len=8192)
_OLMO3_REAL = dict(vocab_size=100278, sliding_window=4096, max_len=65536)

_RECENT_CARDS = [
    _card("llama3", "LLaMA 3.1", 2024, "decoder · GQA · RoPE (llama3 scaling to 128k) · pre-RMSNorm · SwiGLU",
          _LLAMA3,
          {"8B": dict(vocab_size=128256, d_model=4096, n_heads=32, n_kv_heads=8, n_layers=32, d_ff=14336, **_LLAMA31_LONG),
           "70B": dict(vocab_size=128256, d_model=8192, n_heads=64, n_kv_heads=8, n_layers=80, d_ff=28672,
                       **_LLAMA31_LONG),
           "405B": dict(vocab_size=128256, d_model=16384, n_heads=128, n_kv_heads=8, n_layers=126, d_ff=53248,
                        **_LLAMA31_LONG)},
          {"8B": 8.03e9, "70B": 70.6e9, "405B": 405e9}, classroom=dict(n_kv_heads=2)),
    # OLMo 2 normalises each sublayer's output (no norm before it) and q, k over all heads at once
    _card("olmo2", "OLMo 2", 2024, "decoder · MHA · RoPE · RMSNorm after each sublayer · QK-norm (full) · SwiGLU",
          _OLMO2,
          {"7B": dict(vocab_size=100352, d_model=4096, n_heads=32, n_layers=32, d_ff=11008, max_len=4096),
           "13B": dict(vocab_size=100352, d_model=5120, n_heads=40, n_layers=40, d_ff=13824, max_len=4096)},
          {"7B": 7.30e9, "13B": 13.7e9}),
    # head_dim 128 is chosen on its own: 32 x 128 = 4,096 = d_model at 8B, but 64 x 128 = 8,192 at 235B
    _card("qwen3", "Qwen3", 2025, "decoder · GQA · RoPE · QK-norm (per head) · pre-RMSNorm · SwiGLU, or MoE "
          "(128 experts, top-8)", _QWEN3,
          {"8B": dict(vocab_size=151936, d_model=4096, n_heads=32, n_kv_heads=8, head_dim=128, n_layers=36, d_ff=12288,
                      max_len=40960),
           "235B-A22B": dict(vocab_size=151936, d_model=4096, n_heads=64, n_kv_heads=4, head_dim=128, n_layers=94,
                             ffn="moe", d_ff=12288, d_expert=1536, n_experts=128, top_k=8, max_len=40960)},
          {"8B": 8.2e9, "235B-A22B": 235e9}, {"235B-A22B": 22e9},
          classroom=dict(ENGLISH_GATED, n_kv_heads=2, head_dim=32)),  # the size its English model trained at
    # the language model: 1,416M embedding + 25,600M other parameters (Gemma 3 report, Table 1); the 417M of its
    # SigLIP vision encoder are left out. Five local layers (window 1,024, RoPE base 10k) to one global (1M, x8)
    _card("gemma3", "Gemma 3", 2025, "decoder · GQA · RoPE · 5 local : 1 global layers · sandwich RMSNorm (1 + w) · "
          "QK-norm · GeGLU", _GEMMA3,
          {"27B": dict(vocab_size=262208, d_model=5376, n_heads=32, n_kv_heads=16, head_dim=128, n_layers=62,
                       d_ff=21504, max_len=131072, sliding_window=1024, score_scale=168 ** -0.5,
                       rope_scaling="linear", rope_factor=8.0)},
          {"27B": 27.0e9},
          # the size its English model trained at: six layers keep the 5 : 1 pattern, the one global layer last
          classroom=dict(ENGLISH_GATED, n_layers=6, n_kv_heads=2, head_dim=32, sliding_window=64)),
    # 31B (30.7B as published) from its Hugging Face config: 60 layers, five local (window 1,024) to one global. The
    # global layers have heads of 512 and 4 kv heads, K = V: their cache is 4 x 512 numbers per token for K and as
    # many for V, where a local layer's is 16 x 256 each. The cache saves in the windowed layers (50 of 60 hold at
    # most 1,024 tokens) and in the global layers' fewer kv heads; bf16: 1.09 GiB at 4k tokens, 10.8 GiB at 128k,
    # 80.8 GiB at 1M (the 256k context is its longest). The small Gemma 4 models (E2B, E4B) add per-layer input
    # embeddings and let their last layers reuse earlier K and V (kv_shared_layers), which the classroom size shows
    _card("gemma4", "Gemma 4", 2026, "decoder · GQA · RoPE (proportional on global layers) · 5 local : 1 global "
          "layers · K = V on global layers · sandwich RMSNorm · QK-norm and value norm · GeGLU", _GEMMA4,
          {"31B": dict(vocab_size=262144, d_model=5376, n_heads=32, n_kv_heads=16, head_dim=256, global_head_dim=512,
                       global_kv_heads=4, n_layers=60, d_ff=21504, max_len=262144, sliding_window=1024)},
          {"31B": 30.7e9},
          classroom=dict(ENGLISH_GATED, n_layers=8, n_kv_heads=2, head_dim=16, global_head_dim=32, global_kv_heads=1,
                         sliding_window=64, kv_shared_layers="last 2", per_layer_dim=16)),
    # 671B and 37B active as published: the main model, without its 14B multi-token-prediction module
    # (the Hugging Face checkpoint's 685B include it)
    _card("deepseek-v3", "DeepSeek-V3", 2024, "decoder · MLA · RoPE (decoupled, YaRN) · pre-RMSNorm · MoE (256 "
          "experts, sigmoid router, top-8 + 1 shared, first 3 layers dense)", _DEEPSEEK_V3,
          {"671B": _DEEPSEEK_V3_REAL}, {"671B": 671e9}, {"671B": 37e9},
          classroom=_DEEPSEEK_CLASSROOM),  # the size its English model trained at
    # DeepSeek-V3's model and a lightning indexer in every layer (64 heads of 128 keep 2,048 keys per query): 0.85B
    # more parameters, and 128 more cached numbers per token and layer beside MLA's 576. The published 37B active
    # matches what a token multiplies by (37.5B; with the embedding lookup 38.4B)
    _card("deepseek-v3.2", "DeepSeek-V3.2", 2025, "decoder · MLA · indexer top-2048 (DeepSeek Sparse Attention) · "
          "RoPE (decoupled, YaRN) · pre-RMSNorm · MoE (256 experts, sigmoid router, top-8 + 1 shared)", _DEEPSEEK_V3,
          {"671B": dict(_DEEPSEEK_V3_REAL, index_top_k=2048, index_heads=64, index_head_dim=128)},
          {"671B": 671e9}, {"671B": 37e9}, classroom=dict(_DEEPSEEK_CLASSROOM, **_DSA_CLASSROOM),
          active_counts="multiplied"),
    # GLM-5 (Z.ai): DeepSeek-V3.2's layers at its own sizes, 78 layers, 32 indexer heads; its latent norms keep 1e-6
    # beside rms_norm_eps 1e-5. 744B as published (743.9B); the published 40B active matches the count outside the
    # embedding and the output matrix (39.9B; what a token multiplies by, 40.8B, is 2.1% over)
    _card("glm-5", "GLM-5", 2026, "decoder · MLA · indexer top-2048 (DeepSeek Sparse Attention) · RoPE (decoupled) · "
          "pre-RMSNorm · MoE (256 experts, sigmoid router, top-8 + 1 shared)", dict(_DEEPSEEK_V3, norm_eps=1e-5),
          {"744B": dict(vocab_size=154880, d_model=6144, n_heads=64, head_dim=256, rope_dim=64, v_head_dim=256,
                        kv_rank=512, q_rank=2048, latent_norm_eps=1e-6, n_layers=78, d_ff=12288, d_expert=2048,
                        n_experts=256, top_k=8, first_dense_layers=3, max_len=202752, index_top_k=2048,
                        index_heads=32, index_head_dim=128)},
          {"744B": 744e9}, {"744B": 40e9}, classroom=dict(_DEEPSEEK_CLASSROOM, **_DSA_CLASSROOM),
          active_counts="non-embedding"),
    # DeepSeek-V4-Flash (2026), from the dimensions Hugging Face's DeepseekV4Config is written for: 284B (284.3B
    # counted, the multi-token-prediction module left out as V3's) and 13B active, a token multiplying by 13.26B
    # (2.0% over the rounded figure). Its cache saves three ways: every layer's one head is key and value at once;
    # past the 128-token window, blocks of 4 (chosen by an indexer) or 128 tokens pooled into one key each.
    # bf16 at 4k / 128k / 1M tokens: 0.03 / 0.81 / 6.4 GiB (DeepSeek-V3's latents: 0.27 / 8.6 / 68.6 GiB)
    _card("deepseek-v4", "DeepSeek-V4", 2026, "decoder · one key-value head · RoPE (partial) · sliding window (128) "
          "beside blocks pooled by 4 (indexer top-512) or 128 · sinks · grouped output · 4 hyper-connected streams · "
          "MoE (256 experts, sqrt-softplus router, top-6 + 1 shared, first 3 hashed)", _DEEPSEEK_V4,
          {"Flash": _DEEPSEEK_V4_FLASH}, {"Flash": 284e9}, {"Flash": 13e9}, active_counts="multiplied",
          classroom=_DEEPSEEK_V4_CLASSROOM),
    # OpenAI's model card counts the active parameters a token multiplies by: the unembedding, not the embedding
    _card("gpt-oss", "gpt-oss", 2025, "decoder · GQA · RoPE (YaRN) · alternating 128-token windows · sinks · "
          "pre-RMSNorm · MoE (clamped SwiGLU experts, top-4) · biases", _GPT_OSS,
          {"120b": dict(_GPT_OSS_REAL, n_layers=36, n_experts=128), "20b": dict(_GPT_OSS_REAL, n_layers=24, n_experts=32)},
          {"120b": 116.83e9, "20b": 20.91e9}, {"120b": 5.13e9, "20b": 3.61e9},
          # the size its English model trained at: each expert as wide as the model, as gpt-oss's 2,880 of 2,880
          classroom=dict(ENGLISH_SIZE, n_kv_heads=2, head_dim=32, sliding_window=64, d_expert=128),
          active_counts="multiplied"),
    # the language model alone (the published totals also count a vision encoder and a multi-token-prediction layer)
    _card("qwen3.5", "Qwen3.5", 2026, "decoder · 3 Gated DeltaNet : 1 gated full-attention layers · GQA · partial "
          "RoPE · QK-norm · pre-RMSNorm (1 + w) · SwiGLU, or MoE (512 experts, top-10 + 1 shared)", _QWEN3_5,
          {"9B": dict(_QWEN3_5_REAL, n_heads=16, n_kv_heads=4, n_layers=32, d_ff=12288, linear_value_heads=32),
           "397B-A17B": dict(_QWEN3_5_REAL, n_heads=32, n_kv_heads=2, n_layers=60, ffn="moe", n_experts=512, top_k=10,
                             d_ff=1024, d_expert=1024, n_shared_experts=1, shared_expert_gate=True,
                             linear_value_heads=64)},
          # the names round the active count: 17.35B counted here for "A17B" (2.1% over it), so no active figure is
          # held against the count
          {"9B": 9.0e9, "397B-A17B": 397e9},
          # the size its English models trained at: three state layers and one full layer, 4 heads of 32
          classroom=dict(ENGLISH_GATED, n_kv_heads=2, head_dim=32, rope_dim=8)),
    # Qwen3.5's layout a release earlier, from its published config.json: every fourth layer full attention. Its name
    # rounds the active count too: 3.87B counted here (3.25B without the embedding and the head)
    _card("qwen3-next", "Qwen3-Next", 2025, "decoder · 3 Gated DeltaNet : 1 gated full-attention layers · GQA · partial "
          "RoPE · QK-norm · pre-RMSNorm (1 + w) · MoE (512 experts, top-10 + 1 gated shared)", _QWEN3_5,
          {"80B-A3B": dict(_QWEN3_5_REAL, vocab_size=151936, d_model=2048, n_heads=16, n_kv_heads=2, n_layers=48,
                           ffn="moe", n_experts=512, top_k=10, d_ff=512, d_expert=512, n_shared_experts=1,
                           shared_expert_gate=True, linear_value_heads=32, rope_theta=1e7)},
          {"80B-A3B": 80e9}, classroom=dict(ENGLISH_GATED, n_kv_heads=2, head_dim=32, rope_dim=8, ffn="moe",
                                             n_experts=8, top_k=2, d_expert=32, n_shared_experts=1,
                                             shared_expert_gate=True)),
    # "48B" and "A3B" are the release's rounded names: its config gives 49.12B with both embedding tables (48.75B
    # with one) and 3.11B multiplied per token (the unembedding, not the embedding's lookup); docs/interop.md
    _card("kimi-linear", "Kimi Linear", 2025, "decoder · 3 Kimi delta attention : 1 latent attention (no positions) · "
          "pre-RMSNorm · MoE (256 experts, sigmoid router, top-8 + 1 shared, first layer dense)", _KIMI_LINEAR,
          {"48B-A3B": dict(vocab_size=163840, d_model=2304, n_heads=32, n_layers=27, head_dim=192, rope_dim=64,
                           v_head_dim=128, kv_rank=512, d_ff=9216, d_expert=1024, n_experts=256, top_k=8,
                           max_len=1048576, linear_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=128,
                           attention_layers=",".join("full_attention" if i in _KIMI_FULL_LAYERS else
                                                     "linear_attention" for i in range(27)),
                           nope_layers=", ".join(map(str, _KIMI_FULL_LAYERS)))},
          {"48B-A3B": 48e9}, {"48B-A3B": 3e9},
          classroom=dict(ENGLISH_GATED, attention_layers="3:1", nope_layers="3", head_dim=32, rope_dim=8, v_head_dim=32,
                         kv_rank=64, linear_key_head_dim=32, linear_value_head_dim=32, n_experts=8, top_k=2,
                         d_expert=32), active_counts="multiplied"),
    # Liquid AI's model card: 1,170,340,608 parameters; the MLP 8,192 wide (two thirds of block_ff_dim 12,288)
    _card("lfm2", "LFM2", 2025, "decoder · 10 gated short convolutions : 6 GQA layers · RoPE · QK-norm (per head) · "
          "pre-RMSNorm · SwiGLU", _LFM2,
          {"1.2B": dict(vocab_size=65536, d_model=2048, n_heads=32, n_kv_heads=8, n_layers=16, d_ff=8192,
                        max_len=128000, attention_layers=_LFM2_LAYERS)},
          {"1.2B": 1.17034e9},
          classroom=dict(n_layers=4, n_kv_heads=2, attention_layers="short-conv,short-conv,softmax,short-conv")),
    # MiniMax-01's report: 456B total, 45.9B activated per token, which leaves out the embedding and the output head
    _card("minimax", "MiniMax-01", 2025, "decoder · 7 lightning (decayed linear) : 1 GQA layers · RoPE on half of "
          "each head · RMSNorm, normed skips · MoE (32 experts, top-2)", _MINIMAX,
          {"Text-01": dict(vocab_size=200064, d_model=6144, n_heads=64, head_dim=128, n_kv_heads=8, n_layers=80,
                           d_ff=9216, n_experts=32, rope_dim=64, max_len=10_240_000)},
          {"Text-01": 456e9}, {"Text-01": 45.9e9},
          classroom=dict(n_layers=8, n_kv_heads=2, n_experts=4), active_counts="non-embedding"),
    # Llama 4's text models, from their published config.json: 48 layers, 36 of them chunked. Meta's 109B and 400B
    # round the whole checkpoint, the vision encoder included (the text models counted here: 107.8B, 1.1% under,
    # and 400.7B); 17B active counts the embedding lookup (17.17B). The router's score scales the token before its
    # expert (router_scales_input), and Maverick alternates dense and MoE layers (1, 3, 5 ... route: moe_layers
    # "every 2"), as released. Scout's RoPE stretch to 10M (llama3 with both frequency factors 1) is left out: this
    # library's llama3 RoPE asks high > low.
    # The cache saves in the chunked layers (36 of 48 hold at most 8,192 tokens); the 12 NoPE layers hold every
    # token: bf16, 0.75 GiB at 4k tokens, 7.125 GiB at 128k, 49.1 GiB at 1M (48 full layers: 192 GiB)
    _card("llama4", "Llama 4", 2025, "decoder · GQA · RoPE, chunked (8192), NoPE every 4th layer (full) · L2 QK-norm "
          "(Scout) · pre-RMSNorm · MoE (top-1 of 16 or 128 + 1 shared)", _LLAMA4,
          {"Scout": dict(_LLAMA4_REAL, n_experts=16, max_len=10485760),
           # Maverick's config.json turns q and k's L2 norm off (use_qk_norm false): no parameters either way
           "Maverick": dict(_LLAMA4_REAL, n_experts=128, moe_layers="every 2", max_len=1048576, qk_norm="none")},
          {"Scout": 109e9, "Maverick": 400e9}, {"Scout": 17e9, "Maverick": 17e9},
          # the English size, a routed and a shared expert of half LLaMA 2's gated width (a token's FFN costs as much);
          # a chunk of 64 of the 512-character crops: only the NoPE layer sees further back
          classroom=dict(ENGLISH_GATED, n_kv_heads=2, n_experts=4, d_expert=88, attention_chunk=64)),
    # SmolLM3 3B (Hugging Face, 2025): 3.08B as its model page gives it (3.075B with the one embedding table).
    # Nothing windowed: the NoPE layers (9 of 36) hold as many parameters and cache as much as the others,
    # 4 kv heads of 128 in every layer: bf16, 0.28 GiB at 4k tokens, 9 GiB at 128k, 72 GiB at 1M (64k its context)
    _card("smollm3", "SmolLM3", 2025, "decoder · GQA · RoPE, NoPE every 4th layer · pre-RMSNorm · SwiGLU · "
          "tied embeddings", _SMOLLM3,
          {"3B": dict(vocab_size=128256, d_model=2048, n_heads=16, n_kv_heads=4, n_layers=36, d_ff=11008,
                      max_len=65536)},
          {"3B": 3.08e9}, classroom=dict(n_layers=4, n_kv_heads=2)),
    # OLMo 3 7B and 32B (Ai2, 2025), 7.3B and 32.2B on their model pages (7.298B and 32.23B counted). The cache
    # saves in the sliding layers (24 of 32, 48 of 64, each at most 4,096 tokens); the full layers hold every token.
    # bf16, 7B (32 kv heads): 2 / 17.5 / 129.5 GiB at 4k / 128k / 1M tokens; 32B (8 kv heads): 1 / 8.75 / 64.75 GiB
    # (65,536 tokens is their context; past it the arithmetic still says where bytes would sit)
    _card("olmo3", "OLMo 3", 2025, "decoder · MHA (7B) or GQA (32B) · RoPE (YaRN on full layers) · 3 sliding : 1 full "
          "layers · RMSNorm after each sublayer · QK-norm (full) · SwiGLU", _OLMO3,
          {"7B": dict(_OLMO3_REAL, d_model=4096, n_heads=32, n_layers=32, d_ff=11008),
           "32B": dict(_OLMO3_REAL, d_model=5120, n_heads=40, n_kv_heads=8, n_layers=64, d_ff=27648)},
          {"7B": 7.3e9, "32B": 32.2e9}, classroom=dict(n_layers=4, sliding_window=64)),
]

# --- encoder-decoders opened from Hugging Face: cards only, no trained checkpoint -----------------------------------
# BART (Lewis et al. 2019): BERT's post-LayerNorm blocks with GELU and a LayerNorm after the embeddings, in an
# encoder and a decoder that share one token embedding, each with its own learned positions; the logits get a bias.
# bart-large's config.json: 12 + 12 layers of 1,024, 16 heads, FFN 4,096, 1,024 positions (its tables keep two more
# rows, never read: 4,096 parameters not built), 406M counted as 406.3M
_BART = dict(arch="encoder-decoder", position="learned", norm="layernorm", norm_position="post", ffn="gelu", bias=True,
             embed_norm=True, head_bias=True, norm_eps=1e-5)

_SEQ2SEQ_CARDS = [
    _card("bart", "BART", 2019, "encoder-decoder · MHA · learned (offset 2) · post-LayerNorm (+ embedding norm) · GELU",
          _BART, {"large": dict(vocab_size=50265, d_model=1024, n_heads=16, n_layers=12, d_ff=4096, max_len=1024)},
          {"large": 406e6}),
    # the T5 paper's "base" (about 220M) and "11B" (its released checkpoint holds 11.3B: 128 heads of 128 in a
    # d_model of 1,024, an FFN 65,536 wide)
    _card("t5", "T5", 2019, "encoder-decoder · MHA · relative position buckets (learned) · pre-RMSNorm · ReLU · "
          "no biases, scores unscaled", _T5,
          {"base": dict(_T5_REAL, d_model=768, n_heads=12, n_layers=12, d_ff=3072, head_input_scale=768 ** -0.5),
           "11B": dict(_T5_REAL, d_model=1024, n_heads=128, head_dim=128, n_layers=24, d_ff=65536,
                       head_input_scale=1024 ** -0.5)},
          {"base": 220e6, "11B": 11.3e9}, classroom=dict(head_input_scale=64 ** -0.5)),
]

# the models of 2024-2026 whose English language model ships (docs/checkpoints.md): presets too
TRAINED_RECENT = ("qwen3", "deepseek-v3", "deepseek-v3.2", "gpt-oss", "gemma3", "qwen3.5", "llama4")

# the families that ship trained checkpoints: the app's presets
PRESETS: dict[str, TransformerConfig] = {c.key: c.config for c in [*_CARDS, *_RECENT_CARDS] if
                                         c in _CARDS or c.key in TRAINED_RECENT}
MODEL_CARDS: dict[str, ModelCard] = {c.key: c for c in [*_CARDS, *_SEQ2SEQ_CARDS, *_RECENT_CARDS]}
