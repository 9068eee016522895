"""Masks: causal models never see the future, padding changes nothing real, windows stop at W."""
import itertools

import pytest
import torch

from transformer import choices
from transformer.hooks import recording

WINDOWS = [None, 3]
CAUSAL_CASES = list(itertools.product(["decoder", "encoder-decoder"], choices("position"), WINDOWS, ["swiglu", "moe"]))
ALL_ARCH_CASES = list(itertools.product(choices("arch"), choices("position"), WINDOWS))


def both_paths(model):
    """The model on its fused path, then on the explicit five lines."""
    yield model.set_fused(True)
    yield model.set_fused(False)


@pytest.mark.parametrize("arch,position,window,ffn", CAUSAL_CASES)
def test_changing_a_later_token_leaves_earlier_logits_unchanged(arch, position, window, ffn, tiny_model):
    model = tiny_model(arch=arch, position=position, sliding_window=window, ffn=ffn, n_kv_heads=2)
    T = 7
    base = torch.randint(1, 32, (1, T), generator=torch.Generator().manual_seed(0))
    # row t changes the token at position t + 1 only
    changed = base.repeat(T - 1, 1)  # (T-1, T)
    for t in range(T - 1):
        changed[t, t + 1] = (changed[t, t + 1] + 7) % 32
    src = torch.randint(1, 32, (T - 1, 5), generator=torch.Generator().manual_seed(1))  # encoder input, fixed
    for m in both_paths(model):
        with torch.no_grad():
            if arch == "encoder-decoder":
                before = m(src, base.repeat(T - 1, 1))
                after = m(src, changed)
            else:
                before, after = m(base.repeat(T - 1, 1)), m(changed)
        for t in range(T - 1):
            torch.testing.assert_close(after[t, : t + 1], before[t, : t + 1], atol=1e-6, rtol=0,
                                       msg=f"changing token {t + 1} moved the logits at positions <= {t}")
            assert not torch.allclose(after[t, t + 1], before[t, t + 1]), "the changed token itself must matter"


@pytest.mark.parametrize("arch,position,window", ALL_ARCH_CASES)
def test_right_padding_leaves_real_tokens_unchanged(arch, position, window, tiny_model, logits_of):
    model = tiny_model(arch=arch, position=position, sliding_window=window, ffn="moe", n_kv_heads=2)
    g = torch.Generator().manual_seed(3)
    real = torch.randint(1, 32, (2, 5), generator=g)
    padded = torch.cat((real, torch.zeros(2, 3, dtype=torch.long)), dim=1)  # three pad tokens appended
    mask = torch.cat((torch.ones(2, 5, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long)), dim=1)
    tgt = torch.randint(1, 32, (2, 4), generator=g)
    tgt_padded = torch.cat((tgt, torch.zeros(2, 2, dtype=torch.long)), dim=1)
    tgt_mask = torch.cat((torch.ones(2, 4, dtype=torch.long), torch.zeros(2, 2, dtype=torch.long)), dim=1)
    for m in both_paths(model):
        with torch.no_grad():
            alone = logits_of(m, real, None, tgt, None)
            with_pads = logits_of(m, padded, mask, tgt_padded, tgt_mask)
        n_real = alone.shape[1]
        torch.testing.assert_close(with_pads[:, :n_real], alone, atol=1e-5, rtol=0)
        assert torch.isfinite(with_pads).all()


@pytest.mark.parametrize("position", choices("position"))
def test_left_padding_with_position_ids_leaves_real_tokens_unchanged_and_makes_no_nan(position, tiny_model):
    """A left-padded decoder row: the pad queries see nothing at all (a fully masked row), yet no NaN."""
    model = tiny_model(position=position, n_kv_heads=2)
    real = torch.randint(1, 32, (1, 5), generator=torch.Generator().manual_seed(4))
    padded = torch.cat((torch.zeros(1, 3, dtype=torch.long), real), dim=1)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)  # real tokens count from 0, as generate() does
    for m in both_paths(model):
        with torch.no_grad():
            alone = m(real)
            logits, trace = m.run_with_trace(padded, attention_mask=mask, position_ids=position_ids)
        assert torch.isfinite(logits).all()
        torch.testing.assert_close(logits[:, 3:], alone, atol=1e-5, rtol=0)
        pattern = trace["blocks.0.attn.hook_pattern"]  # (B, H, T_q, T_kv)
        assert torch.isfinite(pattern).all()
        # a real query puts no weight at all on the pads
        assert (pattern[:, :, 3:, :3] == 0).all()


@pytest.mark.parametrize("arch", choices("arch"))
def test_fully_masked_query_rows_give_no_nan(arch, tiny_model, logits_of):
    """Window 3 and four trailing pads: the last pad query's window holds pads only, so its row is fully masked."""
    model = tiny_model(arch=arch, sliding_window=3, norm_position="post", norm="layernorm")
    ids = torch.randint(1, 32, (2, 8), generator=torch.Generator().manual_seed(5))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 4:] = 0
    for m in both_paths(model):
        with torch.no_grad():
            logits = logits_of(m, ids, mask, ids, mask)
        assert torch.isfinite(logits).all()
    if arch == "encoder-decoder":
        _, trace = model.run_with_trace(ids, ids, attention_mask=mask, tgt_attention_mask=mask)
    else:
        _, trace = model.run_with_trace(ids, attention_mask=mask)
    for stack in ("encoder.", "decoder.") if arch == "encoder-decoder" else ("",):
        allowed = trace[f"{stack}blocks.0.attn.hook_mask"] == 0  # (B, 1, T_q, T_kv)
        assert not allowed[1, 0, 7].any(), f"{stack}: the last pad query should have nothing to attend to"
        pattern = trace[f"{stack}blocks.0.attn.hook_pattern"]  # (B, H, T_q, T_kv)
        assert torch.isfinite(pattern).all()
        torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1]))


@pytest.mark.parametrize("arch,window,position", list(itertools.product(choices("arch"), [1, 2, 3, 5], ["rope", "alibi"])))
def test_sliding_window_never_looks_past_w(arch, window, position, tiny_model):
    model = tiny_model(arch=arch, sliding_window=window, position=position)
    T = 8
    ids = torch.randint(1, 32, (2, T), generator=torch.Generator().manual_seed(6))
    args = (ids, ids) if arch == "encoder-decoder" else (ids,)
    _, trace = model.run_with_trace(*args, names="*.attn.hook_pattern")
    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # query position - key position
    for event in trace.events:
        pattern = event.tensor  # (B, H, T_q, T_kv)
        causal = not event.name.startswith("encoder.") and arch != "encoder"
        if causal:
            outside = (distance >= window) | (distance < 0)  # further than W-1 back, or the future
            assert (pattern[..., outside] == 0).all(), f"{event.name} attends past the window"
        assert ((pattern > 0).sum(-1) <= window).all(), f"{event.name}: a query sees more than W={window} keys"
        assert ((pattern > 0).sum(-1) >= 1).all()
        torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1]))


def test_sliding_window_holds_during_cached_generation(tiny_model):
    window = 3
    model = tiny_model(sliding_window=window)
    ids = torch.randint(1, 32, (1, 4), generator=torch.Generator().manual_seed(7))
    with recording(names="blocks.*.attn.hook_pattern") as recorder:
        model.generate(ids, max_new_tokens=6)
    steps = recorder.trace.events
    assert len(steps) == 2 * 6  # two layers, six forward passes (prompt, then one token at a time)
    for event in steps[2:]:  # one new query against every cached key
        pattern = event.tensor  # (B, H, 1, T_kv)
        assert pattern.shape[2] == 1
        t_kv = pattern.shape[-1]
        assert (pattern[..., : t_kv - window] == 0).all()
        assert (pattern[..., t_kv - window:] > 0).all()
