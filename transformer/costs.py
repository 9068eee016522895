"""What a model costs, from its dimensions alone (no model is built): parameters term by term, FLOPs,
and the memory of training and of generation.

    param_terms(cfg) -> [ParamTerm]          every weight matrix, bias and norm, with its formula
    param_counts(cfg) -> {"total", "active", "embedding", "attention", "ffn", "norms", "head"}
    kv_cache_bytes_per_token(cfg, bytes_per_value=2)
    forward_flops_per_token(cfg, context)     one token attending to `context` keys
    training_flops_per_token(cfg, context)    forward + backward: 3x the forward
    training_flops(n_params, n_tokens)        6 N D, the budget of a whole training run
    forward_flops(cfg, batch, seq)            one whole forward pass, as torch's FLOP counter counts it
    memory_bytes(cfg, context, batch)         weights, gradients, optimiser state, activations, KV cache
    full_attention_bytes(B, H, T, dtype_bytes, T_kv=None)   the five lines' T x T scores and weights
    tiled_attention_bytes(B, H, T, block_q, block_k, d_head, acc_bytes=4)   flash attention's running state
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from . import masks
from .config import TransformerConfig
from .hooks import attention_stacks

# --- parameters, term by term ------------------------------------------------------

# the letters the formulas are written in
SYMBOLS = {"V": "vocabulary size", "D": "d_model", "L": "layers", "H": "query heads", "G": "kv heads",
           "d_h": "d_head = D / H", "F": "d_ff (the FFN's hidden width)", "E": "experts", "k": "experts per token",
           "P": "max_len (positions in the learned table)"}
PARTS = ("embedding", "attention", "ffn", "norms", "head")


@dataclass(frozen=True)
class ParamTerm:
    """One kind of weight: its formula for one copy, how many copies the model holds, and where they live."""

    part: str  # one of PARTS
    name: str  # e.g. "W_q"
    formula: str  # parameters of one copy, in the letters of SYMBOLS
    per_copy: int
    copies: int  # 1, or one per block (x 2 stacks in an encoder-decoder)
    where: tuple[str, ...]  # the model's parameter names that hold it (fnmatch patterns)
    active_per_copy: int | None = None  # MoE experts: the parameters of the top-k experts one token uses

    @property
    def count(self) -> int:
        return self.per_copy * self.copies

    @property
    def active(self) -> int:
        return (self.per_copy if self.active_per_copy is None else self.active_per_copy) * self.copies


def _with_bias(formula: str, bias: str, has_bias: bool) -> str:
    return f"{formula} + {bias}" if has_bias else formula


def param_terms(cfg: TransformerConfig) -> list[ParamTerm]:
    """Every parameter of ``Transformer(cfg)``, grouped into terms with their formulas.

    The terms add up to the built model's parameter count (tied weights once), and each term's
    ``where`` names exactly the parameters it counts, so a test can hold every formula against the
    live model.
    """
    d, V, L = cfg.d_model, cfg.vocab_size, cfg.n_layers
    b = 1 if cfg.bias else 0
    q_out, kv_out = cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head
    n_stacks = 2 if cfg.arch == "encoder-decoder" else 1
    blocks = n_stacks * L
    layernorm = cfg.norm == "layernorm"
    norm, norm_formula = (2 * d, "2·D") if layernorm else (d, "D")  # LayerNorm: a scale and a shift per dimension
    block = "*blocks.*."
    terms = [ParamTerm("embedding", "token embedding", "V·D", V * d, 1, ("embed.weight",))]
    if cfg.position == "learned":
        terms.append(ParamTerm("embedding", "position table", "P·D", cfg.max_len * d, n_stacks,
                               ("*pos.table.weight",)))
    if cfg.embed_norm:
        terms.append(ParamTerm("norms", "embedding LayerNorm", "2·D", 2 * d, n_stacks, ("*ln_embed.*",)))
    terms += [
        ParamTerm("attention", "W_q", _with_bias("D·H·d_h", "H·d_h", b), d * q_out + b * q_out, blocks,
                  (block + "attn.q_proj.*",)),
        ParamTerm("attention", "W_k and W_v", _with_bias("2·D·G·d_h", "2·G·d_h", b), 2 * (d * kv_out + b * kv_out),
                  blocks, (block + "attn.k_proj.*", block + "attn.v_proj.*")),
        ParamTerm("attention", "W_o", _with_bias("H·d_h·D", "D", b), q_out * d + b * d, blocks,
                  (block + "attn.o_proj.*",)),
    ]
    if cfg.arch == "encoder-decoder":  # the decoder's blocks read the encoder through a second attention
        cross = d * q_out + 2 * d * kv_out + q_out * d + b * (q_out + 2 * kv_out + d)
        terms.append(ParamTerm("attention", "cross-attention W_q, W_k, W_v, W_o",
                               _with_bias("2·D·H·d_h + 2·D·G·d_h", "H·d_h + 2·G·d_h + D", b), cross, L,
                               ("*blocks.*.cross_attn.*",)))
    norms_per_block = 1 if cfg.parallel_block else 2
    terms.append(ParamTerm("norms", "block norms", f"{norms_per_block}·{norm_formula}" if norms_per_block > 1
                           else norm_formula, norms_per_block * norm, blocks, (block + "ln1.*", block + "ln2.*")))
    if cfg.arch == "encoder-decoder":
        terms.append(ParamTerm("norms", "cross-attention norm", norm_formula, norm, L, (block + "ln_cross.*",)))
    terms += _ffn_terms(cfg, blocks, b)
    if cfg.has_final_norm:
        terms.append(ParamTerm("norms", "final norm", norm_formula, norm, n_stacks, ("*ln_final.*",)))
    if cfg.head_transform:  # BERT's masked-LM head: dense -> GELU -> LayerNorm before the unembedding
        terms.append(ParamTerm("head", "head transform", "D·D + D + 2·D", d * d + 3 * d, 1,
                               ("head_dense.*", "head_norm.*")))
    if not cfg.tie_embeddings:
        terms.append(ParamTerm("head", "unembedding W_U", "D·V", d * V, 1, ("unembed.weight",)))
    if cfg.head_bias:
        terms.append(ParamTerm("head", "output bias", "V", V, 1, ("unembed.bias",)))
    return terms


def _ffn_terms(cfg: TransformerConfig, blocks: int, b: int) -> list[ParamTerm]:
    d, f, E = cfg.d_model, cfg.d_ff, cfg.n_experts
    mlp = "*blocks.*.mlp."
    if cfg.ffn in ("relu", "gelu"):
        return [ParamTerm("ffn", "W_up", _with_bias("D·F", "F", b), d * f + b * f, blocks, (mlp + "up.*",)),
                ParamTerm("ffn", "W_down", _with_bias("F·D", "D", b), f * d + b * d, blocks, (mlp + "down.*",))]
    swiglu = 3 * d * f + b * (2 * f + d)
    swiglu_formula = _with_bias("3·D·F", "2·F + D", b)
    if cfg.ffn == "swiglu":
        return [ParamTerm("ffn", "W_gate, W_up and W_down (SwiGLU)", swiglu_formula, swiglu, blocks,
                          (mlp + "gate.*", mlp + "up.*", mlp + "down.*"))]
    return [ParamTerm("ffn", "router", "D·E", d * E, blocks, (mlp + "router.*",)),
            ParamTerm("ffn", "experts (each a SwiGLU)", f"E·({swiglu_formula})", E * swiglu, blocks,
                      (mlp + "experts.*",), active_per_copy=cfg.top_k * swiglu)]


def param_counts(cfg: TransformerConfig) -> dict[str, int]:
    """Parameters by part, the sums of ``param_terms`` (no model is built).

    'total' counts every weight; 'active' the ones one token uses (MoE: top_k of the experts).
    """
    terms = param_terms(cfg)
    return {"total": sum(t.count for t in terms), "active": sum(t.active for t in terms),
            **{part: sum(t.count for t in terms if t.part == part) for part in PARTS}}


# --- KV cache ---------------------------------------------------------------------


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
    2 x keys x d_attn (d_attn = n_heads x d_head); a sliding window caps the keys at W, a
    sparse pattern at the keys it allows (``keys_seen``).
    For an encoder-decoder this is one source token through the encoder plus one target
    token through the decoder (its cross-attention reads `context` encoder outputs).
    """
    counts = param_counts(cfg)
    tied_head = cfg.vocab_size * cfg.d_model if cfg.tie_embeddings else 0
    multiplied = counts["active"] - counts["embedding"] + tied_head
    d_attn = cfg.n_heads * cfg.d_head
    return 2 * multiplied + attention_layers(cfg) * 2 * 2 * keys_seen(cfg, context) * d_attn


def keys_seen(cfg: TransformerConfig, context: int) -> int:
    """How many keys the token at position context - 1 attends to: all of them, at most W with a sliding
    window, and with a sparse pattern the ones its causal form allows (counted from the mask itself)."""
    if context < 1:
        raise ValueError(f"context={context} must be at least 1 (a token always sees itself)")
    if cfg.attention_pattern == "dense":
        return min(context, cfg.sliding_window) if cfg.sliding_window else context
    last = torch.tensor([context - 1])
    allowed = masks.sparse(cfg.attention_pattern, last, torch.arange(context), cfg.pattern_size, True, cfg.n_global)
    return int(allowed.sum())


BACKWARD_PER_FORWARD = 2  # the backward pass multiplies by every weight twice: once for the input's gradient,
# once for the weight's (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1)


def training_flops_per_token(cfg: TransformerConfig, context: int) -> int:
    """FLOPs to train on one token: its forward pass and the backward pass, twice the forward's cost."""
    return (1 + BACKWARD_PER_FORWARD) * forward_flops_per_token(cfg, context)


def training_flops(n_params: float, n_tokens: float) -> float:
    """C = 6 N D: the FLOPs of training N parameters on D tokens, attention's share left out (2 N per token
    forward, twice that backward). GPT-3: 6 x 175e9 x 300e9 = 3.15e23, its published 3.14e23 FLOPs."""
    if n_params <= 0 or n_tokens <= 0:
        raise ValueError(f"parameters ({n_params:g}) and tokens ({n_tokens:g}) must both be positive")
    return 2 * (1 + BACKWARD_PER_FORWARD) * n_params * n_tokens


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


# --- memory -----------------------------------------------------------------------

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
    Generation: 16-bit weights and the KV cache of `context` tokens per sequence.
    """
    if context < 1 or batch < 1:
        raise ValueError(f"context={context} and batch={batch} must both be at least 1")
    n_params = param_counts(cfg)["total"]
    tokens = context * batch
    attention_matrices = 0 if fused_attention else ATTENTION_MATRIX_BYTES * cfg.n_heads * context * tokens
    per_layer = ACTIVATION_BYTES_PER_LAYER * tokens * cfg.d_model + attention_matrices
    return {**{part: n * n_params for part, n in TRAINING_BYTES_PER_PARAM.items()},
            "activations": cfg.n_layers * len(attention_stacks(cfg.arch).self_attention) * per_layer,  # every block
            "kv_cache": kv_cache_bytes_per_token(cfg) * tokens}


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
