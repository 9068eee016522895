"""Hugging Face models -> our Transformer: GPT-2, LLaMA (3.1's RoPE too), Mistral, Mixtral, BLOOM, Falcon (its new
decoder architecture too) and BERT here; the families of 2024-2026 in hf_modern.py, and those whose layers keep a
state (Qwen3-Next, Qwen3.5, OLMo hybrid) in hf_hybrid.py, LFM2's short convolutions in hf_lfm2.py, MiniMax-01's
lightning attention in hf_minimax.py, Llama 4's text model (chunked layers) in hf_llama4.py, and BERT's relatives
(RoBERTa, DistilBERT) in hf_bert_family.py, BART in hf_bart.py, T5 in hf_t5.py.

Each family is a ``Family``: how its config maps onto the axes, and how its weights are
renamed to ours. ``transformers`` is imported only to load a path or a cached id.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .. import axes
from ..config import TransformerConfig
from ..layer_plan import parse_nope_layers
from ..model import Transformer
from .family import Family, activation as _activation, head_dim, rope_fields, unsupported as _unsupported
from .hf_bart import BART_CLASSES, BART_FAMILIES, DEFAULT_BART_CLASS
from .hf_bert_family import BERT_RELATIVE_CLASSES, BERT_RELATIVE_FAMILIES, DEFAULT_BERT_RELATIVE_CLASS
from .hf_gemma4 import DEFAULT_GEMMA4_CLASS, GEMMA4_CLASSES, GEMMA4_FAMILIES, describe_global_kv, describe_per_layer
from .hf_hybrid import DEFAULT_HYBRID_CLASS, HYBRID_CLASSES, HYBRID_FAMILIES
from .hf_kimi import DEFAULT_KIMI_CLASS, KIMI_CLASSES, KIMI_FAMILIES
from .hf_lfm2 import DEFAULT_LFM2_CLASS, LFM2_CLASSES, LFM2_FAMILIES
from .hf_minimax import DEFAULT_MINIMAX_CLASS, MINIMAX_CLASSES, MINIMAX_FAMILIES
from .hf_dsa import DEFAULT_DSA_CLASS, DSA_CLASSES, DSA_FAMILIES
from .hf_deepseek_v4 import DEFAULT_V4_CLASS, V4_CLASSES, V4_FAMILIES
from .hf_llama4 import DEFAULT_LLAMA4_CLASS, LLAMA4_CLASSES, LLAMA4_FAMILIES
from .hf_modern import DEFAULT_MODERN_CLASS, MODERN_CLASSES, MODERN_FAMILIES
from .hf_t5 import DEFAULT_T5_CLASS, T5_CLASSES, T5_FAMILIES, bucket_words
from .weights import DTYPE_NAMES, Weights, from_linear, linear, norm_weights, split_interleaved


@dataclass(frozen=True)
class HFMapping:
    """What ``describe_hf`` returns: the family, each axis's choice, and the config."""

    family: str
    hf_class: str
    config: TransformerConfig
    axes: dict[str, str]  # axis -> the choice this model makes, in words
    notes: tuple[str, ...]


# --- GPT-2 ----------------------------------------------------------------------------

def _gpt2_config(c, hf_class: str, has_head: bool) -> dict:
    if not c.scale_attn_weights or c.scale_attn_by_inverse_layer_idx:
        raise _unsupported(hf_class, "scale_attn_weights=False or scale_attn_by_inverse_layer_idx=True",
                           "our scores are always scaled by 1/sqrt(d_head), the same in every layer")
    if c.add_cross_attention:
        raise _unsupported(hf_class, "add_cross_attention=True", "a decoder-only model has no encoder to attend to")
    ffn, approximate = _activation(hf_class, c.activation_function)
    return dict(arch="decoder", vocab_size=c.vocab_size, d_model=c.n_embd, n_heads=c.n_head, n_layers=c.n_layer,
                d_ff=c.n_inner or 4 * c.n_embd, max_len=c.n_positions, position="learned", norm="layernorm",
                norm_position="pre", ffn=ffn, gelu_approximate=approximate, bias=True, norm_eps=c.layer_norm_epsilon)


def _gpt2_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    w = {"embed.weight": body.wte.weight, "pos.table.weight": body.wpe.weight, **norm_weights("ln_final", body.ln_f)}
    for i, layer in enumerate(body.h):
        b = f"blocks.{i}."
        # Conv1D keeps its weight as (in, out), so every matrix is transposed to nn.Linear's (out, in);
        # c_attn holds q, k and v side by side.
        q, k, v = layer.attn.c_attn.weight.T.split(cfg.d_model, dim=0)  # 3 x (D, D)
        qb, kb, vb = layer.attn.c_attn.bias.split(cfg.d_model)
        w |= linear(b + "attn.q_proj", q, qb, True) | linear(b + "attn.k_proj", k, kb, True)
        w |= linear(b + "attn.v_proj", v, vb, True)
        w |= linear(b + "attn.o_proj", layer.attn.c_proj.weight.T, layer.attn.c_proj.bias, True)
        w |= linear(b + "mlp.up", layer.mlp.c_fc.weight.T, layer.mlp.c_fc.bias, True)
        w |= linear(b + "mlp.down", layer.mlp.c_proj.weight.T, layer.mlp.c_proj.bias, True)
        w |= norm_weights(b + "ln1", layer.ln_1) | norm_weights(b + "ln2", layer.ln_2)
    return w


# --- LLaMA, Mistral, Mixtral -------------------------------------------------------

def _llama_config(c, hf_class: str, has_head: bool) -> dict:
    if c.hidden_act != "silu":
        raise _unsupported(hf_class, f"hidden_act={c.hidden_act!r}", "SwiGLU's gate is SiLU")
    fields = dict(arch="decoder", vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.num_attention_heads,
                  n_kv_heads=c.num_key_value_heads or c.num_attention_heads, n_layers=c.num_hidden_layers,
                  d_ff=c.intermediate_size, max_len=c.max_position_embeddings, position="rope", head_dim=head_dim(c),
                  **rope_fields(hf_class, c), norm="rmsnorm", norm_position="pre", ffn="swiglu",
                  norm_eps=c.rms_norm_eps, sliding_window=getattr(c, "sliding_window", None),
                  # one switch covers both; a zero bias stands in where only one of them has one
                  bias=bool(getattr(c, "attention_bias", False) or getattr(c, "mlp_bias", False)))
    if hasattr(c, "num_local_experts"):  # Mixtral
        fields |= dict(ffn="moe", n_experts=c.num_local_experts, top_k=c.num_experts_per_tok)
    return fields


def _llama_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    w = {"embed.weight": body.embed_tokens.weight, **norm_weights("ln_final", body.norm)}
    for i, layer in enumerate(body.layers):
        b = f"blocks.{i}."
        attn = layer.self_attn
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            w |= from_linear(b + "attn." + name, getattr(attn, name), cfg.bias)
        w |= norm_weights(b + "ln1", layer.input_layernorm) | norm_weights(b + "ln2", layer.post_attention_layernorm)
        if cfg.row("ffn").routed:
            w |= _mixtral_moe(b + "mlp.", layer.mlp, model)
        else:
            for hf_name, ours in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down")):
                w |= from_linear(b + "mlp." + ours, getattr(layer.mlp, hf_name), cfg.bias)
    return w


def _mixtral_moe(prefix: str, moe: nn.Module, model) -> Weights:
    """Router + experts. transformers 5 stores the experts fused: gate_up_proj (E, 2*d_ff, D), down_proj (E, D, d_ff)."""
    experts = moe.experts
    if not hasattr(experts, "gate_up_proj"):
        raise _unsupported(type(model).__name__, f"experts stored as {type(experts).__name__}",
                           "this reader expects the fused gate_up_proj / down_proj parameters of transformers 5")
    gate, up = experts.gate_up_proj.chunk(2, dim=1)  # (E, d_ff, D) each: the gate half comes first
    w = {prefix + "router.weight": moe.gate.weight}  # (E, D)
    for e in range(gate.shape[0]):
        w |= {f"{prefix}experts.{e}.gate.weight": gate[e], f"{prefix}experts.{e}.up.weight": up[e],
              f"{prefix}experts.{e}.down.weight": experts.down_proj[e]}
    return w


# --- BLOOM ------------------------------------------------------------------------------

def _bloom_config(c, hf_class: str, has_head: bool) -> dict:
    if c.apply_residual_connection_post_layernorm:
        raise _unsupported(hf_class, "apply_residual_connection_post_layernorm=True",
                           "our residual stream carries the block input, not its normalised copy")
    # ALiBi has no position table, so max_len bounds nothing here; 2048 is BLOOM's training length
    return dict(arch="decoder", vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.n_head, n_layers=c.n_layer,
                d_ff=4 * c.hidden_size, max_len=2048, position="alibi", norm="layernorm", norm_position="pre",
                ffn="gelu", gelu_approximate="tanh", bias=True, embed_norm=True, norm_eps=c.layer_norm_epsilon)


def _bloom_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    w = {"embed.weight": body.word_embeddings.weight, **norm_weights("ln_embed", body.word_embeddings_layernorm),
         **norm_weights("ln_final", body.ln_f)}
    for i, layer in enumerate(body.h):
        b = f"blocks.{i}."
        fused = layer.self_attention.query_key_value
        qkv_w = split_interleaved(fused.weight, cfg.n_heads, cfg.d_head)
        qkv_b = split_interleaved(fused.bias, cfg.n_heads, cfg.d_head)
        for name, weight, bias in zip(("q_proj", "k_proj", "v_proj"), qkv_w, qkv_b):
            w |= linear(b + "attn." + name, weight, bias, True)
        w |= from_linear(b + "attn.o_proj", layer.self_attention.dense, True)
        w |= from_linear(b + "mlp.up", layer.mlp.dense_h_to_4h, True)
        w |= from_linear(b + "mlp.down", layer.mlp.dense_4h_to_h, True)
        w |= norm_weights(b + "ln1", layer.input_layernorm) | norm_weights(b + "ln2", layer.post_attention_layernorm)
    return w


# --- Falcon ------------------------------------------------------------------------------

def _falcon_config(c, hf_class: str, has_head: bool) -> dict:
    if c.alibi:
        raise _unsupported(hf_class, "alibi=True", "Falcon scales its ALiBi bias by 1/sqrt(d_head), ours is unscaled")
    ffn, approximate = _activation(hf_class, c.activation)
    fields = dict(arch="decoder", vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.num_attention_heads,
                  n_kv_heads=1 if c.multi_query else c.num_attention_heads, n_layers=c.num_hidden_layers,
                  d_ff=c.ffn_hidden_size, max_len=c.max_position_embeddings, position="rope",
                  **rope_fields(hf_class, c), norm="layernorm", norm_position="pre", ffn=ffn,
                  gelu_approximate=approximate, parallel_block=c.parallel_attn, bias=bool(c.bias), norm_eps=c.layer_norm_epsilon)
    if c.new_decoder_architecture:  # grouped kv heads; ln_attn and ln_mlp, one norm per branch (unless told one)
        if not c.parallel_attn:
            raise _unsupported(hf_class, "new_decoder_architecture=True and parallel_attn=False",
                               "the new architecture is a parallel block")
        fields |= dict(n_kv_heads=c.num_kv_heads, parallel_norms=1 if c.num_ln_in_parallel_attn == 1 else 2)
    return fields


def _falcon_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    w = {"embed.weight": body.word_embeddings.weight, **norm_weights("ln_final", body.ln_f)}
    H, G, d = cfg.n_heads, cfg.n_kv_heads, cfg.d_head
    new = model.config.new_decoder_architecture
    for i, layer in enumerate(body.h):
        b = f"blocks.{i}."
        fused = layer.self_attention.query_key_value
        if new:  # per kv group g: [q of its H/G heads, k_g, v_g]
            def split(t, r=H // G):
                groups = t.view(G, r + 2, d, *t.shape[1:])
                return (groups[:, :r].reshape(H * d, *t.shape[1:]), groups[:, r].reshape(G * d, *t.shape[1:]),
                        groups[:, r + 1].reshape(G * d, *t.shape[1:]))
        elif cfg.n_kv_heads == 1:  # multi-query: all H query heads, then the one key head, then the one value head
            split = lambda t: t.split((H * d, d, d), dim=0)  # noqa: E731
        else:  # per head [q_h, k_h, v_h], as in BLOOM
            split = lambda t: split_interleaved(t, H, d)  # noqa: E731
        biases = split(fused.bias) if fused.bias is not None else (None, None, None)
        for name, weight, bias in zip(("q_proj", "k_proj", "v_proj"), split(fused.weight), biases):
            w |= linear(b + "attn." + name, weight, bias, cfg.bias)
        w |= from_linear(b + "attn.o_proj", layer.self_attention.dense, cfg.bias)
        w |= from_linear(b + "mlp.up", layer.mlp.dense_h_to_4h, cfg.bias)
        w |= from_linear(b + "mlp.down", layer.mlp.dense_4h_to_h, cfg.bias)
        if new and cfg.parallel_norms == 2:
            w |= norm_weights(b + "ln1", layer.ln_attn) | norm_weights(b + "ln2", layer.ln_mlp)
            continue
        w |= norm_weights(b + "ln1", layer.input_layernorm)
        if not cfg.parallel_block:
            w |= norm_weights(b + "ln2", layer.post_attention_layernorm)
    return w


# --- BERT -------------------------------------------------------------------------------

def _bert_config(c, hf_class: str, has_head: bool) -> dict:
    if c.is_decoder or c.add_cross_attention:
        raise _unsupported(hf_class, "is_decoder=True or add_cross_attention=True", "BERT is read as an encoder")
    position_type = getattr(c, "position_embedding_type", "absolute")
    if position_type != "absolute":
        raise _unsupported(hf_class, f"position_embedding_type={position_type!r}", "only absolute (learned) positions map")
    ffn, approximate = _activation(hf_class, c.hidden_act)
    if has_head and not axes.row("ffn", ffn).gelu:
        raise _unsupported(hf_class, f"hidden_act={c.hidden_act!r}", "our masked-LM head transform uses GELU")
    return dict(arch="encoder", vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.num_attention_heads,
                n_layers=c.num_hidden_layers, d_ff=c.intermediate_size, max_len=c.max_position_embeddings,
                position="learned", norm="layernorm", norm_position="post", ffn=ffn, gelu_approximate=approximate,
                bias=True, embed_norm=True, norm_eps=c.layer_norm_eps, head_transform=has_head, head_bias=has_head)


def _bert_weights(model, cfg: TransformerConfig) -> Weights:
    body = model.base_model
    emb = body.embeddings
    # Every token gets token type 0, so its vector is the same at every position: fold it into the position table.
    positions = emb.position_embeddings.weight + emb.token_type_embeddings.weight[0]  # (max_len, D)
    w = {"embed.weight": emb.word_embeddings.weight, "pos.table.weight": positions, **norm_weights("ln_embed", emb.LayerNorm)}
    for i, layer in enumerate(body.encoder.layer):
        b = f"blocks.{i}."
        attn = layer.attention
        for hf_name, ours in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj")):
            w |= from_linear(b + "attn." + ours, getattr(attn.self, hf_name), True)
        w |= from_linear(b + "attn.o_proj", attn.output.dense, True)
        w |= from_linear(b + "mlp.up", layer.intermediate.dense, True)
        w |= from_linear(b + "mlp.down", layer.output.dense, True)
        # post-norm: each sublayer's LayerNorm sits after its residual sum
        w |= norm_weights(b + "ln1", attn.output.LayerNorm) | norm_weights(b + "ln2", layer.output.LayerNorm)
    if cfg.head_transform:
        transform = model.cls.predictions.transform
        w |= from_linear("head_dense", transform.dense, True) | norm_weights("head_norm", transform.LayerNorm)
    return w


FAMILIES = {
    "gpt2": Family("GPT-2", _gpt2_config, _gpt2_weights, (
        "Conv1D weights are stored (in, out): transposed to (out, in)",
        "the fused c_attn is split into q, k and v",
        "the output head is tied to the token embedding")),
    "llama": Family("LLaMA", _llama_config, _llama_weights, (
        "RoPE uses the half-split rotate_half layout, the same as ours: q and k are copied unpermuted",
        "num_key_value_heads becomes n_kv_heads (MHA, GQA or MQA)",
        "rope_type linear, dynamic, yarn or llama3 (LLaMA 3.1) becomes rope_scaling with its factor and bands")),
    "mistral": Family("Mistral", _llama_config, _llama_weights, (
        "as LLaMA, plus sliding_window: a query sees at most W keys, itself included (HF: key > query - W)",)),
    "mixtral": Family("Mixtral", _llama_config, _llama_weights, (
        "as Mistral, with a mixture of SwiGLU experts: softmax over the router logits, top-k, renormalised",
        "the fused expert tensor gate_up_proj (E, 2*d_ff, D) is split into gate (first half) and up")),
    "bloom": Family("BLOOM", _bloom_config, _bloom_weights, (
        "the fused query_key_value runs head by head ([q, k, v] per head) and is split per head",
        "ALiBi: HF adds +slope*key_position, ours -slope*|i-j|; they differ by a constant per query row, "
        "which softmax ignores, so the weights agree",
        "word_embeddings_layernorm becomes the embedding LayerNorm")),
    "falcon": Family("Falcon", _falcon_config, _falcon_weights, (
        "multi_query: the fused query_key_value holds H query heads, then one key head and one value head",
        "parallel_attn: attention and MLP read the same LayerNorm (parallel_block=True)",
        "new_decoder_architecture: the fused query_key_value runs kv group by kv group ([its q heads, k, v]); "
        "ln_attn and ln_mlp, one norm per branch (parallel_norms=2)")),
    "bert": Family("BERT", _bert_config, _bert_weights, (
        "token type 0's vector is folded into the learned position table (every token gets type 0)",
        "post-LayerNorm blocks, LayerNorm after the embeddings",
        "masked-LM head: dense -> GELU -> LayerNorm -> tied decoder with its own bias; the pooler is not used")),
    **BERT_RELATIVE_FAMILIES, **BART_FAMILIES,
    **MODERN_FAMILIES, **HYBRID_FAMILIES, **LFM2_FAMILIES, **MINIMAX_FAMILIES, **LLAMA4_FAMILIES, **GEMMA4_FAMILIES,
    **KIMI_FAMILIES, **DSA_FAMILIES, **V4_FAMILIES, **T5_FAMILIES,
}

# HF class -> (family, whether it has an output head)
SUPPORTED_CLASSES = {
    "GPT2LMHeadModel": ("gpt2", True), "GPT2Model": ("gpt2", False),
    "LlamaForCausalLM": ("llama", True), "LlamaModel": ("llama", False),
    "MistralForCausalLM": ("mistral", True), "MistralModel": ("mistral", False),
    "MixtralForCausalLM": ("mixtral", True), "MixtralModel": ("mixtral", False),
    "BloomForCausalLM": ("bloom", True), "BloomModel": ("bloom", False),
    "FalconForCausalLM": ("falcon", True), "FalconModel": ("falcon", False),
    "BertForMaskedLM": ("bert", True), "BertModel": ("bert", False),
    **BERT_RELATIVE_CLASSES, **BART_CLASSES,
    **MODERN_CLASSES, **HYBRID_CLASSES, **LFM2_CLASSES, **MINIMAX_CLASSES, **LLAMA4_CLASSES, **GEMMA4_CLASSES,
    **KIMI_CLASSES, **DSA_CLASSES, **V4_CLASSES, **T5_CLASSES,
}


def _family_of(hf_class: str) -> tuple[Family, bool]:
    if hf_class not in SUPPORTED_CLASSES:
        raise ValueError(f"{hf_class} is not supported; supported Hugging Face classes: {', '.join(SUPPORTED_CLASSES)}")
    family, has_head = SUPPORTED_CLASSES[hf_class]
    return FAMILIES[family], has_head


# --- public API -------------------------------------------------------------------------

def _config_for(hf_config, hf_class: str, tied: bool, dtype: torch.dtype) -> TransformerConfig:
    family, has_head = _family_of(hf_class)
    if dtype not in DTYPE_NAMES:
        raise ValueError(f"{hf_class} is in {dtype}; supported dtypes are float32 and bfloat16: "
                         "convert it first, e.g. model.float()")
    fields = family.config(hf_config, hf_class, has_head)
    return TransformerConfig(**fields, tie_embeddings=tied or not has_head, dtype=DTYPE_NAMES[dtype])


def _is_tied(model) -> bool:
    head = model.get_output_embeddings()
    return head is None or head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


def from_hf(model_or_path, *, device: torch.device | str | None = None) -> Transformer:
    """Our Transformer with the weights of a Hugging Face model.

    `model_or_path`: a ``transformers`` model instance, a local directory written by
    ``save_pretrained``, or a model id already in the local cache (never downloaded).
    The result has the source's device and dtype (a loaded path: float32 on the CPU);
    `device` moves it elsewhere. Unsupported classes raise ValueError listing the supported ones.
    """
    model = model_or_path if isinstance(model_or_path, nn.Module) else _load_local(model_or_path)
    hf_class = type(model).__name__
    source = model.get_input_embeddings().weight
    cfg = _config_for(model.config, hf_class, _is_tied(model), source.dtype)
    family, has_head = _family_of(hf_class)
    with torch.no_grad():
        weights = family.weights(model, cfg)
        head = model.get_output_embeddings() if has_head else None
        weights["unembed.weight"] = weights["embed.weight"] if cfg.tie_embeddings else head.weight
        if cfg.head_bias and "unembed.bias" not in weights:  # a family may bring its own (BART's final_logits_bias)
            weights["unembed.bias"] = head.bias
        ours = Transformer(cfg, device=device or source.device)
        ours.load_state_dict(weights, strict=True)  # strict: every weight of ours must have come from the source
    return ours.eval()


def describe_hf(model_or_path) -> HFMapping:
    """How a Hugging Face model maps onto the five axes, without copying any weights.

    Accepts a model instance, a local directory or a cached model id (only its config is read).
    """
    if isinstance(model_or_path, nn.Module):
        hf_class, hf_config = type(model_or_path).__name__, model_or_path.config
        tied, dtype = _is_tied(model_or_path), model_or_path.get_input_embeddings().weight.dtype
    else:
        hf_config = _load_local_config(model_or_path)
        hf_class = _architecture(hf_config, model_or_path)
        tied, dtype = bool(getattr(hf_config, "tie_word_embeddings", True)), torch.float32
    cfg = _config_for(hf_config, hf_class, tied, dtype)
    family, has_head = _family_of(hf_class)
    return HFMapping(family.name, hf_class, cfg, describe_axes(cfg, has_head), family.notes)


def describe_axes(cfg: TransformerConfig, has_head: bool = True) -> dict[str, str]:
    """Each axis's choice in words, e.g. {"KV heads": "GQA: 8 query heads share 2 kv heads", ...}, and, where
    layers differ, the layer plan ("layers").

    The names come from ``transformer.axes``; this adds the sizes.
    """
    H, G = cfg.n_heads, cfg.n_kv_heads
    sizes = {"MHA": f"{H} query heads, {G} kv heads", "GQA": f"{H} query heads share {G} kv heads",
             "MQA": f"{H} query heads share 1 kv head",
             "MLA": f"{H} heads rebuilt from a latent of {cfg.kv_rank} and one shared RoPE key of {cfg.d_rope}"
             }[cfg.attention_kind]
    kv = f"{axes.label('kv_heads', cfg.attention_kind)}: {sizes}"
    if cfg.head_dim is not None:
        kv += f", head_dim {cfg.d_head}"
    kv += describe_global_kv(cfg)
    causal = axes.label("mask", "causal")
    arch = cfg.row("arch")
    mask = (f"{causal} decoder, {axes.label('mask', 'cross')}" if arch.cross
            else causal if arch.causal else axes.label("mask", "none"))
    windows = cfg.layer_windows()
    if all(w is not None for w in windows) and cfg.sliding_window is not None:
        mask += f", {axes.label('mask', 'sliding_window')} of {cfg.sliding_window} keys"
    elif any(w is not None for w in windows):
        local = sum(w is not None for w in windows)
        mask += (f", {local} local layers ({axes.label('mask', 'sliding_window')} of {cfg.sliding_window} keys) and "
                 f"{len(windows) - local} global ({cfg.layer_pattern})")
    chunked = [spec.index for spec in cfg.layer_plan() if spec.chunk is not None]
    if chunked:  # Llama 4: "causal, chunked (3 tokens) on layers 0-2"
        where = "every layer" if len(chunked) == cfg.n_layers else _layers(chunked)
        mask += f", {axes.label('mask', 'chunked')} ({cfg.attention_chunk} tokens) on {where}"
    indexed = [spec.index for spec in cfg.layer_plan() if spec.selects_keys]
    if indexed:  # DeepSeek-V3.2: "causal, indexer top-k (2048 keys per query; 64 indexer heads of 128) on every layer"
        where = "every layer" if len(indexed) == cfg.n_layers else _layers(indexed)
        unit = "blocks" if any(spec.compresses for spec in cfg.layer_plan()) else "keys"  # DeepSeek-V4 picks blocks
        mask += (f", {axes.label('mask', 'top_k')} ({cfg.index_top_k} {unit} per query; {cfg.index_heads} indexer "
                 f"heads of {cfg.index_head_dim}) on {where}")
    position = axes.label("position", cfg.position) + bucket_words(cfg)
    scheme = cfg.row("position")
    if scheme.table_param_terms:
        position += f" table of {cfg.max_len} positions"
    if scheme.rotates_qk:
        position += f", theta = {cfg.rope_theta:g}"
        if cfg.rope_local_theta is not None:
            position += f" (local layers {cfg.rope_local_theta:g})"
        if cfg.d_rope != cfg.d_head:
            position += f", {cfg.d_rope} of {cfg.d_head} dimensions turn"
        if cfg.row("rope_scaling").rescales:
            position += f", {_rope_change(cfg, cfg.rope_scaling, ' scaling')}"
        nope = sorted(parse_nope_layers(cfg.nope_layers, cfg.n_layers))
        if nope:
            position += f"; {_layers(nope)}: no positions (NoPE)"
        if not any(spec.rotates for spec in cfg.layer_plan()):  # Kimi Linear: every softmax layer leaves RoPE out
            position = f"none: no layer turns q and k ({_layers(nope)} leave RoPE out, the others keep a state)"
    placements = list(dict.fromkeys(spec.norm_position for spec in cfg.layer_plan()))
    norm = "; ".join(_placed(cfg, key) for key in placements) + f", eps = {cfg.norm_eps:g}"
    if cfg.norm_plus_one:
        norm += ", scale (1 + w)"
    if cfg.latent_norm_eps is not None:
        norm += f", MLA latent norms eps = {cfg.latent_norm_eps:g}"
    if cfg.row("qk_norm").normalises:
        norm += f", QK-norm {axes.label('qk_norm', cfg.qk_norm)}"
    if cfg.value_norm:
        norm += ", values by their RMS (no weight)"
    if cfg.embed_norm:
        norm += f", plus a {axes.label('norm', 'layernorm')} after the embeddings"
    ffn = axes.label("ffn", cfg.ffn)
    if cfg.row("gelu_approximate").approximate and cfg.row("ffn").gelu:
        ffn += " (tanh approximation)"
    if cfg.row("ffn").routed:
        ffn += (f": {cfg.n_experts} {axes.label('expert_activation', cfg.expert_activation)} experts, top-{cfg.top_k}"
                + (f", {axes.label('router', cfg.router)} router" if cfg.row("router").sigmoid else "")
                + (f", {cfg.n_shared_experts} shared" if cfg.n_shared_experts else "")
                + (" (gated by sigmoid(x W))" if cfg.shared_expert_gate else "")
                + (f", the first {cfg.first_dense_layers} layers dense" if cfg.first_dense_layers else "")
                + _interleaved(cfg)
                + (", the weight scaling each expert's input" if cfg.router_scales_input else ""))
    scores = ", ".join(axes.label("scores", key) for key in axes.scores_choices(cfg))
    if cfg.attn_softcap is not None:
        scores += f" at {cfg.attn_softcap:g}"
    if cfg.attn_temperature_scale is not None:
        scores += f" (s = {cfg.attn_temperature_scale:g}, f = {cfg.attn_temperature_floor:g})"
    if not has_head:
        head = "none (hidden states only)"
    else:
        head = ("masked-LM transform, " if cfg.head_transform else "") + ("tied to the embedding" if cfg.tie_embeddings else "its own matrix")
        if cfg.logit_softcap is not None:
            head += f", logits soft-capped at {cfg.logit_softcap:g}"
    described = {"KV heads": kv, "mask": mask, "position": position, "norm": norm, "FFN": ffn, "scores": scores,
                 "block": axes.label("block", "parallel" if cfg.parallel_block else "sequential")
                 + (f", {cfg.hyper_streams} hyper-connected residual streams" if cfg.hyper_streams > 1 else ""),
                 "head": head}
    return described | describe_per_layer(cfg) | describe_state(cfg) | describe_plan(cfg)


def _rope_change(cfg: TransformerConfig, scaling: str, word: str = "") -> str:
    """A RoPE scaling in words: "LLaMA 3 x8" (`word` after the name: "LLaMA 3 scaling x8"), or proportional's share
    of turning frequencies."""
    if axes.row("rope_scaling", scaling).turns_fraction:
        return f"{axes.label('rope_scaling', scaling)}: {cfg.rope_fraction:g} of the frequencies turn"
    return f"{axes.label('rope_scaling', scaling)}{word} x{cfg.rope_factor:g}"


def _placed(cfg: TransformerConfig, key: str) -> str:
    """The model's norm at one placement, in words: "pre-RMSNorm", "RMSNorm, after the sublayer"; where the layers'
    placements differ, which layers ("RMSNorm, after the sublayer (layers 3, 7)")."""
    placement, kind = axes.row("norm_position", key), axes.label("norm", cfg.norm)
    text = f"{kind}, {placement.label}" if placement.after or placement.skips_normed else f"{placement.label}-{kind}"
    layers = [spec.index for spec in cfg.layer_plan() if spec.norm_position == key]
    return text if len(layers) == cfg.n_layers else f"{text} ({_layers(layers)})"


def describe_state(cfg: TransformerConfig) -> dict[str, str]:
    """{"linear layers": ...}: the kind and sizes of the layers that keep a state, where there are any, e.g.
    "Gated DeltaNet: 4 value heads, each a 8 x 12 state, read by 2 q/k heads; short convolution of 4 tokens"."""
    kinds = list(dict.fromkeys(spec.kind for spec in cfg.layer_plan() if spec.row.keeps_state))
    convolutions = [kind for kind in kinds if axes.row("attention", kind).conv_only]  # no state matrix (LFM2)
    kinds = [kind for kind in kinds if kind not in convolutions]
    described = {"convolution layers": f"{axes.label('attention', convolutions[0])}: {cfg.d_model} channels, each "
                 f"mixing its last {cfg.linear_conv_size} inputs; no attention weights"} if convolutions else {}
    if not kinds:
        return described
    text = ", ".join(axes.label("attention", kind) for kind in kinds)
    text += (f": {cfg.state_heads} value heads, each a {cfg.state_d_k} x {cfg.state_d_v} state, read by "
             f"{cfg.state_key_heads} q/k heads")
    rows = [axes.row("attention", kind) for kind in kinds]
    if any(row.channel_decay for row in rows):
        text += f"; a decay per key channel ({cfg.state_d_k} per head)"
    if any(row.short_conv for row in rows):
        text += f"; short convolution of {cfg.linear_conv_size} tokens"
    if any(row.delta_rule for row in rows):
        text += f"; β up to {cfg.delta_beta_max:g}"
    if cfg.linear_lightning:
        text += "; lightning's form (SiLU on q, k, v, q unscaled, decay by depth, one norm over all heads)"
    if cfg.linear_sigmoid_gate:
        text += "; read gated by sigmoid(x W_g)"
    if cfg.read_norm_eps != cfg.norm_eps:
        text += f"; read norm eps = {cfg.read_norm_eps:g}"
    return described | {"linear layers": text}


def describe_plan(cfg: TransformerConfig) -> dict[str, str]:
    """{"layers": ...}: which layers do what, in Hugging Face's layer_types words, where layers differ, e.g.
    "layers 0-2: sliding_attention of 4 keys, RoPE theta 10000; layer 3: full_attention, no positions (NoPE)", or
    "layers 0-2: linear_attention (Gated DeltaNet); layer 3: full_attention, RoPE theta 10000"."""
    nope = parse_nope_layers(cfg.nope_layers, cfg.n_layers)
    plan = cfg.layer_plan()
    placements = {spec.norm_position for spec in plan}
    groups: dict[str, list[int]] = {}
    for spec in plan:
        text = spec.hf_layer_type + (f" of {spec.window} keys" if spec.window is not None else "")
        if spec.chunk is not None:
            text += f" in chunks of {spec.chunk} tokens"
        if spec.compress_rate:  # DeepSeek-V4: pooled blocks beside the window
            text += f" and blocks of {spec.compress_rate}"
        if spec.selects_keys:
            text += f" keeping the top {spec.index_top_k} {'blocks' if spec.compresses else 'keys'}"
        if spec.row.keeps_state:
            text += f" ({spec.row.label})"
        if spec.index in nope:
            text += ", no positions (NoPE)"
        elif spec.rotates:
            text += f", RoPE theta {spec.rope_theta:g}"
            if axes.row("rope_scaling", spec.rope_scaling).rescales:
                text += f", {_rope_change(cfg, spec.rope_scaling)}"
        if spec.reuses_kv:  # Gemma 4: computes q alone
            text += f", reads the K and V of layer {spec.kv_from}"
        if len(placements) > 1:  # OLMo hybrid: norms before the sublayers on some layers, after them on others
            text += f", norms {spec.placement.label}"
        groups.setdefault(text, []).append(spec.index)
    if len(groups) == 1:
        return {}
    return {"layers": "; ".join(f"{_layers(indices)}: {text}" for text, indices in groups.items())}


def _interleaved(cfg: TransformerConfig) -> str:
    """", routed on layers 1, 3 (the others dense)" where dense layers sit between the routed ones (moe_layers),
    not only before them (first_dense_layers); else nothing."""
    routed = [spec.index for spec in cfg.layer_plan() if spec.routed]
    return "" if routed[0] + len(routed) == cfg.n_layers else f", routed on {_layers(routed)} (the others dense)"


def _layers(indices: list[int]) -> str:
    """ "layer 3", "layers 3, 7" or "layers 0-2, 4-6": runs of three or more written as a span."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    parts = [f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs]
    return ("layer " if len(indices) == 1 else "layers ") + ", ".join(parts)


# --- loading from disk or the local cache -----------------------------------------------

DEFAULT_CLASS = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                 "mixtral": "MixtralForCausalLM", "bloom": "BloomForCausalLM", "falcon": "FalconForCausalLM",
                 "bert": "BertForMaskedLM", **DEFAULT_BERT_RELATIVE_CLASS, **DEFAULT_BART_CLASS, **DEFAULT_MODERN_CLASS,
                 **DEFAULT_HYBRID_CLASS, **DEFAULT_LFM2_CLASS,
                 **DEFAULT_MINIMAX_CLASS, **DEFAULT_LLAMA4_CLASS, **DEFAULT_GEMMA4_CLASS,
                 **DEFAULT_KIMI_CLASS, **DEFAULT_DSA_CLASS, **DEFAULT_V4_CLASS, **DEFAULT_T5_CLASS}  # model_type -> class, for a config naming none


def _transformers():
    try:
        import transformers
    except ImportError as e:  # optional dependency
        raise ImportError("loading a Hugging Face model needs the `transformers` package: pip install transformers") from e
    return transformers


def _load_local_config(path_or_id):
    try:
        return _transformers().AutoConfig.from_pretrained(path_or_id, local_files_only=True, trust_remote_code=False)
    except OSError as e:  # no such directory, and not in the cache
        raise ValueError(f"no Hugging Face model found at {path_or_id!r} on disk or in the local cache "
                         "(nothing is downloaded): pass a directory written by save_pretrained, "
                         "a cached model id, or a model instance") from e


def _architecture(hf_config, path_or_id) -> str:
    named = (getattr(hf_config, "architectures", None) or [None])[0]
    hf_class = named or DEFAULT_CLASS.get(hf_config.model_type)
    if hf_class is None:
        raise ValueError(f"{path_or_id!r} holds a {hf_config.model_type!r} model, which is not supported; "
                         f"supported Hugging Face classes: {', '.join(SUPPORTED_CLASSES)}")
    return hf_class


def _load_local(path_or_id):
    hf_config = _load_local_config(path_or_id)
    hf_class = _architecture(hf_config, path_or_id)
    _family_of(hf_class)  # refuse before loading any weights
    model_class = getattr(_transformers(), hf_class)
    model = model_class.from_pretrained(path_or_id, local_files_only=True, trust_remote_code=False)
    return model.to(torch.float32).eval()
