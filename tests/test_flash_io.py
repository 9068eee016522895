"""Bytes moved between HBM and SRAM: the counts the running code reports equal the closed forms, counting changes
no output, FlashAttention 1's and 2's loop orders agree, and a tile too large for SRAM is refused by name."""
from __future__ import annotations

import pytest
import torch

from transformer.attention import AttentionInputs, attend
from transformer.flash import tiled_attention
from transformer.flash_io import (explicit_attention_counted, explicit_bytes, fa1_attention, fa1_bytes, fa2_attention,
                                  fa2_bytes)
from transformer.hbm import (SRAM_BYTES_A100, STATS_BYTES, HBMTraffic, check_tiles_fit, largest_square_block,
                             tile_sram_bytes)
from transformer import masks

B, H = 2, 3
# (T_q = T_kv, d_head, block_q, block_k): blocks that divide T, that do not, and larger than T
SHAPES = [(32, 8, 8, 8), (37, 16, 8, 5), (20, 4, 32, 7), (64, 32, 16, 64)]


def qkv(t, d_head, n_kv_heads=H, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, t, d_head, generator=g)  # (B, H, T, d_head)
    k = torch.randn(B, n_kv_heads, t, d_head, generator=g)  # (B, G, T, d_head)
    v = torch.randn(B, n_kv_heads, t, d_head, generator=g)  # (B, G, T, d_head)
    return q, k, v


def library_five_lines(q, k, v, is_causal=False):
    positions = torch.arange(q.shape[2])
    allowed = masks.self_attention(positions, positions, is_causal=is_causal)  # (1, 1, T, T)
    out = attend(q, k, v, AttentionInputs.from_allowed(allowed), fused=False)  # (B, T, H * d_head)
    return out.view(q.shape[0], q.shape[2], q.shape[1], q.shape[3]).transpose(1, 2)  # (B, H, T, d_head)


@pytest.mark.parametrize("element_bytes", [2, 4])
@pytest.mark.parametrize("t, d_head, block_q, block_k", SHAPES)
def test_each_way_moves_exactly_its_closed_form_and_its_output_is_unchanged(t, d_head, block_q, block_k,
                                                                            element_bytes):
    q, k, v = qkv(t, d_head)
    reference = library_five_lines(q, k, v)
    runs = {
        "explicit": (lambda c: explicit_attention_counted(q, k, v, c), explicit_bytes(t, t, d_head, element_bytes)),
        "FA1": (lambda c: fa1_attention(q, k, v, c, block_q=block_q, block_k=block_k),
                fa1_bytes(t, t, d_head, block_q, block_k, element_bytes)),
        "FA2": (lambda c: fa2_attention(q, k, v, c, block_q=block_q, block_k=block_k),
                fa2_bytes(t, t, d_head, block_q, block_k, element_bytes)),
    }
    for name, (run, closed) in runs.items():
        traffic = HBMTraffic(element_bytes)
        out = run(traffic)
        # the closed forms are per head; the counter saw every batch row and head
        assert traffic.read_bytes == B * H * closed["reads"], name
        assert traffic.write_bytes == B * H * closed["writes"], name
        torch.testing.assert_close(out, reference, atol=1e-5, rtol=1e-5)


def test_the_counts_are_the_matrices_named_in_the_closed_forms():
    t, d_head, block = 64, 16, 16
    q, k, v = qkv(t, d_head)
    per_head = lambda n_bytes: n_bytes // (B * H)  # noqa: E731
    explicit = HBMTraffic(2)
    explicit_attention_counted(q, k, v, explicit)
    square = t * t * 2
    assert {m: per_head(n) for m, n in explicit.writes.items()} == {"S": square, "P": square, "O": t * d_head * 2}
    assert per_head(explicit.reads["S"]) == per_head(explicit.reads["P"]) == square  # both read back
    fa2 = HBMTraffic(2)
    fa2_attention(q, k, v, fa2, block_q=block, block_k=block)
    assert set(fa2.writes) == {"O"} and per_head(fa2.writes["O"]) == t * d_head * 2  # O leaves SRAM once
    assert per_head(fa2.reads["K"]) == (t // block) * t * d_head * 2  # K once per query block
    fa1 = HBMTraffic(2)
    fa1_attention(q, k, v, fa1, block_q=block, block_k=block)
    assert per_head(fa1.reads["K"]) == t * d_head * 2  # K once in all
    assert per_head(fa1.reads["O"]) == (t // block) * t * d_head * 2  # O back from HBM once per key block
    assert per_head(fa1.writes["m, l"]) == (1 + t // block) * 2 * t * STATS_BYTES


def test_counting_leaves_the_library_tiled_output_unchanged_and_skipped_tiles_move_nothing():
    q, k, v = qkv(48, 8, n_kv_heads=1)  # GQA: three query heads read one kv head
    plain, _ = tiled_attention(q, k, v, is_causal=True, block_q=8, block_k=8)
    traffic = HBMTraffic(2)
    counted, tiles = tiled_attention(q, k, v, is_causal=True, block_q=8, block_k=8, traffic=traffic)
    assert torch.equal(plain, counted)
    computed = sum(not tile.skipped for tile in tiles)
    assert computed == 21 < len(tiles) == 36  # 6 query blocks: 1 + 2 + ... + 6 tiles on or below the diagonal
    assert traffic.reads["K"] == traffic.reads["V"] == computed * B * 1 * 8 * 8 * 2  # one kv head's block per tile
    full = HBMTraffic(2)
    tiled_attention(q, k, v, block_q=8, block_k=8, traffic=full)
    assert full.reads["K"] == len(tiles) * B * 8 * 8 * 2 > traffic.reads["K"]


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("t, d_head, block_q, block_k", SHAPES)
def test_fa1_and_fa2_loop_orders_give_the_same_output(t, d_head, block_q, block_k, is_causal):
    q, k, v = qkv(t, d_head, seed=1)
    fa1 = fa1_attention(q, k, v, block_q=block_q, block_k=block_k, is_causal=is_causal)
    fa2 = fa2_attention(q, k, v, block_q=block_q, block_k=block_k, is_causal=is_causal)
    assert (fa1 - fa2).abs().max() <= 1e-5
    torch.testing.assert_close(fa1, library_five_lines(q, k, v, is_causal), atol=1e-5, rtol=1e-5)


def test_the_causal_explicit_output_matches_and_its_traffic_does_not_shrink():
    q, k, v = qkv(24, 8)
    traffic = HBMTraffic(2)
    out = explicit_attention_counted(q, k, v, traffic, is_causal=True)
    torch.testing.assert_close(out, library_five_lines(q, k, v, True), atol=1e-5, rtol=1e-5)
    assert traffic.read_bytes == B * H * explicit_bytes(24, 24, 8, 2)["reads"]  # S and P are still T x T


def test_the_explicit_version_moves_about_four_times_more_at_4096_by_64():
    t, d_head, block = 4096, 64, 128
    explicit = explicit_bytes(t, t, d_head, 2)
    fa2 = fa2_bytes(t, t, d_head, block, block, 2)
    ratio = sum(explicit.values()) / sum(fa2.values())
    assert 3.8 < ratio < 4.1  # 4 T² + 4 T d against (2 + 2 T / block) T d
    fa1 = fa1_bytes(t, t, d_head, block, block, 2)
    assert sum(fa1.values()) > sum(fa2.values())  # FA1 also carries O, m and l to and fro


def test_a_tile_larger_than_sram_is_refused_naming_both_sizes():
    parts = tile_sram_bytes(128, 128, 64, 2)
    needed = sum(parts.values())
    assert needed == (128 * 64 + 2 * 128 * 64) * 2 + (128 * 128 + 128 * 64 + 2 * 128) * 4 == 148_480
    check_tiles_fit(128, 128, 64, 2, SRAM_BYTES_A100)  # fits: no error
    with pytest.raises(ValueError) as error:
        check_tiles_fit(256, 256, 64, 2, SRAM_BYTES_A100)
    message = str(error.value)
    assert f"{sum(tile_sram_bytes(256, 256, 64, 2).values()):,} bytes" in message and "196,608 bytes" in message
    fits = largest_square_block(64, 2, SRAM_BYTES_A100)
    assert f"block_q = block_k = {fits} fits" in message
    assert sum(tile_sram_bytes(fits, fits, 64, 2).values()) <= SRAM_BYTES_A100
    assert sum(tile_sram_bytes(fits + 1, fits + 1, 64, 2).values()) > SRAM_BYTES_A100
    with pytest.raises(ValueError, match="not even one row fits"):
        check_tiles_fit(1, 1, 64, 4, 100)
    with pytest.raises(ValueError, match="at least 1"):
        check_tiles_fit(0, 8, 64, 2, SRAM_BYTES_A100)
    with pytest.raises(ValueError, match="element_bytes=0"):
        HBMTraffic(0)


def test_the_loop_order_benchmark_times_both_orders_and_reports_their_counted_bytes(capsys):
    from benchmarks import flash_loop_order
    results = flash_loop_order.main(["--smoke"])
    by_method = {row["method"]: row for row in results}
    assert set(by_method) == {"FA1 order", "FA2 order", "sdpa"}
    assert all(row["seconds"] > 0 and row["max_diff"] < 1e-5 for row in results)
    t, d_head, block = flash_loop_order.SMOKE_LENGTHS[0], 64, 128
    heads = flash_loop_order.B * flash_loop_order.H
    assert by_method["FA1 order"]["mib_moved"] * 2 ** 20 == heads * sum(fa1_bytes(t, t, d_head, block, block, 2).values())
    assert by_method["FA2 order"]["mib_moved"] * 2 ** 20 == heads * sum(fa2_bytes(t, t, d_head, block, block, 2).values())
    assert by_method["sdpa"]["mib_moved"] is None
    assert "FA1 order" in capsys.readouterr().out


@pytest.mark.parametrize("loop", [fa1_attention, fa2_attention])
def test_both_loops_refuse_tiles_larger_than_the_counters_sram_before_loading_anything(loop):
    q, k, v = qkv(64, 64)
    traffic = HBMTraffic(2, sram_bytes=SRAM_BYTES_A100)
    with pytest.raises(ValueError, match=r"tiles of 256 × 256 with d_head = 64 need 428,032 bytes .* 196,608 bytes"):
        loop(q, k, v, traffic, block_q=256, block_k=256)
    assert traffic.total_bytes == 0
    loop(q, k, v, traffic, block_q=128, block_k=128)  # 148,480 bytes: fits
    assert traffic.total_bytes > 0
