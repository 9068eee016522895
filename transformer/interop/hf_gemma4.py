"""Gemma 4's text model: sliding and full layers, each kind with its own RoPE (the full layers' proportional, a
quarter of the frequencies turning) and its own head sizes, the last layers reusing the K and V of the last earlier
layer of their kind, K = V on the full layers, a weightless norm on the values, a per-layer input embedding gated
into every block, and a learned scalar on each block's output.

Its ``layer_types`` and ``num_kv_shared_layers`` become our layer plan (``layer_pattern``, ``kv_shared_layers``
"last N"); ``describe_hf`` names each layer's kind and the layer whose K and V it reads. One ``Family`` row, as in
hf_modern.py: the config on our axes, and the weights renamed to ours.
"""
from __future__ import annotations

from ..axes import AXES
from ..config import TransformerConfig
from .family import Family, activation, layer_pattern, rope_fields, unsupported
from .hf_modern import _gated_mlp
from .weights import Weights, from_linear, norm_weights

# HF's names of a block's norms -> ours (sandwich: before and after each sublayer)
_NORMS = {"input_layernorm": "ln1", "post_attention_layernorm": "ln1_post", "pre_feedforward_layernorm": "ln2",
          "post_feedforward_layernorm": "ln2_post"}


def _refuse_what_is_not_built(c, hf_class: str) -> None:
    """The settings of Gemma4TextConfig that have no counterpart here, each refused by name."""
    if c.enable_moe_block:
        raise unsupported(hf_class, "enable_moe_block=True", "its blocks run a dense FFN and a mixture of experts side "
                          "by side, each with its own norms; ours has one FFN per block (only the dense models open)")
    if c.use_bidirectional_attention is not None:
        raise unsupported(hf_class, f"use_bidirectional_attention={c.use_bidirectional_attention!r}",
                          "only the causal text model opens")
    if c.attention_bias:
        raise unsupported(hf_class, "attention_bias=True", "Gemma's FFN has no bias and our `bias` puts one on both")
    if c.hidden_size_per_layer_input and c.vocab_size_per_layer_input != c.vocab_size:
        raise unsupported(hf_class, f"vocab_size_per_layer_input={c.vocab_size_per_layer_input}",
                          f"our per-layer table has a row per token of the vocabulary (vocab_size={c.vocab_size})")
    other = sorted(set(c.layer_types) - {"sliding_attention", "full_attention"})
    if other:
        raise unsupported(hf_class, f"layer_types {other}", "Gemma 4's layers are sliding_attention or full_attention")
    if c.num_kv_shared_layers >= c.num_hidden_layers:
        raise unsupported(hf_class, f"num_kv_shared_layers={c.num_kv_shared_layers}",
                          "a layer must make the K and V the others reuse")


def _rope(c, hf_class: str) -> dict:
    """RoPE by layer kind: the full layers' dict gives the base (proportional: rope_fraction of the frequencies turn),
    the sliding layers turn by a plain RoPE with a base of their own (rope_local_theta)."""
    params = c.rope_parameters
    full = params["full_attention"]
    if full.get("rope_type", "default") == "proportional":
        if full.get("factor", 1.0) != 1.0:
            raise unsupported(hf_class, f"a proportional RoPE with factor={full['factor']}",
                              "its frequencies are divided by no factor here")
        fields = dict(rope_theta=float(full["rope_theta"]), rope_scaling="proportional",
                      rope_fraction=float(full.get("partial_rotary_factor", 1.0)))
    else:
        fields = rope_fields(hf_class, c, full)
    local = params.get("sliding_attention")
    if "sliding_attention" in c.layer_types and local is not None:
        if local.get("rope_type", "default") != "default":
            raise unsupported(hf_class, f"a scaled RoPE on the sliding layers ({local['rope_type']!r})",
                              "local layers turn by a plain RoPE with their own base (rope_local_theta)")
        fields["rope_local_theta"] = float(local["rope_theta"])
    return fields


def _gemma4_config(c, hf_class: str, has_head: bool) -> dict:
    _refuse_what_is_not_built(c, hf_class)
    ffn, approximate = activation(hf_class, c.hidden_activation)
    if not AXES["ffn"].row(ffn).gelu:
        raise unsupported(hf_class, f"hidden_activation={c.hidden_activation!r}", "Gemma's gate is a GELU")
    # head_dim and num_key_value_heads are per layer: the sliding layers' are ours, the full layers' the global ones
    full = c.layer_types.index("full_attention")  # HF makes the last layer full whatever layer_types says
    local = c.layer_types.index("sliding_attention") if "sliding_attention" in c.layer_types else full
    sizes, global_sizes = c.per_layer_config[local], c.per_layer_config[full]
    shared = c.num_kv_shared_layers
    return dict(arch="decoder", vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.num_attention_heads,
                n_kv_heads=sizes.num_key_value_heads, head_dim=sizes.head_dim, n_layers=c.num_hidden_layers,
                max_len=c.max_position_embeddings, position="rope", d_ff=c.intermediate_size, norm="rmsnorm",
                norm_position="sandwich", scale_embeddings=True, ffn="geglu", gelu_approximate=approximate,
                norm_eps=c.rms_norm_eps, qk_norm="head", score_scale=1.0, logit_softcap=c.final_logit_softcapping,
                global_head_dim=global_sizes.head_dim if global_sizes.head_dim != sizes.head_dim else None,
                global_kv_heads=(global_sizes.num_key_value_heads
                                 if global_sizes.num_key_value_heads != sizes.num_key_value_heads else None),
                k_eq_v=bool(c.attention_k_eq_v), value_norm=True, layer_scalar=True,
                per_layer_dim=c.hidden_size_per_layer_input or None,
                kv_shared_layers=f"last {shared}" if shared else "none",
                wide_shared_ffn=bool(c.use_double_wide_mlp and shared),  # HF widens the reusing layers' MLP only
                **_rope(c, hf_class), **layer_pattern(c.layer_types, c.sliding_window))


def _gemma4_weights(model, cfg: TransformerConfig) -> Weights:
    body = getattr(model, "model", model)
    w = {"embed.weight": body.embed_tokens.weight, **norm_weights("ln_final", body.norm)}
    if cfg.per_layer_dim is not None:
        w |= {"per_layer_embed.table.weight": body.embed_tokens_per_layer.weight,
              "per_layer_embed.projection.weight": body.per_layer_model_projection.weight,
              **norm_weights("per_layer_embed.norm", body.per_layer_projection_norm)}
    for i, (layer, spec) in enumerate(zip(body.layers, cfg.layer_plan())):
        a, b = layer.self_attn, f"blocks.{i}."
        # a layer reading an earlier one's K and V has no W_k, W_v or k-norm; a full layer with K = V no W_v
        names = ("q_proj", "o_proj") if spec.reuses_kv else ("q_proj", "k_proj", "v_proj", "o_proj")
        for name in names:
            if getattr(a, name, None) is not None:
                w |= from_linear(b + "attn." + name, getattr(a, name), False)
        for name in ("q_norm",) if spec.reuses_kv else ("q_norm", "k_norm"):
            w |= norm_weights(b + "attn." + name, getattr(a, name))
        w |= _gated_mlp(b + "mlp.", layer.mlp, cfg)
        for hf_name, ours in _NORMS.items():
            w |= norm_weights(b + ours, getattr(layer, hf_name))
        if cfg.per_layer_dim is not None:
            w |= {b + "per_layer.gate.weight": layer.per_layer_input_gate.weight,
                  b + "per_layer.up.weight": layer.per_layer_projection.weight,
                  **norm_weights(b + "per_layer.norm", layer.post_per_layer_input_norm)}
        w[b + "layer_scalar"] = layer.layer_scalar
    return w


GEMMA4_FAMILIES = {
    "gemma4": Family("Gemma 4", _gemma4_config, _gemma4_weights, (
        "layer_types: 'sliding_attention' layers see the last sliding_window keys, 'full_attention' layers every key "
        "(layer_pattern, sliding_window)",
        "the full layers have their own head width and kv heads (per_layer_config: global_head_dim, and with "
        "attention_k_eq_v num_global_key_value_heads) and make K and V with one projection when attention_k_eq_v "
        "(k_eq_v): the values are the keys as projected, before k_norm and RoPE",
        "rope_parameters by layer type: the sliding layers' plain RoPE base is rope_local_theta; the full layers' "
        "proportional RoPE turns the first partial_rotary_factor of the frequencies of the whole head "
        "(rope_scaling='proportional', rope_fraction) and leaves the rest still",
        "num_kv_shared_layers: the last N layers reuse the K and V of the last earlier layer of their type "
        "(kv_shared_layers='last N'); our cache holds them once; use_double_wide_mlp gives those layers an FFN "
        "2 x intermediate_size wide (wide_shared_ffn)",
        "q and k normed per head (RMSNorm with weight w, not 1 + w), v by its RMS with no weight (value_norm); "
        "scores are q·k unscaled (score_scale=1)",
        "hidden_size_per_layer_input: every layer's own embedding of the tokens, gated into the stream after the FFN "
        "(per_layer_dim, transformer/per_layer.py); layer_scalar multiplies each block's output (layer_scalar)",
        "refused: enable_moe_block (an FFN and experts side by side), bidirectional attention, attention_bias")),
}

GEMMA4_CLASSES = {"Gemma4ForCausalLM": ("gemma4", True), "Gemma4TextModel": ("gemma4", False)}

DEFAULT_GEMMA4_CLASS = {"gemma4_text": "Gemma4ForCausalLM"}


def describe_global_kv(cfg: TransformerConfig) -> str:
    """What the global layers' attention does its own way, in words ("; global layers: 1 kv head, head_dim 32,
    K = V (one projection)"), or "" where every layer is alike."""
    heads = cfg.global_kv_heads
    own = [f"{heads} kv head{'s' if heads != 1 else ''}" if heads is not None else "",
           f"head_dim {cfg.global_head_dim}" if cfg.global_head_dim is not None else "",
           "K = V (one projection)" if cfg.k_eq_v else ""]
    text = ", ".join(part for part in own if part)
    return f"; global layers: {text}" if text else ""


def describe_per_layer(cfg: TransformerConfig) -> dict[str, str]:
    """{"per layer": ...}: each layer's own embedding of the tokens and the scalar on its output, where they are."""
    parts = []
    if cfg.per_layer_dim is not None:
        parts.append(f"an input of {cfg.per_layer_dim} numbers per layer and token (a table of {cfg.n_layers} x "
                     f"{cfg.per_layer_dim} per token), gated in after the FFN")
    if cfg.layer_scalar:
        parts.append("each block's output times a learned scalar")
    return {"per layer": "; ".join(parts)} if parts else {}
