"""The KV heads page's paged cache: a batch of requests of mixed lengths generated through the paged cache and the
contiguous one, and the block tables after each pass. Hashable arguments, so Streamlit caches the result."""
from __future__ import annotations

import re
from dataclasses import asdict

import streamlit as st
import torch

from transformer import KVCache, PagedKVCache
from transformer.hooks import recording

from ui.compute.model_cache import get_model

MAX_REQUESTS = 8
MAX_PROMPT = 64


def parse_lengths(text: str) -> list[int]:
    """'12, 5, 9' -> [12, 5, 9]: the prompt lengths of the requests; a ValueError says what is wrong."""
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    if not parts:
        raise ValueError("type the prompt length of each request, e.g. 12, 5, 9, 2")
    if not all(p.isdigit() for p in parts):
        raise ValueError(f"{text!r} is not a list of whole numbers: type lengths such as 12, 5, 9, 2")
    lengths = [int(p) for p in parts]
    if not 1 <= len(lengths) <= MAX_REQUESTS:
        raise ValueError(f"{len(lengths)} requests: give between 1 and {MAX_REQUESTS}")
    if not all(1 <= n <= MAX_PROMPT for n in lengths):
        raise ValueError(f"prompt lengths {lengths}: each must lie between 1 and {MAX_PROMPT} tokens")
    return lengths


def request_batch(ids: tuple[int, ...], lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) ids left-padded to the longest prompt, and the 1/0 mask: request r reads the text from its token 3r on,
    round and round, for its own length, so the requests differ."""
    longest = max(lengths)
    batch = torch.zeros(len(lengths), longest, dtype=torch.long)  # (B, T)
    mask = torch.zeros(len(lengths), longest, dtype=torch.long)  # (B, T)
    for request, n in enumerate(lengths):
        batch[request, longest - n:] = torch.tensor([ids[(3 * request + i) % len(ids)] for i in range(n)])
        mask[request, longest - n:] = 1
    return batch, mask


@st.cache_data(max_entries=32, show_spinner="Generating through the paged cache and the contiguous one…")
def paged_generation(config_json: str, seed: int, ids: tuple[int, ...], lengths: tuple[int, ...], new_tokens: int,
                     block_size: int) -> dict:
    """Both caches on the same batch: the block tables after each pass (``PagedStep`` as dicts), the bytes each cache
    holds at the end, whether the tokens agree and the largest logit difference."""
    model = get_model(config_json, seed)
    batch, mask = request_batch(ids, list(lengths))
    batch, mask = batch.to(model.device), mask.to(model.device)  # (B, T) each
    outputs, logits = {}, {}
    caches = {"contiguous": KVCache(), "paged": PagedKVCache(block_size=block_size)}
    for layout, cache in caches.items():
        with recording(names="hook_logits") as recorder:
            outputs[layout] = model.generate(batch, new_tokens, attention_mask=mask, cache=cache)  # (B, T + new)
        logits[layout] = torch.stack([e.tensor[:, -1].float() for e in recorder.trace.events])  # (steps, B, vocab)
    paged = caches["paged"]
    return {"steps": [asdict(step) for step in paged.steps],
            "same_tokens": bool(torch.equal(outputs["paged"], outputs["contiguous"])),
            "max_logit_diff": float((logits["paged"] - logits["contiguous"]).abs().max()),
            "nbytes": {layout: cache.nbytes for layout, cache in caches.items()}}
