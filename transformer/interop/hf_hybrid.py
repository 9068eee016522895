"""The Hugging Face families whose layers keep a state: Qwen3-Next, Qwen3.5 (dense and MoE, text) and OLMo hybrid.

Their ``layer_types`` mix "linear_attention" layers (Gated DeltaNet, transformer/linear_attention.py) with
"full_attention" ones; the list is copied onto ``attention_layers`` ("3:1" when it says so). Each is one
``Family`` row, as in hf_modern.py: the config on our axes, and the weights renamed to ours.
"""
from __future__ import annotations

import torch
from torch import nn

from ..axes import AXES
from ..config import TransformerConfig
from ..layer_plan import parse_attention_layers
from .family import Family, head_dim, rope_fields, unsupported
from .hf_modern import _AFTER_NORMS, _PRE_NORMS, _attention, _decoder, _gated_mlp, _silu
from .weights import Weights, from_linear, linear, norm_weights

LINEAR_KIND = "gated-deltanet"  # the kind of every "linear_attention" layer of these families


def attention_layers(layer_types: list[str]) -> str:
    """attention_layers from HF's layer_types: "N:1" when the layers repeat N linear ones then a full one, else
    the list as it is (our parser reads HF's words)."""
    listed = ",".join(layer_types)
    kinds = parse_attention_layers(listed, len(layer_types), LINEAR_KIND)
    first_full = next((i for i, kind in enumerate(kinds) if AXES["attention"].row(kind).softmax), None)
    if first_full:
        named = f"{first_full}:1"
        if parse_attention_layers(named, len(kinds), LINEAR_KIND) == kinds:
            return named
    return listed


def _linear_fields(c) -> dict:
    """A Gated DeltaNet layer's sizes."""
    return dict(attention_layers=attention_layers(c.layer_types), linear_kind=LINEAR_KIND,
                linear_key_heads=c.linear_num_key_heads, linear_value_heads=c.linear_num_value_heads,
                linear_key_head_dim=c.linear_key_head_dim, linear_value_head_dim=c.linear_value_head_dim,
                linear_conv_size=c.linear_conv_kernel_dim)


# --- Qwen3-Next, Qwen3.5: Gated DeltaNet layers, gated full attention, (1 + w) norms, an MoE with a gated shared expert


def _dense_layers(c, hf_class: str) -> int:
    """How many first layers keep a dense MLP: HF makes layer i sparse unless mlp_only_layers lists it, and only
    every decoder_sparse_step-th; ours can keep the first N dense."""
    step, only = getattr(c, "decoder_sparse_step", 1), getattr(c, "mlp_only_layers", None) or []
    dense = [i for i in range(c.num_hidden_layers) if i in only or (i + 1) % step]
    if dense != list(range(len(dense))):
        raise unsupported(hf_class, f"dense MLP layers {dense} (mlp_only_layers={only}, decoder_sparse_step={step})",
                          "a routed model keeps its first layers dense (first_dense_layers), not others")
    return len(dense)


def _qwen3_next_moe(c, hf_class: str) -> dict:
    width, shared = c.moe_intermediate_size, c.shared_expert_intermediate_size
    if shared % width:
        raise unsupported(hf_class, f"shared_expert_intermediate_size={shared} with moe_intermediate_size={width}",
                          "the shared expert is n_shared_experts routed experts wide: it must be a multiple")
    return dict(ffn="moe", n_experts=c.num_experts, top_k=c.num_experts_per_tok, d_expert=width,
                # Qwen3.5's MoE always renormalises the chosen probabilities; Qwen3-Next says so in norm_topk_prob
                router_norm=bool(getattr(c, "norm_topk_prob", True)), n_shared_experts=shared // width,
                shared_expert_gate=shared > 0, first_dense_layers=_dense_layers(c, hf_class))


def _qwen3_next_config(c, hf_class: str, has_head: bool) -> dict:
    _silu(hf_class, c.hidden_act)  # the MLP's gate, and the short convolution's activation
    d_head = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    fields = _decoder(c, head_dim=head_dim(c), **rope_fields(hf_class, c, partial=True, head_dim=d_head),
                      norm="rmsnorm", norm_position="pre", norm_plus_one=True, norm_eps=c.rms_norm_eps,
                      qk_norm="head", attn_gate=True, d_ff=getattr(c, "intermediate_size", None), ffn="swiglu",
                      # one switch covers the attention's biases; a zero bias stands in on the MLP and linear layers
                      bias=bool(c.attention_bias), **_linear_fields(c))
    if getattr(c, "num_experts", 0):
        fields |= _qwen3_next_moe(c, hf_class)
    return fields


def _gated_attention(prefix: str, attn: nn.Module, cfg: TransformerConfig) -> Weights:
    """q_proj holds each head's query, then its output gate: [q_h | gate_h] per head h."""
    H, d = cfg.n_heads, cfg.d_head
    q, gate = attn.q_proj.weight.view(H, 2 * d, -1).split(d, dim=1)  # (H, d, D) each
    w = {prefix + "q_proj.weight": q.reshape(H * d, -1), prefix + "gate_proj.weight": gate.reshape(H * d, -1)}
    if cfg.bias:
        q_bias, gate_bias = attn.q_proj.bias.view(H, 2 * d).split(d, dim=1)
        w |= {prefix + "q_proj.bias": q_bias.reshape(-1), prefix + "gate_proj.bias": gate_bias.reshape(-1)}
    for name in ("k_proj", "v_proj", "o_proj"):
        w |= from_linear(prefix + name, getattr(attn, name), cfg.bias)
    return w | {prefix + "q_norm.weight": attn.q_norm.weight, prefix + "k_norm.weight": attn.k_norm.weight}


def _qwen3_next_projections(layer: nn.Module, cfg: TransformerConfig) -> dict[str, torch.Tensor]:
    """q, k, v, z, b and a by our names. Qwen3-Next fuses them into in_proj_qkvz and in_proj_ba grouped by q/k head:
    for each, [q | k | its value heads' v | their z] and [their b | their a]. Qwen3.5 keeps z, b and a apart, and
    in_proj_qkv is [all q | all k | all v]."""
    H_k, d_k, d_v = cfg.state_key_heads, cfg.state_d_k, cfg.state_d_v
    if hasattr(layer, "in_proj_qkv"):
        q, k, v = layer.in_proj_qkv.weight.split((H_k * d_k, H_k * d_k, cfg.state_heads * d_v))
        return {"q_proj": q, "k_proj": k, "v_proj": v, "z_proj": layer.in_proj_z.weight,
                "b_proj": layer.in_proj_b.weight, "a_proj": layer.in_proj_a.weight}
    per_key = cfg.state_heads // H_k  # value heads per q/k head
    D = layer.in_proj_qkvz.weight.shape[-1]
    q, k, v, z = layer.in_proj_qkvz.weight.view(H_k, -1, D).split((d_k, d_k, per_key * d_v, per_key * d_v), dim=1)
    b, a = layer.in_proj_ba.weight.view(H_k, -1, D).split((per_key, per_key), dim=1)
    return {name: t.reshape(-1, D) for name, t in zip(("q_proj", "k_proj", "v_proj", "z_proj", "b_proj", "a_proj"),
                                                         (q, k, v, z, b, a))}


def _gated_deltanet(prefix: str, layer: nn.Module, cfg: TransformerConfig, projections: dict, out_proj: nn.Linear,
                    norm: nn.Module) -> Weights:
    """A Gated DeltaNet layer: its projections (by our names), the short convolution, the decay's A_log and
    dt_bias, the gated RMSNorm's weight and the output projection."""
    w = {prefix + name + ".weight": weight for name, weight in projections.items()}
    w |= {prefix + "conv.weight": layer.conv1d.weight, prefix + "A_log": layer.A_log, prefix + "dt_bias": layer.dt_bias,
          prefix + "norm_weight": norm.weight}
    return w | linear(prefix + "o_proj", out_proj.weight, None, cfg.bias)


def _qwen3_next_moe_weights(prefix: str, moe: nn.Module, cfg: TransformerConfig) -> Weights:
    """Router, experts (gate_up_proj (E, 2 d_expert, D), gate half first), the shared expert and its gate."""
    w = linear(prefix + "router", moe.gate.weight, None, cfg.bias)
    gate, up = moe.experts.gate_up_proj.chunk(2, dim=1)  # (E, d_expert, D) each
    for e in range(cfg.n_experts):
        for name, weight in (("gate", gate[e]), ("up", up[e]), ("down", moe.experts.down_proj[e])):
            w |= linear(f"{prefix}experts.{e}.{name}", weight, None, cfg.bias)
    if cfg.n_shared_experts:  # HF builds one even 0 wide; it then adds nothing
        w |= _gated_mlp(prefix + "shared.", moe.shared_expert, cfg)
        w[prefix + "shared_gate.weight"] = moe.shared_expert_gate.weight
    return w


def _qwen3_next_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    w = {"embed.weight": body.embed_tokens.weight, **norm_weights("ln_final", body.norm)}
    for spec, layer in zip(cfg.layer_plan(), body.layers):
        b = f"blocks.{spec.index}."
        if spec.row.keeps_state:
            mixer = layer.linear_attn
            w |= _gated_deltanet(b + "attn.", mixer, cfg, _qwen3_next_projections(mixer, cfg), mixer.out_proj,
                                 mixer.norm)
        else:
            w |= _gated_attention(b + "attn.", layer.self_attn, cfg)
        w |= norm_weights(b + "ln1", layer.input_layernorm) | norm_weights(b + "ln2", layer.post_attention_layernorm)
        if cfg.layer_is_moe(spec.index):
            w |= _qwen3_next_moe_weights(b + "mlp.", layer.mlp, cfg)
        else:
            w |= _gated_mlp(b + "mlp.", layer.mlp, cfg)
    return w


# --- OLMo hybrid: OLMo 3's full-attention layers between Gated DeltaNet layers in LLaMA's blocks ----------------------

# HF builds the gated read norm with eps 1e-5 (FLA's FusedRMSNormGated's default), whatever rms_norm_eps says
OLMO_HYBRID_READ_EPS = 1e-5


def _olmo_hybrid_config(c, hf_class: str, has_head: bool) -> dict:
    _silu(hf_class, c.hidden_act)  # the MLP's gate, and the short convolution's activation
    fields = _decoder(c, d_ff=c.intermediate_size, norm="rmsnorm", norm_eps=c.rms_norm_eps, qk_norm="full",
                      ffn="swiglu", bias=bool(c.attention_bias), **_linear_fields(c),
                      # a full layer is OLMo 3's, its norms on each sublayer's output; a linear layer is LLaMA's block
                      norm_position="after", linear_norm_position="pre", linear_read_norm_eps=OLMO_HYBRID_READ_EPS,
                      # linear_allow_neg_eigval: β = 2 sigmoid(x W_b), so the state's step may flip a direction
                      delta_beta_max=2.0 if c.linear_allow_neg_eigval else 1.0)
    # HF leaves RoPE out where rope_parameters has no rope_theta, as the released checkpoints do
    turns = (getattr(c, "rope_parameters", None) or {}).get("rope_theta") is not None
    return fields | (rope_fields(hf_class, c) if turns else dict(position="none"))


def _olmo_hybrid_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    w = {"embed.weight": body.embed_tokens.weight, **norm_weights("ln_final", body.norm)}
    for spec, layer in zip(cfg.layer_plan(), body.layers):
        b = f"blocks.{spec.index}."
        if spec.row.keeps_state:  # q, k, v, a, b and the gate g each in a projection of its own
            mixer = layer.linear_attn
            projections = {ours: getattr(mixer, hf).weight for ours, hf in (
                ("q_proj", "q_proj"), ("k_proj", "k_proj"), ("v_proj", "v_proj"), ("z_proj", "g_proj"),
                ("b_proj", "b_proj"), ("a_proj", "a_proj"))}
            w |= _gated_deltanet(b + "attn.", mixer, cfg, projections, mixer.o_proj, mixer.o_norm)
        else:
            w |= _attention(b + "attn.", layer.self_attn, cfg)
        # HF's layer class names its norms by where they sit; ours by the placement the plan gives the layer
        norms = _AFTER_NORMS if spec.placement.after else _PRE_NORMS
        for hf_name, ours in norms.items():
            w |= norm_weights(b + ours, getattr(layer, hf_name))
        w |= _gated_mlp(b + "mlp.", layer.mlp, cfg)
    return w


HYBRID_FAMILIES = {
    "qwen3_next": Family("Qwen3-Next", _qwen3_next_config, _qwen3_next_weights, (
        "layer_types: 'linear_attention' layers are Gated DeltaNet, 'full_attention' softmax (attention_layers '3:1' "
        "for three linear layers then one full, else the list)",
        "Gated DeltaNet: in_proj_qkvz and in_proj_ba run key head by key head ([q | k | v | z] and [b | a] of each "
        "q/k head's value heads) and are split into q, k, v, z, b and a; a short causal convolution on q, k, v; "
        "decay exp(-exp(A_log) softplus(a + dt_bias)); β = sigmoid(b); q and k of length 1; "
        "RMSNorm(read) * SiLU(z)",
        "full attention: q_proj holds each head's query then its output gate, concat(heads) * sigmoid(gate) "
        "(attn_gate); QK-norm per head; RoPE on partial_rotary_factor of each head",
        "every RMSNorm but the gated one scales by (1 + w)",
        "MoE: softmax router, top-k, renormalised when norm_topk_prob; one shared expert "
        "(shared_expert_intermediate_size) scaled by sigmoid(x W_shared_gate) (shared_expert_gate)")),
    "qwen3_5": Family("Qwen3.5", _qwen3_next_config, _qwen3_next_weights, (
        "the text model of Qwen3.5: Qwen3-Next's layers, with q, k, v, z, b and a each in a projection of its own",
        "positions in three sections (mrope_section) that coincide for text: one partial RoPE",
        "a dense SwiGLU in every layer (Qwen3.5); an MoE with a gated shared expert in every layer (Qwen3.5 MoE)")),
    "olmo_hybrid": Family("OLMo hybrid", _olmo_hybrid_config, _olmo_hybrid_weights, (
        "layer_types: 'linear_attention' layers are Gated DeltaNet, 'full_attention' softmax (attention_layers '3:1' "
        "for three linear layers then one full, else the list)",
        "each layer's norms where its block puts them: OLMo 3's full layers after each sublayer (norm_position "
        "'after'), the linear layers LLaMA's, before (linear_norm_position 'pre')",
        "Gated DeltaNet with q, k, v, a, b and the gate g_proj each in a projection of its own; β = 2 sigmoid(x W_b) "
        "(linear_allow_neg_eigval: delta_beta_max 2); the gated read norm's eps 1e-5 (linear_read_norm_eps), where "
        "every other norm takes rms_norm_eps",
        "full attention: QK-norm over the whole projection (OLMo 2's); no RoPE where rope_parameters has no "
        "rope_theta, as in the released checkpoints (position 'none')")),
}

HYBRID_CLASSES = {
    "Qwen3NextForCausalLM": ("qwen3_next", True), "Qwen3NextModel": ("qwen3_next", False),
    "Qwen3_5ForCausalLM": ("qwen3_5", True), "Qwen3_5TextModel": ("qwen3_5", False),
    "Qwen3_5MoeForCausalLM": ("qwen3_5", True), "Qwen3_5MoeTextModel": ("qwen3_5", False),
    "OlmoHybridForCausalLM": ("olmo_hybrid", True), "OlmoHybridModel": ("olmo_hybrid", False),
}

DEFAULT_HYBRID_CLASS = {"qwen3_next": "Qwen3NextForCausalLM", "qwen3_5_text": "Qwen3_5ForCausalLM",
                        "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM", "olmo_hybrid": "OlmoHybridForCausalLM"}
