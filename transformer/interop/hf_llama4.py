"""Llama 4's text model: attention cut into chunks on the layers RoPE turns, full layers without
positions between them (every fourth by default) whose queries warm with the position, an L2 norm on q and k,
RoPE on interleaved pairs, and mixture-of-experts layers (all of them, or every second: Maverick) whose router's
sigmoid weight scales the token before its expert.

Its ``layer_types`` ("chunked_attention" / "full_attention") and ``no_rope_layers`` are copied onto our layer plan
(``chunked_layers``, ``nope_layers``); ``describe_hf`` prints them back in the same words. One ``Family`` row, as in
hf_modern.py: the config on our axes, and the weights renamed to ours.
"""
from __future__ import annotations

import torch

from ..config import TransformerConfig
from ..layer_plan import parse_moe_layers
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


def _moe(c) -> dict:
    """The MoE layers' fields: experts intermediate_size wide beside one shared expert as wide, top-k of the router's
    logits, each chosen expert fed the token times the sigmoid of its logit (no renormalising). The dense layers
    between them keep their SwiGLU of intermediate_size_mlp (d_ff)."""
    if not c.moe_layers:
        return {}
    n = c.num_hidden_layers
    return dict(ffn="moe", n_experts=c.num_local_experts, top_k=c.num_experts_per_tok, d_expert=c.intermediate_size,
                n_shared_experts=1, router="sigmoid", router_norm=False, router_scales_input=True,
                moe_layers=_layer_list(c.moe_layers, n, "all", parse_moe_layers))


def _layer_list(layers: list[int], n_layers: int, every_layer: str, parse) -> str:
    """Our words for these layer indices: `every_layer` for all of them, "every N" when they are exactly every N-th
    layer, else the list."""
    wanted = frozenset(layers)
    if wanted == frozenset(range(n_layers)):
        return every_layer
    for step in range(2, n_layers + 1):
        if parse(f"every {step}", n_layers) == wanted:
            return f"every {step}"
    return ", ".join(map(str, sorted(wanted)))


def _llama4_config(c, hf_class: str, has_head: bool) -> dict:
    _silu(hf_class, c.hidden_act)
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
                    bias=bool(c.attention_bias)) | positions | chunks | temperature | _moe(c)


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
        if cfg.layer_is_moe(i):
            w |= _routed(b + "mlp.", layer.feed_forward, cfg)
        else:
            w |= _gated_mlp(b + "mlp.", layer.feed_forward, cfg)
        for hf_name, ours in _PRE_NORMS.items():
            w |= norm_weights(b + ours, getattr(layer, hf_name))
    return w


def _routed(prefix: str, moe, cfg: TransformerConfig) -> Weights:
    """Router, experts and the shared expert. HF fuses the experts the other way round from Mixtral's:
    gate_up_proj (E, D, 2·F_e), [gate | up] along the last axis, and down_proj (E, F_e, D), each multiplied from the
    right; ours are nn.Linear weights (out, in), so each expert's slice is transposed."""
    experts = moe.experts
    gate, up = experts.gate_up_proj.chunk(2, dim=-1)  # (E, D, F_e) each
    # HF's router has no bias and no choice bias: zeros where ours keeps them are exact
    w = linear(prefix + "router", moe.router.weight, None, cfg.bias)  # (E, D)
    w[prefix + "choice_bias"] = torch.zeros(cfg.n_experts, dtype=moe.router.weight.dtype)  # (E,)
    for e in range(cfg.n_experts):
        for name, weight in (("gate", gate[e].T), ("up", up[e].T), ("down", experts.down_proj[e].T)):
            w |= linear(f"{prefix}experts.{e}.{name}", weight, None, cfg.bias)  # gate, up (F_e, D); down (D, F_e)
    return w | _gated_mlp(prefix + "shared.", moe.shared_expert, cfg)


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
        "the dense layers' SwiGLU is intermediate_size_mlp wide (d_ff); the MoE layers (moe_layers, every "
        "interleave_moe_layer_step-th layer by default) become moe_layers: experts and one shared expert "
        "intermediate_size wide (d_expert), the top-k of the router's logits (top-1 by default), each chosen expert "
        "fed the token times the sigmoid of its logit (router_scales_input; no renormalising)",
        "the experts' fused gate_up_proj (E, D, 2·F_e) splits along its last axis into gate and up, each expert's "
        "slice transposed into an nn.Linear weight, as is down_proj (E, F_e, D)")),
}

LLAMA4_CLASSES = {"Llama4ForCausalLM": ("llama4", True), "Llama4TextModel": ("llama4", False)}

DEFAULT_LLAMA4_CLASS = {"llama4_text": "Llama4ForCausalLM"}
