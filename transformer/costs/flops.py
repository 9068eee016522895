"""FLOPs, from a model's dimensions alone: per token forward and in training, a whole forward pass, a training run.

    forward_flops_per_token(cfg, context)     one token attending to `context` keys (each layer its own keys)
    keys_seen_by_layer(cfg, context)          the keys the last token sees in each layer
    training_flops_per_token(cfg, context)    forward + backward: 3x the forward
    training_flops(n_params, n_tokens)        6 N D, the budget of a whole training run
    forward_flops(cfg, batch, seq)            one whole forward pass, as torch's FLOP counter counts it
"""
from __future__ import annotations

import torch

from .. import masks
from ..config import TransformerConfig
from ..hooks import attention_stacks
from .params import matmul_weights_per_token, multiplied_params


def forward_flops_per_token(cfg: TransformerConfig, context: int) -> int:
    """Forward-pass FLOPs for one token that attends to `context` keys.

        2 x (parameters the token multiplies by)  +  2 x (keys seen) x H x (d_h + d_v) per attention layer

    A multiply-add is 2 FLOPs, so every weight a token goes through costs 2 (MoE: only the
    top-k experts count, with the router and any shared experts). Embedding tables are read, not
    multiplied, so they are left out, except that a tied output head still multiplies by the embedding
    matrix (``multiplied_params``). Attention adds two matrix products that grow with the context:
    q @ K^T, 2 x keys x H x d_h, and weights @ V, 2 x keys x H x d_v. Each layer sees its own keys
    (``keys_seen_by_layer``): a local layer at most its window W, a sparse pattern the keys it allows.
    MLA counts as it trains: each token's latent is expanded to its keys and values once (k_up and v_up
    are among its parameters), and attention then runs over H heads of d_h and d_v. A layer whose lightning
    indexer picks its keys (``index_top_k``) attends to at most k of them, and its indexer scores every key it
    may see: 2 x keys x I x (d_I + 1) (ReLU(q·k) per head, then the heads' weighted sum).
    For an encoder-decoder this is one source token through the encoder plus one target
    token through the decoder (its cross-attention reads `context` encoder outputs).
    """
    stacks = attention_stacks(cfg.arch)
    per_layer = zip(keys_seen_by_layer(cfg, context), _per_key_by_layer(cfg))
    self_attention = len(stacks.self_attention) * sum(keys * per_key for keys, per_key in per_layer)
    cross_keys = len(stacks.cross_attention) * cfg.n_layers * context  # cross-attention has no window
    scored = sum(n for n, spec in zip(_keys_allowed(cfg, context), cfg.layer_plan()) if spec.selects_keys)
    index_flops = 2 * scored * cfg.index_heads * (cfg.index_head_dim + 1)  # the indexers score every key allowed
    return 2 * multiplied_params(cfg) + self_attention + _per_key(cfg) * cross_keys + index_flops


def _per_key(cfg: TransformerConfig) -> int:
    """FLOPs per query and key: q·k over H heads of d_h, and the weight times v over H heads of d_v."""
    return 2 * cfg.n_heads * (cfg.d_head + cfg.d_v)


def _per_key_by_layer(cfg: TransformerConfig) -> list[int]:
    """Each layer's FLOPs per query and key, at its own head sizes (Gemma 4's global layers: their own d_h)."""
    return [_per_key(cfg.layer_config(spec)) for spec in cfg.layer_plan()]


def keys_seen_by_layer(cfg: TransformerConfig, context: int) -> tuple[int, ...]:
    """Keys the token at position context - 1 attends to in each layer of a stack: all of them in a global
    layer, at most W in a local one (``cfg.layer_windows()``), and with a sparse pattern the ones its causal
    form allows (counted from the mask itself); of those, at most k where an indexer keeps its top k. A
    DeepSeek-V4 layer sees its window and the pooled keys of the blocks finished before the token, every one of
    them, or the k its block indexer keeps."""
    return tuple(_compressed_keys_seen(spec, n, context) if spec.compresses else
                 min(n, spec.index_top_k) if spec.selects_keys else n
                 for n, spec in zip(_keys_allowed(cfg, context), cfg.layer_plan()))


def _compressed_keys_seen(spec, window_keys: int, context: int) -> int:
    if not spec.compress_rate:
        return window_keys
    blocks = context // spec.compress_rate  # blocks finished by the token at context - 1, itself included
    return window_keys + (min(blocks, spec.index_top_k) if spec.indexes_blocks else blocks)


def _keys_allowed(cfg: TransformerConfig, context: int) -> tuple[int, ...]:
    """Keys the mask lets the token at position context - 1 see in each layer, before any indexer chooses."""
    if context < 1:
        raise ValueError(f"context={context} must be at least 1 (a token always sees itself)")
    if cfg.row("attention_pattern").sparse:  # a pattern is the same in every layer
        last = torch.tensor([context - 1])
        allowed = masks.sparse(cfg.attention_pattern, last, torch.arange(context), cfg.pattern_size, True,
                               cfg.n_global)
        return (int(allowed.sum()),) * cfg.n_layers
    return tuple(context if w is None else min(context, w) for w in cfg.layer_windows())


def keys_seen(cfg: TransformerConfig, context: int, layer: int | None = None) -> int:
    """How many keys the token at position context - 1 attends to in layer `layer`, or with layer=None in the
    layer that sees the most (a global one if there is one; every layer alike without per-layer windows)."""
    by_layer = keys_seen_by_layer(cfg, context)
    return max(by_layer) if layer is None else by_layer[layer]


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


def forward_flops(cfg: TransformerConfig, batch: int, seq: int) -> int:
    """FLOPs of one forward pass, counted analytically as torch's FLOP counter counts the explicit path.

    2 x (weights in matrix multiplies) x tokens          -- each weight is one multiply and one add per token
    + 2 x T^2 x H x (d_h + d_v) per attention layer        -- Q K^T and weights @ V over every pair
    A layer that keeps a state adds, per token, what ``state_flops`` counts instead of the T x T products.
    The attention term counts the full T x T square, causal, windowed or not: the explicit five lines
    compute every score and mask it afterwards (the usual convention; ``forward_flops_per_token`` counts
    only the keys each layer sees). MoE counts the router and the top-k experts each token goes to.
    Norms, activations, softmax and the embedding lookup are left out. An encoder-decoder runs `seq`
    source tokens through the encoder and `seq` target tokens through the decoder.
    """
    tokens = batch * seq
    stacks = attention_stacks(cfg.arch)
    n_attention = len(stacks.self_attention) + len(stacks.cross_attention)
    plan = cfg.layer_plan()
    state_kinds = [spec.row for spec in plan if spec.row.keeps_state]
    # each softmax layer's pairs at its own head sizes, in every stack; cross-attention's at the model's
    self_pairs = sum(per_key for spec, per_key in zip(plan, _per_key_by_layer(cfg)) if not spec.row.keeps_state)
    cross_pairs = (n_attention - len(stacks.self_attention)) * cfg.n_layers * _per_key(cfg)
    scores = (len(stacks.self_attention) * self_pairs + cross_pairs) * batch * seq**2
    return 2 * matmul_weights_per_token(cfg) * tokens + scores + sum(state_flops(cfg, kind) * tokens
                                                                     for kind in state_kinds)


def state_flops(cfg: TransformerConfig, kind) -> int:
    """Per token, a state-keeping layer's products beyond its projections, as its recurrent form computes them: the
    read q·S (2·H_s·d_k·d_v), the delta rule's guess S^T k (as much again), and a short convolution's taps
    (2·c per channel). Writing k writeᵀ into S is an elementwise product, which FLOP counts leave out. A gated short
    convolution alone (``conv_only``): 2·c per channel of d_model; its gates are elementwise too."""
    if kind.conv_only:  # the gated short convolution: its taps (its gates are elementwise products)
        return 2 * cfg.d_model * cfg.linear_conv_size
    read = 2 * cfg.state_heads * cfg.state_d_k * cfg.state_d_v
    channels = 2 * cfg.state_key_heads * cfg.state_d_k + cfg.state_heads * cfg.state_d_v
    return read * (2 if kind.delta_rule else 1) + (2 * channels * cfg.linear_conv_size if kind.short_conv else 0)
