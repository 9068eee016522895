"""What a model costs, from its dimensions alone (no model is built): parameters term by term, FLOPs,
and the memory of training and of generation. One module per job, each importing only those above it here:

    params.py   parameters term by term
        param_terms(cfg) -> [ParamTerm]          every weight matrix, bias and norm, with its formula
        param_counts(cfg) -> {"total", "active", "embedding", "attention", "ffn", "norms", "head"}
        multiplied_params(cfg)                    the active parameters a token multiplies by (no embedding lookup)
        matmul_weights_per_token(cfg)             the weights in the matrix products one token goes through
    cache.py    the KV cache, and the constant state of the layers that keep one
        kv_cache_bytes_per_token(cfg, bytes_per_value=2, context=None)   growth per token, or the average at a context
        kv_cache_bytes(cfg, context, bytes_per_value=2, state_bytes_per_value=None)   a cache of `context` tokens:
                                                  global, local and state layers, by tensor and by layer
    flops.py    FLOPs (reads params)
        forward_flops_per_token(cfg, context)     one token attending to `context` keys (each layer its own keys)
        keys_seen_by_layer(cfg, context)          the keys the last token sees in each layer
        training_flops_per_token(cfg, context)    forward + backward: 3x the forward
        training_flops(n_params, n_tokens)        6 N D, the budget of a whole training run
        forward_flops(cfg, batch, seq)            one whole forward pass, as torch's FLOP counter counts it
    memory.py   memory (reads params and cache)
        memory_bytes(cfg, context, batch)         weights, gradients, optimiser state, activations, KV cache
        full_attention_bytes(B, H, T, dtype_bytes, T_kv=None)   the five lines' T x T scores and weights
        tiled_attention_bytes(B, H, T, block_q, block_k, d_head, acc_bytes=4)   flash attention's running state
    paging.py   what a batch of requests reserves under each KV-cache layout
        reserved_tokens(layout, lengths, max_length, block_size)   token slots per request: contiguous or paged

Every public name is here too: ``transformer.costs.param_counts`` is ``transformer.costs.params.param_counts``.
"""
from __future__ import annotations

from .cache import every_token_bytes, kv_cache_bytes, kv_cache_bytes_per_token
from .flops import (BACKWARD_PER_FORWARD, forward_flops, forward_flops_per_token, keys_seen, keys_seen_by_layer,
                    training_flops, training_flops_per_token)
from .memory import (ACTIVATION_BYTES_PER_LAYER, ATTENTION_MATRIX_BYTES, TRAINING_BYTES_PER_PARAM,
                     full_attention_bytes, generation_bytes, memory_bytes, tiled_attention_bytes, training_bytes)
from .paging import RESERVATIONS, reserved_tokens
from .params import (PARTS, SYMBOLS, ParamTerm, matmul_weights_per_token, multiplied_params, param_counts,
                     param_terms)

__all__ = [
    "SYMBOLS", "PARTS", "ParamTerm", "param_terms", "param_counts", "multiplied_params", "matmul_weights_per_token",
    "kv_cache_bytes", "kv_cache_bytes_per_token", "every_token_bytes",
    "forward_flops_per_token", "keys_seen_by_layer", "keys_seen", "BACKWARD_PER_FORWARD", "training_flops_per_token",
    "training_flops", "forward_flops",
    "TRAINING_BYTES_PER_PARAM", "ACTIVATION_BYTES_PER_LAYER", "ATTENTION_MATRIX_BYTES", "memory_bytes",
    "training_bytes", "generation_bytes", "full_attention_bytes", "tiled_attention_bytes",
    "RESERVATIONS", "reserved_tokens",
]
