"""The paged KV cache: keys and values in fixed-size blocks through a block table per request generate exactly what
the contiguous cache generates, take a block only when a request's last one is full, and store no padding."""
import math

import pytest
import torch

from transformer import AXES, CACHE_LAYOUTS, KVCache, PagedKVCache
from transformer.costs import reserved_tokens
from transformer.hooks import recording

NEW_TOKENS = 9
BLOCK_SIZES = [1, 3, 16]
MODELS = {  # the softmax K/V cache and each other thing a layer caches: a latent, a state, the encoder's keys
    "GQA-rope": dict(n_kv_heads=2),
    "MQA-alibi-window": dict(n_kv_heads=1, position="alibi", sliding_window=3),
    "MLA": dict(kv_rank=8, rope_dim=2, head_dim=6),
    "indexer": dict(index_top_k=3, index_heads=2, index_head_dim=8),
    "hybrid": dict(n_layers=4, attention_layers="1:1", linear_kind="deltanet"),
    "encoder-decoder": dict(arch="encoder-decoder", n_kv_heads=2),
}


@pytest.fixture
def lively_model(tiny_model):
    """A tiny model with larger random weights, so the next token depends on the context."""
    def build(**changes):
        model = tiny_model(**changes)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(p.numel()))
        return model
    return build


def requests_of_mixed_lengths():
    """Three requests of 7, 4 and 1 tokens, left-padded into a (3, 7) batch."""
    lengths = [7, 4, 1]
    ids = torch.randint(1, 32, (3, 7), generator=torch.Generator().manual_seed(5))
    mask = torch.tensor([[0] * (7 - n) + [1] * n for n in lengths])
    return ids.masked_fill(mask == 0, 0), mask, lengths


def generate_with_step_logits(model, ids, mask, cache):
    """generate() into `cache`, and the last position's logits at every step, (steps, B, vocab)."""
    with recording(names="hook_logits") as recorder:
        out = model.generate(ids, NEW_TOKENS, attention_mask=mask, cache=cache)
    return out, torch.stack([e.tensor[:, -1] for e in recorder.trace.events])


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("name", MODELS)
def test_paged_generation_equals_the_contiguous_cache(name, block_size, lively_model):
    model = lively_model(**MODELS[name])
    ids, mask, _ = requests_of_mixed_lengths()
    if model.cfg.row("arch").cross:
        mask = None  # the encoder reads the padded source; the decoder's targets all start from one token
    contiguous, contiguous_logits = generate_with_step_logits(model, ids, mask, KVCache())
    paged_cache = PagedKVCache(block_size=block_size)
    paged, paged_logits = generate_with_step_logits(model, ids, mask, paged_cache)
    assert torch.equal(paged, contiguous)
    assert (paged_logits - contiguous_logits).abs().max() <= 1e-5
    assert paged_cache.n_blocks > 0 and len(paged_cache.steps) == NEW_TOKENS


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_each_request_takes_a_block_only_when_its_last_one_is_full(block_size, lively_model):
    model = lively_model(n_kv_heads=2)
    ids, mask, lengths = requests_of_mixed_lengths()
    cache = PagedKVCache(block_size=block_size)
    model.generate(ids, NEW_TOKENS, attention_mask=mask, cache=cache)
    assert len(cache.steps) == NEW_TOKENS  # the prompt's pass, then one pass per fed-back token
    for step_number, step in enumerate(cache.steps):
        stored = [n + step_number for n in lengths]  # padding takes no slot; each pass adds one token per request
        assert list(step.lengths) == stored
        assert [len(table) for table in step.tables] == [math.ceil(n / block_size) for n in stored]
        assert step.empty_slots == sum(-n % block_size for n in stored)  # only each request's last block has room
        assert all(-n % block_size < block_size for n in stored)
        every_block = [block for table in step.tables for block in table]
        assert sorted(every_block) == list(range(step.blocks))  # no block shared, none skipped
        if step_number:  # a table only grows: blocks already handed out stay where they are
            for before, after in zip(cache.steps[step_number - 1].tables, step.tables):
                assert after[:len(before)] == before
    # every layer's pool holds exactly the blocks handed out, each of block_size tokens of G heads
    B, G, d_head, L = 3, 2, model.cfg.d_head, model.cfg.n_layers
    assert cache.nbytes == 2 * L * cache.n_blocks * block_size * G * d_head * 4


def test_the_pool_holds_each_token_where_the_table_says(lively_model):
    """Reading block table entry by entry gives back the keys the contiguous cache holds for the real tokens."""
    model = lively_model(n_kv_heads=2)
    ids, mask, lengths = requests_of_mixed_lengths()
    contiguous, paged = KVCache(), PagedKVCache(block_size=3)
    model.generate(ids, 4, attention_mask=mask, cache=contiguous)
    model.generate(ids, 4, attention_mask=mask, cache=paged)
    layer = model.blocks[1].attn
    keys = contiguous[layer][0]  # (B, G, T, d_head), padding included
    key_pool = paged.layers[layer][0]  # (n_blocks, block_size, G, d_head)
    for request, table in enumerate(paged.tables):
        n = paged.lengths[request]
        own = torch.cat([key_pool[block] for block in table])[:n]  # (n, G, d_head) read through the table
        assert torch.equal(own, keys[request, :, -n:].transpose(0, 1))  # its real tokens are the last n


def test_paging_wastes_at_most_one_partly_filled_block_per_request():
    lengths, max_length = [7, 40, 3, 19], 64
    contiguous, paged = (reserved_tokens(layout, lengths, max_length, block_size=16) for layout in ("contiguous", "paged"))
    assert contiguous == [64, 64, 64, 64]
    assert paged == [16, 48, 16, 32]
    assert all(0 <= held - n < 16 for held, n in zip(paged, lengths))
    assert reserved_tokens("paged", lengths, max_length, block_size=1) == lengths  # a block per token wastes nothing
    with pytest.raises(ValueError, match="max_length=10"):
        reserved_tokens("contiguous", [12], 10, block_size=4)


def test_a_cache_layout_per_row_of_the_table():
    assert [AXES["kv_cache"].row(key).blocks for key in CACHE_LAYOUTS] == [False, True]
    with pytest.raises(ValueError, match="'pages'"):
        reserved_tokens("pages", [1], 4, block_size=2)


@pytest.mark.parametrize("block_size", [0, -3, 2.5, True])
def test_a_page_size_below_one_is_refused_by_name(block_size):
    with pytest.raises(ValueError, match=f"block_size={block_size!r}"):
        PagedKVCache(block_size=block_size)
    with pytest.raises(ValueError, match="block_size"):
        reserved_tokens("paged", [5], 8, block_size=block_size)


def test_one_paged_cache_serves_one_batch(lively_model):
    model = lively_model()
    cache = PagedKVCache(block_size=4)
    model.generate(torch.ones(2, 3, dtype=torch.long), 2, cache=cache)
    with pytest.raises(ValueError, match="holds 2 requests, not 3"):
        model.generate(torch.ones(3, 3, dtype=torch.long), 2, cache=cache)
