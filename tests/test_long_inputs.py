"""A long text never makes a T x T tensor on the default path: a causal model hands SDPA no mask at all, and every
other rule of keys (windows, chunks, padding, ALiBi, T5 buckets, sinks, soft-capping, sparse patterns) works
through blocks of query rows, each with its own small mask. The blocks change nothing: logits equal one block's
and the explicit five lines', forward and backward."""
import pytest
import torch
import torch.nn.functional as F

from transformer import Transformer, TransformerConfig, attention, masks
from tiny_models import TINY, build

T = 40
ROWS = 7  # rows per block in the tests: 40 rows make six blocks, the last one short

CASES = {
    "causal, GQA": dict(),
    "sliding window": dict(sliding_window=5),
    "chunks with NoPE layers and q's temperature": dict(attention_chunk=8, nope_layers="1", attn_temperature_scale=0.5,
                                                       attn_temperature_floor=4.0),
    "ALiBi": dict(position="alibi"),
    "sinks in a window": dict(sinks=True, sliding_window=6),
    "soft-capping": dict(attn_softcap=1.5),
    "gated attention, MQA": dict(attn_gate=True, n_kv_heads=1),
    "MLA": dict(kv_rank=8, rope_dim=2, head_dim=6, v_head_dim=4, n_kv_heads=None),
    "a sparse pattern": dict(attention_pattern="strided", pattern_size=4),
    "encoder": dict(arch="encoder", position="learned"),
    "encoder-decoder with T5 buckets": dict(arch="encoder-decoder", position="t5"),
}



def run(model, ids, mask):
    if model.cfg.arch == "encoder-decoder":
        return model(ids, ids[:, :T - 3], attention_mask=mask)
    return model(ids, attention_mask=mask)


def batch():
    """Two rows, the second left-padded (some of its query rows see no key at all)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 32, (2, T), generator=g)
    mask = torch.ones(2, T, dtype=torch.long)
    mask[1, :3] = 0
    return ids, mask


@pytest.mark.parametrize("name", CASES)
def test_blocks_of_query_rows_give_the_logits_and_gradients_of_one_block(name, monkeypatch):
    model = build(CASES[name])
    ids, mask = batch()
    whole = run(model, ids, mask)
    whole.square().mean().backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()

    monkeypatch.setattr(attention, "TILE_ENTRIES", ROWS * T)
    built = []
    original = masks.self_attention
    monkeypatch.setattr(masks, "self_attention", lambda q, *a, **k: built.append(len(q)) or original(q, *a, **k))
    tiled = run(model, ids, mask)
    torch.testing.assert_close(tiled, whole, atol=1e-5, rtol=0)
    tiled.square().mean().backward()
    for n, p in model.named_parameters():
        if n in expected:
            torch.testing.assert_close(p.grad, expected[n], atol=1e-5, rtol=1e-4, msg=n)
    assert built and max(built) <= ROWS  # every self-attention mask made was one block's
    with torch.no_grad():
        explicit = run(model.set_fused(False), ids, mask)
    torch.testing.assert_close(explicit, whole.detach(), atol=1e-5, rtol=0)


def test_a_causal_model_makes_no_mask_on_a_long_text(monkeypatch):
    model = Transformer(TransformerConfig(**{**TINY, "max_len": 4096}), device="cpu").eval()
    asked = []
    monkeypatch.setattr(masks, "self_attention", lambda *a, **k: asked.append(a) or pytest.fail("a mask was made"))
    monkeypatch.setattr(masks, "to_additive", lambda *a, **k: asked.append(a) or pytest.fail("a mask was made"))
    with torch.no_grad():
        logits = model(torch.randint(0, 32, (1, 3000)))
    assert logits.shape == (1, 3000, 32) and not asked


def test_a_window_on_a_long_text_reads_only_the_keys_each_block_of_rows_can_see(monkeypatch):
    model = Transformer(TransformerConfig(**{**TINY, "max_len": 4096, "sliding_window": 16}), device="cpu").eval()
    seen = []
    original = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda q, k, *a, **kw: seen.append(
        (q.shape[2], k.shape[2])) or original(q, k, *a, **kw))
    ids = torch.randint(0, 32, (1, 3000))
    rows = attention.TILE_ENTRIES // 3000
    with torch.no_grad():
        tiled = model(ids)
        monkeypatch.setattr(attention, "TILE_ENTRIES", 3000 * 3000)
        whole = model(ids)
    torch.testing.assert_close(tiled, whole, atol=1e-5, rtol=0)
    blocks = seen[:len(seen) - TINY["n_layers"]]  # the first pass's calls; the second ran one block a layer
    assert len(blocks) == TINY["n_layers"] * -(-3000 // rows)
    assert all(t_kv <= t_q + 15 for t_q, t_kv in blocks)  # each block's own rows and the 15 keys before them
