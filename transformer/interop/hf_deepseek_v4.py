"""DeepSeek-V4 (DeepseekV4ForCausalLM): compressed attention beside a sliding window, hyper-connections, and a MoE
whose first layers route by a table of token ids.

Its ``layer_types`` are our plan's ``compress_layers``: "sliding_attention" -> "window", "compressed_sparse_attention"
-> "indexed 4" (blocks of 4, chosen by an indexer), "heavily_compressed_attention" -> "pooled 128"
(transformer/compressed_attention.py). Its ``hc_mult`` streams are our ``hyper_streams``
(transformer/hyper_connections.py); its ``mlp_layer_types`` "hash_moe" layers, which must come first, are our
``hash_layers``. RoPE turns the last qk_rope_head_dim dimensions of every head in interleaved pairs; ours turns the
first ones as halves, so every row that feeds a head (q, the K = V head, the pooled blocks, the indexer's q and keys)
is reordered on loading, and the output projection's columns with them, since the values carry the same order.
"""
from __future__ import annotations

import torch

from .family import Family, unsupported
from .weights import Weights, norm_weights

# HF's layer type -> our compress_layers entry, given the config's rates
LAYER_ENTRIES = {"sliding_attention": lambda rates: "window",
                 "compressed_sparse_attention": lambda rates: f"indexed {rates['compressed_sparse_attention']}",
                 "heavily_compressed_attention": lambda rates: f"pooled {rates['heavily_compressed_attention']}"}
SCORES = {"sqrtsoftplus": "sqrt-softplus", "sigmoid": "sigmoid"}  # HF scoring_func -> our router


def _v4_config(c, hf_class: str, has_head: bool) -> dict:
    if c.scoring_func not in SCORES:
        raise unsupported(hf_class, f"scoring_func={c.scoring_func!r}", f"the routers here are {', '.join(SCORES)} "
                          "with a bias for choosing (a softmax router has none)")
    if c.hidden_act != "silu" or c.attention_bias or c.mlp_bias:
        raise unsupported(hf_class, f"hidden_act={c.hidden_act!r}, attention_bias={c.attention_bias}, mlp_bias="
                          f"{c.mlp_bias}", "DeepSeek-V4's experts are SiLU-gated, without biases")
    if c.num_key_value_heads != 1:
        raise unsupported(hf_class, f"num_key_value_heads={c.num_key_value_heads}", "one head is key and value")
    if c.n_shared_experts != 1:
        raise unsupported(hf_class, f"n_shared_experts={c.n_shared_experts}", "the model builds one shared expert "
                          "of moe_intermediate_size whatever the count")
    if c.hc_mult < 2:
        raise unsupported(hf_class, f"hc_mult={c.hc_mult}", "one stream here is the ordinary residual, without the "
                          "weights DeepSeek-V4 still puts on it")
    for label, params in c.rope_parameters.items():
        if params.get("rope_type", "default") != "default":
            raise unsupported(hf_class, f"rope_type={params['rope_type']!r} on the {label!r} layers",
                              "DeepSeek-V4's RoPE is mapped without scaling (its YaRN is not built)")
    hashed = [kind == "hash_moe" for kind in c.mlp_layer_types]
    hash_layers = sum(hashed)
    if any(hashed[hash_layers:]) or not all(hashed[:hash_layers]):
        raise unsupported(hf_class, f"mlp_layer_types {c.mlp_layer_types}", "the hash-routed layers come first")
    entries = [LAYER_ENTRIES[kind](c.compress_rates) for kind in c.layer_types]
    indexed = "compressed_sparse_attention" in c.layer_types
    head = c.head_dim
    fields = dict(vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.num_attention_heads, n_kv_heads=1,
                  n_layers=c.num_hidden_layers, head_dim=head, rope_dim=int(head * c.partial_rotary_factor),
                  q_rank=c.q_lora_rank, max_len=c.max_position_embeddings, position="rope", norm="rmsnorm",
                  norm_eps=c.rms_norm_eps, rope_theta=float(c.rope_parameters["main"]["rope_theta"]),
                  compress_rope_theta=float(c.rope_parameters["compress"]["rope_theta"]),
                  sliding_window=c.sliding_window, sinks=True, compress_layers=", ".join(entries),
                  o_groups=c.o_groups, o_rank=c.o_lora_rank, hyper_streams=c.hc_mult,
                  hyper_sinkhorn_iters=c.hc_sinkhorn_iters, hyper_eps=c.hc_eps,
                  ffn="moe", n_experts=c.n_routed_experts, top_k=c.num_experts_per_tok,
                  d_ff=c.moe_intermediate_size, d_expert=c.moe_intermediate_size, n_shared_experts=1,
                  router=SCORES[c.scoring_func], router_norm=True, routed_scale=float(c.routed_scaling_factor),
                  expert_activation="limited-swiglu", expert_limit=float(c.swiglu_limit), hash_layers=hash_layers)
    if indexed:  # HF keeps min(index_topk, blocks so far); ours refuses a k past the longest context
        fields |= dict(index_top_k=min(c.index_topk, c.max_position_embeddings), index_heads=c.index_n_heads,
                       index_head_dim=c.index_head_dim)
    return fields


def rope_order(width: int, d_rope: int) -> torch.Tensor:
    """Our row r of a head `width` wide takes HF's row order[r]: HF's [rest | rope pairs (2j, 2j+1)] becomes our
    [rope halves: the pairs' first members, then their second members | rest]."""
    start = width - d_rope
    firsts = torch.arange(start, width, 2)  # (d_rope/2,)
    return torch.cat((firsts, firsts + 1, torch.arange(start)))  # (width,)


def _pool_weights(ours: str, pool, width: int, d_rope: int, series: int) -> Weights:
    """A block pool (the compressor, or the indexer's): its rows run series by series, each `width` wide."""
    order = torch.cat([rope_order(width, d_rope) + s * width for s in range(series)])
    return {ours + "pool_proj.weight": pool.kv_proj.weight[order], ours + "gate_proj.weight": pool.gate_proj.weight[order],
            ours + "position_bias": pool.position_bias[:, order], ours + "norm.weight": pool.kv_norm.weight[order[:width]]}


def _attention_weights(ours: str, a, cfg) -> Weights:
    H, d, r = cfg.n_heads, cfg.d_head, cfg.d_rope
    order = rope_order(d, r)
    w = {ours + "q_down.weight": a.q_a_proj.weight, ours + "q_up.weight": a.q_b_proj.weight.view(H, d, -1)[:, order]
         .reshape(H * d, -1), ours + "kv_proj.weight": a.kv_proj.weight[order], ours + "sinks": a.sinks,
         ours + "o_proj.weight": a.o_b_proj.weight}
    w |= norm_weights(ours + "q_down_norm", a.q_a_norm)
    w[ours + "kv_norm.weight"] = a.kv_norm.weight[order]
    per_group = H // cfg.o_groups
    columns = torch.cat([order + h * d for h in range(per_group)])  # a group's heads, each reordered
    w[ours + "o_group_proj"] = a.o_a_proj.weight.view(cfg.o_groups, cfg.o_rank, -1)[:, :, columns]
    compressor = a.compressor
    if compressor is None:
        return w
    indexer = getattr(compressor, "indexer", None)
    w |= _pool_weights(ours + "pool.", compressor, d, r, 2 if indexer is not None else 1)
    if indexer is not None:
        I, d_i = cfg.index_heads, cfg.index_head_dim
        b = ours + "block_indexer."
        w |= {b + "q_proj.weight": indexer.q_b_proj.weight.view(I, d_i, -1)[:, rope_order(d_i, r)].reshape(I * d_i, -1),
              b + "head_weights.weight": indexer.scorer.weights_proj.weight}
        w |= _pool_weights(b + "pool.", indexer, d_i, r, 2)
    return w


def _moe_weights(ours: str, mlp, cfg) -> Weights:
    w = {ours + "router.weight": mlp.gate.weight}
    bias = getattr(mlp.gate, "e_score_correction_bias", None)  # a hash layer's gate chooses by its table alone
    w[ours + "choice_bias"] = bias if bias is not None else torch.zeros(cfg.n_experts)
    if hasattr(mlp.gate, "tid2eid"):
        w[ours + "expert_table"] = mlp.gate.tid2eid.long()
    gate, up = mlp.experts.gate_up_proj.chunk(2, dim=1)  # (E, d_expert, D) each: [gate | up]
    for e in range(cfg.n_experts):
        for name, weight in (("gate", gate[e]), ("up", up[e]), ("down", mlp.experts.down_proj[e])):
            w[f"{ours}experts.{e}.{name}.weight"] = weight
    shared = mlp.shared_experts
    return w | {ours + "shared.gate.weight": shared.gate_proj.weight, ours + "shared.up.weight": shared.up_proj.weight,
                ours + "shared.down.weight": shared.down_proj.weight}


def _v4_weights(model, cfg) -> Weights:
    body = model.model
    w = {"embed.weight": body.embed_tokens.weight}
    for i, layer in enumerate(body.layers):
        p = f"blocks.{i}."
        w |= _attention_weights(p + "attn.", layer.self_attn, cfg) | _moe_weights(p + "mlp.", layer.mlp, cfg)
        w |= norm_weights(p + "ln1", layer.input_layernorm) | norm_weights(p + "ln2", layer.post_attention_layernorm)
        for ours, hc in (("attn_hyper.", layer.attn_hc), ("mlp_hyper.", layer.ffn_hc)):
            w |= {p + ours + "proj": hc.fn, p + ours + "bias": hc.base, p + ours + "scale": hc.scale}
    head = body.hc_head
    w |= {"hyper_head.proj": head.hc_fn, "hyper_head.bias": head.hc_base, "hyper_head.scale": head.hc_scale}
    return w | norm_weights("ln_final", body.norm)


V4_FAMILIES = {
    "deepseek_v4": Family("DeepSeek-V4", _v4_config, _v4_weights, (
        "layer_types -> compress_layers: sliding_attention 'window', compressed_sparse_attention 'indexed 4' (blocks "
        "of 4 with two overlapping series, an indexer keeping index_topk), heavily_compressed_attention 'pooled 128'",
        "one K = V head, queries from q_lora_rank through a weightless RMS per head; per-head sinks; the grouped "
        "output projection (o_groups, o_lora_rank); RoPE on the compressed layers with compress_rope_theta",
        "RoPE's interleaved pairs at the end of each head are reordered to our halves at the front, in every row "
        "that feeds a head and in the output projection's columns",
        "hc_mult -> hyper_streams (Sinkhorn iterations and eps alike); mlp_layer_types 'hash_moe' first -> "
        "hash_layers (tid2eid -> expert_table); sqrtsoftplus -> router 'sqrt-softplus'; swiglu_limit -> "
        "'limited-swiglu' experts, the shared expert too",
        "a YaRN RoPE, hash layers after a learned one, or a softmax router are refused by name")),
}

V4_CLASSES = {"DeepseekV4ForCausalLM": ("deepseek_v4", True)}

DEFAULT_V4_CLASS = {"deepseek_v4": "DeepseekV4ForCausalLM"}
