"""BART: the encoder-decoder of the lab (two stacks sharing one token embedding), read from Hugging Face.

BART is the 2017 encoder-decoder with BERT's habits: post-LayerNorm layers, GELU, learned positions and a LayerNorm
right after the embeddings (``layernorm_embedding``), in each stack. Its quirks:
- each stack's position table has two more rows than positions, and position p reads row p + 2 (fairseq kept rows
  0 and 1 for padding): our table is the stored one from row 2 on;
- ``scale_embedding`` multiplies the token embeddings by sqrt(d_model) (off in the released models);
- the logits get ``final_logits_bias``, a bias of one number per token of the vocabulary, after a head tied to
  the shared embedding.
Our encoder-decoder has one size for both stacks, so the encoder's and the decoder's layer count, heads and FFN
width must agree (they do in every released BART).
"""
from __future__ import annotations

from .family import Family, activation, unsupported
from .weights import Weights, from_linear, norm_weights

POSITION_OFFSET = 2  # BART's position p reads row p + 2 of its table
NORM_EPS = 1e-5  # BART's LayerNorms keep PyTorch's default eps; its config has no field for it


def _one_size(hf_class: str, c, what: str) -> int:
    """The encoder's and the decoder's value of `what` (layers, attention_heads, ffn_dim): ours is one number."""
    encoder, decoder = getattr(c, f"encoder_{what}"), getattr(c, f"decoder_{what}")
    if encoder != decoder:
        raise unsupported(hf_class, f"encoder_{what}={encoder} and decoder_{what}={decoder}",
                          f"our encoder and decoder share one size: set both {what} to the same number")
    return encoder


def _bart_config(c, hf_class: str, has_head: bool) -> dict:
    if c.is_decoder:
        raise unsupported(hf_class, "is_decoder=True", "BART is read as the whole encoder-decoder")
    if not c.tie_word_embeddings:  # transformers unties the stacks' embeddings from model.shared as well
        raise unsupported(hf_class, "tie_word_embeddings=False",
                          "our two stacks and the head read one token embedding: set tie_word_embeddings=True")
    ffn, approximate = activation(hf_class, c.activation_function)
    return dict(arch="encoder-decoder", vocab_size=c.vocab_size, d_model=c.d_model,
                n_heads=_one_size(hf_class, c, "attention_heads"), n_layers=_one_size(hf_class, c, "layers"),
                d_ff=_one_size(hf_class, c, "ffn_dim"), max_len=c.max_position_embeddings, position="learned",
                norm="layernorm", norm_position="post", ffn=ffn, gelu_approximate=approximate, bias=True,
                embed_norm=True, scale_embeddings=bool(c.scale_embedding), norm_eps=NORM_EPS, head_bias=has_head)


def _attention(prefix: str, attn) -> Weights:
    """q_proj, k_proj, v_proj and out_proj, each with its bias (self- and cross-attention alike)."""
    w: Weights = {}
    for hf_name, ours in (("q_proj", "q_proj"), ("k_proj", "k_proj"), ("v_proj", "v_proj"), ("out_proj", "o_proj")):
        w |= from_linear(prefix + ours, getattr(attn, hf_name), True)
    return w


def _stack(prefix: str, stack, shared, hf_class: str) -> Weights:
    """One stack: its position table from row 2 on, its layernorm_embedding, and its post-norm layers; a decoder
    layer's encoder_attn becomes our cross_attn, its encoder_attn_layer_norm our ln_cross."""
    if not stack.embed_tokens.weight.equal(shared.weight):
        raise unsupported(hf_class, "an encoder or decoder embedding that differs from model.shared",
                          "our two stacks read one token embedding: tie them (tie_word_embeddings=True)")
    table = stack.embed_positions.weight[POSITION_OFFSET:]  # (max_len, D): rows 0 and 1 are never read
    w = {prefix + "pos.table.weight": table, **norm_weights(prefix + "ln_embed", stack.layernorm_embedding)}
    for i, layer in enumerate(stack.layers):
        b = f"{prefix}blocks.{i}."
        w |= _attention(b + "attn.", layer.self_attn) | norm_weights(b + "ln1", layer.self_attn_layer_norm)
        if hasattr(layer, "encoder_attn"):
            w |= _attention(b + "cross_attn.", layer.encoder_attn)
            w |= norm_weights(b + "ln_cross", layer.encoder_attn_layer_norm)
        w |= from_linear(b + "mlp.up", layer.fc1, True) | from_linear(b + "mlp.down", layer.fc2, True)
        w |= norm_weights(b + "ln2", layer.final_layer_norm)
    return w


def _bart_weights(model, cfg) -> Weights:
    body, hf_class = model.base_model, type(model).__name__
    w = {"embed.weight": body.shared.weight}
    for name in ("encoder", "decoder"):
        w |= _stack(name + ".", getattr(body, name), body.shared, hf_class)
    if cfg.head_bias:  # the head itself has no bias: final_logits_bias (1, vocab) is added to its logits
        w["unembed.bias"] = model.final_logits_bias[0]  # (vocab,)
    return w


BART_FAMILIES = {
    "bart": Family("BART", _bart_config, _bart_weights, (
        "two stacks, encoder and decoder, share model.shared as their token embedding; each has its own learned "
        "position table and layernorm_embedding",
        "position p reads row p + 2 of each stored table (BART's offset): the table is read from row 2 on, so "
        "max_len = max_position_embeddings",
        "post-LayerNorm layers (eps 1e-5): self_attn_layer_norm, encoder_attn_layer_norm and final_layer_norm "
        "follow the residual sums; a decoder layer's encoder_attn becomes its cross-attention",
        "scale_embedding: token embeddings times sqrt(d_model)",
        "the head is tied to the shared embedding; final_logits_bias becomes the bias on the logits",
        "generation starts from decoder_start_token_id (2 in the released models); where forced_bos_token_id is "
        "set, Hugging Face forces it as the first generated token: start ours from both")),
}

# HF class -> (family, whether it has an output head)
BART_CLASSES = {"BartForConditionalGeneration": ("bart", True), "BartModel": ("bart", False)}

DEFAULT_BART_CLASS = {"bart": "BartForConditionalGeneration"}
