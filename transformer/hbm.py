"""The two memories of a GPU, as attention sees them: bytes moved to and from HBM, and what a tile needs in SRAM.

A GPU's large memory (HBM, tens of GiB) is far from its arithmetic; each streaming multiprocessor has a small
on-chip SRAM (the FlashAttention paper gives 192 KB per SM on an A100) that is fast but holds only a few tiles.
Attention is limited by the bytes moved between the two, not by its multiplications, so the code that runs
attention here reports every full matrix or tile it loads from HBM and every one it stores back to an
``HBMTraffic`` counter. The counts come from the tensors themselves (numel × bytes per element), never from a
formula; transformer.flash_io holds the closed forms the tests compare them with.

API::

    traffic = HBMTraffic(element_bytes=2, sram_bytes=SRAM_BYTES_A100)
        element_bytes  bytes of one element of Q, K, V, S, P, O in HBM (2: fp16/bf16)
        sram_bytes     the SRAM a tile step must fit in; None: no limit. The tiled loops call
                       traffic.check_tiles(block_q, block_k, d_head) before their first load.
    tensor = traffic.read("Q", tensor)          # counts tensor.numel() × element_bytes read; returns tensor
    tensor = traffic.write("O", tensor)         # the same for a store
    traffic.read("m, l", m, element_bytes=4)    # the softmax statistics are kept in float32
    traffic.reads, traffic.writes               # {matrix name: bytes}
    traffic.read_bytes, traffic.write_bytes, traffic.total_bytes

    tile_sram_bytes(block_q, block_k, d_head, element_bytes) -> {part: bytes}
    check_tiles_fit(block_q, block_k, d_head, element_bytes, sram_bytes)   # ValueError naming both sizes

The arithmetic itself runs in float32 whatever element_bytes says: the counter describes what a kernel
keeping its matrices in that format would move, and the outputs stay comparable to the library's.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch

SRAM_BYTES_A100 = 192 * 1024  # on-chip SRAM per streaming multiprocessor of an A100, as the FlashAttention paper gives it
STATS_BYTES = 4  # the running max m and sum l are kept in float32 by every flash kernel


@dataclass
class HBMTraffic:
    """Bytes read from and written to HBM, by matrix name, as the code that runs reports them."""

    element_bytes: int = 2  # bytes per element of the matrices in HBM: 2 for fp16/bf16, 4 for fp32
    sram_bytes: int | None = None  # on-chip SRAM a tile step must fit in (check_tiles); None: no limit
    reads: Counter = field(default_factory=Counter)
    writes: Counter = field(default_factory=Counter)

    def __post_init__(self):
        if self.element_bytes < 1:
            raise ValueError(f"element_bytes={self.element_bytes}: an element takes at least 1 byte "
                             "(2 for fp16/bf16, 4 for fp32)")

    def check_tiles(self, block_q: int, block_k: int, d_head: int) -> None:
        """Refuse tiles whose step does not fit in this SRAM (ValueError naming both sizes)."""
        if self.sram_bytes is not None:
            check_tiles_fit(block_q, block_k, d_head, self.element_bytes, self.sram_bytes)

    def read(self, name: str, tensor: torch.Tensor, element_bytes: int | None = None) -> torch.Tensor:
        """Count a load of `tensor` from HBM into SRAM and hand it back unchanged."""
        self.reads[name] += tensor.numel() * (element_bytes or self.element_bytes)
        return tensor

    def write(self, name: str, tensor: torch.Tensor, element_bytes: int | None = None) -> torch.Tensor:
        """Count a store of `tensor` from SRAM to HBM and hand it back unchanged."""
        self.writes[name] += tensor.numel() * (element_bytes or self.element_bytes)
        return tensor

    @property
    def read_bytes(self) -> int:
        return sum(self.reads.values())

    @property
    def write_bytes(self) -> int:
        return sum(self.writes.values())

    @property
    def total_bytes(self) -> int:
        return self.read_bytes + self.write_bytes


def tile_sram_bytes(block_q: int, block_k: int, d_head: int, element_bytes: int) -> dict[str, int]:
    """What one step of tiled attention holds in SRAM at once, by part, in bytes.

    Both loop orders hold the same parts during a step (a block of Q, one of K and one of V, the scores tile, the
    output block being accumulated and its m and l); they differ in which of them stay across the inner loop.
    """
    return {
        "Q block": block_q * d_head * element_bytes,
        "K block": block_k * d_head * element_bytes,
        "V block": block_k * d_head * element_bytes,
        "scores tile (fp32)": block_q * block_k * STATS_BYTES,
        "output block (fp32)": block_q * d_head * STATS_BYTES,
        "m and l (fp32)": 2 * block_q * STATS_BYTES,
    }


def largest_square_block(d_head: int, element_bytes: int, sram_bytes: int) -> int:
    """The largest block_q = block_k whose tile fits in `sram_bytes` (0 when not even 1 fits)."""
    block = 0
    while sum(tile_sram_bytes(block + 1, block + 1, d_head, element_bytes).values()) <= sram_bytes:
        block += 1
    return block


def check_tiles_fit(block_q: int, block_k: int, d_head: int, element_bytes: int, sram_bytes: int) -> None:
    """Raise ValueError, naming the bytes needed and the SRAM size, when one step's tiles do not fit in SRAM."""
    if min(block_q, block_k, d_head, element_bytes, sram_bytes) < 1:
        raise ValueError(f"block_q={block_q}, block_k={block_k}, d_head={d_head}, element_bytes={element_bytes} and "
                         f"sram_bytes={sram_bytes} must all be at least 1")
    needed = sum(tile_sram_bytes(block_q, block_k, d_head, element_bytes).values())
    if needed > sram_bytes:
        fits = largest_square_block(d_head, element_bytes, sram_bytes)
        fix = (f"use smaller blocks (block_q = block_k = {fits} fits)" if fits
               else "use a larger SRAM or a smaller d_head: not even one row fits")
        raise ValueError(f"tiles of {block_q} × {block_k} with d_head = {d_head} need {needed:,} bytes of SRAM "
                         f"(Q, K and V blocks, the scores tile, the output block, m and l) but SRAM holds "
                         f"{sram_bytes:,} bytes; {fix}")
