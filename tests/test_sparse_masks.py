"""Sparse attention patterns (strided, block-local, global + local): each mask against its definition
written out pair by pair, the fused SDPA path equal to the explicit five lines within 1e-5 on every
architecture, position scheme and kv-head count, cached generation equal to recomputing, weights exactly 0
outside the pattern, the allowed-pair counts the pages show, and the messages for impossible sizes."""
import itertools

import pytest
import torch

from transformer import AXES, Transformer, TransformerConfig, analysis, choices, masks
from transformer.attention import AttentionInputs, attend
from transformer.costs import forward_flops_per_token, keys_seen

PATTERNS = [p for p in choices("attention_pattern") if p != "dense"]
T = 10


def by_definition(pattern: str, t: int, size: int, causal: bool, n_global: int = 1) -> torch.Tensor:
    """The pattern, one pair at a time, straight from its description."""
    allowed = torch.zeros(t, t, dtype=torch.bool)
    for i, j in itertools.product(range(t), range(t)):
        d = i - j
        if pattern == "strided":  # Child et al. 2019: the last `size` keys, and every size-th key
            ok = abs(d) < size or d % size == 0
        elif pattern == "block-local":
            ok = i // size == j // size
        else:  # global-local: a local window and the first n_global tokens, both ways
            local = 0 <= d < size if causal else abs(d) <= (size - 1) // 2
            ok = local or i < n_global or j < n_global
        allowed[i, j] = ok and (d >= 0 or not causal)
    return allowed


@pytest.mark.parametrize("pattern,size,causal,n_global",
                         [(p, s, c, g) for p in PATTERNS for s in (1, 3, 4) for c in (True, False) for g in (0, 2)
                          if g == 0 or p == "global-local"])
def test_each_pattern_is_its_definition(pattern, size, causal, n_global):
    positions = torch.arange(T)
    built = masks.sparse(pattern, positions, positions, size, causal, n_global)
    assert torch.equal(built, by_definition(pattern, T, size, causal, n_global))
    assert built.diagonal().all()  # every token sees itself: no row is empty


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_cached_step_gets_the_rows_of_the_full_mask(pattern):
    positions = torch.arange(T)
    full = masks.self_attention(positions, positions, is_causal=True, pattern=pattern, pattern_size=3)
    step = masks.self_attention(positions[7:], positions, is_causal=True, pattern=pattern, pattern_size=3)
    assert torch.equal(step[0, 0], full[0, 0, 7:])


@pytest.mark.parametrize("pattern", PATTERNS)
def test_attend_fused_equals_explicit_on_the_pattern_with_gqa(pattern):
    positions = torch.arange(T)
    allowed = masks.self_attention(positions, positions, is_causal=True, pattern=pattern, pattern_size=3,
                                   attention_mask=torch.tensor([[1] * T, [0, 0] + [1] * (T - 2)]))  # (B, 1, T, T)
    inputs = AttentionInputs.from_allowed(allowed)
    assert not inputs.plain_causal and not inputs.no_mask
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, T, 8, generator=g)  # (B, H, T, d_head)
    k, v = (torch.randn(2, 2, T, 8, generator=g) for _ in range(2))  # (B, G, T, d_head)
    torch.testing.assert_close(attend(q, k, v, inputs, fused=True), attend(q, k, v, inputs, fused=False),
                               atol=1e-5, rtol=1e-5)


KV_HEADS = {"MHA": 4, "GQA": 2, "MQA": 1}
COMBINATIONS = list(itertools.product(PATTERNS, choices("arch"), choices("position"), KV_HEADS))


@pytest.mark.parametrize("pattern,arch,position,kv", COMBINATIONS, ids=["-".join(c) for c in COMBINATIONS])
def test_fused_equals_explicit_on_every_axis(pattern, arch, position, kv, tiny_model, logits_of):
    # the norm and FFN axes turn with the others, so every one of their choices meets every pattern
    index = COMBINATIONS.index((pattern, arch, position, kv))
    norm, ffn = choices("norm")[index % 2], choices("ffn")[index % 4]
    model = tiny_model(arch=arch, position=position, n_kv_heads=KV_HEADS[kv], norm=norm, ffn=ffn,
                       attention_pattern=pattern, pattern_size=3, n_global=1)
    ids = torch.randint(1, 32, (2, T), generator=torch.Generator().manual_seed(1))
    mask = torch.tensor([[1] * T, [1] * (T - 3) + [0] * 3])  # a right-padded row
    with torch.no_grad():
        fused = logits_of(model.set_fused(True), ids, mask)
        explicit = logits_of(model.set_fused(False), ids, mask)
    real = mask.bool() if arch != "encoder-decoder" else torch.ones_like(mask, dtype=torch.bool)
    torch.testing.assert_close(fused[real], explicit[real], atol=1e-5, rtol=1e-5)
    assert torch.isfinite(fused).all()


@pytest.mark.parametrize("arch,pattern", list(itertools.product(choices("arch"), PATTERNS)))
def test_weights_are_exactly_zero_outside_the_pattern(arch, pattern, tiny_model):
    model = tiny_model(arch=arch, attention_pattern=pattern, pattern_size=3, n_global=2)
    ids = torch.randint(1, 32, (1, T), generator=torch.Generator().manual_seed(2))
    args = (ids, ids) if arch == "encoder-decoder" else (ids,)
    _, trace = model.run_with_trace(*args, names="*blocks.*.attn.hook_pattern")
    for event in trace.events:
        causal = not event.name.startswith("encoder.") and arch != "encoder"
        outside = ~by_definition(pattern, T, 3, causal, n_global=2)  # (T, T)
        assert (event.tensor[..., outside] == 0).all(), event.name
        assert (event.tensor[..., ~outside] > 0).all(), event.name


@pytest.mark.parametrize("pattern", PATTERNS)
def test_cached_generation_equals_recomputing(pattern, tiny_model):
    model = tiny_model(attention_pattern=pattern, pattern_size=3, position="rope")
    prompt = torch.randint(1, 32, (2, 4), generator=torch.Generator().manual_seed(3))
    assert torch.equal(model.generate(prompt, 8, use_cache=True), model.generate(prompt, 8, use_cache=False))


def test_allowed_pairs_against_n_squared():
    t = 64
    counts = {kind: int(analysis.allowed_matrix(kind, t, 8, causal=False, n_global=2).sum()) for kind in PATTERNS}
    assert counts["block-local"] == t * 8  # T/b blocks of b x b
    # a window of 3 on each side (436 pairs), the 2 global rows and columns (252), 14 pairs counted in both
    assert counts["global-local"] == 436 + 252 - 14
    assert all(count < t * t / 2 for count in counts.values())  # each scores well under half of the N² pairs
    causal = int(analysis.allowed_matrix("block-local", t, 8, causal=True).sum())
    assert causal == (t // 8) * 8 * 9 // 2  # each block's lower triangle


def test_the_flops_of_a_token_count_the_keys_its_pattern_allows():
    cfg = TransformerConfig(attention_pattern="block-local", pattern_size=16)
    assert keys_seen(cfg, 1000) == 8  # the last token, 999, is the 8th of its block 992 .. 1007
    assert forward_flops_per_token(cfg, 1000) < forward_flops_per_token(cfg.replace(attention_pattern="dense"), 1000)
    assert keys_seen(cfg.replace(attention_pattern="strided"), 64) == 16 + 3  # 16 within reach; 16, 32, 48 back


@pytest.mark.parametrize("changes,words", [
    (dict(attention_pattern="strided", sliding_window=4), ["sliding_window=None", "now 4"]),
    (dict(attention_pattern="block-local", pattern_size=0), ["pattern_size=0", "at least 1"]),
    (dict(attention_pattern="global-local", n_global=-1), ["n_global=-1"]),
    (dict(attention_pattern="banded"), ["'banded'", "'strided'"]),
])
def test_impossible_patterns_are_refused_with_the_fix(changes, words):
    with pytest.raises(ValueError) as error:
        TransformerConfig(**changes)
    assert all(word in str(error.value) for word in words), str(error.value)


@pytest.mark.parametrize("kind,size,n_global,words", [
    ("block-local", 16, 1, ["block of 16", "T = 8", "between 1 and 8"]),
    ("strided", 0, 1, ["stride of 0"]),
    ("global-local", 3, 9, ["9 global tokens", "T = 8"]),
])
def test_a_size_that_does_not_fit_the_text_is_refused(kind, size, n_global, words):
    with pytest.raises(ValueError) as error:
        analysis.allowed_matrix(kind, 8, size, n_global=n_global)
    assert all(word in str(error.value) for word in words), str(error.value)


def test_tiles_a_block_sparse_kernel_must_compute():
    t, size = 256, 16
    n = t // size
    assert analysis.tiles_needed("block-local", t, size, size) == n  # the diagonal tiles only
    assert analysis.tiles_needed("strided", t, size, size) == n * (n + 1) // 2  # a stride of one tile touches every one
    # the diagonal, the tiles below it (a window of one tile reaches back into them) and the rest of the first
    # column (the global token)
    assert analysis.tiles_needed("global-local", t, size, size, n_global=1) == n + (n - 1) + (n - 2)
    with pytest.raises(ValueError, match="t=250 is not a multiple of the tile size 16"):
        analysis.tiles_needed("strided", 250, size, size)


def test_the_sparse_benchmark_runs_and_its_block_sparse_path_is_exact():
    from benchmarks import sparse_masks

    rows = sparse_masks.main(["--smoke"])
    assert {(r["T"], r["pattern"]) for r in rows} == {(t, p) for t in sparse_masks.SMOKE["lengths"] for p in PATTERNS}
    for row in rows:
        assert 0 < row["pairs"] <= row["tiles"] <= 1 and row["masked_vs_dense"] > 0
    assert all(r["max_difference"] < 1e-5 for r in rows if r["pattern"] == "block-local")


@pytest.mark.parametrize("pattern,crosses", [("block-local", False), ("strided", True), ("global-local", True)])
def test_what_the_text_says_crosses_a_block_in_a_stack_of_layers_does(pattern, crosses):
    """The table's words: blocks that are the same in every layer never pass information across a block boundary,
    however many layers are stacked; strides and global tokens do."""
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=32, d_model=16, n_heads=2, n_layers=4, max_len=64,
                                          attention_pattern=pattern, pattern_size=4, position="rope",
                                          arch="encoder")).eval()  # Longformer's setting: globals see all
    ids = torch.randint(1, 32, (1, 24))
    changed = ids.clone()
    changed[0, 1] = (ids[0, 1] + 1) % 32  # a token of the first block
    with torch.no_grad():
        moved = (model(ids) - model(changed))[0, 12:].abs().max()  # two blocks on
    assert (moved > 1e-6) if crosses else (moved == 0)  # not one bit moves across a block
    words = AXES["attention_pattern"].problem
    assert "never" in words and "blocks that are the same in every layer" in words
