"""torch.nn.Transformer (the 2017 encoder-decoder) -> our Transformer."""
from __future__ import annotations

import torch
from torch import nn

from ..config import TransformerConfig
from ..model import Transformer
from .weights import DTYPE_NAMES, Weights, from_linear, linear, norm_weights


def _torch_activation(activation) -> tuple[str, str]:
    """A torch layer's activation (function or module) -> (our ffn, gelu_approximate)."""
    if activation is torch.nn.functional.relu or isinstance(activation, nn.ReLU):
        return "relu", "none"
    if activation is torch.nn.functional.gelu:
        return "gelu", "none"
    if isinstance(activation, nn.GELU):
        return "gelu", activation.approximate
    raise ValueError(f"activation {activation!r} is not supported; use 'relu' or 'gelu'")


def _torch_attention(ours: str, mha: nn.MultiheadAttention, bias: bool) -> Weights:
    if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
        raise ValueError("only MultiheadAttention with kdim = vdim = embed_dim, no bias_k/bias_v and no add_zero_attn maps onto ours")
    q, k, v = mha.in_proj_weight.chunk(3, dim=0)  # in_proj_weight stacks W_q, W_k, W_v: (3*D, D)
    qb, kb, vb = mha.in_proj_bias.chunk(3) if mha.in_proj_bias is not None else (None, None, None)
    return (linear(ours + ".q_proj", q, qb, bias) | linear(ours + ".k_proj", k, kb, bias)
            | linear(ours + ".v_proj", v, vb, bias) | from_linear(ours + ".o_proj", mha.out_proj, bias))


def from_torch_transformer(module, vocab_size: int, embedding: nn.Embedding | None = None, *,
                           device: torch.device | str | None = None) -> Transformer:
    """Our encoder-decoder with the layers of a ``torch.nn.Transformer``.

    `module`: an ``nn.Transformer`` or a pair (``nn.TransformerEncoder``, ``nn.TransformerDecoder``)
    with the same number of layers. torch's modules take embeddings, not token ids, and have no
    positions: the result uses position="none", and `embedding` (vocab_size x d_model), if given,
    becomes its token embedding (and tied output head). Feed torch the decoder's causal mask
    (``tgt_is_causal=True`` with ``nn.Transformer.generate_square_subsequent_mask``): ours is always causal.
    Each stack's final norm is kept when present (``nn.Transformer`` always has one).
    """
    encoder, decoder = (module.encoder, module.decoder) if isinstance(module, nn.Transformer) else module
    if len(encoder.layers) != len(decoder.layers):
        raise ValueError(f"the encoder has {len(encoder.layers)} layers and the decoder {len(decoder.layers)}; "
                         "our encoder-decoder has one n_layers for both, so they must be equal")
    if (encoder.norm is None) != (decoder.norm is None):
        raise ValueError("the encoder and decoder must both have a final norm or both have none")
    first = encoder.layers[0]
    attn = first.self_attn
    ffn, approximate = _torch_activation(first.activation)
    bias = attn.in_proj_bias is not None
    source = attn.in_proj_weight
    if source.dtype not in DTYPE_NAMES:
        raise ValueError(f"the module is in {source.dtype}; supported dtypes are float32 and bfloat16: convert it first, e.g. .float()")
    cfg = TransformerConfig(arch="encoder-decoder", vocab_size=vocab_size, d_model=attn.embed_dim, n_heads=attn.num_heads,
                            n_layers=len(encoder.layers), d_ff=first.linear1.out_features, position="none",
                            norm="layernorm", norm_position="pre" if first.norm_first else "post", ffn=ffn,
                            gelu_approximate=approximate, bias=bias, norm_eps=first.norm1.eps,
                            final_norm=encoder.norm is not None, dtype=DTYPE_NAMES[source.dtype])
    ours = Transformer(cfg, device=device or source.device)
    with torch.no_grad():
        table = (ours.embed if embedding is None else embedding).weight  # torch's layers take embeddings; without a table ours keeps its own
        weights = {"embed.weight": table, "unembed.weight": table}
        for stack_name, stack in (("encoder", encoder), ("decoder", decoder)):
            for i, layer in enumerate(stack.layers):
                b = f"{stack_name}.blocks.{i}."
                weights |= _torch_attention(b + "attn", layer.self_attn, bias)
                weights |= from_linear(b + "mlp.up", layer.linear1, bias) | from_linear(b + "mlp.down", layer.linear2, bias)
                # norm1 wraps self-attention; the decoder's norm2 wraps cross-attention; the last norm wraps the FFN
                weights |= norm_weights(b + "ln1", layer.norm1) | norm_weights(b + "ln2", layer.norm3 if stack_name == "decoder" else layer.norm2)
                if stack_name == "decoder":
                    weights |= _torch_attention(b + "cross_attn", layer.multihead_attn, bias) | norm_weights(b + "ln_cross", layer.norm2)
            if stack.norm is not None:
                weights |= norm_weights(f"{stack_name}.ln_final", stack.norm)
        ours.load_state_dict(weights, strict=True)
    return ours.eval()


