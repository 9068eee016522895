"""What a model costs, from its dimensions alone (no model is built): parameters, KV-cache bytes,
FLOPs and the memory attention holds.

    param_counts(cfg) -> {"total", "active", "embedding", "attention", "ffn", "head"}
    kv_cache_bytes_per_token(cfg, bytes_per_value=2)
    forward_flops_per_token(cfg, context)     one token attending to `context` keys
    forward_flops(cfg, batch, seq)            one whole forward pass, as torch's FLOP counter counts it
    full_attention_bytes(B, H, T, dtype_bytes, T_kv=None)   the five lines' T x T scores and weights
    tiled_attention_bytes(B, H, T, block_q, block_k, d_head, acc_bytes=4)   flash attention's running state
"""
from __future__ import annotations

from .config import TransformerConfig
from .hooks import attention_stacks

# --- parameters and KV cache ------------------------------------------------------


def param_counts(cfg: TransformerConfig) -> dict[str, int]:
    """Parameters by part, computed from the dimensions alone (no model is built).

    'total' counts every weight; 'active' the ones one token uses (MoE: top_k of the experts).
    """
    d, f, V, L = cfg.d_model, cfg.d_ff, cfg.vocab_size, cfg.n_layers
    b = 1 if cfg.bias else 0
    norm = 2 * d if cfg.norm == "layernorm" else d
    q_out, kv_out = cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head
    attention = d * q_out + 2 * d * kv_out + q_out * d + b * (q_out + 2 * kv_out + d)
    swiglu = 3 * d * f + b * (2 * f + d)
    expert, n_active_experts = swiglu, 1
    if cfg.ffn in ("relu", "gelu"):
        ffn = 2 * d * f + b * (f + d)
    elif cfg.ffn == "swiglu":
        ffn = swiglu
    else:
        ffn, n_active_experts = cfg.n_experts * expert + d * cfg.n_experts, cfg.top_k
    norms_per_block = 1 if cfg.parallel_block else 2
    n_stacks = 2 if cfg.arch == "encoder-decoder" else 1
    cross = (attention + norm) * L if cfg.arch == "encoder-decoder" else 0  # decoder blocks only

    embedding = V * d
    positions = n_stacks * cfg.max_len * d if cfg.position == "learned" else 0
    stack_extra = n_stacks * ((2 * d if cfg.embed_norm else 0) + (norm if cfg.has_final_norm else 0))
    blocks = n_stacks * L * (attention + ffn + norms_per_block * norm) + cross
    head = (0 if cfg.tie_embeddings else V * d) + (V if cfg.head_bias else 0) + ((d * d + d + 2 * d) if cfg.head_transform else 0)
    total = embedding + positions + stack_extra + blocks + head
    inactive = n_stacks * L * (cfg.n_experts - n_active_experts) * expert if cfg.ffn == "moe" else 0
    return {
        "total": total, "active": total - inactive, "embedding": embedding + positions,
        "attention": n_stacks * L * attention + (attention * L if cfg.arch == "encoder-decoder" else 0),
        "ffn": n_stacks * L * ffn, "head": head,
    }


def kv_cache_bytes_per_token(cfg: TransformerConfig, bytes_per_value: int = 2) -> int:
    """Bytes the KV cache grows by per token: K and V, every layer, G kv heads of d_head (fp16 by default)."""
    n_self_attention_layers = cfg.n_layers  # the decoder's layers in an encoder-decoder
    return 2 * n_self_attention_layers * cfg.n_kv_heads * cfg.d_head * bytes_per_value


# --- FLOPs ------------------------------------------------------------------------


def attention_layers(cfg: TransformerConfig) -> int:
    """How many attention sublayers a token passes: self-attention in every block, plus the
    decoder's cross-attention in an encoder-decoder (whose encoder is a second stack)."""
    stacks = attention_stacks(cfg.arch)
    return cfg.n_layers * (len(stacks.self_attention) + len(stacks.cross_attention))


def forward_flops_per_token(cfg: TransformerConfig, context: int) -> int:
    """Forward-pass FLOPs for one token that attends to `context` keys.

        2 x (parameters the token multiplies by)  +  4 x (keys seen) x d_attn per attention layer

    A multiply-add is 2 FLOPs, so every weight a token goes through costs 2 (MoE: only the
    top-k experts count). Embedding tables are read, not multiplied, so they are left out,
    except that a tied output head still multiplies by the embedding matrix. Attention adds
    two matrix products that grow with the context: q @ K^T and weights @ V, each
    2 x keys x d_attn (d_attn = n_heads x d_head); a sliding window caps the keys at W.
    For an encoder-decoder this is one source token through the encoder plus one target
    token through the decoder (its cross-attention reads `context` encoder outputs).
    """
    if context < 1:
        raise ValueError(f"context={context} must be at least 1 (a token always sees itself)")
    counts = param_counts(cfg)
    tied_head = cfg.vocab_size * cfg.d_model if cfg.tie_embeddings else 0
    multiplied = counts["active"] - counts["embedding"] + tied_head
    keys_seen = min(context, cfg.sliding_window) if cfg.sliding_window else context
    d_attn = cfg.n_heads * cfg.d_head
    return 2 * multiplied + attention_layers(cfg) * 2 * 2 * keys_seen * d_attn


FFN_MATRICES = {"relu": 2, "gelu": 2, "swiglu": 3}  # weight matrices in one FFN


def forward_flops(cfg: TransformerConfig, batch: int, seq: int) -> int:
    """FLOPs of one forward pass, counted analytically.

    2 x (weights in matrix multiplies) x tokens   -- each weight is one multiply and one add per token
    + 4 x T^2 x d_model per layer                  -- Q K^T and weights @ V, 2 T^2 d_head per head each
    The attention term counts the full T x T square, causal or not (the usual convention).
    Norms, activations, softmax and the embedding lookup are left out.
    """
    if cfg.ffn not in FFN_MATRICES:
        raise ValueError(f"forward_flops counts ffn in {sorted(FFN_MATRICES)}, not {cfg.ffn!r}")
    d, kv_width = cfg.d_model, cfg.n_kv_heads * cfg.d_head
    attention = 2 * d * d + 2 * d * kv_width  # W_q and W_o, W_k and W_v
    ffn = FFN_MATRICES[cfg.ffn] * d * cfg.d_ff
    matmul_weights = cfg.n_layers * (attention + ffn) + d * cfg.vocab_size  # + the unembedding
    return 2 * matmul_weights * batch * seq + cfg.n_layers * 4 * batch * seq**2 * d


# --- attention memory -------------------------------------------------------------


def full_attention_bytes(B: int, H: int, T: int, dtype_bytes: int, T_kv: int | None = None) -> int:
    """Bytes of the (T, T_kv) scores and the (T, T_kv) softmax weights the five lines hold, for all heads.

    2 * B * H * T * T_kv * dtype_bytes: it grows with the square of the sequence length
    (T_kv defaults to T). Queries, keys, values and the output are left out: every method needs them.
    """
    T_kv = T if T_kv is None else T_kv
    return 2 * B * H * T * T_kv * dtype_bytes


def tiled_attention_bytes(B: int, H: int, T: int, block_q: int, block_k: int, d_head: int, acc_bytes: int = 4) -> int:
    """Bytes tiled attention holds beyond the inputs and the output: linear in T, plus one tile.

    - 2 * B * H * T: the running max m and sum l of every query row. Flash kernels keep
      them (as the log-sum-exp m + log l) for the backward pass, so they count for all T rows;
    - 2 * B * H * block_q * block_k: one tile's scores S and probabilities exp(S - m);
    - B * H * block_q * d_head: the output accumulator of the query block in flight.
    Everything is float32 (acc_bytes = 4) whatever the input dtype, as flash kernels accumulate.
    """
    stats = 2 * B * H * T
    tile = 2 * B * H * block_q * block_k
    accumulator = B * H * block_q * d_head
    return (stats + tile + accumulator) * acc_bytes
