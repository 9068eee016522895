"""The attention core on q, k, v of one's own: the same path, and the same numbers, as inside a model."""
import pytest
import torch

from transformer import masks
from transformer.attention import AttentionInputs, attend, merge_heads
from transformer.hooks import recording
from transformer.positions import alibi_bias, alibi_slopes

POSITIONS = torch.arange(6)


@pytest.mark.parametrize("allowed,alibi,plain_causal,no_mask", [
    (masks.self_attention(POSITIONS, POSITIONS, is_causal=True), False, True, False),
    (masks.self_attention(POSITIONS, POSITIONS, is_causal=False), False, False, True),
    (masks.self_attention(POSITIONS, POSITIONS, is_causal=True, window=3), False, False, False),
    (masks.self_attention(POSITIONS, POSITIONS, is_causal=True, attention_mask=torch.tensor([[1] * 6, [0] + [1] * 5])),
     False, False, False),
    (masks.self_attention(POSITIONS, POSITIONS, is_causal=True), True, False, False),  # ALiBi always needs the bias
    (masks.self_attention(POSITIONS[4:], POSITIONS, is_causal=True), False, False, False),  # queries after a cache
], ids=["causal", "none", "window", "padding", "causal+alibi", "cached step"])
def test_from_allowed_finds_the_shortcuts_sdpa_can_take(allowed, alibi, plain_causal, no_mask):
    t_q = allowed.shape[-2]
    bias = alibi_bias(alibi_slopes(4), POSITIONS[None, -t_q:], POSITIONS[None]) if alibi else None  # (1, H, T_q, T)
    inputs = AttentionInputs.from_allowed(allowed, bias)
    assert (inputs.plain_causal, inputs.no_mask) == (plain_causal, no_mask)
    assert torch.equal(inputs.mask, masks.to_additive(allowed))
    torch.testing.assert_close(inputs.fused_bias, inputs.mask + (0 if bias is None else bias))

    g = torch.Generator().manual_seed(0)
    q = torch.randn(allowed.shape[0], 4, t_q, 8, generator=g)  # (B, H, T_q, d_head)
    k, v = (torch.randn(allowed.shape[0], 2, 6, 8, generator=g) for _ in range(2))  # (B, G, T_kv, d_head)
    torch.testing.assert_close(attend(q, k, v, inputs, fused=True), attend(q, k, v, inputs, fused=False),
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("changes", [dict(position="rope", n_kv_heads=2, sliding_window=3),
                                     dict(position="alibi", n_kv_heads=1)], ids=["rope-GQA-window", "alibi-MQA"])
def test_attend_gives_what_the_model_computes_from_its_own_q_k_v(tiny_model, changes):
    model = tiny_model(n_layers=1, **changes)
    ids, attention_mask = torch.tensor([[3, 4, 5, 6, 7], [0, 0, 5, 6, 7]]), torch.tensor([[1] * 5, [0, 0, 1, 1, 1]])
    rotated = "rot_" if model.cfg.position == "rope" else ""
    names = [f"blocks.0.attn.hook_{rotated}q", f"blocks.0.attn.hook_{rotated}k", "blocks.0.attn.hook_v",
             "blocks.0.attn.hook_z"]
    _, trace = model.run_with_trace(ids, attention_mask=attention_mask, names=names)
    positions = torch.arange(5)
    allowed = masks.self_attention(positions, positions, is_causal=True, window=model.cfg.sliding_window,
                                   attention_mask=attention_mask)  # (B, 1, T, T)
    alibi = alibi_bias(alibi_slopes(4), positions[None], positions[None]) if model.cfg.position == "alibi" else None
    q, k, v = (trace[name] for name in names[:3])
    with torch.no_grad():
        out = attend(q, k, v, AttentionInputs.from_allowed(allowed, alibi))  # (B, T, H * d_head)
    torch.testing.assert_close(out, merge_heads(trace["blocks.0.attn.hook_z"]), atol=1e-5, rtol=1e-5)


def test_attend_records_the_five_lines_under_standalone_names():
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    with recording() as recorder:
        attend(q, k, v, AttentionInputs.from_allowed(masks.self_attention(torch.arange(4), torch.arange(4), is_causal=True)))
    assert recorder.trace.names() == ["hook_raw_scores", "hook_mask", "hook_attn_scores", "hook_pattern", "hook_z"]
    assert recorder.trace["hook_pattern"].shape == (1, 2, 4, 4)
