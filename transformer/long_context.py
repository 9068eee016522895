"""Where each head looks on a long text, without its T x T weights.

``summarize(model, ids)`` runs the model's own fused forward once. As each softmax attention layer attends, it
reads that layer's q, k and rules of keys (``attention.ATTENTION_READER``) and works out its weights one block of
query rows at a time: a block's rows are exact softmax rows, summarised and dropped before the next block is
made, so no tensor larger than TILE_ENTRIES x heads is ever held and memory grows as O(T).

Per layer (``"blocks.{i}.attn"``, ``"encoder."`` / ``"decoder."`` prefixes, ``".cross_attn"`` for
cross-attention), each (B, H, T) unless said:
- ``entropy`` in bits; ``max``, the largest weight;
- ``sink``, the weight on key 0; ``local``, on the other keys nearer than ``window``; ``distant``, on the rest
  (sink + local + distant is the row's total: 1, or 1 minus a gpt-oss sink logit's share);
- ``top_keys`` and ``top_weights`` (B, H, T, top_k);
- ``visible`` (B, T): how many keys each query may see;
- ``distance_mass`` (B, H, n): the weight at distances [edge_i, edge_i+1) (``distance_edges``: 0, 1, 2, 4, 8 ...),
  averaged over the queries.

Layers that keep a state (linear, delta rule, Gated DeltaNet, KDA, short convolution) have no softmax weights and
are not in the result. An indexer's layer is summarised over the keys it chose.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from . import attention
from .attention import ATTENTION_READER, Attention, AttentionInputs


def summarize(model: torch.nn.Module, *inputs: torch.Tensor, window: int = 64, top_k: int = 8,
              progress: Callable[[str], None] | None = None, **forward_kwargs) -> dict[str, dict[str, torch.Tensor]]:
    """Per-head figures for every softmax attention layer of one forward pass: ``model(*inputs, **forward_kwargs)``
    (an encoder-decoder takes source and target ids). Never holds a T x T tensor. ``progress(layer)`` is called
    as each layer's figures are done."""
    if window < 1 or top_k < 1:
        raise ValueError(f"window={window} and top_k={top_k} must both be at least 1")
    summaries: dict[str, dict[str, torch.Tensor]] = {}

    def read(layer: Attention, q: torch.Tensor, k: torch.Tensor, rules: AttentionInputs) -> None:
        name = layer_name(layer)
        summaries[name] = layer_summary(layer, q, k, rules, window, top_k)
        if progress is not None:
            progress(name)

    reading(model, read, inputs, forward_kwargs)
    return summaries


def row_weights(model: torch.nn.Module, *inputs: torch.Tensor, layer: str, start: int, stop: int,
                **forward_kwargs) -> torch.Tensor:
    """The exact softmax weights (B, H, stop - start, T_kv) of query rows start:stop of one layer ("blocks.3.attn"):
    a window of a long text looked at closely, without the rest of its T x T weights."""
    found: list[torch.Tensor] = []

    def read(attn: Attention, q: torch.Tensor, k: torch.Tensor, rules: AttentionInputs) -> None:
        if layer_name(attn) == layer:
            if not 0 <= start < stop <= q.shape[2]:
                raise ValueError(f"rows {start}:{stop} are outside the {q.shape[2]} queries of {layer}; "
                                 f"choose 0 <= start < stop <= {q.shape[2]}")
            found.append(block_weights(attn, q[:, :, start:stop].float(), attn.repeat_kv(k).float(),
                                       rules.rows(start, stop)))

    reading(model, read, inputs, forward_kwargs)
    if not found:
        raise ValueError(f"{layer!r} is no softmax attention layer of this model")
    return found[0]


def reading(model: torch.nn.Module, read: Callable, inputs: tuple, forward_kwargs: dict) -> None:
    """One forward pass of the model's fused path, with ``read`` seeing each attention's q, k and rules of keys."""
    token = ATTENTION_READER.set(read)
    try:
        with torch.no_grad():
            model(*inputs, **forward_kwargs)
    finally:
        ATTENTION_READER.reset(token)


def layer_name(layer: Attention) -> str:
    """The layer's module path, read off one of its hook points: "blocks.0.attn.hook_pattern" -> "blocks.0.attn"."""
    return layer.hook_pattern.name.rsplit(".", 1)[0]


def distance_edges(t_kv: int) -> torch.Tensor:
    """0, 1, 2, 4, 8 ... up to the first power of two past the longest distance: the buckets' lower edges."""
    return torch.tensor([0] + [2 ** i for i in range(max(1, math.ceil(math.log2(max(t_kv, 2)))) + 1)])


def rows_per_block(batch: int, heads: int, t_kv: int) -> int:
    """How many query rows make one block of weights of at most TILE_ENTRIES numbers."""
    return max(1, attention.TILE_ENTRIES // (batch * heads * t_kv))


def layer_summary(layer: Attention, q: torch.Tensor, k: torch.Tensor, rules: AttentionInputs, window: int,
                  top_k: int) -> dict[str, torch.Tensor]:
    """The figures of one layer from its q (B, H, T_q, d_head), k (B, G, T_kv, d_head) and rules of keys.

    Each block of query rows costs a few passes over its weights: the scores, their row maxima, the weights, one
    dot product for the entropy (H = lse - sum w s), the top k, and one running sum along the keys, from which the
    weight in any span of keys (the local ones, each distance bucket) is a difference of two entries. The blocks
    write into three buffers made once per layer: blocks of growing width would otherwise leave the allocator a
    trail of freed pieces too small to reuse."""
    B, H, T_q, _ = q.shape
    k = layer.repeat_kv(k).float()  # (B, H, T_kv, d_head)
    T_kv = k.shape[2]
    edges = distance_edges(T_kv).to(q.device)  # (n + 1,)
    first_query = T_kv - T_q if not layer.cross else 0  # cached keys come first; a cross layer's keys are the source's
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in ("entropy", "max", "sink", "local", "distant",
                                                                  "top_keys", "top_weights", "visible")}
    distance_mass = q.new_zeros(B, H, len(edges) - 1, dtype=torch.float32)
    lows, highs = torch.cat((edges[:-1], edges.new_tensor([0]))), torch.cat((edges[1:], edges.new_tensor([window])))
    size = min(rows_per_block(B, H, T_kv), T_q)
    causal = rules.plain_causal and not layer.cross  # exactly causal: each row sees every key up to its own
    future = torch.ones(size, size, dtype=torch.bool, device=q.device).triu_(1)  # (R, R): keys past each row
    buffers = [q.new_empty(B * H * size * (T_kv + 1), dtype=torch.float32) for _ in range(3)]
    for start in range(0, T_q, size):
        stop = min(start + size, T_q)
        R = stop - start
        query_pos = first_query + torch.arange(start, stop, device=q.device)  # (R,)
        if causal:  # no mask to make: the keys past the block are left out, those past each row cut in place
            span = first_query + stop
            visible = (query_pos + 1).expand(B, -1)  # (B, R)
        else:
            block = rules.rows(start, stop)
            seen = block.allowed.any(dim=-2).reshape(-1, T_kv).any(dim=0).nonzero()  # keys any row of the block sees
            span = int(seen[-1]) + 1 if len(seen) else T_kv  # keys past the last one seen hold no weight: left out
            visible = block.allowed.sum(-1)[:, 0].expand(B, -1)  # (B, R): the keys each row may see
        scores, weights, running = (buffer[:B * H * R * width].view(B, H, R, width)
                                    for buffer, width in zip(buffers, (span, span, span + 1)))  # contiguous
        block_scores(layer, q[:, :, start:stop].float(), k[:, :, :span],
                     None if causal else block.fused_bias[..., :span], out=scores)
        if causal:
            scores[..., span - R:].masked_fill_(future[:R, :R], torch.finfo(scores.dtype).min)
        peak = scores.amax(dim=-1, keepdim=True)  # (B, H, R, 1)
        torch.sub(scores, peak, out=weights).exp_()  # exp(s - max)
        norm = weights.sum(dim=-1, keepdim=True)  # (B, H, R, 1)
        if layer.has_sinks:  # the sink's logit joins each row's normaliser and is dropped
            norm = norm + (layer.sinks.float().view(1, H, 1, 1) - peak).exp()
        weights.div_(norm)  # (B, H, R, span): rows sum to `total`
        lse = (peak + norm.log())[..., 0]  # (B, H, R)
        total = weights.sum(-1) if layer.has_sinks else torch.ones_like(lse)  # (B, H, R)
        dot = torch.mul(weights, scores, out=scores).sum(-1)  # (B, H, R): sum of w s, row by row (scores spent)
        parts["entropy"].append((lse * total - dot) / math.log(2))  # bits
        top = weights.topk(min(top_k, span), dim=-1)  # (B, H, R, k)
        parts["top_weights"].append(top.values)
        parts["top_keys"].append(top.indices)
        parts["max"].append(top.values[..., 0])
        parts["sink"].append(weights[..., 0].clone())  # a copy: the buffer is the next block's
        parts["visible"].append(visible)
        running[..., 0] = 0
        torch.cumsum(weights, dim=-1, out=running[..., 1:])  # running[..., j]: the weight of keys before j
        masses = mass_at_distances(running, query_pos, lows, highs)  # (B, H, R, n + 1): the buckets, then local
        near = masses[..., -1] - parts["sink"][-1] * (query_pos < window)  # key 0 is the sink's, not local
        parts["local"].append(near)
        parts["distant"].append(total - parts["sink"][-1] - near)
        distance_mass += masses[..., :len(edges) - 1].sum(dim=2)  # (B, H, n)
    summary = {name: torch.cat(blocks, dim=-1 if name == "visible" else 2) for name, blocks in parts.items()}
    summary["distance_mass"] = distance_mass / T_q  # (B, H, n)
    summary["distance_edges"] = edges
    return summary


def mass_at_distances(running: torch.Tensor, query_pos: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor
                      ) -> torch.Tensor:
    """The weight (B, H, R, n) on keys j with lo[i] <= |query - j| < hi[i], for every range i at once, from the
    running sum along the keys ``running[..., j]`` = the weight of keys before j (B, H, R, span + 1): keys before
    the query and keys after it (an encoder's rows) alike."""
    span = running.shape[-1] - 1
    query = query_pos[:, None]  # (R, 1)
    # keys query - (hi - 1) .. query - lo, then keys query + max(lo, 1) .. query + hi - 1: inclusive ranges
    first = torch.cat((query - hi + 1, query + lo.clamp(min=1)), dim=-1).clamp(0, span)  # (R, 2n)
    past = torch.cat((query - lo, query + hi - 1), dim=-1).add(1).clamp(0, span)  # (R, 2n), one past the last key
    index = torch.cat((first, torch.maximum(first, past)), dim=-1)  # (R, 4n): an empty range reads the same entry
    ends = running.gather(-1, index.expand(*running.shape[:2], -1, -1))  # (B, H, R, 4n)
    n = len(lo)
    sides = ends[..., 2 * n:] - ends[..., :2 * n]  # (B, H, R, 2n)
    return sides[..., :n] + sides[..., n:]


def block_scores(layer: Attention, q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor | None,
                 out: torch.Tensor | None = None) -> torch.Tensor:
    """What softmax sees for one block of R query rows (B, H, R, T_kv): the five lines' first two (bias None: the
    caller masks them itself)."""
    scores = torch.matmul(q * layer.scale, k.transpose(-2, -1), out=out)  # (B, H, R, T_kv)
    if layer.softcap is not None:
        scores.div_(layer.softcap).tanh_().mul_(layer.softcap)
    return scores if bias is None else scores.add_(bias.float())


def block_weights(layer: Attention, q: torch.Tensor, k: torch.Tensor, rules: AttentionInputs) -> torch.Tensor:
    """The layer's softmax weights (B, H, R, T_kv) for one block of R query rows: its five lines' first three."""
    scores = block_scores(layer, q, k, rules.fused_bias)
    return layer.sink_softmax(scores)[0]  # rows sum to 1 (less a sink's share)


# A head's role on a long text, read off its figures over the queries at least `window` tokens in (where a key can
# be local or distant). The thresholds are fixed here, before any model is read, and random-init weights are
# classified by the same rule: a role means something only where random weights do not show it too.
# "broad" is a head whose rows are nearly as spread as uniform weights over the keys they may see (its entropy at
# least 0.8 of log2 of their number): a random-init head is one, and its mass is mostly distant only because most
# keys are, so it is tested before local and distant.
ROLE_THRESHOLDS = {"previous-token": 0.5, "sink": 0.5, "broad": 0.8, "local": 0.7, "distant": 0.5}
ROLES = (*ROLE_THRESHOLDS, "mixed")


def head_scores(summary: dict[str, torch.Tensor], window: int, start: int = 0, stop: int | None = None
                ) -> dict[str, torch.Tensor]:
    """Per head (H,), over the first batch row's queries start .. stop - 1 that are at least `window` in (all of
    them when none is): the share of queries whose top key is the one just before; the mean sink, local and
    distant weight; the mean entropy over its uniform value."""
    T = summary["sink"].shape[-1]
    if not 0 <= start < (T if stop is None else min(stop, T)):
        raise ValueError(f"queries {start}:{stop} hold none of the text's {T} tokens; choose 0 <= start < stop <= {T}")
    stop = T if stop is None else min(stop, T)
    first = max(start, window) if stop > max(start, window) else start
    rows = slice(first, stop)
    queries = torch.arange(first, stop)
    previous = (summary["top_keys"][0, :, rows, 0] == (queries - 1)).float().mean(-1)  # (H,)
    uniform = summary["visible"][0, rows].float().clamp(min=2).log2()  # (rows,): bits of uniform weights
    return {"previous-token": previous,
            **{name: summary[name][0, :, rows].mean(-1) for name in ("sink", "local", "distant")},
            "broad": (summary["entropy"][0, :, rows] / uniform).mean(-1)}


def head_roles(summary: dict[str, torch.Tensor], window: int, start: int = 0, stop: int | None = None) -> list[str]:
    """Each head's role over queries start .. stop - 1: the first of previous-token, sink, broad, local, distant
    whose score reaches its threshold (ROLE_THRESHOLDS), else mixed."""
    scores = head_scores(summary, window, start, stop)
    heads = len(scores["sink"])
    return [next((role for role, least in ROLE_THRESHOLDS.items() if float(scores[role][h]) >= least), "mixed")
            for h in range(heads)]
