"""Generation: the KV cache changes the cost, never the result; sampling is seeded and top-k bounded."""
import itertools

import pytest
import torch

from transformer import KVCache, choices
from transformer.hooks import recording

KV_HEADS = [4, 2, 1]
NEW_TOKENS = 12


@pytest.fixture
def lively_model(tiny_model):
    """A tiny model with larger random weights, so the next token depends on the context
    (at the usual 0.02 init a random model just repeats its last token)."""
    def build(**changes):
        model = tiny_model(**changes)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(p.numel()))
        return model
    return build


def prompt_batch():
    """(2, 5) prompt: row 0 full, row 1 left-padded by two."""
    ids = torch.randint(1, 32, (2, 5), generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    return ids.masked_fill(mask == 0, 0), mask


def generate_with_step_logits(model, ids, **kwargs):
    """generate(), plus the logits of the last position at every step, (steps, B, vocab)."""
    with recording(names="hook_logits") as recorder:
        out = model.generate(ids, NEW_TOKENS, **kwargs)
    return out, torch.stack([e.tensor[:, -1] for e in recorder.trace.events])


GREEDY_CASES = [dict(arch=arch, position=position, n_kv_heads=kv, sliding_window=window)
                for arch, position, kv, window in itertools.product(
                    ["decoder", "encoder-decoder"], choices("position"), KV_HEADS, [None, 3])]
GREEDY_CASES += [dict(arch=arch, position="rope", n_kv_heads=kv, sliding_window=window, ffn="moe")
                 for arch, kv, window in itertools.product(["decoder", "encoder-decoder"], [2, 1], [None, 3])]
GREEDY_CASES += [dict(arch=arch, position="learned", norm="layernorm", norm_position="post", ffn="gelu", bias=True)
                 for arch in ["decoder", "encoder-decoder"]]
GREEDY_CASES += [dict(position="alibi", norm="layernorm", ffn="gelu", parallel_block=True, embed_norm=True, n_kv_heads=1)]


@pytest.mark.parametrize("changes", GREEDY_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_cached_greedy_generation_equals_recomputing(changes, lively_model):
    model = lively_model(**changes)
    ids, mask = prompt_batch()
    for attention_mask in (None, mask):
        cached, cached_logits = generate_with_step_logits(model, ids, use_cache=True, attention_mask=attention_mask)
        recomputed, recomputed_logits = generate_with_step_logits(model, ids, use_cache=False, attention_mask=attention_mask)
        assert cached_logits.shape == (NEW_TOKENS, 2, 32)
        torch.testing.assert_close(cached_logits, recomputed_logits, atol=1e-4, rtol=1e-4)
        assert torch.equal(cached, recomputed)
        prompt_length = 1 if model.cfg.arch == "encoder-decoder" else ids.shape[1]  # targets start from one token
        assert cached.shape == (2, prompt_length + NEW_TOKENS)


def test_left_padding_in_generation_leaves_the_real_row_unchanged(lively_model):
    """A row generated inside a left-padded batch continues exactly as it does alone."""
    model = lively_model(position="rope", n_kv_heads=2, sliding_window=3)
    ids, mask = prompt_batch()
    batched = model.generate(ids, NEW_TOKENS, attention_mask=mask)
    alone = model.generate(ids[1:, 2:], NEW_TOKENS)
    assert torch.equal(batched[1, 2:], alone[0])


@pytest.mark.parametrize("n_kv_heads", KV_HEADS)
def test_cache_stores_only_the_kv_heads(n_kv_heads, lively_model):
    model = lively_model(n_kv_heads=n_kv_heads)
    ids, _ = prompt_batch()
    cache = KVCache()
    model.generate(ids, NEW_TOKENS, cache=cache)
    B, L, d_head = 2, model.cfg.n_layers, model.cfg.d_head
    T = ids.shape[1] + NEW_TOKENS - 1  # the last new token is returned, never fed back
    assert cache.length == T
    assert cache.shapes() == [(B, n_kv_heads, T, d_head)] * L
    assert cache.nbytes == 2 * L * B * n_kv_heads * T * d_head * 4  # K and V, float32


def test_encoder_decoder_cache_holds_target_keys_and_encoder_keys(lively_model):
    model = lively_model(arch="encoder-decoder", n_kv_heads=2)
    src, _ = prompt_batch()
    cache = KVCache()
    model.generate(src, NEW_TOKENS, cache=cache)
    B, L, G, d_head, S, T = 2, model.cfg.n_layers, 2, model.cfg.d_head, src.shape[1], NEW_TOKENS
    # per decoder block: self-attention keys of the T target tokens fed so far, cross-attention keys of the S source tokens
    assert sorted(cache.shapes()) == sorted([(B, G, T, d_head)] * L + [(B, G, S, d_head)] * L)
    assert cache.nbytes == 2 * L * B * G * (T + S) * d_head * 4


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_seeded_sampling_is_reproducible_and_the_seed_matters(arch, lively_model):
    model = lively_model(arch=arch)
    ids, mask = prompt_batch()

    def sample(seed):
        return model.generate(ids, NEW_TOKENS, attention_mask=mask, temperature=1.5, top_k=8,
                              generator=torch.Generator().manual_seed(seed))

    assert torch.equal(sample(0), sample(0))
    assert not torch.equal(sample(0), sample(1))


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_top_k_one_is_greedy(arch, lively_model):
    model = lively_model(arch=arch, position="alibi")
    ids, _ = prompt_batch()
    greedy = model.generate(ids, NEW_TOKENS)
    sampled = model.generate(ids, NEW_TOKENS, temperature=1.0, top_k=1, generator=torch.Generator().manual_seed(3))
    assert torch.equal(sampled, greedy)


def test_top_k_sampling_picks_only_among_the_k_most_likely(lively_model):
    model = lively_model()
    ids, _ = prompt_batch()
    out, step_logits = generate_with_step_logits(model, ids, temperature=3.0, top_k=3,
                                                 generator=torch.Generator().manual_seed(4))
    chosen = out[:, ids.shape[1]:]  # (B, steps)
    top3 = step_logits.topk(3, dim=-1).indices  # (steps, B, 3)
    assert (top3 == chosen.T[..., None]).any(-1).all()
    greedy = step_logits.argmax(-1).T  # (B, steps)
    assert not torch.equal(chosen, greedy), "at temperature 3 some pick should not be the argmax"
