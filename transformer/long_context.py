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
    """The figures of one layer from its q (B, H, T_q, d_head), k (B, G, T_kv, d_head) and rules of keys."""
    B, H, T_q, _ = q.shape
    k = layer.repeat_kv(k).float()  # (B, H, T_kv, d_head)
    T_kv = k.shape[2]
    top_k = min(top_k, T_kv)
    edges = distance_edges(T_kv).to(q.device)  # (n + 1,)
    key_pos = torch.arange(T_kv, device=q.device)  # (T_kv,)
    first_query = T_kv - T_q if not layer.cross else 0  # cached keys come first; a cross layer's keys are the source's
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in ("entropy", "max", "sink", "local", "distant",
                                                                  "top_keys", "top_weights", "visible")}
    distance_mass = q.new_zeros(B, H, len(edges) - 1, dtype=torch.float32)
    size = rows_per_block(B, H, T_kv)
    for start in range(0, T_q, size):
        stop = min(start + size, T_q)
        block = rules.rows(start, stop)
        weights = block_weights(layer, q[:, :, start:stop].float(), k, block)  # (B, H, R, T_kv)
        parts["visible"].append(block.allowed.sum(-1)[:, 0].expand(B, -1))  # (B, R): the keys each row may see
        query_pos = first_query + torch.arange(start, stop, device=q.device)  # (R,)
        distance = (query_pos[:, None] - key_pos[None]).abs()  # (R, T_kv)
        not_first = key_pos != 0  # (T_kv,)
        parts["entropy"].append(-torch.special.xlogy(weights, weights).sum(-1) / math.log(2))  # (B, H, R) bits
        parts["max"].append(weights.amax(-1))
        parts["sink"].append(weights[..., 0])
        parts["local"].append((weights * ((distance < window) & not_first)).sum(-1))
        parts["distant"].append((weights * ((distance >= window) & not_first)).sum(-1))
        top = weights.topk(top_k, dim=-1)  # (B, H, R, top_k)
        parts["top_weights"].append(top.values)
        parts["top_keys"].append(top.indices)
        bucket = (torch.bucketize(distance, edges, right=True) - 1).expand_as(weights)  # (B, H, R, T_kv)
        mass = weights.new_zeros(B, H, stop - start, len(edges) - 1).scatter_add_(-1, bucket, weights)
        distance_mass += mass.sum(dim=2)
        del weights, distance, bucket, mass
    summary = {name: torch.cat(blocks, dim=-1 if name == "visible" else 2) for name, blocks in parts.items()}
    summary["distance_mass"] = distance_mass / T_q  # (B, H, n)
    summary["distance_edges"] = edges
    return summary


def block_weights(layer: Attention, q: torch.Tensor, k: torch.Tensor, rules: AttentionInputs) -> torch.Tensor:
    """The layer's softmax weights (B, H, R, T_kv) for one block of R query rows: its five lines' first three."""
    scores = (q * layer.scale) @ k.transpose(-2, -1)  # (B, H, R, T_kv)
    if layer.softcap is not None:
        scores = layer.softcap * torch.tanh(scores / layer.softcap)
    weights, _ = layer.sink_softmax(scores + rules.fused_bias.float())  # rows sum to 1 (less a sink's share)
    return weights


# A head's role on a long text, read off its figures over the queries at least `window` tokens in (where a key can
# be local or distant). The thresholds are fixed here, before any model is read, and random-init weights are
# classified by the same rule: a role means something only where random weights do not show it too.
# "broad" is a head whose rows are nearly as spread as uniform weights over the keys they may see (its entropy at
# least 0.8 of log2 of their number): a random-init head is one, and its mass is mostly distant only because most
# keys are, so it is tested before local and distant.
ROLE_THRESHOLDS = {"previous-token": 0.5, "sink": 0.5, "broad": 0.8, "local": 0.7, "distant": 0.5}
ROLES = (*ROLE_THRESHOLDS, "mixed")


def head_scores(summary: dict[str, torch.Tensor], window: int) -> dict[str, torch.Tensor]:
    """Per head (H,), over the first batch row's queries from `window` on: the share of queries whose top key is
    the one just before; the mean sink, local and distant weight; the mean entropy over its uniform value."""
    T = summary["sink"].shape[-1]
    first = window if T > window else 0
    queries = torch.arange(first, T)
    previous = (summary["top_keys"][0, :, first:, 0] == (queries - 1)).float().mean(-1)  # (H,)
    uniform = summary["visible"][0, first:].float().clamp(min=2).log2()  # (T - first,): bits of uniform weights
    return {"previous-token": previous,
            **{name: summary[name][0, :, first:].mean(-1) for name in ("sink", "local", "distant")},
            "broad": (summary["entropy"][0, :, first:] / uniform).mean(-1)}


def head_roles(summary: dict[str, torch.Tensor], window: int) -> list[str]:
    """Each head's role: the first of previous-token, sink, broad, local, distant whose score reaches its
    threshold (ROLE_THRESHOLDS), else mixed."""
    scores = head_scores(summary, window)
    heads = len(scores["sink"])
    return [next((role for role, least in ROLE_THRESHOLDS.items() if float(scores[role][h]) >= least), "mixed")
            for h in range(heads)]
