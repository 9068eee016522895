"""DeepSeek-V4's compressed attention (compress_layers) and hyper-connections (hyper_streams): validated fields and
entries of the layer plan, recorded through hooks, fused = explicit, cached generation = recomputation, and the
hyper-connection's weights equal to Hugging Face's own module on the same parameters."""
import pytest
import torch

from transformer import Transformer, TransformerConfig
from transformer.hyper_connections import sinkhorn
from transformer.model import KVCache

V4 = dict(n_layers=3, d_model=32, n_heads=4, head_dim=16, rope_dim=8, n_kv_heads=1, q_rank=16, sliding_window=8,
          compress_layers="pooled 8, indexed 4, window", index_top_k=2, index_heads=2, index_head_dim=16,
          sinks=True, o_groups=2, o_rank=8, compress_rope_theta=160000.0, hyper_streams=3, max_len=64)


WITHOUT_BLOCK_INDEXER = dict(index_top_k=None, index_heads=4, index_head_dim=32)


def build(changes: dict | None = None, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(**{**V4, **(changes or {})})).eval()
    with torch.no_grad():  # every 1-D parameter off its initial value, so none can hide a missing term
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.3 * torch.randn_like(p))
        for name, p in model.named_parameters():
            if name.endswith("position_bias"):
                p.add_(0.5 * torch.randn_like(p))
    return model


def ids(B=2, T=30, seed=1):
    return torch.randint(0, 128, (B, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("changes", [{}, dict(hyper_streams=1), dict(o_groups=None, o_rank=None),
                                     dict(compress_layers="indexed 4, indexed 8, pooled 8", index_top_k=1)],
                         ids=["v4", "one stream", "plain W_o", "all indexed"])
def test_fused_equals_explicit(changes):
    model = build(changes)
    with torch.no_grad():
        fused = model.set_fused(True)(ids())
        explicit = model.set_fused(False)(ids())
    assert (fused - explicit).abs().max() <= 1e-5


def test_cached_generation_equals_recomputation():
    model = build()
    prompt = ids(T=5)
    cache = KVCache()
    cached = model.generate(prompt, 23, use_cache=True, cache=cache)  # crosses several blocks of 4 and of 8
    assert torch.equal(cached, model.generate(prompt, 23, use_cache=False))
    with torch.no_grad():
        full = model(cached)
        cache = KVCache()
        model(cached[:, :11], cache=cache)
        step = torch.cat([model(cached[:, t:t + 1], cache=cache) for t in range(11, cached.shape[1])], dim=1)
    assert (full[:, 11:] - step).abs().max() <= 1e-5


def test_hooks_record_blocks_window_choice_and_mixing():
    model = build()
    x = ids(B=1, T=21)
    _, trace = model.run_with_trace(x)
    blocks = trace["blocks.0.attn.hook_compressed_k"]
    assert blocks.shape == (1, 1, 21 // 8, 16)  # one key per finished block of 8
    chosen = trace["blocks.1.attn.block_indexer.hook_blocks_chosen"]  # (B, 1, T_q, n_blocks)
    assert chosen.shape == (1, 1, 21, 21 // 4)
    assert (chosen.sum(-1) <= 2).all()  # index_top_k blocks at most
    finished = torch.arange(5)[None] < ((torch.arange(21) + 1) // 4)[:, None]  # (T_q, n): ended at or before t
    assert not (chosen[0, 0] & ~finished).any()  # never a block that has not ended
    assert torch.equal(chosen[0, 0].sum(-1), finished.sum(-1).clamp(max=2))
    window = trace["blocks.2.attn.hook_window"][0, 0]  # (T_q, T_kv)
    assert torch.equal(window.sum(-1), (torch.arange(21) + 1).clamp(max=8))
    comb = trace["blocks.0.attn_hyper.hook_hyper_comb"]  # (B, T, n, n)
    assert comb.shape == (1, 21, 3, 3)
    assert torch.allclose(comb.sum(-1), torch.ones(1, 21, 3), atol=1e-4)
    assert torch.allclose(comb.sum(-2), torch.ones(1, 21, 3), atol=1e-4)
    assert trace["hyper_head.hook_hyper_pre"].shape == (1, 21, 3)


def test_a_query_never_reads_a_block_that_has_not_ended():
    model = build(dict(compress_layers="pooled 8, pooled 8, pooled 8", **WITHOUT_BLOCK_INDEXER))
    x = ids(B=1, T=24)
    changed = x.clone()
    changed[0, 15] = (x[0, 15] + 1) % 128  # the last token of block 1 (positions 8 to 15)
    with torch.no_grad():
        before, after = model(x), model(changed)
    assert torch.equal(before[0, :15], after[0, :15])  # before it: unchanged (the window and block 0 only)
    assert not torch.allclose(before[0, 16:], after[0, 16:])


def test_sinkhorn_makes_rows_and_columns_sum_to_one():
    weights = torch.rand(5, 4, 4) + 0.01
    mixed = sinkhorn(weights, 30, 1e-9)
    assert torch.allclose(mixed.sum(-1), torch.ones(5, 4), atol=1e-5)
    assert torch.allclose(mixed.sum(-2), torch.ones(5, 4), atol=1e-5)


def test_hyper_connection_equals_hugging_face_module():
    from transformers import DeepseekV4Config
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4HyperConnection, DeepseekV4HyperHead
    model = build()
    ours, head = model.blocks[1].mlp_hyper, model.hyper_head
    hf_cfg = DeepseekV4Config(hidden_size=32, hc_mult=3, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-5,
                              num_hidden_layers=1)
    theirs, their_head = DeepseekV4HyperConnection(hf_cfg), DeepseekV4HyperHead(hf_cfg)
    with torch.no_grad():
        theirs.fn.copy_(ours.proj), theirs.base.copy_(ours.bias), theirs.scale.copy_(ours.scale)
        their_head.hc_fn.copy_(head.proj), their_head.hc_base.copy_(head.bias), their_head.hc_scale.copy_(head.scale)
        streams = torch.randn(2, 7, 3, 32)
        read, post, comb = ours(streams)
        their_post, their_comb, their_read = theirs(streams)
        assert (read - their_read).abs().max() <= 1e-5
        assert (post - their_post).abs().max() <= 1e-6 and (comb - their_comb).abs().max() <= 1e-6
        assert (head(streams) - their_head(streams)).abs().max() <= 1e-5


BAD = [(dict(sliding_window=6), "does not divide its window of 6"),
       (dict(hyper_streams=0), "hyper_streams=0 must be at least 1"),
       (dict(compress_layers="pooled 8, pooled 8, window"), "index_top_k=2 is how many blocks"),
       (dict(compress_layers="pooled 8, indexed 4"), "names 2 layers but n_layers=3"),
       (dict(compress_layers="pooled x, indexed 4, window"), "does not parse"),
       (dict(index_top_k=None, index_heads=4, index_head_dim=32), "index_top_k=None"),
       (dict(n_kv_heads=2), "n_kv_heads=2"),
       (dict(q_rank=None), "q_rank=None"),
       (dict(o_rank=None), "go together"),
       (dict(o_groups=3, o_rank=8), "does not divide n_heads=4"),
       (dict(sliding_window=None), "has no window"),
       (dict(hyper_streams=2, norm_position="post"), "norm_position='pre'")]


@pytest.mark.parametrize("changes,words", BAD, ids=[w for _, w in BAD])
def test_bad_input_is_refused_by_name(changes, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        TransformerConfig(**{**V4, **changes})


def test_v4_settings_without_its_attention_are_refused():
    with pytest.raises(ValueError, match="o_groups=2 is a setting of DeepSeek-V4's attention"):
        TransformerConfig(o_groups=2, o_rank=8)


def test_the_config_round_trips_and_the_plan_names_each_layer():
    cfg = TransformerConfig(**V4)
    assert TransformerConfig.from_dict(cfg.to_dict()) == cfg
    plan = cfg.layer_plan()
    assert [(s.compress_rate, s.indexes_blocks) for s in plan] == [(8, False), (4, True), (0, False)]
    assert [s.rope_theta for s in plan] == [160000.0, 160000.0, 10000.0]  # the window-only layer keeps the main base


def test_a_text_shorter_than_one_block_reads_as_the_start_of_a_longer_one():
    """Before any pooled block has ended the layers see their window alone: a 3-token text's logits are the first
    three of a 21-token text's (blocks of 4 and 8)."""
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**V4)).eval()
    ids = torch.randint(1, 100, (1, 21))  # (1, 21)
    with torch.no_grad():
        short, long = model(ids[:, :3]), model(ids)  # (1, 3, vocab), (1, 21, vocab)
    assert torch.allclose(short, long[:, :3], atol=1e-5)
