"""BERT's relatives: RoBERTa and DistilBERT, read as the same post-norm encoder as BERT (huggingface.py).

RoBERTa keeps BERT's layer layout and changes what surrounds it: its learned positions are counted from
padding_idx + 1 (fairseq's convention: row padding_idx of the table belongs to padding, the first real token reads
row padding_idx + 1, so 2 for the released checkpoints), its released models have one token type, and its masked-LM
head always applies exact GELU whatever the FFN's activation. DistilBERT is BERT's layers (six in the released model)
under names of its own, without token types, with a fixed LayerNorm eps of 1e-12 and, when ``sinusoidal_pos_embds`` is set, sine/cosine positions.
One ``Family`` row each: the config on our axes, and the weights renamed to ours.
"""
from __future__ import annotations

import torch

from .. import axes
from ..positions import sinusoidal_table
from .family import Family, activation, unsupported
from .weights import Weights, from_linear, norm_weights

DISTILBERT_NORM_EPS = 1e-12  # DistilBERT's LayerNorms fix their eps; its config has no field for it
SINUSOIDAL_TOL = 1e-5  # how far a float32 sine/cosine table may sit from ours (HF computes it in float64)


def _encoder_fields(hf_class: str, has_head: bool, act_field: str, act: str, head_act: str) -> dict:
    """The axes every BERT relative shares: a post-LayerNorm encoder with biases and a LayerNorm after the
    embeddings. `act_field`: the config's name for the FFN's activation `act`; `head_act`: the masked-LM head's."""
    ffn, approximate = activation(hf_class, act)
    if has_head:
        head_ffn, head_approximate = activation(hf_class, head_act)
        # ours: dense -> GELU -> LayerNorm, the GELU tanh-approximated exactly when the FFN's is
        if not axes.row("ffn", head_ffn).gelu or head_approximate != approximate:
            raise unsupported(hf_class, f"{act_field}={act!r} and a masked-LM head applying {head_act!r}",
                              "our masked-LM head applies GELU, tanh-approximated exactly when the FFN's GELU is: "
                              f"set {act_field}='gelu', or open the model without its head")
    return dict(arch="encoder", norm="layernorm", norm_position="post", ffn=ffn, gelu_approximate=approximate,
                bias=True, embed_norm=True, head_transform=has_head, head_bias=has_head)


def _encoder_layer(prefix: str, layer) -> Weights:
    """One BERT-layout layer (RoBERTa's are the same): attention.self.{query,key,value}, attention.output.{dense,
    LayerNorm}, intermediate.dense, output.{dense,LayerNorm}; post-norm, so ln1 and ln2 follow the residual sums."""
    attn = layer.attention
    w: Weights = {}
    for hf_name, ours in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj")):
        w |= from_linear(prefix + "attn." + ours, getattr(attn.self, hf_name), True)
    w |= from_linear(prefix + "attn.o_proj", attn.output.dense, True)
    w |= from_linear(prefix + "mlp.up", layer.intermediate.dense, True)
    w |= from_linear(prefix + "mlp.down", layer.output.dense, True)
    return w | norm_weights(prefix + "ln1", attn.output.LayerNorm) | norm_weights(prefix + "ln2", layer.output.LayerNorm)


# --- RoBERTa ------------------------------------------------------------------------------

def _roberta_first_position(hf_class: str, c) -> int:
    """The table row of the first real token: padding_idx + 1."""
    if c.pad_token_id is None:
        raise unsupported(hf_class, "pad_token_id=None", "RoBERTa counts positions from padding_idx + 1, so it needs one")
    if c.max_position_embeddings <= c.pad_token_id + 1:
        raise unsupported(hf_class, f"max_position_embeddings={c.max_position_embeddings} and "
                                    f"pad_token_id={c.pad_token_id}",
                          f"positions start at row pad_token_id + 1 = {c.pad_token_id + 1}, so the table needs more "
                          "rows than that")
    return c.pad_token_id + 1


def _roberta_config(c, hf_class: str, has_head: bool) -> dict:
    if c.is_decoder or c.add_cross_attention:
        raise unsupported(hf_class, "is_decoder=True or add_cross_attention=True", "RoBERTa is read as an encoder")
    position_type = getattr(c, "position_embedding_type", "absolute")
    if position_type != "absolute":
        raise unsupported(hf_class, f"position_embedding_type={position_type!r}", "only absolute (learned) positions map")
    first = _roberta_first_position(hf_class, c)
    # the head's GELU is fixed (exact), whatever hidden_act says
    return _encoder_fields(hf_class, has_head, "hidden_act", c.hidden_act, "gelu") | dict(
        vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.num_attention_heads, n_layers=c.num_hidden_layers,
        d_ff=c.intermediate_size, max_len=c.max_position_embeddings - first, position="learned", norm_eps=c.layer_norm_eps)


def _roberta_weights(model, cfg) -> Weights:
    body = model.base_model
    emb = body.embeddings
    first = _roberta_first_position(type(model).__name__, model.config)
    # Our position p reads HF's row p + padding_idx + 1; every token has type 0, whose vector is folded in.
    positions = emb.position_embeddings.weight[first:] + emb.token_type_embeddings.weight[0]  # (max_len, D)
    w = {"embed.weight": emb.word_embeddings.weight, "pos.table.weight": positions, **norm_weights("ln_embed", emb.LayerNorm)}
    for i, layer in enumerate(body.encoder.layer):
        w |= _encoder_layer(f"blocks.{i}.", layer)
    if cfg.head_transform:
        head = model.lm_head
        w |= from_linear("head_dense", head.dense, True) | norm_weights("head_norm", head.layer_norm)
    return w


# --- DistilBERT ---------------------------------------------------------------------------

def _distilbert_config(c, hf_class: str, has_head: bool) -> dict:
    # the MLM head's activation is the FFN's own (config.activation)
    return _encoder_fields(hf_class, has_head, "activation", c.activation, c.activation) | dict(
        vocab_size=c.vocab_size, d_model=c.dim, n_heads=c.n_heads, n_layers=c.n_layers, d_ff=c.hidden_dim,
        max_len=c.max_position_embeddings, position="sinusoidal" if c.sinusoidal_pos_embds else "learned",
        norm_eps=DISTILBERT_NORM_EPS)


def _distilbert_weights(model, cfg) -> Weights:
    body = model.base_model
    emb = body.embeddings
    table = emb.position_embeddings.weight  # (max_len, D)
    w = {"embed.weight": emb.word_embeddings.weight, **norm_weights("ln_embed", emb.LayerNorm)}
    if cfg.row("position").table_param_terms:  # learned: the table is a weight of ours too
        w["pos.table.weight"] = table
    else:  # sine/cosine: ours computes the same table, so the stored one must be the formula's
        formula = sinusoidal_table(cfg.max_len, cfg.d_model).to(table)  # (max_len, D)
        gap = (table - formula).abs().max().item()
        if gap > max(SINUSOIDAL_TOL, torch.finfo(table.dtype).eps):  # bfloat16 rounds each entry by up to eps / 2
            raise unsupported(type(model).__name__, f"sinusoidal_pos_embds=True and a position table {gap:.2g} away "
                                                    "from the sine/cosine formula",
                              "our sinusoidal positions are computed, not stored: load it with "
                              "sinusoidal_pos_embds=False to read the table as learned positions")
    for i, layer in enumerate(body.transformer.layer):
        b = f"blocks.{i}."
        attn = layer.attention
        for hf_name, ours in (("q_lin", "q_proj"), ("k_lin", "k_proj"), ("v_lin", "v_proj"), ("out_lin", "o_proj")):
            w |= from_linear(b + "attn." + ours, getattr(attn, hf_name), True)
        w |= from_linear(b + "mlp.up", layer.ffn.lin1, True) | from_linear(b + "mlp.down", layer.ffn.lin2, True)
        # post-norm: sa_layer_norm after attention's residual sum, output_layer_norm after the FFN's
        w |= norm_weights(b + "ln1", layer.sa_layer_norm) | norm_weights(b + "ln2", layer.output_layer_norm)
    if cfg.head_transform:
        w |= from_linear("head_dense", model.vocab_transform, True) | norm_weights("head_norm", model.vocab_layer_norm)
    return w


BERT_RELATIVE_FAMILIES = {
    "roberta": Family("RoBERTa", _roberta_config, _roberta_weights, (
        "learned positions start at row padding_idx + 1 (2 for the released models): the table is read from that row "
        "on, so max_len = max_position_embeddings - padding_idx - 1; the padding row itself is not read",
        "token type 0's vector is folded into the position table (the released models have one token type)",
        "BERT's post-LayerNorm layers; masked-LM head: dense -> exact GELU -> LayerNorm -> decoder with its own bias; "
        "the pooler is not used")),
    "distilbert": Family("DistilBERT", _distilbert_config, _distilbert_weights, (
        "q_lin, k_lin, v_lin, out_lin become q, k, v, o; ffn.lin1 / lin2 the FFN; sa_layer_norm and "
        "output_layer_norm the post-LayerNorms (eps 1e-12)",
        "no token types; sinusoidal_pos_embds: sine/cosine positions, computed (the stored table is checked), "
        "else a learned table",
        "masked-LM head: vocab_transform -> activation -> vocab_layer_norm -> vocab_projector with its bias")),
}

# HF class -> (family, whether it has an output head)
BERT_RELATIVE_CLASSES = {"RobertaForMaskedLM": ("roberta", True), "RobertaModel": ("roberta", False),
                         "DistilBertForMaskedLM": ("distilbert", True), "DistilBertModel": ("distilbert", False)}

DEFAULT_BERT_RELATIVE_CLASS = {"roberta": "RobertaForMaskedLM", "distilbert": "DistilBertForMaskedLM"}
