"""Kimi Linear: Kimi delta attention layers (transformer/linear_attention.py, 'kimi-delta') between multi-head latent
attention layers without positions, in DeepSeek-V3's blocks with its routed MoE.

``layer_types`` ("linear_attention" / "full_attention", or the checkpoint's 1-based ``kda_layers`` and
``full_attn_layers``, which the config turns into it) becomes ``attention_layers``. The latent attention turns no
positions, yet keeps the shared key part of qk_rope_head_dim numbers unrotated: position 'rope' with every full layer
in ``nope_layers``. One ``Family`` row, as in hf_modern.py.
"""
from __future__ import annotations

import torch
from torch import nn

from ..config import TransformerConfig
from .family import Family, unsupported
from .hf_hybrid import attention_layers
from .hf_modern import _decoder, _gated_mlp, _silu
from .weights import Weights, from_linear, linear, norm_weights

LINEAR_KIND = "kimi-delta"  # the kind of every "linear_attention" layer of Kimi Linear
LATENT_NORM_EPS = 1e-6  # HF builds the latent's RMSNorm with its default eps, whatever rms_norm_eps says


def _first_dense_layers(c, hf_class: str) -> int:
    """How many first layers keep a dense MLP (mlp_layer_types: "dense" / "sparse"); ours can keep the first N."""
    dense = [i for i, kind in enumerate(c.mlp_layer_types) if kind == "dense"]
    if dense != list(range(len(dense))):
        raise unsupported(hf_class, f"dense MLP layers {dense} (mlp_layer_types)",
                          "a routed model keeps its first layers dense (first_dense_layers), not others")
    return len(dense)


def _kimi_moe(c, hf_class: str) -> dict:
    """DeepSeek-V3's MoE: a sigmoid router whose correction bias only chooses, group-limited top-k, the chosen
    weights renormalised (norm_topk_prob) and scaled, shared experts as wide as n_shared_experts routed ones."""
    dense = _first_dense_layers(c, hf_class)
    if dense == c.num_hidden_layers:
        return dict(ffn="swiglu")
    return dict(ffn="moe", n_experts=c.num_local_experts, top_k=c.num_experts_per_tok, d_expert=c.moe_intermediate_size,
                n_shared_experts=c.n_shared_experts or 0, first_dense_layers=dense, router="sigmoid",
                router_norm=bool(c.norm_topk_prob), routed_scale=float(c.routed_scaling_factor),
                n_expert_groups=c.n_group or 1, top_groups=c.topk_group or 1)


def _kimi_config(c, hf_class: str, has_head: bool) -> dict:
    _silu(hf_class, c.hidden_act)  # the MLP's gate, and the short convolution's activation
    full = [i for i, kind in enumerate(c.layer_types) if kind == "full_attention"]
    bias = bool(getattr(c, "attention_bias", False))
    fields = _decoder(c, head_dim=c.qk_nope_head_dim + c.qk_rope_head_dim, rope_dim=c.qk_rope_head_dim,
                      v_head_dim=c.v_head_dim, kv_rank=c.kv_lora_rank, q_rank=c.q_lora_rank,
                      latent_norm_eps=LATENT_NORM_EPS, norm="rmsnorm", norm_position="pre", norm_eps=c.rms_norm_eps,
                      d_ff=c.intermediate_size, ffn="swiglu", qkv_bias=bias, bias=bias,
                      attention_layers=attention_layers(c.layer_types), linear_kind=LINEAR_KIND,
                      linear_key_heads=c.linear_num_heads, linear_value_heads=c.linear_num_heads,
                      linear_key_head_dim=c.linear_head_dim, linear_value_head_dim=c.linear_head_dim,
                      linear_conv_size=c.linear_conv_kernel_dim)
    fields["n_kv_heads"] = c.num_attention_heads  # MLA rebuilds a key and a value for every head
    if full:  # no positions in the latent attention: its shared key part is kept, unrotated
        fields["nope_layers"] = ", ".join(map(str, full))
    else:
        fields |= dict(position="none", rope_dim=None, kv_rank=None, q_rank=None, latent_norm_eps=None,
                       head_dim=None, v_head_dim=None, n_kv_heads=None)
    return fields | _kimi_moe(c, hf_class)


def _latent_attention(prefix: str, attn: nn.Module, cfg: TransformerConfig) -> Weights:
    """MLA: a head's q is [nope | rope] there, [rope | nope] here (nothing turns, so no pair is reordered);
    kv_a_proj_with_mqa is [latent | shared key]; kv_b_proj is each head's [k | v] up-projection."""
    H, d_rope, d_nope, d_v, rank = cfg.n_heads, cfg.d_rope, cfg.d_head - cfg.d_rope, cfg.d_v, cfg.kv_rank

    def queries(weight):  # (H (d_nope + d_rope), ...) -> ours, per head [rope | nope]
        heads = weight.view(H, d_nope + d_rope, -1)
        return torch.cat((heads[:, d_nope:], heads[:, :d_nope]), dim=1).reshape(H * cfg.d_head, -1)

    w = {}
    if cfg.q_rank is None:
        w |= linear(prefix + "q_proj", queries(attn.q_proj.weight), None, cfg.has_qkv_bias)
    else:
        w |= from_linear(prefix + "q_down", attn.q_a_proj, cfg.has_qkv_bias)
        w |= norm_weights(prefix + "q_down_norm", attn.q_a_layernorm)
        w[prefix + "q_up.weight"] = queries(attn.q_b_proj.weight)
    down = attn.kv_a_proj_with_mqa
    latent, shared_key = down.weight.split((rank, d_rope))
    latent_bias, key_bias = down.bias.split((rank, d_rope)) if down.bias is not None else (None, None)
    w |= linear(prefix + "kv_down", latent, latent_bias, cfg.has_qkv_bias)
    w |= linear(prefix + "k_rope", shared_key, key_bias, cfg.has_qkv_bias)
    w |= norm_weights(prefix + "kv_norm", attn.kv_a_layernorm)
    k_up, v_up = attn.kv_b_proj.weight.view(H, d_nope + d_v, rank).split((d_nope, d_v), dim=1)  # per head [k | v]
    w |= {prefix + "k_up.weight": k_up.reshape(H * d_nope, rank), prefix + "v_up.weight": v_up.reshape(H * d_v, rank)}
    return w | from_linear(prefix + "o_proj", attn.o_proj, cfg.bias)


def _kimi_delta(prefix: str, mixer: nn.Module, cfg: TransformerConfig) -> Weights:
    """Kimi delta attention: q, k, v, the short convolution, β, the decay's bottleneck (forget_gate.f_a_proj,
    f_b_proj), A_log (1, 1, H, 1) and dt_bias per channel, the gate's bottleneck (g_a_proj, g_b_proj), the read's
    norm and the output projection (no bias there: a zero one stands in where ours has one)."""
    forget = mixer.forget_gate
    w = {prefix + ours + ".weight": getattr(mixer, hf).weight for ours, hf in (
        ("q_proj", "q_proj"), ("k_proj", "k_proj"), ("v_proj", "v_proj"), ("b_proj", "b_proj"),
        ("z_down", "g_a_proj"), ("z_up", "g_b_proj"))}
    w |= {prefix + "a_down.weight": forget.f_a_proj.weight, prefix + "a_up.weight": forget.f_b_proj.weight,
          prefix + "A_log": forget.A_log.reshape(-1), prefix + "dt_bias": forget.dt_bias,
          prefix + "conv.weight": mixer.conv1d.weight, prefix + "norm_weight": mixer.o_norm.weight}
    return w | from_linear(prefix + "o_proj", mixer.o_proj, cfg.bias)


def _kimi_moe_weights(prefix: str, moe: nn.Module, cfg: TransformerConfig) -> Weights:
    """The router and its correction bias, the experts (gate_up_proj (E, 2 d_expert, D), gate half first), the shared
    experts."""
    w = linear(prefix + "router", moe.gate.weight, None, cfg.bias)
    w[prefix + "choice_bias"] = moe.gate.e_score_correction_bias
    gate, up = moe.experts.gate_up_proj.chunk(2, dim=1)  # (E, d_expert, D) each
    for e in range(cfg.n_experts):
        for name, weight in (("gate", gate[e]), ("up", up[e]), ("down", moe.experts.down_proj[e])):
            w |= linear(f"{prefix}experts.{e}.{name}", weight, None, cfg.bias)
    if cfg.n_shared_experts:
        w |= _gated_mlp(prefix + "shared.", moe.shared_experts, cfg)
    return w


def _kimi_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    w = {"embed.weight": body.embed_tokens.weight, **norm_weights("ln_final", body.norm)}
    for spec, layer in zip(cfg.layer_plan(), body.layers):
        b = f"blocks.{spec.index}."
        mix = _kimi_delta if spec.row.keeps_state else _latent_attention
        w |= mix(b + "attn.", layer.self_attn, cfg)
        w |= norm_weights(b + "ln1", layer.input_layernorm) | norm_weights(b + "ln2", layer.post_attention_layernorm)
        w |= _kimi_moe_weights(b + "mlp.", layer.mlp, cfg) if cfg.layer_is_moe(spec.index) else \
            _gated_mlp(b + "mlp.", layer.mlp, cfg)
    return w


KIMI_FAMILIES = {
    "kimi_linear": Family("Kimi Linear", _kimi_config, _kimi_weights, (
        "layer_types (or the checkpoint's 1-based kda_layers and full_attn_layers): 'linear_attention' layers are "
        "Kimi delta attention, 'full_attention' multi-head latent attention (attention_layers '3:1' where it says "
        "so, else the list)",
        "Kimi delta attention: q, k, v through a short causal convolution and SiLU; q and k of length 1; a decay per "
        "key channel exp(-exp(A_log) softplus(x f_a f_b + dt_bias)) with A per head and dt per channel; "
        "β = sigmoid(b); RMSNorm(read) * sigmoid(x g_a g_b)",
        "latent attention without positions: position 'rope' with every full layer in nope_layers keeps the "
        "shared key part (qk_rope_head_dim) unrotated; a head's q and k [nope | rope] there, [rope | nope] here; "
        "the latent norms' eps 1e-6 (latent_norm_eps), every other norm's rms_norm_eps",
        "MoE as DeepSeek-V3's: sigmoid router, the correction bias for choosing only, group-limited top-k, "
        "routed_scaling_factor, shared experts; mlp_layer_types' dense layers first (first_dense_layers)")),
}

KIMI_CLASSES = {"KimiLinearForCausalLM": ("kimi_linear", True), "KimiLinearModel": ("kimi_linear", False)}

DEFAULT_KIMI_CLASS = {"kimi_linear": "KimiLinearForCausalLM"}
