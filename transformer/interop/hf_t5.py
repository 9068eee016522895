"""T5 (``T5ForConditionalGeneration``, v1.0 and v1.1) read as our encoder-decoder.

T5 is a pre-norm encoder-decoder with RMSNorm (T5LayerNorm: no mean, no bias), no biases anywhere, and scores
that are not divided by sqrt(d_head): its initialisation folds that scale into W_q. Positions are its relative
position buckets: the first layer of each stack owns a table of one learned bias per bucket and head, and every
layer of that stack adds the same bias to its scores (bidirectional buckets in the encoder, causal ones in the
decoder; cross-attention has none). v1.0 has a ReLU FFN and a head tied to the embedding, whose input is scaled by
d_model**-0.5 first; v1.1 a gated-GELU FFN (tanh GELU) and no such scale.
"""
from __future__ import annotations

from .family import Family, activation, unsupported
from .weights import Weights, from_linear, norm_weights

# our plain FFN kind -> the gated kind whose gate applies the same activation ("gated-gelu" -> GeGLU)
GATED_FFN = {"gelu": "geglu", "relu": "reglu"}
T5_MAX_LEN = 512  # the length T5 was trained on; its buckets set no limit, so a config without n_positions gets this


def _t5_config(c, hf_class: str, has_head: bool) -> dict:
    decoder_layers = c.num_decoder_layers if c.num_decoder_layers is not None else c.num_layers
    if decoder_layers != c.num_layers:
        raise unsupported(hf_class, f"num_layers={c.num_layers} and num_decoder_layers={decoder_layers}",
                          "our encoder and decoder have the same number of layers (n_layers)")
    ffn, approximate = activation(hf_class, c.dense_act_fn)
    if c.is_gated_act:
        if ffn not in GATED_FFN:
            raise unsupported(hf_class, f"feed_forward_proj={c.feed_forward_proj!r}",
                              f"the gated FFNs that map are gated-{' and gated-'.join(GATED_FFN)}")
        ffn = GATED_FFN[ffn]
    head_dim = None if c.d_kv * c.num_heads == c.d_model else c.d_kv  # T5-11B: 128 heads of 128 in d_model 1024
    # transformers writes v1.0's rescale as scale_decoder_outputs; older configs say it with tie_word_embeddings
    rescaled = has_head and getattr(c, "scale_decoder_outputs", c.tie_word_embeddings)
    return dict(arch="encoder-decoder", vocab_size=c.vocab_size, d_model=c.d_model, n_heads=c.num_heads,
                head_dim=head_dim, n_layers=c.num_layers, d_ff=c.d_ff, max_len=getattr(c, "n_positions", T5_MAX_LEN),
                position="t5", relative_buckets=c.relative_attention_num_buckets,
                relative_max_distance=c.relative_attention_max_distance, norm="rmsnorm", norm_position="pre",
                norm_eps=c.layer_norm_epsilon, ffn=ffn, gelu_approximate=approximate, bias=False, score_scale=1.0,
                head_input_scale=c.d_model ** -0.5 if rescaled else None)


def _attention(prefix: str, attn) -> Weights:
    """T5's q, k, v, o (no biases) as ours."""
    w: Weights = {}
    for hf_name, ours in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "o_proj")):
        w |= from_linear(f"{prefix}.{ours}", getattr(attn, hf_name), False)
    return w


def _ffn(prefix: str, ff, cfg) -> Weights:
    """DenseReluDense: wi -> up (plain), or wi_0 -> gate and wi_1 -> up (gated); wo -> down."""
    names = (("wi_0", "gate"), ("wi_1", "up")) if cfg.row("ffn").gated else (("wi", "up"),)
    w: Weights = from_linear(f"{prefix}.down", ff.wo, False)
    for hf_name, ours in names:
        w |= from_linear(f"{prefix}.{ours}", getattr(ff, hf_name), False)
    return w


def _stack(ours: str, stack, cfg, cross: bool) -> Weights:
    """One T5Stack: its blocks' sublayers in order (self-attention, cross-attention in the decoder, FFN), each with
    the norm before it, then the final norm; the first block's bias table is the stack's."""
    first_attn = stack.block[0].layer[0].SelfAttention
    w: Weights = {f"{ours}.rel_bias.table.weight": first_attn.relative_attention_bias.weight,
                  **norm_weights(f"{ours}.ln_final", stack.final_layer_norm)}
    for i, block in enumerate(stack.block):
        b = f"{ours}.blocks.{i}"
        self_attn, *middle, ff = block.layer
        w |= _attention(f"{b}.attn", self_attn.SelfAttention) | norm_weights(f"{b}.ln1", self_attn.layer_norm)
        if cross:
            w |= _attention(f"{b}.cross_attn", middle[0].EncDecAttention)
            w |= norm_weights(f"{b}.ln_cross", middle[0].layer_norm)
        w |= _ffn(f"{b}.mlp", ff.DenseReluDense, cfg) | norm_weights(f"{b}.ln2", ff.layer_norm)
    return w


def _t5_weights(model, cfg) -> Weights:
    return ({"embed.weight": model.shared.weight} | _stack("encoder", model.encoder, cfg, cross=False)
            | _stack("decoder", model.decoder, cfg, cross=True))


def bucket_words(cfg) -> str:
    """T5's bucket settings in words, for describe_hf's position entry ("" for any other scheme)."""
    if not cfg.row("position").learned_bias:
        return ""
    return (f": {cfg.relative_buckets} buckets per stack (split by sign in the encoder), distances from "
            f"{cfg.relative_max_distance} on share the last")


T5_FAMILIES = {
    "t5": Family("T5", _t5_config, _t5_weights, (
        "relative position buckets: the table of the first block of each stack becomes the stack's own, and every "
        "layer adds its bias; the encoder's buckets are split by sign, the decoder's are causal; no bias in "
        "cross-attention",
        "scores are not divided by sqrt(d_head) (score_scale = 1); T5LayerNorm is an RMSNorm without bias, before "
        "each sublayer; no biases in any projection",
        "v1.0: ReLU FFN (wi, wo) and, before the tied head, the decoder's output times d_model**-0.5 "
        "(head_input_scale); v1.1: gated-GELU FFN (wi_0 the gate, wi_1 up, tanh GELU) without that scale",
        f"T5 sets no maximum length; max_len is n_positions where the config has one, else {T5_MAX_LEN}")),
}

T5_CLASSES = {"T5ForConditionalGeneration": ("t5", True)}  # HF class -> (family, whether it has an output head)

DEFAULT_T5_CLASS = {"t5": "T5ForConditionalGeneration"}
