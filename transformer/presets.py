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
# the families whose language model reads everyday English: wide and deep enough for previous-token and
# induction heads on real sentences, and still under 50 ms for a page's forward of 256 characters
ENGLISH_SIZE = dict(d_model=128, n_layers=4)


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
    _card("gpt2", "GPT-2", 2019, "decoder · MHA · learned · pre-LayerNorm · GELU", {**_GPT2, **ENGLISH_SIZE},
          {"small": dict(vocab_size=50257, d_model=768, n_heads=12, n_layers=12, d_ff=3072, max_len=1024),
           "xl": dict(vocab_size=50257, d_model=1600, n_heads=25, n_layers=48, d_ff=6400, max_len=1024),
           # GPT-3 is GPT-2's recipe at 175B (Brown et al. 2020, Table 2.1); its alternating locally banded
           # sparse layers change no parameter
           "175B (GPT-3)": dict(vocab_size=50257, d_model=12288, n_heads=96, n_layers=96, d_ff=49152, max_len=2048)},
          {"small": 124e6, "xl": 1.558e9, "175B (GPT-3)": 175e9}),
    _card("bert", "BERT", 2018, "encoder · MHA · learned · post-LayerNorm · GELU", {**_BERT, **ENGLISH_SIZE},
          {"base": dict(vocab_size=30522, d_model=768, n_heads=12, n_layers=12, d_ff=3072, max_len=512, norm_eps=1e-12)},
          {"base": 110e6}),
    _card("llama2", "LLaMA 2", 2023, "decoder · MHA (7B) / GQA (70B) · RoPE · pre-RMSNorm · SwiGLU",
          {**_LLAMA, "n_kv_heads": 2, **ENGLISH_SIZE, "d_ff": 176},  # the SwiGLU width its English model has
          {"7B": dict(vocab_size=32000, d_model=4096, n_heads=32, n_kv_heads=32, n_layers=32, d_ff=11008, max_len=4096),
           "70B": dict(vocab_size=32000, d_model=8192, n_heads=64, n_kv_heads=8, n_layers=80, d_ff=28672, max_len=4096)},
          {"7B": 6.74e9, "70B": 68.98e9}),
    _card("mistral", "Mistral", 2023, "decoder · GQA · RoPE · sliding window · pre-RMSNorm · SwiGLU",
          # its window covers half of the 512 characters its English model trained on, as Mistral 7B's 4,096 of 8,192
          {**_LLAMA, "n_kv_heads": 2, "sliding_window": 256, **ENGLISH_SIZE, "d_ff": 176},
          {"7B": dict(vocab_size=32000, d_model=4096, n_heads=32, n_kv_heads=8, n_layers=32, d_ff=14336, max_len=32768,
                      sliding_window=4096)},
          {"7B": 7.24e9}),
    _card("palm", "PaLM", 2022, "decoder · MQA · RoPE · parallel block · pre-LayerNorm · SwiGLU",
          {**_PALM, "n_kv_heads": 1, **ENGLISH_SIZE, "d_ff": 176},
          {"8B": dict(vocab_size=256000, d_model=4096, n_heads=16, n_kv_heads=1, n_layers=32, d_ff=16384, max_len=2048),
           "62B": dict(vocab_size=256000, d_model=8192, n_heads=32, n_kv_heads=1, n_layers=64, d_ff=32768, max_len=2048)},
          {"8B": 8.63e9, "62B": 62.5e9}),
    _card("mixtral", "Mixtral", 2024, "decoder · GQA · RoPE · pre-RMSNorm · MoE (8 SwiGLU experts, top-2)",
          {**_LLAMA, "n_kv_heads": 2, "ffn": "moe", "n_experts": 4, "top_k": 2, **ENGLISH_SIZE, "d_ff": 176},
          {"8x7B": dict(vocab_size=32000, d_model=4096, n_heads=32, n_kv_heads=8, n_layers=32, d_ff=14336, max_len=32768,
                        n_experts=8, top_k=2, rope_theta=1e6)},
          {"8x7B": 46.7e9}, {"8x7B": 12.9e9}),
    _card("falcon", "Falcon", 2023, "decoder · MQA · RoPE · parallel block · pre-LayerNorm · GELU",
          {**_FALCON, "n_kv_heads": 1, **ENGLISH_SIZE},
          {"7B": dict(vocab_size=65024, d_model=4544, n_heads=71, n_kv_heads=1, n_layers=32, d_ff=18176, max_len=2048)},
          {"7B": 6.92e9}),
    # 10 heads of 16 at d_model 160: at 8 heads of 16 in 128 its English model's best previous-token head put 0.44
    # on the character before, at this size 0.65 (docs/checkpoints.md)
    _card("bloom", "BLOOM", 2022, "decoder · MHA · ALiBi · pre-LayerNorm (+ embedding norm) · GELU",
          {**_BLOOM, **ENGLISH_SIZE, "d_model": 160, "n_heads": 10},
          {"560M": dict(vocab_size=250880, d_model=1024, n_heads=16, n_layers=24, d_ff=4096, max_len=2048),
           "176B": dict(vocab_size=250880, d_model=14336, n_heads=112, n_layers=70, d_ff=57344, max_len=2048)},
          {"560M": 559e6, "176B": 176e9}),
]

MODEL_CARDS: dict[str, ModelCard] = {c.key: c for c in _CARDS}
PRESETS: dict[str, TransformerConfig] = {c.key: c.config for c in _CARDS}
