"""Memory, from a model's dimensions alone: training's and generation's, and the attention matrices' against tiles.

    memory_bytes(cfg, context, batch)         weights, gradients, optimiser state, activations, KV cache
    full_attention_bytes(B, H, T, dtype_bytes, T_kv=None)   the five lines' T x T scores and weights
    tiled_attention_bytes(B, H, T, block_q, block_k, d_head, acc_bytes=4)   flash attention's running state
"""
from __future__ import annotations

from ..config import TransformerConfig
from ..hooks import attention_stacks
from .cache import kv_cache_bytes
from .params import param_counts

# bytes per parameter in mixed-precision training with Adam (Rajbhandari et al. 2020, "ZeRO", section 3.1):
# 16-bit weights and 16-bit gradients, and in float32 a master copy of the weights and Adam's two moments
TRAINING_BYTES_PER_PARAM = {"weights": 2, "gradients": 2, "optimizer": 4 + 4 + 4}
ACTIVATION_BYTES_PER_LAYER = 34  # x seq x batch x d_model, 16-bit, no recomputation (Korthikanti et al. 2022)
ATTENTION_MATRIX_BYTES = 5  # x heads x seq^2 x batch: scores, softmax and dropout mask, per layer (same paper)


def memory_bytes(cfg: TransformerConfig, context: int, batch: int = 1, fused_attention: bool = True
                 ) -> dict[str, int]:
    """Bytes of memory, by what holds them, for a batch of sequences `context` tokens long.

    Training (mixed precision, Adam): weights, gradients and optimiser state, 16 bytes per parameter
    in all (TRAINING_BYTES_PER_PARAM), plus the activations the backward pass needs, per layer
    s·b·D·(34 + 5·H·s/D) bytes in Korthikanti et al.'s count for a GPT block (2022, "Reducing
    Activation Recomputation in Large Transformer Models", eq. 1); a fused attention kernel keeps no
    s x s matrix, which drops the 5·H·s/D term (fused_attention=True, the library's default path).
    Generation: 16-bit weights and the KV cache of `context` tokens per sequence (``kv_cache_bytes``: local
    layers hold only their window).
    """
    if context < 1 or batch < 1:
        raise ValueError(f"context={context} and batch={batch} must both be at least 1")
    n_params = param_counts(cfg)["total"]
    tokens = context * batch
    attention_matrices = 0 if fused_attention else ATTENTION_MATRIX_BYTES * cfg.n_heads * context * tokens
    per_layer = ACTIVATION_BYTES_PER_LAYER * tokens * cfg.d_model + attention_matrices
    return {**{part: n * n_params for part, n in TRAINING_BYTES_PER_PARAM.items()},
            "activations": cfg.n_layers * len(attention_stacks(cfg.arch).self_attention) * per_layer,  # every block
            "kv_cache": kv_cache_bytes(cfg, context)["total"] * batch}


def training_bytes(memory: dict[str, int]) -> int:
    """What training holds: everything ``memory_bytes`` counts except the KV cache."""
    return sum(n for part, n in memory.items() if part != "kv_cache")


def generation_bytes(memory: dict[str, int]) -> int:
    """What generation holds: the 16-bit weights and the KV cache."""
    return memory["weights"] + memory["kv_cache"]


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
