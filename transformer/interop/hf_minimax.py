"""MiniMax-01 (text): lightning-attention layers between GQA softmax layers, an MoE in every layer, and blocks whose
residual path carries each sublayer's normed input ("normed-skip").

Its ``layer_types`` name each layer "linear_attention" (lightning attention: our "decayed-linear" kind with
``linear_lightning`` and ``linear_sigmoid_gate``, transformer/linear_attention.py) or "full_attention"; the list is
copied onto ``attention_layers`` ("7:1" when it says so). One ``Family`` row, as in hf_hybrid.py.
"""
from __future__ import annotations

from ..axes import AXES
from ..config import TransformerConfig
from ..layer_plan import parse_attention_layers
from .family import Family, head_dim, rope_fields, unsupported
from .hf_modern import _attention, _silu
from .weights import Weights, linear, norm_weights, split_interleaved

LINEAR_KIND = "decayed-linear"  # the kind of MiniMax's "linear_attention" layers, in lightning's form
NORMED_SKIP = next(key for key, row in AXES["norm_position"].choices.items() if row.skips_normed)
# HF builds lightning's RMSNorm over all heads with its default eps, whatever rms_norm_eps says
LIGHTNING_READ_EPS = 1e-6
# the scales of the skip (alpha) and of the sublayer (beta) on each residual path: DeepNorm's, not built here
FACTORS = ("full_attn_alpha_factor", "full_attn_beta_factor", "linear_attn_alpha_factor", "linear_attn_beta_factor",
           "mlp_alpha_factor", "mlp_beta_factor")


def _attention_layers(layer_types: list[str]) -> str:
    """attention_layers from HF's layer_types: "N:1" where N linear layers then a full one repeat, else the list."""
    listed = ",".join(layer_types)
    kinds = parse_attention_layers(listed, len(layer_types), LINEAR_KIND)
    first_full = next((i for i, kind in enumerate(kinds) if AXES["attention"].row(kind).softmax), None)
    if first_full and parse_attention_layers(f"{first_full}:1", len(kinds), LINEAR_KIND) == kinds:
        return f"{first_full}:1"
    return listed


def _minimax_config(c, hf_class: str, has_head: bool) -> dict:
    _silu(hf_class, c.hidden_act)  # the experts' gate, and lightning's activation on q, k and v
    scaled = [f"{name}={getattr(c, name)}" for name in FACTORS if getattr(c, name) != 1]
    if scaled:
        raise unsupported(hf_class, ", ".join(scaled), "each residual path here adds the sublayer to its normed "
                          "input unscaled (alpha = beta = 1); DeepNorm's scales are not built")
    if c.sliding_window is not None:
        raise unsupported(hf_class, f"sliding_window={c.sliding_window}", "its full-attention layers see every key")
    layers = _attention_layers(c.layer_types)
    kinds = parse_attention_layers(layers, c.num_hidden_layers, LINEAR_KIND)
    has_softmax = any(AXES["attention"].row(kind).softmax for kind in kinds)
    fields = dict(arch="decoder", vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.num_attention_heads,
                  n_layers=c.num_hidden_layers, max_len=c.max_position_embeddings, head_dim=head_dim(c),
                  norm="rmsnorm", norm_position=NORMED_SKIP, norm_eps=c.rms_norm_eps, bias=False, ffn="moe",
                  n_experts=c.num_local_experts, top_k=c.num_experts_per_tok, d_ff=c.intermediate_size,
                  router_norm=True, attention_layers=layers, linear_kind=LINEAR_KIND, linear_lightning=True,
                  linear_sigmoid_gate=True, linear_read_norm_eps=LIGHTNING_READ_EPS)
    if has_softmax:  # the settings only softmax layers read, refused in a model without one
        return fields | dict(n_kv_heads=c.num_key_value_heads or c.num_attention_heads, position="rope",
                             **rope_fields(hf_class, c))
    return fields | dict(position="none")


def _moe(prefix: str, moe, cfg: TransformerConfig) -> Weights:
    """The router and the experts, fused as Mixtral's: gate_up_proj (E, 2 d_ff, D), gate half first."""
    w = linear(prefix + "router", moe.gate.weight, None, False)
    gate, up = moe.experts.gate_up_proj.chunk(2, dim=1)  # (E, d_ff, D) each
    for e in range(cfg.n_experts):
        for name, weight in (("gate", gate[e]), ("up", up[e]), ("down", moe.experts.down_proj[e])):
            w |= linear(f"{prefix}experts.{e}.{name}", weight, None, False)
    return w


def _minimax_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    w = {"embed.weight": body.embed_tokens.weight, **norm_weights("ln_final", body.norm)}
    for spec, layer in zip(cfg.layer_plan(), body.layers):
        b = f"blocks.{spec.index}."
        mixer = layer.self_attn
        if spec.row.keeps_state:  # qkv_proj runs head by head, [q_h | k_h | v_h]
            q, k, v = split_interleaved(mixer.qkv_proj.weight, cfg.state_heads, cfg.state_d_k)
            w |= {b + "attn.q_proj.weight": q, b + "attn.k_proj.weight": k, b + "attn.v_proj.weight": v,
                  b + "attn.g_proj.weight": mixer.output_gate.weight, b + "attn.norm_weight": mixer.norm.weight,
                  b + "attn.o_proj.weight": mixer.out_proj.weight}
        else:
            w |= _attention(b + "attn.", mixer, cfg)
        w |= norm_weights(b + "ln1", layer.input_layernorm) | norm_weights(b + "ln2", layer.post_attention_layernorm)
        w |= _moe(b + "mlp.", layer.mlp, cfg)
    return w


MINIMAX_FAMILIES = {
    "minimax": Family("MiniMax-01", _minimax_config, _minimax_weights, (
        "layer_types: 'linear_attention' layers are lightning attention, 'full_attention' GQA softmax "
        "(attention_layers '7:1' for seven linear layers then one full, else the list)",
        "lightning attention: decayed linear (linear_lightning): qkv_proj split head by head into q, k, v, each "
        "through SiLU; q unscaled; head h of layer l decays by exp(-(2^(-8/H))^(h+1) (1 - l/(L-1))); one RMSNorm over all "
        "heads at eps 1e-6; its output times sigmoid(x W_g) (output_gate: linear_sigmoid_gate)",
        "blocks: each residual path carries its sublayer's normed input (norm_position 'normed-skip'); DeepNorm's "
        "alpha and beta factors other than 1 are refused",
        "MoE in every layer: softmax router, top-k, renormalised; experts fused as Mixtral's")),
}

MINIMAX_CLASSES = {"MiniMaxForCausalLM": ("minimax", True), "MiniMaxModel": ("minimax", False)}

DEFAULT_MINIMAX_CLASS = {"minimax": "MiniMaxForCausalLM"}
