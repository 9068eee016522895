"""A paged KV cache: keys and values in fixed-size blocks of a pool, found through one block table per request.

vLLM's PagedAttention (2023) stores the cache as an operating system stores memory: in pages. Each layer owns a
pool of physical blocks of ``block_size`` tokens; each request owns a block table, the list of its blocks in
order. Block id ``i`` names the same slot range in every layer's pool, so one table serves every layer. A request
takes a new block only when its last one is full: at most one partly filled block per request, wherever the
blocks lie in the pool. Attention still wants the past in one piece, so reading the cache gathers each request's
tokens through its table into the (B, G, T, d_head) layout the contiguous cache would hold.

The batch is left-padded (``attention_mask``); padding is never stored: its positions read back as zeros, which
the mask hides from every real query. Tensors that do not grow by token (a linear layer's state, the encoder's
keys and values that cross-attention reads) are kept whole, as the contiguous cache keeps them. What grows, and
along which axis, each module says in ``cache_token_dims``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class PagedStep:
    """The block tables after one forward pass took the blocks its tokens need."""

    block_size: int
    lengths: tuple[int, ...]  # tokens stored per request (padding is not stored)
    tables: tuple[tuple[int, ...], ...]  # each request's physical block ids, in the order of its tokens

    @property
    def blocks(self) -> int:
        """Blocks taken from the pool so far."""
        return sum(len(table) for table in self.tables)

    @property
    def empty_slots(self) -> int:
        """Token slots taken but not filled: at most block_size - 1 per request, in its last block."""
        return self.blocks * self.block_size - sum(self.lengths)


class PagedKVCache:
    """The KV cache in fixed-size blocks: a block pool per layer, a block table per request, blocks on demand.

    ``model.generate(ids, n, cache=PagedKVCache(block_size=16))`` generates what the contiguous ``KVCache`` does;
    afterwards ``steps`` holds the block tables after each forward pass, ``tables`` and ``lengths`` the last.
    """

    def __init__(self, block_size: int = 16):
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size={block_size!r} is no page size: a block holds a whole number of tokens, at "
                             "least 1; use block_size >= 1 (vLLM's default is 16)")
        self.block_size = block_size
        # a layer -> its kept tensors: a pool (n_blocks, block_size, *per token) for each tensor that grows by
        # token, the tensor itself for one that does not
        self.layers: dict[nn.Module, tuple[torch.Tensor, ...]] = {}
        self.position_ids: torch.Tensor | None = None  # (B or 1, T) positions of the cached tokens
        self.length = 0  # cached positions of the padded batch, as the contiguous cache counts them
        self.tables: list[list[int]] = []  # request -> its physical block ids
        self.lengths: list[int] = []  # request -> tokens stored
        self.n_blocks = 0  # blocks handed out; the next one gets this id
        self.slots: torch.Tensor | None = None  # (B, T) each position's slot in a pool (block * block_size + offset), -1 = padding
        self.steps: list[PagedStep] = []

    def reserve(self, batch: int, new: int, attention_mask: torch.Tensor | None, device: torch.device) -> None:
        """Before a forward pass of `new` positions: a slot for each real token, a new block where a request's last
        one is full. `attention_mask` (B, T_past + new) marks the padding, which takes no slot."""
        if not self.tables:
            self.tables, self.lengths = [[] for _ in range(batch)], [0] * batch
        if batch != len(self.tables):
            raise ValueError(f"this cache holds {len(self.tables)} requests, not {batch}: use one cache per batch")
        real = (torch.ones(batch, new, dtype=torch.bool) if attention_mask is None
                else attention_mask[:, -new:].bool().cpu())  # (B, new)
        slots = torch.full((batch, new), -1, dtype=torch.long)  # (B, new)
        for request, count in enumerate(real.sum(dim=1).tolist()):
            first = self.lengths[request]
            self.lengths[request] += count
            table = self.tables[request]
            while len(table) * self.block_size < self.lengths[request]:  # the last block is full: take the next free one
                table.append(self.n_blocks)
                self.n_blocks += 1
            logical = torch.arange(first, first + count)  # (count,) the request's own token numbers
            physical = torch.tensor(table, dtype=torch.long)[logical // self.block_size]  # (count,) their blocks
            slots[request, real[request]] = physical * self.block_size + logical % self.block_size
        slots = slots.to(device)
        self.slots = slots if self.slots is None else torch.cat((self.slots, slots), dim=1)  # (B, T_past + new)
        self.steps.append(PagedStep(self.block_size, tuple(self.lengths), tuple(tuple(t) for t in self.tables)))

    def __contains__(self, layer: nn.Module) -> bool:
        return layer in self.layers

    def __getitem__(self, layer: nn.Module) -> tuple[torch.Tensor, ...]:
        """The layer's past as the contiguous cache would hold it, gathered from its pools through the tables."""
        kept = self.layers[layer]
        dims = getattr(layer, "cache_token_dims", None)
        if dims is None:
            return kept
        return tuple(self._gather(pool, dim) for pool, dim in zip(kept, dims))

    def __setitem__(self, layer: nn.Module, kept: tuple[torch.Tensor, ...]) -> None:
        """`kept` is the layer's past and this pass's tokens together: only the new tokens are written."""
        dims = getattr(layer, "cache_token_dims", None)
        if dims is None:
            self.layers[layer] = kept
            return
        pools = self.layers.get(layer, (None,) * len(kept))
        self.layers[layer] = tuple(self._write(pool, tensor, dim) for pool, tensor, dim in zip(pools, kept, dims))

    def _write(self, pool: torch.Tensor | None, tensor: torch.Tensor, dim: int) -> torch.Tensor:
        new = tensor.narrow(dim, self.length, tensor.shape[dim] - self.length).movedim(dim, 1)  # (B, new, *per token)
        per_token = new.shape[2:]
        if pool is None:
            pool = new.new_zeros(0, self.block_size, *per_token)
        if pool.shape[0] < self.n_blocks:  # blocks taken since this pool last grew: give them memory now
            grown = pool.new_zeros(self.n_blocks - pool.shape[0], self.block_size, *per_token)
            pool = torch.cat((pool, grown))  # (n_blocks, block_size, *per token)
        slots = self.slots[:, self.length:]  # (B, new)
        real = slots >= 0
        pool.view(-1, *per_token)[slots[real]] = new[real]  # (real tokens, *per token) into their slots
        return pool

    def _gather(self, pool: torch.Tensor, dim: int) -> torch.Tensor:
        slots = self.slots[:, :self.length]  # (B, T_past)
        flat = pool.view(-1, *pool.shape[2:])  # (n_blocks * block_size, *per token)
        gathered = flat[slots.clamp(min=0)]  # (B, T_past, *per token)
        padding = (slots < 0).view(*slots.shape, *[1] * (gathered.dim() - 2))
        return gathered.masked_fill(padding, 0).movedim(1, dim)  # padding reads as zeros, which the mask hides

    @property
    def nbytes(self) -> int:
        """Every byte kept: whole blocks of the pools (filled or not), and the tensors kept whole."""
        return sum(t.numel() * t.element_size() for kept in self.layers.values() for t in kept)

