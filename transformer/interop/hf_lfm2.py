"""LFM2 (Liquid AI): gated short convolutions between a few GQA softmax layers, in LLaMA's pre-norm blocks.

Its ``layer_types`` name each layer "conv" (our "short-conv" kind, transformer/short_conv.py) or "full_attention"
(softmax with a QK-norm per head); the list is copied onto ``attention_layers`` kind by kind. One ``Family`` row,
as in hf_hybrid.py: the config on our axes, and the weights renamed to ours.
"""
from __future__ import annotations

from ..axes import AXES
from ..config import TransformerConfig
from .family import Family, head_dim, rope_fields, unsupported
from .weights import Weights, from_linear, norm_weights

CONV_KIND = "short-conv"  # the kind of LFM2's "conv" layers
SOFTMAX_KIND = next(key for key, row in AXES["attention"].choices.items() if row.softmax)
# HF's layer_types word -> our kind: each kind's row says its own word (``hf_layer_type``)
KIND_OF_LAYER_TYPE = {AXES["attention"].row(kind).hf_layer_type: kind for kind in (CONV_KIND, SOFTMAX_KIND)}


def lfm2_d_ff(c) -> int:
    """The MLP's hidden width as Lfm2MLP derives it: intermediate_size, and with block_auto_adjust_ff_dim two thirds
    of it, times block_ffn_dim_multiplier, rounded up to a multiple of block_multiple_of."""
    width = c.intermediate_size
    if c.block_auto_adjust_ff_dim:
        width = int(2 * width / 3)
        if c.block_ffn_dim_multiplier is not None:
            width = int(c.block_ffn_dim_multiplier * width)
            width = c.block_multiple_of * -(-width // c.block_multiple_of)
    return width


def _lfm2_config(c, hf_class: str, has_head: bool) -> dict:
    if c.conv_bias:  # HF puts it on in_proj, the convolution and out_proj together
        raise unsupported(hf_class, "conv_bias=True", "the gated short convolution is built without biases "
                          "(every released LFM2 has conv_bias=False)")
    unknown = sorted(set(c.layer_types) - set(KIND_OF_LAYER_TYPE))
    if unknown:
        raise unsupported(hf_class, f"layer_types {unknown}", f"its layers are {' or '.join(KIND_OF_LAYER_TYPE)}")
    kinds = [KIND_OF_LAYER_TYPE[t] for t in c.layer_types]
    has_conv, has_softmax = CONV_KIND in kinds, SOFTMAX_KIND in kinds
    fields = dict(arch="decoder", vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.num_attention_heads,
                  n_layers=c.num_hidden_layers, max_len=c.max_position_embeddings, head_dim=head_dim(c),
                  d_ff=lfm2_d_ff(c), norm="rmsnorm", norm_position="pre", norm_eps=c.norm_eps, ffn="swiglu",
                  bias=False, attention_layers=",".join(kinds) if has_conv and has_softmax else kinds[0])
    if has_conv:
        fields |= dict(linear_kind=CONV_KIND, linear_conv_size=c.conv_L_cache)
    if has_softmax:  # the settings only softmax layers read, refused in a model without one
        fields |= dict(n_kv_heads=c.num_key_value_heads or c.num_attention_heads, qk_norm="head", position="rope",
                       **rope_fields(hf_class, c))
    else:
        fields |= dict(position="none")
    return fields


def _lfm2_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    # LFM2 calls its final norm embedding_norm, though it runs after the last layer
    w = {"embed.weight": body.embed_tokens.weight, **norm_weights("ln_final", body.embedding_norm)}
    for spec, layer in zip(cfg.layer_plan(), body.layers):
        b = f"blocks.{spec.index}."
        if spec.row.conv_only:  # in_proj holds [B | C | x̃], as ours does
            w |= {b + "attn.in_proj.weight": layer.conv.in_proj.weight, b + "attn.conv.weight": layer.conv.conv.weight,
                  b + "attn.o_proj.weight": layer.conv.out_proj.weight}
        else:
            attn = layer.self_attn
            for hf_name, ours in (("q_proj", "q_proj"), ("k_proj", "k_proj"), ("v_proj", "v_proj"),
                                  ("out_proj", "o_proj")):
                w |= from_linear(b + "attn." + ours, getattr(attn, hf_name), False)
            w |= {b + "attn.q_norm.weight": attn.q_layernorm.weight, b + "attn.k_norm.weight": attn.k_layernorm.weight}
        w |= norm_weights(b + "ln1", layer.operator_norm) | norm_weights(b + "ln2", layer.ffn_norm)
        for hf_name, ours in (("w1", "gate"), ("w3", "up"), ("w2", "down")):
            w |= from_linear(b + "mlp." + ours, getattr(layer.feed_forward, hf_name), False)
    return w


LFM2_FAMILIES = {
    "lfm2": Family("LFM2", _lfm2_config, _lfm2_weights, (
        "layer_types: 'conv' layers are gated short convolutions (attention_layers 'short-conv'), 'full_attention' "
        "softmax; the list is copied layer by layer",
        "short convolution: in_proj holds B, C and x̃; B ⊙ x̃ through a causal depthwise convolution of conv_L_cache "
        "taps (linear_conv_size), times C, then out_proj; no biases (conv_bias=False)",
        "full attention: GQA with an RMSNorm per head on q and k (q_layernorm, k_layernorm: qk_norm 'head'), RoPE",
        "SwiGLU of w1 (gate), w3 (up), w2 (down); its width derived as Lfm2MLP does (block_auto_adjust_ff_dim)",
        "embedding_norm is the final norm, after the last layer")),
}

LFM2_CLASSES = {"Lfm2ForCausalLM": ("lfm2", True), "Lfm2Model": ("lfm2", False)}

DEFAULT_LFM2_CLASS = {"lfm2": "Lfm2ForCausalLM"}
