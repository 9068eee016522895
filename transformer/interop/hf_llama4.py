"""Llama 4's text model (dense layers): attention cut into chunks on the layers RoPE turns, full layers without
positions between them (every fourth by default) whose queries warm with the position, an L2 norm on q and k,
and RoPE on interleaved pairs.

Its ``layer_types`` ("chunked_attention" / "full_attention") and ``no_rope_layers`` are copied onto our layer plan
(``chunked_layers``, ``nope_layers``); ``describe_hf`` prints them back in the same words. One ``Family`` row, as in
hf_modern.py: the config on our axes, and the weights renamed to ours.
"""
from __future__ import annotations

import torch

from ..config import TransformerConfig
from .family import Family, head_dim, rope_fields, unsupported
from .hf_modern import _PRE_NORMS, _decoder, _gated_mlp, _interleave_permutation, _nope_layers, _silu
from .weights import Weights, from_linear, linear, norm_weights


def _chunked_layers(layer_types: list[str], turning: frozenset[int]) -> str:
    """Our chunked_layers for HF's layer_types: "all", "rope" when the chunked layers are exactly those RoPE turns
    (Llama 4's own default), else the list."""
    chunked = frozenset(i for i, kind in enumerate(layer_types) if kind == "chunked_attention")
    if len(chunked) == len(layer_types):
        return "all"
    return "rope" if chunked == turning else ", ".join(map(str, sorted(chunked)))


def _llama4_config(c, hf_class: str, has_head: bool) -> dict:
    _silu(hf_class, c.hidden_act)
    if c.moe_layers:
        # top-1 sigmoid routing and the shared expert exist here, but Llama 4 multiplies the token by its router
        # score before the expert, and a SwiGLU expert is not linear in its input
        raise unsupported(hf_class, f"moe_layers={list(c.moe_layers)}", "its router's sigmoid score scales each "
                          "token before the expert (expert(s·x)); our MoE scales the expert's output (s·expert(x)), "
                          "which differs for a SwiGLU expert; only the dense variant (moe_layers=[]) opens")
    other = sorted(set(c.layer_types) - {"chunked_attention", "full_attention"})
    if other:
        raise unsupported(hf_class, f"layer_types {other}", "Llama 4's layers are chunked_attention or full_attention")
    n = c.num_hidden_layers
    nope = [i for i in range(n) if not c.no_rope_layers[i]]  # HF: 1 = the layer turns by RoPE, 0 = NoPE
    turning = frozenset(range(n)) - frozenset(nope)
    # HF builds the RoPE tables even when no layer reads them; a model without a turning layer has no positions
    positions = (dict(position="none") if not turning
                 else dict(**rope_fields(hf_class, c), nope_layers=_nope_layers(nope, n)))
    chunks = (dict(attention_chunk=c.attention_chunk_size, chunked_layers=_chunked_layers(c.layer_types, turning))
              if "chunked_attention" in c.layer_types else {})
    # HF warms the queries of its NoPE layers only, and norms q and k on its RoPE layers only
    if c.attn_temperature_tuning and not turning:
        raise unsupported(hf_class, "attn_temperature_tuning and no layer that turns by RoPE", "our temperature "
                          "warms the NoPE layers of a RoPE model (a model without positions has no RoPE layer)")
    temperature = (dict(attn_temperature_scale=float(c.attn_scale), attn_temperature_floor=float(c.floor_scale))
                   if c.attn_temperature_tuning and nope else {})
    return _decoder(c, d_ff=c.intermediate_size_mlp, head_dim=head_dim(c), norm="rmsnorm", norm_position="pre",
                    ffn="swiglu", norm_eps=c.rms_norm_eps, qk_norm="l2" if c.use_qk_norm and turning else "none",
                    bias=bool(c.attention_bias)) | positions | chunks | temperature


def _llama4_weights(model, cfg: TransformerConfig) -> Weights:
    body = getattr(model, "model", model)  # Llama4ForCausalLM's base_model_prefix names no attribute of it
    w = {"embed.weight": body.embed_tokens.weight, **norm_weights("ln_final", body.norm)}
    d = cfg.d_head
    # HF turns pairs (2i, 2i + 1) as complex numbers, ours (i, i + d/2): reorder q's and k's rows head by head
    order = _interleave_permutation(d)

    def turned(tensor: torch.Tensor | None, heads: int) -> torch.Tensor | None:
        if tensor is None:
            return None
        return tensor.view(heads, d, *tensor.shape[1:])[:, order].reshape(heads * d, *tensor.shape[1:])

    for i, (layer, spec) in enumerate(zip(body.layers, cfg.layer_plan())):
        a, b = layer.self_attn, f"blocks.{i}."
        for name, heads in (("q_proj", cfg.n_heads), ("k_proj", cfg.n_kv_heads)):
            proj = getattr(a, name)
            if spec.rotates:
                weight, bias = turned(proj.weight, heads), turned(proj.bias, heads)
            else:
                weight, bias = proj.weight, proj.bias
            w |= linear(b + "attn." + name, weight, bias, cfg.has_qkv_bias)
        w |= from_linear(b + "attn.v_proj", a.v_proj, cfg.has_qkv_bias)
        w |= from_linear(b + "attn.o_proj", a.o_proj, cfg.bias)
        w |= _gated_mlp(b + "mlp.", layer.feed_forward, cfg)
        for hf_name, ours in _PRE_NORMS.items():
            w |= norm_weights(b + ours, getattr(layer, hf_name))
    return w


LLAMA4_FAMILIES = {
    "llama4": Family("Llama 4", _llama4_config, _llama4_weights, (
        "layer_types: 'chunked_attention' layers see only the keys of their own chunk of attention_chunk_size tokens "
        "(attention_chunk; chunked_layers 'rope' when they are the layers RoPE turns, as by default), "
        "'full_attention' layers every key",
        "no_rope_layers (1 = RoPE, 0 = NoPE) becomes nope_layers: every fourth layer (no_rope_layer_interval) by "
        "default, full and without positions",
        "RoPE turns pairs (2i, 2i + 1) there, (i, i + d/2) here: q's and k's rows are reordered head by head on the "
        "layers that turn (the same scores)",
        "use_qk_norm: q and k over their RMS, no weight, on the RoPE layers only (qk_norm='l2'); "
        "attn_temperature_tuning: the NoPE layers' q times 1 + attn_scale·log(1 + ⌊(t + 1) / floor_scale⌋) "
        "(attn_temperature_scale, attn_temperature_floor); HF counts t from the start of the text whatever "
        "position_ids say, ours reads position_ids (the same without left padding)",
        "the dense layers' SwiGLU is intermediate_size_mlp wide; MoE layers (moe_layers) are refused: Llama 4 scales "
        "an expert's input by the router's score, ours its output")),
}

LLAMA4_CLASSES = {"Llama4ForCausalLM": ("llama4", True), "Llama4TextModel": ("llama4", False)}

DEFAULT_LLAMA4_CLASS = {"llama4_text": "Llama4ForCausalLM"}
