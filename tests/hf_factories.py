"""Small random-init Hugging Face causal LMs, one function per family variant, for interop tests.

Each factory returns a fresh float32 model in eval() mode with eager attention (so ``output_attentions=True``
works), built from a fixed seed in well under a second: vocab 100, hidden 64, 2-8 layers, windows of 4-6 so
that local layers differ from global ones at sequence lengths 12-16. Every norm weight and bias, every linear
bias, and every attention-sink, router-bias and DeepSeek score-correction-bias tensor is moved away from its
initial value, so a term that a port drops or misplaces changes the numbers. MoE experts use the "eager"
experts implementation (the CPU default, "grouped_mm", agrees to ~1e-6).

Quirks a port must reproduce:
- ``llama_dynamic_rope`` has max_position_embeddings=8: dynamic NTK only acts once a forward sees a position
  >= 8, and HF's rotary module then keeps the enlarged frequencies across later calls (stateful).
- ``gemma3_*`` ignore ``attn_logit_softcapping``; ``gemma2_*`` apply it.
- ``gpt_oss_*`` return attention weights with the sink column dropped: rows sum to less than 1.

``FACTORIES`` maps each name to its function. Nothing from the ``transformer`` package is imported.
"""
from __future__ import annotations

import inspect

import pytest
import torch
import transformers as tf

V = 100  # vocabulary size of every model here
COMMON = dict(vocab_size=V, attn_implementation="eager", bos_token_id=None, eos_token_id=None, pad_token_id=0)


def use_pytorch_fallbacks(monkeypatch, module, names) -> None:
    """Make a Hugging Face modeling module call its own plain PyTorch functions (its kernel wrappers' fallbacks),
    even where an optional kernel package (fla, causal-conv1d) is installed.

    The wrappers change shape between releases (a ``functools.wraps`` decorator, then also a ``torch.nn.Module``
    whose ``forward`` calls the function), so the function is searched for through whatever wraps it rather than
    reached by one fixed path; the module's global name, which is what its layers call, is then replaced."""
    for name in names:
        function = _own_function(getattr(module, name), module.__name__, name)
        if function is None:
            pytest.fail(f"transformers {tf.__version__}: no plain function {module.__name__}.{name} was found inside "
                        f"its wrapper {type(getattr(module, name)).__name__}; update use_pytorch_fallbacks")
        monkeypatch.setattr(module, name, function)


def _own_function(wrapper, module_name: str, name: str):
    """The innermost function named ``name`` defined in ``module_name``, reached through ``__wrapped__``, a module's
    ``forward`` and the names a wrapper closes over; None if there is none."""
    pending, seen = [wrapper], set()
    while pending:
        candidate = pending.pop()
        if id(candidate) in seen:
            continue
        seen.add(id(candidate))
        wrapped = getattr(candidate, "__wrapped__", None)
        if inspect.isfunction(candidate):
            if wrapped is None and candidate.__module__ == module_name and candidate.__name__ == name:
                return candidate
            pending.extend(v for v in inspect.getclosurevars(candidate).nonlocals.values() if callable(v))
        if isinstance(candidate, torch.nn.Module):  # a function made a module: its forward calls the function
            pending.append(type(candidate).forward)
        if wrapped is not None:
            pending.append(wrapped)
    return None


def _perturb(model: torch.nn.Module, seed: int, scale: float = 0.1, big: dict[str, float] | None = None) -> None:
    """Add scale*N(0,1) to every saved 1-D tensor and every tensor whose name ends in 'bias' (norm weights and
    biases, linear and expert biases, sinks, router biases, correction biases); names containing a key of
    ``big`` use that scale instead."""
    big = big or {}
    g = torch.Generator().manual_seed(seed + 1)
    saved = set(model.state_dict())  # persistent only: skips inv_freq, embed_scale
    seen = set()
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if name not in saved or id(t) in seen or not t.is_floating_point():
                continue
            if t.ndim == 1 or name.endswith("bias"):
                seen.add(id(t))
                s = next((v for k, v in big.items() if k in name), scale)
                t.add_(s * torch.randn(t.shape, generator=g, dtype=torch.float32).to(t.dtype))


def _build(model_class, config, seed: int = 0, big: dict[str, float] | None = None):
    torch.manual_seed(seed)
    model = model_class(config).to(torch.float32).eval()
    _perturb(model, seed, big=big)
    return model


# --- Qwen2: q/k/v bias, no o bias; sliding layers are those with index >= max_window_layers -------------

def qwen2_small():
    return _build(tf.Qwen2ForCausalLM, tf.Qwen2Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=64, initializer_range=0.2, **COMMON))


def qwen2_gqa():
    # layer_types = [full, sliding, sliding]; tied embeddings
    return _build(tf.Qwen2ForCausalLM, tf.Qwen2Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        use_sliding_window=True, sliding_window=4, max_window_layers=1, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        max_position_embeddings=64, initializer_range=0.2, **COMMON))


# --- Qwen3: per-head q_norm/k_norm before RoPE; head_dim is explicit --------------------------------------

def qwen3_small():
    return _build(tf.Qwen3ForCausalLM, tf.Qwen3Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        head_dim=16, max_position_embeddings=64, initializer_range=0.2, **COMMON))


def qwen3_gqa():
    # head_dim 32 != 64/4; attention bias on q,k,v,o; layer_types = [full, sliding, sliding]
    return _build(tf.Qwen3ForCausalLM, tf.Qwen3Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32, attention_bias=True, use_sliding_window=True, sliding_window=5, max_window_layers=1,
        max_position_embeddings=64, initializer_range=0.2, **COMMON))


# --- Gemma2: (1+w) RMSNorm sandwich, sqrt(d) embedding scale, attention + final soft-capping ---------------

def gemma2_small():
    # default layer_types: even layers sliding, odd full -> [sliding, full, sliding, full]
    return _build(tf.Gemma2ForCausalLM, tf.Gemma2Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, query_pre_attn_scalar=24, sliding_window=4, attn_logit_softcapping=5.0,
        final_logit_softcapping=3.0, max_position_embeddings=64, initializer_range=0.2, **COMMON))


def gemma2_mha():
    # head_dim 32 (4*32 = 128 != hidden 64), no soft-capping, explicit layer_types, untied head
    return _build(tf.Gemma2ForCausalLM, tf.Gemma2Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
        head_dim=32, query_pre_attn_scalar=32, sliding_window=6, attn_logit_softcapping=None,
        final_logit_softcapping=None, layer_types=["full_attention", "sliding_attention", "full_attention"],
        tie_word_embeddings=False, max_position_embeddings=64, initializer_range=0.2, **COMMON))


# --- Gemma3 (text): per-head q/k (1+w) norms, local/global RoPE bases, 5:1 pattern -------------------------

def gemma3_pattern():
    # 6 layers, default pattern: layers 0-4 sliding (theta 1e4), layer 5 full (theta 1e6)
    return _build(tf.Gemma3ForCausalLM, tf.Gemma3TextConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, query_pre_attn_scalar=24, sliding_window=4, max_position_embeddings=64,
        initializer_range=0.2, **COMMON))


def gemma3_linear_global():
    # MQA, head_dim 32, linear RoPE (factor 8) on global layers only, final soft-capping, explicit layer_types
    return _build(tf.Gemma3ForCausalLM, tf.Gemma3TextConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=1,
        head_dim=32, query_pre_attn_scalar=32, sliding_window=5, final_logit_softcapping=4.0,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0}},
        tie_word_embeddings=False, max_position_embeddings=64, initializer_range=0.2, **COMMON))


# --- Phi-3: fused qkv_proj and gate_up_proj, partial rotary on the first dims -----------------------------

def phi3_small():
    return _build(tf.Phi3ForCausalLM, tf.Phi3Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=64, original_max_position_embeddings=64, initializer_range=0.2, **COMMON))


def phi3_partial():
    # GQA, rotary on the first 8 of 16 head dims, sliding window 5 on every layer
    return _build(tf.Phi3ForCausalLM, tf.Phi3Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        partial_rotary_factor=0.5, sliding_window=5,
        max_position_embeddings=64, original_max_position_embeddings=64, initializer_range=0.2, **COMMON))


# --- OLMo2: norms after each sublayer (no pre-norm), q_norm/k_norm over the whole projection ---------------

def olmo2_small():
    return _build(tf.Olmo2ForCausalLM, tf.Olmo2Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=64, initializer_range=0.2, **COMMON))


def olmo2_gqa():
    return _build(tf.Olmo2ForCausalLM, tf.Olmo2Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        attention_bias=True, max_position_embeddings=64, initializer_range=0.2, **COMMON))


# --- LLaMA with scaled RoPE ------------------------------------------------------------------------------

def _llama(rope_parameters, max_position_embeddings, kv_heads=2, **kw):
    return _build(tf.LlamaForCausalLM, tf.LlamaConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=kv_heads, rope_parameters=rope_parameters,
        max_position_embeddings=max_position_embeddings, initializer_range=0.2, **kw, **COMMON))


def llama31_llama3_rope():
    # head_dim 16, theta 1e4, original 64: wavelengths 6.3 (kept), 19.9 and 62.8 (smoothed), >= 199 (divided by 8)
    return _llama({"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 64}, 256)


def llama_linear_rope():
    return _llama({"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}, 64, kv_heads=4)


def llama_dynamic_rope():
    # max_position_embeddings 8 so that a 12-16 token forward triggers the NTK base change (see module doc)
    return _llama({"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}, 8)


def llama_yarn_rope():
    # original 2048, factor 4, truncate (default True): ramp over dims [2, 6) of 8; attention_factor 1+0.1 ln 4
    return _llama({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                   "original_max_position_embeddings": 2048}, 8192)


def llama_yarn_mscale_rope():
    # truncate False (fractional ramp), attention_factor = mscale(4, 1.0) / mscale(4, 0.5), beta 16/2
    return _llama({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 2048,
                   "truncate": False, "mscale": 1.0, "mscale_all_dim": 0.5, "beta_fast": 16.0, "beta_slow": 2.0},
                  8192, kv_heads=1)


# --- GPT-NeoX: per-head interleaved query_key_value, partial rotary, LayerNorm with bias ------------------

def gpt_neox_partial():
    # rotary_pct 0.25 -> 4 of 16 head dims rotated; parallel residual with two LayerNorms
    return _build(tf.GPTNeoXForCausalLM, tf.GPTNeoXConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, rotary_pct=0.25,
        use_parallel_residual=True, max_position_embeddings=64, initializer_range=0.2, **COMMON))


def gpt_neox_sequential():
    # sequential residual, rotary_pct 0.5, no attention biases (MLP keeps its biases), base 5e5
    return _build(tf.GPTNeoXForCausalLM, tf.GPTNeoXConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, rotary_pct=0.5,
        rotary_emb_base=500000.0, use_parallel_residual=False, attention_bias=False,
        max_position_embeddings=64, initializer_range=0.2, **COMMON))


# --- Falcon, new decoder architecture (grouped qkv, parallel attention + MLP) ------------------------------

def falcon_new_arch():
    # 4 heads in 2 kv groups, two LayerNorms per block (ln_attn, ln_mlp), no linear biases, tied head
    return _build(tf.FalconForCausalLM, tf.FalconConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_kv_heads=2, new_decoder_architecture=True,
        parallel_attn=True, bias=False, alibi=False, max_position_embeddings=64, initializer_range=0.2, **COMMON))


def falcon_new_arch_one_ln():
    # 8 heads in 2 kv groups (head_dim 8), one shared LayerNorm, linear biases, ffn 96, untied head
    return _build(tf.FalconForCausalLM, tf.FalconConfig(
        hidden_size=64, num_hidden_layers=3, num_attention_heads=8, num_kv_heads=2, new_decoder_architecture=True,
        parallel_attn=True, num_ln_in_parallel_attn=1, bias=True, alibi=False, ffn_hidden_size=96,
        tie_word_embeddings=False, max_position_embeddings=64, initializer_range=0.2, **COMMON))


# --- DeepSeek-V3: MLA, sigmoid group-limited routing, shared experts --------------------------------------

_DS_SIZES = dict(hidden_size=64, intermediate_size=96, moe_intermediate_size=16, num_attention_heads=4,
                 num_key_value_heads=4, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=12)


def deepseek_v3_q_lora():
    # q_lora 24; YaRN (factor 4, mscale = mscale_all_dim = 1 -> softmax scale * mscale^2); rope_interleave;
    # 8 experts in 4 groups, 2 groups kept, top-2, normalised, x2.5; layer 0 dense, layers 1-2 MoE
    return _build(tf.DeepseekV3ForCausalLM, tf.DeepseekV3Config(
        **_DS_SIZES, num_hidden_layers=3, q_lora_rank=24, n_routed_experts=8, n_group=4, topk_group=2,
        num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, norm_topk_prob=True,
        routed_scaling_factor=2.5, rope_interleave=True,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 2048, "beta_fast": 32.0, "beta_slow": 1.0,
                         "mscale": 1.0, "mscale_all_dim": 1.0},
        max_position_embeddings=8192, initializer_range=0.2, experts_implementation="eager", **COMMON),
        big={"e_score_correction_bias": 0.3})


def deepseek_v3_no_q_lora():
    # plain q_proj; default RoPE, no interleave; attention_bias (kv_a_proj_with_mqa, o_proj); one group;
    # 6 experts top-3 unnormalised x1.5, 2 shared; every layer MoE
    return _build(tf.DeepseekV3ForCausalLM, tf.DeepseekV3Config(
        **_DS_SIZES, num_hidden_layers=2, q_lora_rank=None, n_routed_experts=6, n_group=1, topk_group=1,
        num_experts_per_tok=3, n_shared_experts=2, first_k_dense_replace=0, norm_topk_prob=False,
        routed_scaling_factor=1.5, rope_interleave=False, attention_bias=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        max_position_embeddings=64, initializer_range=0.2, experts_implementation="eager", **COMMON),
        big={"e_score_correction_bias": 0.3})


# --- DeepSeek-V2: MLA with complex (interleaved) RoPE, softmax routing -----------------------------------

def deepseek_v2_greedy():
    # no q_lora, greedy top-2 of softmax (never renormalised), 2 shared experts, layer 0 dense
    return _build(tf.DeepseekV2ForCausalLM, tf.DeepseekV2Config(
        **_DS_SIZES, num_hidden_layers=2, q_lora_rank=None, n_routed_experts=8, num_experts_per_tok=2,
        n_shared_experts=2, first_k_dense_replace=1, topk_method="greedy", routed_scaling_factor=1.0,
        max_position_embeddings=64, initializer_range=0.2, experts_implementation="eager", **COMMON))


def deepseek_v2_group_limited():
    # q_lora 24, group_limited_greedy (4 groups, keep 2, group score = max), x16; YaRN mscale 0.707
    return _build(tf.DeepseekV2ForCausalLM, tf.DeepseekV2Config(
        **_DS_SIZES, num_hidden_layers=2, q_lora_rank=24, n_routed_experts=8, num_experts_per_tok=2,
        n_shared_experts=1, first_k_dense_replace=0, topk_method="group_limited_greedy", n_group=4, topk_group=2,
        routed_scaling_factor=16.0,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 2048, "mscale": 0.707, "mscale_all_dim": 0.707},
        max_position_embeddings=8192, initializer_range=0.2, experts_implementation="eager", **COMMON))


# --- gpt-oss: sinks, attention biases, biased top-k-then-softmax router, clamped interleaved SwiGLU --------

def gpt_oss_small():
    # [sliding, full], window 4, the default-style YaRN (factor 32, truncate False, original 4096, theta 150000)
    return _build(tf.GptOssForCausalLM, tf.GptOssConfig(
        hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
        rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0,
                         "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 4096},
        max_position_embeddings=131072, initializer_range=0.2, experts_implementation="eager", **COMMON),
        big={"sinks": 1.0})


def gpt_oss_mqa():
    # [full, sliding, sliding, full], window 5, MQA, head_dim 8 (4*8 != 64), 6 experts top-3, limit 1.0,
    # plain RoPE theta 1e4
    return _build(tf.GptOssForCausalLM, tf.GptOssConfig(
        hidden_size=64, intermediate_size=24, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=1,
        head_dim=8, num_local_experts=6, num_experts_per_tok=3, sliding_window=5, swiglu_limit=1.0,
        layer_types=["full_attention", "sliding_attention", "sliding_attention", "full_attention"],
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        max_position_embeddings=64, initializer_range=0.2, experts_implementation="eager", **COMMON),
        big={"sinks": 1.0})


# --- SmolLM3: LLaMA with NoPE layers (no_rope_layers: 1 = RoPE, 0 = none) ----------------------------------

def smollm3_every_4():
    # default no_rope_layer_interval 4 -> layers 3 and 7 without RoPE; GQA 4/2, theta 5e6, tied head
    return _build(tf.SmolLM3ForCausalLM, tf.SmolLM3Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
        rope_parameters={"rope_type": "default", "rope_theta": 5000000.0},
        max_position_embeddings=64, initializer_range=0.2, **COMMON))


def smollm3_list_sliding_yarn():
    # NoPE on layers 1 and 4 (no interval says it); use_sliding_window puts a window of 4 on those two; head_dim
    # 32; attention biases (no MLP bias); YaRN, whose attention factor scales RoPE's tables, so NoPE layers skip it
    return _build(tf.SmolLM3ForCausalLM, tf.SmolLM3Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32, no_rope_layers=[1, 0, 1, 1, 0, 1], use_sliding_window=True, sliding_window=4,
        attention_bias=True, tie_word_embeddings=False,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 16},
        max_position_embeddings=64, initializer_range=0.2, **COMMON))


# --- OLMo 3: OLMo 2's block with sliding layers and a RoPE per layer type ----------------------------------

def olmo3_pattern():
    # default layer_types: three sliding layers (window 4), then one full; one RoPE (theta 5e5) for both types
    return _build(tf.Olmo3ForCausalLM, tf.Olmo3Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4, sliding_window=4,
        max_position_embeddings=64, initializer_range=0.2, **COMMON))


def olmo3_yarn_full_layers():
    # explicit layer_types, window 5, GQA 4/2, attention biases; YaRN on the full layers only, the sliding
    # layers a plain RoPE at a base of their own
    return _build(tf.Olmo3ForCausalLM, tf.Olmo3Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=5, num_attention_heads=4, num_key_value_heads=2,
        sliding_window=5, attention_bias=True,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                     "full_attention"],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 4.0,
                                            "original_max_position_embeddings": 16, "attention_factor": 1.2}},
        max_position_embeddings=64, initializer_range=0.2, **COMMON))


# --- Layers that keep a state: Gated DeltaNet between full-attention layers (Qwen3-Next, Qwen3.5, OLMo hybrid) ------

_HYBRID_SIZES = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                     max_position_embeddings=64, initializer_range=0.2)


def _state_weights(model, seed: int) -> None:
    """Two changes to HF's initial Gated DeltaNet weights, both within the range trained models reach:
    - A_log from log U(0.05, 0.5) instead of log U(0.01, 16), so that α = exp(-e^A softplus(a + dt_bias)) keeps most
      of the state from token to token and a 14-token text tests its memory, not a state wiped at every step;
    - the short convolution's taps three times larger (std 0.6), so that values and reads are of order 1, not 0.01:
      the gated RMSNorm divides each read by its size, and a read near 0 magnifies the float32 rounding of the
      layers before it (1e-6) past the 1e-4 the logits are held to, on both sides alike."""
    g = torch.Generator().manual_seed(seed + 2)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.empty(p.shape).uniform_(0.05, 0.5, generator=g).log())
            elif name.endswith("conv1d.weight"):
                p.mul_(3.0)


def _hybrid(model_class, config, seed: int = 0):
    model = _build(model_class, config, seed)
    _state_weights(model, seed)
    return model


def qwen3_next_moe():
    # default layer_types (3 linear : 1 full); 2 q/k heads serve 4 value heads (d_k 8, d_v 12); partial rotary 0.25
    # (4 of 16 dims); 4 experts top-2 renormalised, a shared expert two experts wide behind its sigmoid gate
    return _hybrid(tf.Qwen3NextForCausalLM, tf.Qwen3NextConfig(
        **_HYBRID_SIZES, num_hidden_layers=4, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
        linear_value_head_dim=12, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=16, shared_expert_intermediate_size=32, intermediate_size=96,
        experts_implementation="eager", **COMMON))


def qwen3_next_list_dense_first():
    # layer_types as a list no 'N:1' names; layer 0 a dense MLP (mlp_only_layers); attention biases (q, gate, k, v,
    # o); one q/k head per value head; half the head turns, base 5e5; 6 experts top-3 not renormalised; tied head
    return _hybrid(tf.Qwen3NextForCausalLM, tf.Qwen3NextConfig(
        **_HYBRID_SIZES, num_hidden_layers=5,
        layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention", "full_attention"],
        linear_num_key_heads=4, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
        linear_conv_kernel_dim=3, attention_bias=True, mlp_only_layers=[0], intermediate_size=96, num_experts=6,
        num_experts_per_tok=3, norm_topk_prob=False, moe_intermediate_size=16, shared_expert_intermediate_size=16,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5},
        tie_word_embeddings=True, experts_implementation="eager", **COMMON), seed=1)


def qwen3_5_dense():
    # Qwen3.5's text model: separate in_proj_qkv / z / b / a; 8 layers 3:1; 2 q/k heads for 4 value heads; SwiGLU
    return _hybrid(tf.Qwen3_5ForCausalLM, tf.Qwen3_5TextConfig(
        **_HYBRID_SIZES, num_hidden_layers=8, intermediate_size=96, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=8, linear_value_head_dim=8, **COMMON), seed=2)


def qwen3_5_moe():
    # Qwen3.5 MoE's text model: every layer routed (always renormalised), a gated shared expert; MQA full layers
    sizes = _HYBRID_SIZES | dict(num_key_value_heads=1)
    return _hybrid(tf.Qwen3_5MoeForCausalLM, tf.Qwen3_5MoeTextConfig(
        **sizes, num_hidden_layers=4, linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=16,
        linear_value_head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
        shared_expert_intermediate_size=16, experts_implementation="eager", **COMMON), seed=3)


def olmo_hybrid_small():
    # OLMo 3's full-attention layers (norms after the sublayers, QK-norm over the projection) between Gated DeltaNet
    # layers with pre-norms and β up to 2 (linear_allow_neg_eigval); default layer_types (3 linear : 1 full); RoPE
    # at HF's default base; the read norm's eps 1e-5 against rms_norm_eps 1e-6
    return _hybrid(tf.OlmoHybridForCausalLM, tf.OlmoHybridConfig(
        hidden_size=64, num_attention_heads=4, num_hidden_layers=4, intermediate_size=96, linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8, max_position_embeddings=64,
        initializer_range=0.2, **COMMON), seed=4)


def olmo_hybrid_nope_list():
    # no RoPE (rope_theta None, as in the released checkpoints): the full layers have no positions; layer_types a list
    # no 'N:1' names; GQA 4/2 with attention biases (q, k, v, o); one q/k head per value head, each value twice as
    # wide as its key (HF's default linear_value_head_dim); β up to 1 (linear_allow_neg_eigval=False); tied head
    return _hybrid(tf.OlmoHybridForCausalLM, tf.OlmoHybridConfig(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=5, intermediate_size=96,
        layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention", "full_attention"],
        linear_num_key_heads=4, linear_num_value_heads=4, linear_key_head_dim=8, linear_conv_kernel_dim=3,
        linear_allow_neg_eigval=False, attention_bias=True, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": None}, max_position_embeddings=64,
        initializer_range=0.2, **COMMON), seed=5)


# --- Llama 4's text model: chunked layers, NoPE layers, L2 QK-norm, the temperature, interleaved RoPE ------------

_LLAMA4_SIZES = dict(hidden_size=64, num_attention_heads=4, head_dim=16, intermediate_size=48,
                     intermediate_size_mlp=96, max_position_embeddings=64, initializer_range=0.2)


def llama4_dense():
    # HF's default plan on 8 layers: chunks of 4 tokens on the layers RoPE turns, every fourth layer full and
    # without positions; GQA 4/2; q and k over their RMS; the temperature steps up every 2 positions, strongly
    return _build(tf.Llama4ForCausalLM, tf.Llama4TextConfig(
        **_LLAMA4_SIZES, num_key_value_heads=2, num_hidden_layers=8, moe_layers=[], attention_chunk_size=4,
        use_qk_norm=True, attn_temperature_tuning=True, floor_scale=2, attn_scale=0.5,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, **COMMON))


def llama4_listed_llama3_rope():
    # layer_types and no_rope_layers as lists of their own: chunks of 5 on layers 0, 2, 4, one of them (2) NoPE; no
    # QK-norm; attention biases (q, k, v, o); MQA; LLaMA 3's RoPE scaling; tied head
    return _build(tf.Llama4ForCausalLM, tf.Llama4TextConfig(
        **_LLAMA4_SIZES, num_key_value_heads=1, num_hidden_layers=6, moe_layers=[], attention_chunk_size=5,
        layer_types=["chunked_attention", "full_attention"] * 3, no_rope_layers=[1, 1, 0, 1, 1, 0],
        use_qk_norm=False, attn_temperature_tuning=True, floor_scale=3, attn_scale=0.3, attention_bias=True,
        tie_word_embeddings=True, rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0,
                                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                   "original_max_position_embeddings": 16}, **COMMON), seed=1)


def llama4_moe():
    # Scout's layout: every layer an MoE of 4 experts, top-1 by sigmoid, one shared expert
    return _build(tf.Llama4ForCausalLM, tf.Llama4TextConfig(
        **_LLAMA4_SIZES, num_key_value_heads=2, num_hidden_layers=4, num_local_experts=4, num_experts_per_tok=1,
        attention_chunk_size=4, **COMMON), seed=2)


def llama4_interleaved_moe():
    # Maverick's layout: every second layer an MoE (interleave_moe_layer_step=2), the others dense and twice as wide;
    # top-2 of 4 experts, so two sigmoid weights each scale the token for their own expert; attention biases
    return _build(tf.Llama4ForCausalLM, tf.Llama4TextConfig(
        **_LLAMA4_SIZES, num_key_value_heads=1, num_hidden_layers=4, num_local_experts=4, num_experts_per_tok=2,
        interleave_moe_layer_step=2, attention_chunk_size=5, attention_bias=True, **COMMON), seed=3)


# Llama 4's text model, tested apart (tests/test_interop_llama4.py)
LLAMA4_FACTORIES = {fn.__name__: fn for fn in (llama4_dense, llama4_listed_llama3_rope, llama4_moe,
                                               llama4_interleaved_moe)}


# families whose layers mix kinds: HF's attentions hold the full-attention layers only, so they are tested apart
HYBRID_FACTORIES = {fn.__name__: fn for fn in (qwen3_next_moe, qwen3_next_list_dense_first, qwen3_5_dense,
                                                qwen3_5_moe, olmo_hybrid_small, olmo_hybrid_nope_list)}

FACTORIES = {fn.__name__: fn for fn in (
    qwen2_small, qwen2_gqa, qwen3_small, qwen3_gqa, gemma2_small, gemma2_mha, gemma3_pattern, gemma3_linear_global,
    phi3_small, phi3_partial, olmo2_small, olmo2_gqa, llama31_llama3_rope, llama_linear_rope, llama_dynamic_rope,
    llama_yarn_rope, llama_yarn_mscale_rope, gpt_neox_partial, gpt_neox_sequential, falcon_new_arch,
    falcon_new_arch_one_ln, deepseek_v3_q_lora, deepseek_v3_no_q_lora, deepseek_v2_greedy,
    deepseek_v2_group_limited, gpt_oss_small, gpt_oss_mqa, smollm3_every_4, smollm3_list_sliding_yarn, olmo3_pattern,
    olmo3_yarn_full_layers)}


# --- what every family's comparison feeds both models -----------------------------------------------------------

V, T = 100, 14  # the factories' vocabulary, and the batch's length


def right_padded_batch(seed: int = 0):
    """(3, T) ids and mask: one full row and two right-padded ones (at 10 and at 6 tokens)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, V, (3, T), generator=g)
    mask = torch.ones(3, T, dtype=torch.long)
    mask[1, 10:] = 0
    mask[2, 6:] = 0
    return ids.masked_fill(mask == 0, 0), mask


def run_both(hf_model, ours, ids, mask):
    """Hugging Face's output with its eager attention weights, and ours: traced logits with every layer's
    weights, and the fused path's logits."""
    with torch.no_grad():
        out = hf_model(ids, attention_mask=mask, output_attentions=True)
        logits, trace = ours.run_with_trace(ids, attention_mask=mask, names="*hook_pattern")
        fused = ours(ids, attention_mask=mask)
    return out, logits, trace, fused
