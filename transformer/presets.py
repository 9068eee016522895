"""Real models as choices along the five axes: classroom-size presets with their real sizes alongside.

``PRESETS[name]`` is a small config with the family's axes; ``MODEL_CARDS[name]`` adds the
real-size configs (for parameter and KV-cache arithmetic) and the published parameter counts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .config import TransformerConfig


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


CLASSROOM = dict(vocab_size=128, d_model=64, n_heads=4, n_layers=2, max_len=256)  # sizes a laptop trains in minutes


def _card(key, name, year, summary, axes: dict, real: dict[str, dict], published=None, active=None) -> ModelCard:
    classroom = TransformerConfig(**{**CLASSROOM, **axes})
    real_cfgs = {size: TransformerConfig(**{**axes, **dims}) for size, dims in real.items()}
    return ModelCard(key, name, year, summary, classroom, real_cfgs, published or {}, active or {})


_ORIGINAL = dict(arch="encoder-decoder", position="sinusoidal", norm="layernorm", norm_position="post", ffn="relu", bias=True)
_GPT2 = dict(arch="decoder", position="learned", norm="layernorm", norm_position="pre", ffn="gelu", gelu_approximate="tanh", bias=True)
_BERT = dict(arch="encoder", position="learned", norm="layernorm", norm_position="post", ffn="gelu", bias=True,
             embed_norm=True, head_transform=True, head_bias=True)
_LLAMA = dict(arch="decoder", position="rope", norm="rmsnorm", norm_position="pre", ffn="swiglu", tie_embeddings=False)
_PALM = dict(arch="decoder", position="rope", norm="layernorm", norm_position="pre", ffn="swiglu", parallel_block=True)
_FALCON = dict(arch="decoder", position="rope", norm="layernorm", norm_position="pre", ffn="gelu", parallel_block=True)
_BLOOM = dict(arch="decoder", position="alibi", norm="layernorm", norm_position="pre", ffn="gelu", gelu_approximate="tanh",
              bias=True, embed_norm=True)

_CARDS = [
    _card("original", "Original Transformer", 2017, "encoder-decoder · MHA · sinusoidal · post-LayerNorm · ReLU", _ORIGINAL,
          {"base": dict(vocab_size=37000, d_model=512, n_heads=8, n_layers=6, d_ff=2048, max_len=512)}, {"base": 65e6}),
    _card("gpt2", "GPT-2", 2019, "decoder · MHA · learned · pre-LayerNorm · GELU", _GPT2,
          {"small": dict(vocab_size=50257, d_model=768, n_heads=12, n_layers=12, d_ff=3072, max_len=1024),
           "xl": dict(vocab_size=50257, d_model=1600, n_heads=25, n_layers=48, d_ff=6400, max_len=1024)},
          {"small": 124e6, "xl": 1.558e9}),
    _card("bert", "BERT", 2018, "encoder · MHA · learned · post-LayerNorm · GELU", _BERT,
          {"base": dict(vocab_size=30522, d_model=768, n_heads=12, n_layers=12, d_ff=3072, max_len=512, norm_eps=1e-12)},
          {"base": 110e6}),
    _card("llama2", "LLaMA 2", 2023, "decoder · MHA (7B) / GQA (70B) · RoPE · pre-RMSNorm · SwiGLU",
          {**_LLAMA, "n_kv_heads": 2},
          {"7B": dict(vocab_size=32000, d_model=4096, n_heads=32, n_kv_heads=32, n_layers=32, d_ff=11008, max_len=4096),
           "70B": dict(vocab_size=32000, d_model=8192, n_heads=64, n_kv_heads=8, n_layers=80, d_ff=28672, max_len=4096)},
          {"7B": 6.74e9, "70B": 68.98e9}),
    _card("mistral", "Mistral", 2023, "decoder · GQA · RoPE · sliding window · pre-RMSNorm · SwiGLU",
          {**_LLAMA, "n_kv_heads": 2, "sliding_window": 32},
          {"7B": dict(vocab_size=32000, d_model=4096, n_heads=32, n_kv_heads=8, n_layers=32, d_ff=14336, max_len=32768,
                      sliding_window=4096)},
          {"7B": 7.24e9}),
    _card("palm", "PaLM", 2022, "decoder · MQA · RoPE · parallel block · pre-LayerNorm · SwiGLU",
          {**_PALM, "n_kv_heads": 1},
          {"8B": dict(vocab_size=256000, d_model=4096, n_heads=16, n_kv_heads=1, n_layers=32, d_ff=16384, max_len=2048),
           "62B": dict(vocab_size=256000, d_model=8192, n_heads=32, n_kv_heads=1, n_layers=64, d_ff=32768, max_len=2048)},
          {"8B": 8.63e9, "62B": 62.5e9}),
    _card("mixtral", "Mixtral", 2024, "decoder · GQA · RoPE · pre-RMSNorm · MoE (8 SwiGLU experts, top-2)",
          {**_LLAMA, "n_kv_heads": 2, "ffn": "moe", "n_experts": 4, "top_k": 2},
          {"8x7B": dict(vocab_size=32000, d_model=4096, n_heads=32, n_kv_heads=8, n_layers=32, d_ff=14336, max_len=32768,
                        n_experts=8, top_k=2, rope_theta=1e6)},
          {"8x7B": 46.7e9}, {"8x7B": 12.9e9}),
    _card("falcon", "Falcon", 2023, "decoder · MQA · RoPE · parallel block · pre-LayerNorm · GELU",
          {**_FALCON, "n_kv_heads": 1},
          {"7B": dict(vocab_size=65024, d_model=4544, n_heads=71, n_kv_heads=1, n_layers=32, d_ff=18176, max_len=2048)},
          {"7B": 6.92e9}),
    # 8 heads: ALiBi's steepest slope is then 1/2 (1/4 with 4 heads), steep enough for a previous-token head
    _card("bloom", "BLOOM", 2022, "decoder · MHA · ALiBi · pre-LayerNorm (+ embedding norm) · GELU", {**_BLOOM, "n_heads": 8},
          {"560M": dict(vocab_size=250880, d_model=1024, n_heads=16, n_layers=24, d_ff=4096, max_len=2048),
           "176B": dict(vocab_size=250880, d_model=14336, n_heads=112, n_layers=70, d_ff=57344, max_len=2048)},
          {"560M": 559e6, "176B": 176e9}),
]

MODEL_CARDS: dict[str, ModelCard] = {c.key: c for c in _CARDS}
PRESETS: dict[str, TransformerConfig] = {c.key: c.config for c in _CARDS}


def param_counts(cfg: TransformerConfig) -> dict[str, int]:
    """Parameters by part, computed from the dimensions alone (no model is built).

    'total' counts every weight; 'active' the ones one token uses (MoE: top_k of the experts).
    """
    d, f, V, L = cfg.d_model, cfg.d_ff, cfg.vocab_size, cfg.n_layers
    b = 1 if cfg.bias else 0
    norm = 2 * d if cfg.norm == "layernorm" else d
    q_out, kv_out = cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head
    attention = d * q_out + 2 * d * kv_out + q_out * d + b * (q_out + 2 * kv_out + d)
    swiglu = 3 * d * f + b * (2 * f + d)
    expert, n_active_experts = swiglu, 1
    if cfg.ffn in ("relu", "gelu"):
        ffn = 2 * d * f + b * (f + d)
    elif cfg.ffn == "swiglu":
        ffn = swiglu
    else:
        ffn, n_active_experts = cfg.n_experts * expert + d * cfg.n_experts, cfg.top_k
    norms_per_block = 1 if cfg.parallel_block else 2
    n_stacks = 2 if cfg.arch == "encoder-decoder" else 1
    cross = (attention + norm) * L if cfg.arch == "encoder-decoder" else 0  # decoder blocks only

    embedding = V * d
    positions = n_stacks * cfg.max_len * d if cfg.position == "learned" else 0
    stack_extra = n_stacks * ((2 * d if cfg.embed_norm else 0) + (norm if cfg.has_final_norm else 0))
    blocks = n_stacks * L * (attention + ffn + norms_per_block * norm) + cross
    head = (0 if cfg.tie_embeddings else V * d) + (V if cfg.head_bias else 0) + ((d * d + d + 2 * d) if cfg.head_transform else 0)
    total = embedding + positions + stack_extra + blocks + head
    inactive = n_stacks * L * (cfg.n_experts - n_active_experts) * expert if cfg.ffn == "moe" else 0
    return {
        "total": total, "active": total - inactive, "embedding": embedding + positions,
        "attention": n_stacks * L * attention + (attention * L if cfg.arch == "encoder-decoder" else 0),
        "ffn": n_stacks * L * ffn, "head": head,
    }


def kv_cache_bytes_per_token(cfg: TransformerConfig, bytes_per_value: int = 2) -> int:
    """Bytes the KV cache grows by per token: K and V, every layer, G kv heads of d_head (fp16 by default)."""
    n_self_attention_layers = cfg.n_layers  # the decoder's layers in an encoder-decoder
    return 2 * n_self_attention_layers * cfg.n_kv_heads * cfg.d_head * bytes_per_value
