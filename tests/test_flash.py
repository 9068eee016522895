"""Tiled (flash) attention equals the five lines, skips what the mask hides, and records its steps."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer import Transformer, TransformerConfig, masks
from transformer.attention import AttentionInputs, attend, merge_heads
from transformer.costs import full_attention_bytes, tiled_attention_bytes
from transformer.flash import TiledAttention, steps_from_trace, tile_plan, tiled_attention, trace_tiled_attention
from transformer.hooks import name_hook_points, recording
from transformer.positions import alibi_bias, alibi_slopes

H, D_HEAD = 4, 8
TOL = dict(atol=1e-5, rtol=1e-5)

# mask name -> (is_causal, window, attention_mask rows or None)
MASKS = {
    "none": (False, None, None),
    "causal": (True, None, None),
    "padding": (False, None, [[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]]),
    "causal+left padding": (True, None, [[0, 0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]]),  # rows 0-2 of batch 0 see nothing
    "sliding window": (True, 3, None),
    "bidirectional window": (False, 5, None),
    "one sequence all padding": (True, 2, [[1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0]]),
}
BLOCKS = [(2, 2), (3, 5), (16, 16)]  # 7 is divisible by none of them


def qkv(t_q, t_kv, n_kv_heads, batch=2, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, H, t_q, D_HEAD, generator=g)
    k = torch.randn(batch, n_kv_heads, t_kv, D_HEAD, generator=g)
    v = torch.randn(batch, n_kv_heads, t_kv, D_HEAD, generator=g)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def library_mask(t_q, t_kv, is_causal, window, attention_mask):
    """The library's boolean mask, queries at the last t_q of t_kv positions (as with a KV cache)."""
    q_pos, k_pos = torch.arange(t_kv - t_q, t_kv), torch.arange(t_kv)
    am = None if attention_mask is None else torch.tensor(attention_mask)
    return masks.self_attention(q_pos, k_pos, is_causal=is_causal, window=window, attention_mask=am), q_pos, k_pos


def library_explicit(q, k, v, allowed, alibi):
    """The library's own five lines (Attention.explicit_attention) with no projections around them."""
    return attend(q, k, v, AttentionInputs.from_allowed(allowed, alibi), fused=False)  # (B, T_q, H * d_head)


def sdpa(q, k, v, allowed, alibi):
    bias = masks.to_additive(allowed) + (0 if alibi is None else alibi)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, enable_gqa=q.shape[1] != k.shape[1])


@pytest.mark.parametrize("block_q,block_k", BLOCKS)
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1], ids=["MHA", "GQA", "MQA"])
@pytest.mark.parametrize("position", ["none", "alibi"])
@pytest.mark.parametrize("mask_name", list(MASKS))
def test_tiled_equals_explicit_core_and_sdpa(mask_name, position, n_kv_heads, block_q, block_k):
    T = 7
    is_causal, window, attention_mask = MASKS[mask_name]
    q, k, v = qkv(T, T, n_kv_heads)
    allowed, q_pos, k_pos = library_mask(T, T, is_causal, window, attention_mask)
    slopes = alibi_slopes(H) if position == "alibi" else None
    alibi = alibi_bias(slopes, q_pos[None], k_pos[None]) if position == "alibi" else None

    out, tiles = tiled_attention(q, k, v, allowed=None if attention_mask is None else masks.padding(torch.tensor(attention_mask)),
                                 is_causal=is_causal, window=window, alibi_slopes=slopes, block_q=block_q, block_k=block_k)
    torch.testing.assert_close(merge_heads(out), library_explicit(q, k, v, allowed, alibi), **TOL)
    torch.testing.assert_close(out, sdpa(q, k, v, allowed, alibi), **TOL)
    assert len(tiles) == math.ceil(T / block_q) * math.ceil(T / block_k)

    # the same masks handed over as one additive bias, the way the library adds them
    bias = masks.to_additive(allowed) + (0 if alibi is None else alibi)
    out_from_bias, tiles_from_bias = tiled_attention(q, k, v, bias, block_q=block_q, block_k=block_k)
    torch.testing.assert_close(out_from_bias, out, **TOL)
    assert not any(tile.skipped for tile in tiles_from_bias)  # a bias alone reveals no structure to skip


@pytest.mark.parametrize("block_q,block_k", [(2, 3), (4, 4)])
@pytest.mark.parametrize("t_q,t_kv,is_causal,attention_mask", [
    (5, 9, False, None),  # cross-attention shape
    (5, 9, False, [[1] * 6 + [0] * 3, [0] * 9]),  # padded source; batch 1 sees nothing
    (3, 8, True, None),  # a cached decoding step: 3 new queries after 5 cached keys
    (6, 4, True, None),  # more queries than keys: the first two see no key at all
])
def test_tiled_handles_unequal_query_and_key_lengths(t_q, t_kv, is_causal, attention_mask, block_q, block_k):
    q, k, v = qkv(t_q, t_kv, n_kv_heads=2)
    allowed, _, _ = library_mask(t_q, t_kv, is_causal, None, attention_mask)
    out, _ = tiled_attention(q, k, v, allowed=allowed, is_causal=is_causal, block_q=block_q, block_k=block_k)
    torch.testing.assert_close(merge_heads(out), library_explicit(q, k, v, allowed, None), **TOL)
    torch.testing.assert_close(out, sdpa(q, k, v, allowed, None), **TOL)


def test_rows_that_see_nothing_get_uniform_weights_over_every_key():
    # left padding + causal: padding queries see only padding keys; their tiles past the diagonal are skipped,
    # yet the library's answer is the mean of all values, and tiled attention gives that too
    q, k, v = qkv(6, 6, n_kv_heads=1, batch=1)
    attention_mask = torch.tensor([[0, 0, 0, 0, 1, 1]])
    out, tiles = tiled_attention(q, k, v, allowed=masks.padding(attention_mask), is_causal=True, block_q=2, block_k=2)
    assert any(tile.skipped and tile.q_block == 0 for tile in tiles)
    mean_of_values = v.mean(dim=2)  # (1, 1, d_head), shared by every query head (MQA)
    for row in range(4):
        torch.testing.assert_close(out[0, :, row], mean_of_values[0].expand(H, -1), **TOL)


def test_causal_skipping_counts_tiles_above_the_diagonal():
    T, block = 8, 2
    # derived from the rule: a tile is skipped when every key in it comes after every query in it
    expected_skipped = sum(
        all(key > query for query in range(i, i + block) for key in range(j, j + block))
        for i in range(0, T, block) for j in range(0, T, block))
    tiles = tile_plan(T, T, block, block, is_causal=True)
    assert len(tiles) == (T // block) ** 2
    assert sum(tile.skipped for tile in tiles) == expected_skipped
    # and the skipped tiles really are not computed: only computed tiles record scores
    q, k, v = qkv(T, T, n_kv_heads=H, batch=1)
    with recording() as recorder:
        TiledAttention(block, block)(q, k, v, is_causal=True)
    n_score_tiles = sum(event.name == "hook_tile_scores" for event in recorder.trace.events)
    assert n_score_tiles == len(tiles) - expected_skipped


@pytest.mark.parametrize("is_causal,window", [(True, 3), (False, 3)])
def test_window_skipping_follows_the_window_rule(is_causal, window):
    T, block_q, block_k = 11, 2, 3

    def sees(query, key):  # the library's rule, written out: causal W keys, or (W-1)//2 each side
        return 0 <= query - key < window if is_causal else abs(query - key) <= (window - 1) // 2

    tiles = tile_plan(T, T, block_q, block_k, is_causal=is_causal, window=window)
    for tile in tiles:
        visible = any(sees(query, key) for query in range(tile.q_start, tile.q_stop) for key in range(tile.k_start, tile.k_stop))
        assert tile.skipped == (not visible), tile
    assert sum(tile.skipped for tile in tiles) > 0


def test_recorded_running_max_and_sum_match_a_hand_computation():
    # T=4, blocks of 2. Query 0's scores rise in the second key block (its sum must be rescaled);
    # query 1's do not.
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.5]])
    k = torch.tensor([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0], [0.0, -2.0]])
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [-1.0, 3.0]])
    out, steps = trace_tiled_attention(q[None, None], k[None, None], v[None, None], block_q=2, block_k=2)

    S = q.numpy() @ k.numpy().T / np.sqrt(2)
    assert [(s["q_block"], s["k_block"]) for s in steps] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for q_block in (0, 1):
        rows = slice(2 * q_block, 2 * q_block + 2)
        first, second = S[rows, 0:2], S[rows, 2:4]
        m1 = first.max(axis=1)
        l1 = np.exp(first - m1[:, None]).sum(axis=1)
        m2 = np.maximum(m1, second.max(axis=1))
        l2 = l1 * np.exp(m1 - m2) + np.exp(second - m2[:, None]).sum(axis=1)
        step1, step2 = steps[2 * q_block], steps[2 * q_block + 1]
        assert np.all(np.isneginf(step1["m_before"])) and np.all(step1["l_before"] == 0)
        np.testing.assert_allclose(step1["m_after"][0, 0], m1, rtol=1e-6)
        np.testing.assert_allclose(step1["l_after"][0, 0], l1, rtol=1e-6)
        np.testing.assert_allclose(step2["m_before"][0, 0], m1, rtol=1e-6)
        np.testing.assert_allclose(step2["l_before"][0, 0], l1, rtol=1e-6)
        np.testing.assert_allclose(step2["m_after"][0, 0], m2, rtol=1e-6)
        np.testing.assert_allclose(step2["l_after"][0, 0], l2, rtol=1e-6)
        np.testing.assert_allclose(step2["rescale"][0, 0], np.exp(m1 - m2), rtol=1e-6)
        np.testing.assert_allclose(step2["scores"][0, 0], second, rtol=1e-6)
    assert steps[1]["rescale"][0, 0, 0] < 1 and steps[1]["rescale"][0, 0, 1] == 1
    full_weights = np.exp(S - S.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out[0, 0].numpy(), full_weights @ v.numpy() / full_weights.sum(axis=1, keepdims=True), rtol=1e-5)


def test_step_records_chain_into_the_output():
    q, k, v = qkv(7, 7, n_kv_heads=2, batch=1, seed=3)
    out, steps = trace_tiled_attention(q, k, v, is_causal=True, window=4, block_q=3, block_k=2)
    assert [s["step"] for s in steps] == list(range(len(steps)))
    assert any(s["skipped"] for s in steps) and not all(s["skipped"] for s in steps)
    v_heads = v.repeat_interleave(2, dim=1).numpy()  # (1, H, T, d_head): each query head's values
    for previous, step in zip([None] + steps, steps):
        same_block = previous is not None and previous["q_block"] == step["q_block"]
        acc_before = previous["acc"] if same_block else np.zeros_like(step["acc"])
        if same_block:
            np.testing.assert_array_equal(step["m_before"], previous["m_after"])
            np.testing.assert_array_equal(step["l_before"], previous["l_after"])
        if step["skipped"]:
            assert step["scores"] is None and step["probs"] is None
            np.testing.assert_array_equal(step["m_after"], step["m_before"])
            np.testing.assert_array_equal(step["acc"], acc_before)
            continue
        k0, k1 = step["k_cols"]
        np.testing.assert_allclose(step["rescale"], np.exp(step["m_before"] - step["m_after"]), rtol=1e-6)
        np.testing.assert_allclose(step["probs"], np.exp(step["scores"] - step["m_after"][..., None]), rtol=1e-6)
        np.testing.assert_allclose(step["l_after"], step["l_before"] * step["rescale"] + step["probs"].sum(-1), rtol=1e-5)
        np.testing.assert_allclose(step["acc"], acc_before * step["rescale"][..., None] + step["probs"] @ v_heads[:, :, k0:k1],
                                   rtol=1e-5, atol=1e-6)
    # the last tile of every query block has produced that block's final output
    for last, after in zip(steps, steps[1:] + [None]):
        if after is None or after["q_block"] != last["q_block"]:
            r0, r1 = last["q_rows"]
            np.testing.assert_allclose(last["out_so_far"], out[:, :, r0:r1].numpy(), rtol=1e-5, atol=1e-6)


def test_trace_events_walk_the_tiles_in_order_under_a_module_path():
    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.flash = TiledAttention(block_q=2, block_k=3)

        def forward(self, q, k, v):
            return self.flash(q, k, v, is_causal=True)

    model = Wrapper()
    name_hook_points(model)
    q, k, v = qkv(5, 5, n_kv_heads=1, batch=1, seed=1)
    with torch.no_grad(), recording() as recorder:
        out, tiles = model(q, k, v)
    names = [event.name for event in recorder.trace.events]
    per_tile = ["flash.hook_tile", "flash.hook_tile_scores", "flash.hook_running_max", "flash.hook_rescale",
                "flash.hook_tile_probs", "flash.hook_running_sum", "flash.hook_partial_out"]
    expected = [name for tile in tiles for name in (per_tile[:1] if tile.skipped else per_tile)] + ["flash.hook_out"]
    assert names == expected
    steps = steps_from_trace(recorder.trace, prefix="flash.")
    _, direct_steps = trace_tiled_attention(q, k, v, is_causal=True, block_q=2, block_k=3)
    assert [(s["q_block"], s["k_block"], s["skipped"]) for s in steps] == [(t.q_block, t.k_block, t.skipped) for t in tiles]
    for ours, theirs in zip(steps, direct_steps):
        np.testing.assert_array_equal(ours["l_after"], theirs["l_after"])


@pytest.mark.parametrize("cfg_changes", [
    dict(position="rope", n_kv_heads=2, sliding_window=3),
    dict(position="alibi", n_kv_heads=1),
], ids=["rope-GQA-window", "alibi-MQA"])
def test_tiled_reproduces_a_models_recorded_attention(cfg_changes):
    cfg = TransformerConfig(d_model=H * D_HEAD, n_heads=H, n_layers=1, **cfg_changes)
    model = Transformer(cfg, device="cpu").set_fused(False)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [0, 0, 3, 4, 5, 6, 7]])
    attention_mask = (ids != 0).long()
    rotated = cfg.position == "rope"
    names = {x: f"blocks.0.attn.hook_{'rot_' + x if rotated and x != 'v' else x}" for x in "qkv"}
    _, trace = model.run_with_trace(ids, attention_mask=attention_mask, names=[*names.values(), "blocks.0.attn.hook_z"])
    slopes = alibi_slopes(H) if cfg.position == "alibi" else None
    out, _ = tiled_attention(trace[names["q"]], trace[names["k"]], trace[names["v"]], allowed=masks.padding(attention_mask),
                             is_causal=True, window=cfg.sliding_window, alibi_slopes=slopes, block_q=3, block_k=2)
    torch.testing.assert_close(out, trace["blocks.0.attn.hook_z"], **TOL)


def test_bfloat16_runs_finite_and_close_to_float32():
    q, k, v = qkv(9, 9, n_kv_heads=2, dtype=torch.bfloat16)
    args = dict(allowed=masks.padding(torch.tensor([[0, 1, 1, 1, 1, 1, 1, 1, 1]] * 2)), is_causal=True,
                alibi_slopes=alibi_slopes(H), block_q=4, block_k=3)
    out, _ = tiled_attention(q, k, v, **args)
    reference, _ = tiled_attention(q.float(), k.float(), v.float(), **args)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), reference, atol=3e-2, rtol=3e-2)


def test_memory_arithmetic_matches_the_tensors_each_method_holds():
    B, T = 2, 7
    cfg = TransformerConfig(d_model=H * D_HEAD, n_heads=H, n_layers=1)
    model = Transformer(cfg, device="cpu")
    _, trace = model.run_with_trace(torch.ones(B, T, dtype=torch.long),
                                    names=["blocks.0.attn.hook_attn_scores", "blocks.0.attn.hook_pattern"])
    assert full_attention_bytes(B, H, T, dtype_bytes=4) == trace.nbytes

    q, k, v = qkv(T, T, n_kv_heads=H, batch=B)
    _, steps = trace_tiled_attention(q, k, v, block_q=3, block_k=2)
    full_tile = steps[0]  # rows 0-2 against keys 0-1: a whole tile
    running_stats = 2 * B * H * T * 4  # m and l for every query row, float32
    expected = running_stats + full_tile["scores"].nbytes + full_tile["probs"].nbytes + full_tile["acc"].nbytes
    assert tiled_attention_bytes(B, H, T, 3, 2, D_HEAD) == expected

    # doubling T quadruples the full matrices but only adds 2 * B * H * T float32 statistics to tiled
    assert full_attention_bytes(B, H, 2 * T, 2) == 4 * full_attention_bytes(B, H, T, 2)
    assert tiled_attention_bytes(B, H, 2 * T, 64, 64, 128) - tiled_attention_bytes(B, H, T, 64, 64, 128) == 2 * B * H * T * 4
    assert full_attention_bytes(1, 32, 4096, 2, T_kv=8192) == 2 * 32 * 4096 * 8192 * 2


@pytest.mark.parametrize("call,message", [
    (lambda q, k, v: tiled_attention(q, k[:, :3], v[:, :3]), "H=4 query heads cannot share G=3"),
    (lambda q, k, v: tiled_attention(q, k, v, block_q=0), "block_q=0"),
    (lambda q, k, v: tiled_attention(q, k, v, window=0), "window=0"),
    (lambda q, k, v: tiled_attention(q, k, v, torch.zeros(3, 1, 5, 5)), "does not broadcast"),
    (lambda q, k, v: tiled_attention(q, k, v, allowed=torch.ones(1, 1, 5, 5)), "must be a bool mask"),
    (lambda q, k, v: tiled_attention(q, k, v, alibi_slopes=torch.ones(2)), "(4,)"),
    (lambda q, k, v: tiled_attention(q[0], k, v), "(B, H, T_q, d_head)"),
])
def test_invalid_input_raises_value_error_naming_the_numbers(call, message):
    q, k, v = qkv(5, 5, n_kv_heads=4)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(q, k, v)
