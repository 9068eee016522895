"""What a model holds of the past in generation, from its dimensions alone: per token, and per layer at a context.

A softmax layer keeps the keys and values of every token it may still see, so its part grows with the text; a
layer that keeps a state keeps one matrix per head instead, the same size at 10 tokens as at a million.

    kv_cache_bytes_per_token(cfg, bytes_per_value=2, context=None)   growth per token, or the average at a context
    kv_cache_bytes(cfg, context, bytes_per_value=2, state_bytes_per_value=None)   the whole cache at `context`
        tokens: global, local and state layers, by tensor and by layer
    every_token_bytes(cfg, context, bytes_per_value=2)   the same model if every layer kept every token's K and V
"""
from __future__ import annotations

from ..config import TransformerConfig


def _cache_width(cfg: TransformerConfig) -> dict[str, int]:
    """Numbers one softmax layer caches per token, by tensor: K (G·d_h) and V (G·d_v); MLA its latent and one rope key."""
    if cfg.row("kv_heads").latent:
        return {"latent": cfg.kv_rank, "rope keys": cfg.d_rope}
    return {"keys": cfg.n_kv_heads * cfg.d_head, "values": cfg.n_kv_heads * cfg.d_v}


def _index_width(cfg: TransformerConfig, spec) -> dict[str, int]:
    """Numbers a layer's lightning indexer caches per token: its one key of d_I (index_top_k), else none."""
    return {"index keys": cfg.index_head_dim} if spec.selects_keys else {}


def _state_width(cfg: TransformerConfig, spec) -> dict[str, int]:
    """Numbers one layer that keeps a state holds, whatever the context: a d_k × d_v state per value head, and with a
    short convolution the last K − 1 inputs of each of its channels (q, k and v: 2·H_k·d_k + H·d_v of them). A gated
    short convolution alone (``conv_only``, LFM2) holds no state matrix, only its d_model channels' last K − 1 inputs."""
    if spec.row.conv_only:
        return {"states": 0, "conv inputs": cfg.d_model * (cfg.linear_conv_size - 1)}
    channels = 2 * cfg.state_key_heads * cfg.state_d_k + cfg.state_heads * cfg.state_d_v
    return {"states": cfg.state_heads * cfg.state_d_k * cfg.state_d_v,
            "conv inputs": channels * (cfg.linear_conv_size - 1) if spec.row.short_conv else 0}


def _compressed_width(cfg: TransformerConfig, spec, context: int) -> dict[str, int]:
    """Numbers one DeepSeek-V4 layer holds at `context` tokens, by tensor: its one head (key and value at once, d_h)
    for the last `window` tokens; one pooled key of d_h per finished block of m tokens; where an indexer chooses
    blocks, its own pooled key of d_I per block too; and the pooling rows (values and gates, 2 series where
    blocks overlap) of the tokens whose block is not pooled yet, with the block before's where blocks overlap."""
    rate, d_h = spec.compress_rate, cfg.d_head
    numbers = {"window keys": min(context, spec.window) * d_h}
    if not rate:
        return numbers
    blocks, series = context // rate, 2 if spec.indexes_blocks else 1
    pending = context % rate + (rate if spec.indexes_blocks and blocks else 0)  # tokens whose rows are kept
    numbers |= {"compressed keys": blocks * d_h, "block rows": pending * 2 * series * d_h}
    if spec.indexes_blocks:
        numbers["index keys"] = blocks * cfg.index_head_dim
        numbers["block rows"] += pending * 2 * series * cfg.index_head_dim
    return numbers


def kv_cache_bytes(cfg: TransformerConfig, context: int, bytes_per_value: int = 2,
                   state_bytes_per_value: int | None = None) -> dict:
    """Bytes the cache of one sequence of `context` tokens holds, and where they sit.

    A global softmax layer holds every token; a local layer (window W, ``cfg.layer_windows()``, or a chunk of C
    tokens, ``attention_chunk``) needs only the last W (at most C), so it holds min(context, W) -- what a
    serving stack that drops older keys keeps. (This library's own ``KVCache`` keeps every token in every
    layer, and so matches this only for global layers.) A layer that reads an earlier layer's K and V
    (``kv_shared_layers``) holds nothing of its own. Per layer and token: K and V, G·d_h + G·d_v numbers; MLA
    caches its latent and one rotated key shared by the heads, r_kv + d_r numbers; a layer whose lightning
    indexer picks its keys (``index_top_k``) caches the indexer's own key too, d_I numbers ("index keys"): the
    indexer scores every earlier token, so they grow with the text as the rest do. A layer that keeps a state
    (``attention_layers``) holds no keys at all: its H state
    matrices of d_k × d_v, and with a short convolution its last K − 1 inputs, a constant. States are
    counted at `state_bytes_per_value` (None: `bytes_per_value`); this library keeps them in float32 (4)
    whatever the model's dtype, as Hugging Face's Gated DeltaNet computes them. Self-attention only: an
    encoder-decoder's cross-attention keys are computed once from the source. A DeepSeek-V4 layer
    (``compress_layers``) holds its window of one key-value head and its pooled blocks (``_compressed_width``),
    the cache its paper describes; this library's ``KVCache`` keeps every token's key and pooling rows instead,
    from which it pools the blocks again, exact but larger.

    Returns {"total", "global layers", "local layers", "state layers", "compressed layers", and by tensor "keys"
    and "values" (or MLA's "latent" and "rope keys"), "index keys" with an indexer, "states" and "conv inputs"
    where a layer keeps a state, DeepSeek-V4's "window keys", "compressed keys" and "block rows": bytes;
    "per layer": a tuple of each layer's bytes}.
    """
    if context < 1:
        raise ValueError(f"context={context} must be at least 1 token")
    state_bytes_per_value = bytes_per_value if state_bytes_per_value is None else state_bytes_per_value
    held = {tensor: 0 for tensor in _cache_width(cfg)}  # bytes by tensor, summed over layers
    per_layer, kinds = [], []  # each layer's bytes, and what holds them: "global", "local", "state" or "compressed"
    for spec in cfg.layer_plan():
        if spec.compresses:
            numbers = _compressed_width(cfg, spec, context)
            for tensor, n in numbers.items():
                held[tensor] = held.get(tensor, 0) + n * bytes_per_value
            per_layer.append(sum(numbers.values()) * bytes_per_value)
            kinds.append("compressed" if spec.compress_rate else "local")
            continue
        if spec.row.keeps_state:
            numbers = _state_width(cfg, spec)
            state = {"states": numbers["states"] * state_bytes_per_value,  # float32 here, as the library keeps them
                     "conv inputs": numbers["conv inputs"] * bytes_per_value}  # the model's own inputs, its dtype
            for tensor, n in state.items():
                held[tensor] = held.get(tensor, 0) + n
            per_layer.append(sum(state.values()))
            kinds.append("state")
            continue
        bound = spec.window if spec.window is not None else spec.chunk  # None: it may see every earlier token
        seen = context if bound is None else min(context, bound)  # the tokens a query of it may still see
        tokens = 0 if spec.reuses_kv else seen  # tokens whose K and V it holds
        layer_width = _cache_width(cfg.layer_config(spec))  # Gemma 4's global layers: their own head sizes
        for tensor, n in layer_width.items():
            held[tensor] += n * bytes_per_value * tokens
        index = _index_width(cfg, spec)  # its indexer's own keys, one per token it may choose from
        for tensor, n in index.items():
            held[tensor] = held.get(tensor, 0) + n * bytes_per_value * seen
        per_layer.append((tokens * sum(layer_width.values()) + seen * sum(index.values())) * bytes_per_value)
        kinds.append("global" if bound is None else "local")
    return {"total": sum(per_layer),
            **{f"{kind} layers": sum(b for b, k in zip(per_layer, kinds) if k == kind)
               for kind in ("global", "local", "state", "compressed")},
            **held, "per layer": tuple(per_layer)}


def kv_cache_bytes_per_token(cfg: TransformerConfig, bytes_per_value: int = 2, context: int | None = None):
    """Bytes of KV cache per token (fp16 by default).

    context=None: what one more token adds while every layer still holds every token -- K and V of G kv heads
    in every softmax layer, 2·L·G·d_h (G·d_h + G·d_v when values are narrower), MLA L·(r_kv + d_r), plus d_I
    per layer with a lightning indexer, a DeepSeek-V4 layer its key-value head and its pooling rows; a layer
    that keeps a state, or reads another layer's K and V, adds nothing. That is the growth before any window is
    full, the growth of this library's ``KVCache`` at any length (it keeps local layers' old tokens too), and an
    upper bound; an int.
    context=T: the average per token of a cache of T tokens whose local layers hold only their window and whose
    state layers their constant state, ``kv_cache_bytes(cfg, T)["total"] / T``; a float, which falls as T grows
    past the windows and over the states.
    """
    if context is not None:
        return kv_cache_bytes(cfg, context, bytes_per_value)["total"] / context
    # the layers that cache keys and values of their own (an encoder-decoder's: its decoder's)
    plan = cfg.layer_plan()
    index_keys = sum(sum(_index_width(cfg, spec).values()) for spec in plan if not spec.compresses)
    return (sum(sum(_cache_width(cfg.layer_config(spec)).values()) for spec in plan
                if not (spec.row.keeps_state or spec.reuses_kv or spec.compresses)) + index_keys
            + sum(_kept_per_token(cfg, spec) for spec in plan if spec.compresses)) * bytes_per_value


def _kept_per_token(cfg: TransformerConfig, spec) -> int:
    """Numbers this library's cache keeps per token in a DeepSeek-V4 layer: its key-value head, and the pooling rows
    (values and gates, of each series) of the attention's pooling and of the block indexer's."""
    if not spec.compress_rate:
        return cfg.d_head
    series = 2 if spec.indexes_blocks else 1
    return cfg.d_head + 2 * series * (cfg.d_head + (cfg.index_head_dim if spec.indexes_blocks else 0))


def every_token_bytes(cfg: TransformerConfig, context: int, bytes_per_value: int = 2) -> int:
    """What cfg's cache would hold at `context` tokens if every layer kept every token's keys and values: the
    baseline a window, a chunk, a shared layer, pooled blocks or a state saves from. A layer keeps its own K and V
    (MLA its latent and rope key, a DeepSeek-V4 layer its one key-value head); a layer that keeps a state counts as
    the model's softmax layers (or, in a model of state layers only, as its config's K and V would); no indexer."""
    plan = cfg.layer_plan()
    softmax = [spec for spec in plan if not spec.row.keeps_state]

    def width(spec) -> int:
        return cfg.d_head if spec.compresses else sum(_cache_width(cfg.layer_config(spec)).values())
    as_softmax = width(softmax[0]) if softmax else sum(_cache_width(cfg).values())
    return sum(as_softmax if spec.row.keeps_state else width(spec) for spec in plan) * context * bytes_per_value
