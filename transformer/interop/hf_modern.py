"""The Hugging Face families of 2024-2026: Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3, OLMo 2, OLMo 3, GPT-NeoX,
DeepSeek-V2/V3, gpt-oss and SmolLM3. (LLaMA 3.1's RoPE and Falcon's new decoder architecture live with their
older relatives in huggingface.py.)

Each is one ``Family`` row: which choice it makes on each axis, and how its weights are renamed to ours.
Nothing of their forward pass is copied: ours runs, so matching numbers prove the mapping.
"""
from __future__ import annotations

import torch
from torch import nn

from ..axes import AXES
from ..config import TransformerConfig
from ..layer_plan import parse_nope_layers
from .family import (Family, activation, head_dim, layer_pattern, rope_by_layer_type, rope_fields, unsupported,
                     yarn_mscale)
from .weights import Weights, from_linear, linear, norm_weights

# --- shared pieces ---------------------------------------------------------------------


def _decoder(c, **fields) -> dict:
    """Fields every decoder-only family here shares."""
    return dict(arch="decoder", vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.num_attention_heads,
                n_kv_heads=getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
                n_layers=c.num_hidden_layers, max_len=c.max_position_embeddings, position="rope", **fields)


def _windows(c) -> dict:
    return layer_pattern(getattr(c, "layer_types", None), getattr(c, "sliding_window", None))


def _attention(prefix: str, attn: nn.Module, cfg: TransformerConfig) -> Weights:
    """q, k, v, o projections (and QK-norm weights) of a LLaMA-style attention module."""
    w = {}
    for name in ("q_proj", "k_proj", "v_proj"):
        w |= from_linear(prefix + name, getattr(attn, name), cfg.has_qkv_bias)
    w |= from_linear(prefix + "o_proj", attn.o_proj, cfg.bias)
    if cfg.row("qk_norm").normalises:
        w |= {prefix + "q_norm.weight": attn.q_norm.weight, prefix + "k_norm.weight": attn.k_norm.weight}
    return w


def _gated_mlp(prefix: str, mlp: nn.Module, cfg: TransformerConfig) -> Weights:
    w = {}
    for hf_name, ours in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down")):
        w |= from_linear(prefix + ours, getattr(mlp, hf_name), cfg.bias)
    return w


def _silu(hf_class: str, act: str) -> None:
    if act != "silu":
        raise unsupported(hf_class, f"hidden_act={act!r}", "SwiGLU's gate is SiLU")


# --- Qwen2, Qwen3, OLMo 2 and 3: LLaMA's skeleton with one or two switches ------------------------------


def _qwen_config(c, hf_class: str, has_head: bool) -> dict:
    _silu(hf_class, c.hidden_act)
    qwen3 = hasattr(c, "head_dim") and "Qwen3" in hf_class
    attention_bias = bool(getattr(c, "attention_bias", False))
    return _decoder(c, d_ff=c.intermediate_size, head_dim=head_dim(c) if qwen3 else None, **rope_fields(hf_class, c),
                    norm="rmsnorm", norm_position="pre", ffn="swiglu", norm_eps=c.rms_norm_eps,
                    qk_norm="head" if qwen3 else "none",
                    # Qwen2: q, k and v always have a bias, o never; Qwen3: attention_bias puts one on all four
                    qkv_bias=True if not qwen3 else attention_bias, bias=qwen3 and attention_bias, **_windows(c))


def _llama_like_weights(model, cfg: TransformerConfig, norms: dict[str, str]) -> Weights:
    """Embedding, final norm, attention and SwiGLU of every layer; `norms` renames the block's norms."""
    body = model.base_model
    w = {"embed.weight": body.embed_tokens.weight, **norm_weights("ln_final", body.norm)}
    for i, layer in enumerate(body.layers):
        b = f"blocks.{i}."
        w |= _attention(b + "attn.", layer.self_attn, cfg) | _gated_mlp(b + "mlp.", layer.mlp, cfg)
        for hf_name, ours in norms.items():
            w |= norm_weights(b + ours, getattr(layer, hf_name))
    return w


_PRE_NORMS = {"input_layernorm": "ln1", "post_attention_layernorm": "ln2"}  # LLaMA's names: both sit before a sublayer
# OLMo 2's names: both sit on a sublayer's output (ours ln1_post and ln2_post)
_AFTER_NORMS = {"post_attention_layernorm": "ln1_post", "post_feedforward_layernorm": "ln2_post"}


def _qwen_weights(model, cfg: TransformerConfig) -> Weights:
    return _llama_like_weights(model, cfg, _PRE_NORMS)


def _olmo_config(c, hf_class: str, has_head: bool) -> dict:
    """OLMo 2, and OLMo 3: the same block, with sliding layers (layer_types) and a RoPE per layer type."""
    _silu(hf_class, c.hidden_act)
    bias = bool(getattr(c, "attention_bias", False))
    return _decoder(c, d_ff=c.intermediate_size, **rope_by_layer_type(hf_class, c), norm="rmsnorm",
                    norm_position="after", qk_norm="full", ffn="swiglu", norm_eps=c.rms_norm_eps, bias=bias,
                    **_windows(c))


def _olmo_weights(model, cfg: TransformerConfig) -> Weights:
    return _llama_like_weights(model, cfg, _AFTER_NORMS)


# --- Gemma 2 and Gemma 3 -----------------------------------------------------------------------------


def _gemma_config(c, hf_class: str, has_head: bool) -> dict:
    ffn, approximate = activation(hf_class, getattr(c, "hidden_activation", None) or c.hidden_act)
    if not AXES["ffn"].row(ffn).gelu:
        raise unsupported(hf_class, f"hidden_activation={c.hidden_activation!r}", "Gemma's gate is a GELU")
    gemma3 = "Gemma3" in hf_class
    return _decoder(c, d_ff=c.intermediate_size, head_dim=head_dim(c), **rope_by_layer_type(hf_class, c),
                    norm="rmsnorm", norm_position="sandwich", norm_plus_one=True, scale_embeddings=True, ffn="geglu",
                    gelu_approximate=approximate, norm_eps=c.rms_norm_eps, bias=bool(c.attention_bias),
                    score_scale=float(c.query_pre_attn_scalar) ** -0.5, qk_norm="head" if gemma3 else "none",
                    # Gemma 3 stores attn_logit_softcapping but never applies it
                    attn_softcap=None if gemma3 else c.attn_logit_softcapping,
                    logit_softcap=c.final_logit_softcapping, **_windows(c))


def _gemma_weights(model, cfg: TransformerConfig) -> Weights:
    return _llama_like_weights(model, cfg, {"input_layernorm": "ln1", "post_attention_layernorm": "ln1_post",
                                            "pre_feedforward_layernorm": "ln2",
                                            "post_feedforward_layernorm": "ln2_post"})


# --- Phi-3: fused projections, partial rotary ------------------------------------------------------------


def _phi3_config(c, hf_class: str, has_head: bool) -> dict:
    _silu(hf_class, c.hidden_act)
    d_head = c.hidden_size // c.num_attention_heads
    return _decoder(c, d_ff=c.intermediate_size, **rope_fields(hf_class, c, partial=True, head_dim=d_head),
                    norm="rmsnorm", norm_position="pre", ffn="swiglu", norm_eps=c.rms_norm_eps,
                    sliding_window=getattr(c, "sliding_window", None))  # Phi-3 slides in every layer


def _phi3_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    w = {"embed.weight": body.embed_tokens.weight, **norm_weights("ln_final", body.norm)}
    q_rows, kv_rows = cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head
    for i, layer in enumerate(body.layers):
        b = f"blocks.{i}."
        q, k, v = layer.self_attn.qkv_proj.weight.split((q_rows, kv_rows, kv_rows))  # [all q | all k | all v]
        w |= {b + "attn.q_proj.weight": q, b + "attn.k_proj.weight": k, b + "attn.v_proj.weight": v,
              b + "attn.o_proj.weight": layer.self_attn.o_proj.weight}
        gate, up = layer.mlp.gate_up_proj.weight.chunk(2)  # [gate | up]
        w |= {b + "mlp.gate.weight": gate, b + "mlp.up.weight": up, b + "mlp.down.weight": layer.mlp.down_proj.weight}
        w |= norm_weights(b + "ln1", layer.input_layernorm) | norm_weights(b + "ln2", layer.post_attention_layernorm)
    return w


# --- GPT-NeoX: per-head fused qkv, partial rotary, parallel residual with two norms ----------------------


def _neox_config(c, hf_class: str, has_head: bool) -> dict:
    ffn, approximate = activation(hf_class, c.hidden_act)
    d_head = c.hidden_size // c.num_attention_heads
    return _decoder(c, d_ff=c.intermediate_size, **rope_fields(hf_class, c, partial=True, head_dim=d_head),
                    norm="layernorm", norm_position="pre", ffn=ffn, gelu_approximate=approximate,
                    norm_eps=c.layer_norm_eps, parallel_block=bool(c.use_parallel_residual),
                    parallel_norms=2, bias=True)  # the MLP always has biases; a missing attention bias is a zero


def _neox_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    w = {"embed.weight": body.embed_in.weight, **norm_weights("ln_final", body.final_layer_norm)}
    H, d = cfg.n_heads, cfg.d_head
    for i, layer in enumerate(body.layers):
        b = f"blocks.{i}."
        fused = layer.attention.query_key_value  # rows head by head: [q_h | k_h | v_h]
        weights = fused.weight.view(H, 3, d, -1)
        biases = fused.bias.view(H, 3, d) if fused.bias is not None else None
        for j, name in enumerate(("q_proj", "k_proj", "v_proj")):
            w |= linear(b + "attn." + name, weights[:, j].reshape(H * d, -1),
                        None if biases is None else biases[:, j].reshape(-1), True)
        w |= from_linear(b + "attn.o_proj", layer.attention.dense, True)
        w |= from_linear(b + "mlp.up", layer.mlp.dense_h_to_4h, True) | from_linear(b + "mlp.down", layer.mlp.dense_4h_to_h, True)
        w |= norm_weights(b + "ln1", layer.input_layernorm) | norm_weights(b + "ln2", layer.post_attention_layernorm)
    return w


# --- DeepSeek-V2 and V3: multi-head latent attention and a routed MoE with shared experts -----------------


def _deepseek_config(c, hf_class: str, has_head: bool, v3: bool | None = None) -> dict:
    """DeepSeek-V2's or V3's fields (`v3`: None = read off the class name; GLM-5 routes as V3 does)."""
    _silu(hf_class, c.hidden_act)
    v3 = "V3" in hf_class if v3 is None else v3
    d_q = c.qk_nope_head_dim + c.qk_rope_head_dim
    rope = rope_fields(hf_class, c)
    scale = d_q ** -0.5
    params = getattr(c, "rope_parameters", None) or {}
    if AXES["rope_scaling"].row(rope.get("rope_scaling", "none")).rescales and params.get("mscale_all_dim"):
        scale *= yarn_mscale(rope["rope_factor"], params["mscale_all_dim"]) ** 2  # YaRN's temperature on the softmax
    bias = bool(getattr(c, "attention_bias", False))
    fields = _decoder(c, head_dim=d_q, rope_dim=c.qk_rope_head_dim, v_head_dim=c.v_head_dim, kv_rank=c.kv_lora_rank,
                      q_rank=c.q_lora_rank, score_scale=scale, **rope, norm="rmsnorm", norm_position="pre",
                      norm_eps=c.rms_norm_eps, d_ff=c.intermediate_size, qkv_bias=bias, bias=bias,
                      # DeepSeek's latent norms use 1e-6 whatever rms_norm_eps says (GLM-5's is 1e-5)
                      latent_norm_eps=None if c.rms_norm_eps == 1e-6 else 1e-6)
    fields["n_kv_heads"] = c.num_attention_heads
    n_experts = getattr(c, "n_routed_experts", None)
    if not n_experts:
        return fields | dict(ffn="swiglu")
    method = getattr(c, "topk_method", "noaux_tc" if v3 else "greedy")
    groups = dict(n_expert_groups=c.n_group or 1, top_groups=c.topk_group or 1) if v3 else {}
    if not v3 and method != "greedy":
        raise unsupported(hf_class, f"topk_method={method!r}", "DeepSeek-V2's group-limited routing scores a group by "
                          "its best expert; ours by its best two (DeepSeek-V3): only 'greedy' maps")
    return fields | dict(ffn="moe", n_experts=n_experts, top_k=c.num_experts_per_tok, d_expert=c.moe_intermediate_size,
                         n_shared_experts=c.n_shared_experts or 0, first_dense_layers=c.first_k_dense_replace,
                         router="sigmoid" if v3 else "softmax", router_norm=bool(getattr(c, "norm_topk_prob", False)) and v3,
                         routed_scale=float(c.routed_scaling_factor), **groups)


def _interleave_permutation(d_rope: int) -> torch.Tensor:
    """DeepSeek rotates pairs (0, 1), (2, 3) ...; ours pairs (i, i + d/2): these rows, reordered, turn alike."""
    return torch.cat((torch.arange(0, d_rope, 2), torch.arange(1, d_rope, 2)))


def _deepseek_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    c = model.config
    interleaved = "V2" in type(model).__name__ or getattr(c, "rope_interleave", True)
    order = _interleave_permutation(cfg.d_rope) if interleaved else torch.arange(cfg.d_rope)
    H, d_rope, d_nope, d_v, rank = cfg.n_heads, cfg.d_rope, cfg.d_head - cfg.d_rope, cfg.d_v, cfg.kv_rank
    w = {"embed.weight": body.embed_tokens.weight, **norm_weights("ln_final", body.norm)}

    def queries(weight):  # HF per head [nope | rope]; ours [rope (reordered) | nope]
        heads = weight.view(H, d_nope + d_rope, -1)
        return torch.cat((heads[:, d_nope:][:, order], heads[:, :d_nope]), dim=1).reshape(H * cfg.d_head, -1)

    for i, layer in enumerate(body.layers):
        a, b = layer.self_attn, f"blocks.{i}.attn."
        if cfg.q_rank is None:
            w |= linear(b + "q_proj", queries(a.q_proj.weight), None, cfg.has_qkv_bias)
        else:
            w |= from_linear(b + "q_down", a.q_a_proj, cfg.has_qkv_bias) | norm_weights(b + "q_down_norm", a.q_a_layernorm)
            w |= {b + "q_up.weight": queries(a.q_b_proj.weight)}
        down = a.kv_a_proj_with_mqa  # rows [latent (rank) | rope key (d_rope)]
        down_bias = down.bias.split((rank, d_rope)) if down.bias is not None else (None, None)
        latent, rope_key = down.weight.split((rank, d_rope))
        w |= linear(b + "kv_down", latent, down_bias[0], cfg.has_qkv_bias)
        w |= linear(b + "k_rope", rope_key[order], None if down_bias[1] is None else down_bias[1][order], cfg.has_qkv_bias)
        w |= norm_weights(b + "kv_norm", a.kv_a_layernorm)
        k_nope, v = a.kv_b_proj.weight.view(H, d_nope + d_v, rank).split((d_nope, d_v), dim=1)  # per head [k | v]
        w |= {b + "k_up.weight": k_nope.reshape(H * d_nope, rank), b + "v_up.weight": v.reshape(H * d_v, rank)}
        w |= from_linear(b + "o_proj", a.o_proj, cfg.bias)
        p = f"blocks.{i}."
        w |= norm_weights(p + "ln1", layer.input_layernorm) | norm_weights(p + "ln2", layer.post_attention_layernorm)
        mlp = layer.mlp
        if not hasattr(mlp, "experts"):
            w |= _gated_mlp(p + "mlp.", mlp, cfg)
            continue
        w |= linear(p + "mlp.router", mlp.gate.weight, None, cfg.bias)
        if cfg.row("router").sigmoid:
            w[p + "mlp.choice_bias"] = mlp.gate.e_score_correction_bias
        gate, up = mlp.experts.gate_up_proj.chunk(2, dim=1)  # (E, d_expert, D) each: [gate | up]
        for e in range(cfg.n_experts):
            for name, weight in (("gate", gate[e]), ("up", up[e]), ("down", mlp.experts.down_proj[e])):
                w |= linear(f"{p}mlp.experts.{e}.{name}", weight, None, cfg.bias)
        if cfg.n_shared_experts:
            w |= _gated_mlp(p + "mlp.shared.", mlp.shared_experts, cfg)
    return w


# --- gpt-oss: sinks, alternating windows, YaRN, clamped experts with biases --------------------------------


# transformers releases before the config named it (5.17 among them) clamp the experts at 7.0 in the model's code
SWIGLU_LIMIT_BEFORE_CONFIG = 7.0


def _gpt_oss_config(c, hf_class: str, has_head: bool) -> dict:
    if getattr(c, "swiglu_alpha", 1.702) != 1.702:
        raise unsupported(hf_class, f"swiglu_alpha={c.swiglu_alpha}", "the clamped SwiGLU's alpha is gpt-oss's 1.702")
    return _decoder(c, head_dim=head_dim(c), **rope_fields(hf_class, c), norm="rmsnorm", norm_position="pre",
                    norm_eps=c.rms_norm_eps, sinks=True, bias=True, ffn="moe", n_experts=c.num_local_experts,
                    top_k=c.num_experts_per_tok, d_ff=c.intermediate_size, d_expert=c.intermediate_size,
                    expert_activation="clamped-swiglu",
                    expert_limit=float(getattr(c, "swiglu_limit", SWIGLU_LIMIT_BEFORE_CONFIG)), **_windows(c))


def _gpt_oss_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    w = {"embed.weight": body.embed_tokens.weight, **norm_weights("ln_final", body.norm)}
    for i, layer in enumerate(body.layers):
        b = f"blocks.{i}."
        w |= _attention(b + "attn.", layer.self_attn, cfg) | {b + "attn.sinks": layer.self_attn.sinks}
        w |= norm_weights(b + "ln1", layer.input_layernorm) | norm_weights(b + "ln2", layer.post_attention_layernorm)
        mlp = layer.mlp
        w |= from_linear(b + "mlp.router", mlp.router, True)
        experts = mlp.experts  # gate_up_proj (E, D, 2 d_expert), stored for x @ W, gate and up interleaved
        for e in range(cfg.n_experts):
            x = f"{b}mlp.experts.{e}."
            w |= {x + "gate.weight": experts.gate_up_proj[e][:, 0::2].T, x + "gate.bias": experts.gate_up_proj_bias[e][0::2],
                  x + "up.weight": experts.gate_up_proj[e][:, 1::2].T, x + "up.bias": experts.gate_up_proj_bias[e][1::2],
                  x + "down.weight": experts.down_proj[e].T, x + "down.bias": experts.down_proj_bias[e]}
    return w


# --- SmolLM3: LLaMA with layers that leave RoPE out ---------------------------------------------------------


def _nope_layers(nope: list[int], n_layers: int) -> str:
    """Our nope_layers for these layer indices: "every N" when they are exactly every N-th layer, else a list."""
    if not nope:
        return "none"
    for step in range(2, n_layers + 1):
        if parse_nope_layers(f"every {step}", n_layers) == frozenset(nope):
            return f"every {step}"
    return ", ".join(map(str, nope))


def _smollm3_config(c, hf_class: str, has_head: bool) -> dict:
    _silu(hf_class, c.hidden_act)
    n = c.num_hidden_layers
    nope = [i for i in range(n) if not c.no_rope_layers[i]]  # HF: 1 = the layer turns by RoPE, 0 = NoPE
    # HF builds the RoPE tables even when no layer reads them; a model without a turning layer has no positions
    positions = (dict(position="none") if len(nope) == n
                 else dict(**rope_fields(hf_class, c), nope_layers=_nope_layers(nope, n)))
    # HF's eager and SDPA attention take the window from the mask, which layer_types and sliding_window make
    # (use_sliding_window only chose the default layer_types: sliding on the NoPE layers)
    return _decoder(c, d_ff=c.intermediate_size, head_dim=head_dim(c), norm="rmsnorm", norm_position="pre",
                    ffn="swiglu", norm_eps=c.rms_norm_eps, **_windows(c),
                    # one switch covers both; a zero bias stands in where only one of them has one
                    bias=bool(c.attention_bias or c.mlp_bias)) | positions


MODERN_FAMILIES = {
    "qwen2": Family("Qwen2", _qwen_config, _qwen_weights, (
        "q, k and v carry a bias, o none (qkv_bias=True, bias=False)",
        "sliding layers, when use_sliding_window is on, are those from max_window_layers up: a per-layer pattern")),
    "qwen3": Family("Qwen3", _qwen_config, _qwen_weights, (
        "head_dim is its own number, not d_model / n_heads",
        "QK-norm: an RMSNorm of width head_dim on every q and k head, before RoPE")),
    "gemma2": Family("Gemma 2", _gemma_config, _gemma_weights, (
        "sandwich norms: input_layernorm / post_attention_layernorm around attention, pre_ / post_feedforward_layernorm "
        "around the FFN", "RMSNorm scales by (1 + w); embeddings times sqrt(d_model)",
        "scores scaled by query_pre_attn_scalar^-0.5 and soft-capped before the mask; final logits soft-capped",
        "local and global layers alternate, the local ones first", "GeGLU with GELU's tanh approximation")),
    "gemma3": Family("Gemma 3", _gemma_config, _gemma_weights, (
        "as Gemma 2, plus QK-norm per head ((1 + w) RMSNorm, before RoPE); its attn_logit_softcapping is never applied",
        "five local layers to one global; local layers turn at their own RoPE base (rope_local_theta), "
        "and any RoPE scaling acts on the global layers only")),
    "phi3": Family("Phi-3", _phi3_config, _phi3_weights, (
        "qkv_proj holds all of q, then all of k, then all of v; gate_up_proj the gate, then up",
        "partial_rotary_factor rotates the first rope_dim dimensions of each head")),
    "olmo2": Family("OLMo 2", _olmo_config, _olmo_weights, (
        "norms after each sublayer, before the residual add (norm_position='after'); no norm before",
        "QK-norm over the whole q and k projections (qk_norm='full'), before RoPE")),
    "olmo3": Family("OLMo 3", _olmo_config, _olmo_weights, (
        "as OLMo 2: norms after each sublayer, QK-norm over the whole q and k projections",
        "layer_types: three sliding-window layers, then one full layer (layer_pattern '3:1'), or any list",
        "one RoPE per layer type: alike, one RoPE for all; else the sliding layers turn by a plain RoPE at their "
        "own base (rope_local_theta) and any scaling (YaRN) acts on the full layers only")),
    "gpt_neox": Family("GPT-NeoX", _neox_config, _neox_weights, (
        "query_key_value runs head by head ([q, k, v] per head) and is split per head",
        "rotary_pct: only the first rope_dim dimensions of each head turn",
        "use_parallel_residual: x + attn(ln1(x)) + mlp(ln2(x)), two norms (parallel_norms=2)")),
    "deepseek_v3": Family("DeepSeek-V3", _deepseek_config, _deepseek_weights, (
        "MLA: kv_a_proj_with_mqa splits into the latent's down-projection and the shared RoPE key; kv_b_proj into "
        "each head's key and value up-projections", "a head's q and k are laid out [rope | nope] here, [nope | rope] "
        "there; interleaved RoPE pairs are reordered to ours (the same scores)",
        "YaRN's mscale_all_dim enters the softmax scale (score_scale)",
        "MoE: sigmoid router, the correction bias for choosing only, group-limited top-k, shared experts, "
        "dense first layers")),
    "deepseek_v2": Family("DeepSeek-V2", _deepseek_config, _deepseek_weights, (
        "MLA as in DeepSeek-V3; complex (interleaved) RoPE reordered to ours",
        "MoE: softmax router without renormalising, greedy top-k, shared experts")),
    "gpt_oss": Family("gpt-oss", _gpt_oss_config, _gpt_oss_weights, (
        "sinks: one learned logit per head joins every row's softmax and is dropped",
        "local (sliding) and global layers alternate; YaRN RoPE", "experts' gate_up_proj is stored (D, 2F) with gate "
        "and up interleaved in columns, plus biases: split and transposed", "router with a bias; top-k, then softmax "
        "over the k (the same as renormalising the chosen softmax probabilities)",
        "clamped SwiGLU: (up + 1) * gate * sigmoid(1.702 gate), both clamped at swiglu_limit")),
    "smollm3": Family("SmolLM3", _smollm3_config, _qwen_weights, (
        "as LLaMA, with layers that leave RoPE out: no_rope_layers (1 = RoPE, 0 = NoPE) becomes nope_layers, "
        "'every N' (every no_rope_layer_interval-th layer by default) or a list of layers",
        "layer_types and sliding_window give the sliding layers (the NoPE ones when use_sliding_window is on)")),
}

MODERN_CLASSES = {
    "Qwen2ForCausalLM": ("qwen2", True), "Qwen2Model": ("qwen2", False),
    "Qwen3ForCausalLM": ("qwen3", True), "Qwen3Model": ("qwen3", False),
    "Gemma2ForCausalLM": ("gemma2", True), "Gemma2Model": ("gemma2", False),
    "Gemma3ForCausalLM": ("gemma3", True), "Gemma3TextModel": ("gemma3", False),
    "Phi3ForCausalLM": ("phi3", True), "Phi3Model": ("phi3", False),
    "Olmo2ForCausalLM": ("olmo2", True), "Olmo2Model": ("olmo2", False),
    "GPTNeoXForCausalLM": ("gpt_neox", True), "GPTNeoXModel": ("gpt_neox", False),
    "DeepseekV3ForCausalLM": ("deepseek_v3", True), "DeepseekV3Model": ("deepseek_v3", False),
    "DeepseekV2ForCausalLM": ("deepseek_v2", True), "DeepseekV2Model": ("deepseek_v2", False),
    "GptOssForCausalLM": ("gpt_oss", True), "GptOssModel": ("gpt_oss", False),
    "Olmo3ForCausalLM": ("olmo3", True), "Olmo3Model": ("olmo3", False),
    "SmolLM3ForCausalLM": ("smollm3", True), "SmolLM3Model": ("smollm3", False),
}

DEFAULT_MODERN_CLASS = {"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "gemma2": "Gemma2ForCausalLM",
                        "gemma3_text": "Gemma3ForCausalLM", "phi3": "Phi3ForCausalLM", "olmo2": "Olmo2ForCausalLM",
                        "gpt_neox": "GPTNeoXForCausalLM", "deepseek_v3": "DeepseekV3ForCausalLM",
                        "deepseek_v2": "DeepseekV2ForCausalLM", "gpt_oss": "GptOssForCausalLM",
                        "olmo3": "Olmo3ForCausalLM", "smollm3": "SmolLM3ForCausalLM"}
