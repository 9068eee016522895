"""What a server reserves for a batch of requests under each KV-cache layout, in token slots (no model is built).

Contiguous: every request reserves the longest length it may reach, because its keys and values must lie in one
piece. Paged (vLLM): a request holds whole blocks, ceil(length / block_size) of them, so it leaves at most
block_size - 1 slots empty, in its last block. Multiply by ``kv_cache_bytes_per_token`` for bytes.
"""
from __future__ import annotations

import math
from typing import Callable

from ..axes import AXES

# slots one request of `length` tokens holds, by layout (the rows of AXES["kv_cache"]): (length, max_length, block_size)
RESERVATIONS: dict[str, Callable[[int, int, int], int]] = {
    "contiguous": lambda length, max_length, block_size: max_length,
    "paged": lambda length, max_length, block_size: math.ceil(length / block_size) * block_size,
}


def reserved_tokens(layout: str, lengths: list[int], max_length: int, block_size: int) -> list[int]:
    """Token slots each request holds under `layout`, for requests of `lengths` tokens that may reach `max_length`."""
    AXES["kv_cache"].row(layout)  # an unknown layout is a ValueError naming it
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size={block_size!r} is no page size: a block holds a whole number of tokens, at "
                         "least 1; use block_size >= 1 (vLLM's default is 16)")
    if any(n < 0 or n > max_length for n in lengths):
        raise ValueError(f"request lengths {lengths} must lie between 0 and max_length={max_length}: raise max_length "
                         "to the longest request or shorten it")
    return [RESERVATIONS[layout](n, max_length, block_size) for n in lengths]
