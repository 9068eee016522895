"""Bytes moved between HBM and SRAM by three ways of computing the same attention, counted as they run.

    explicit   the five lines: S = Q Kᵀ / √d_head is written to HBM, read back for the softmax, the weights P
               written, read back for P V; two T × T matrices go out and come back per head.
    FA1 order  FlashAttention 1's loops (Dao et al., 2022): outer over K/V blocks, inner over Q blocks. K_j and V_j
               stay in SRAM for a whole pass; every inner step reads Q_i, the partial output O_i and its
               statistics m_i, l_i from HBM and writes O_i, m_i, l_i back.
    FA2 order  FlashAttention 2's loops (Dao, 2023): outer over Q blocks, inner over K/V blocks. Q_i, the output
               accumulator and m, l stay in SRAM until the block is done; O_i is written once. This is the library's
               own TiledAttention (transformer.flash), counted through its ``traffic`` argument.

Every function takes an hbm.HBMTraffic and reports each matrix or tile it loads and stores; the closed forms
below are what the tests compare those counts with, never what the counts are made of. Given a traffic with an
SRAM size, the two tiled loops refuse (ValueError) blocks whose step does not fit before loading anything.

API (q (B, H, T_q, d_head); k, v (B, G, T_kv, d_head), as transformer.flash)::

    out = explicit_attention_counted(q, k, v, traffic, *, is_causal=False)     # (B, H, T_q, d_head)
    out = fa1_attention(q, k, v, traffic=None, *, block_q, block_k, is_causal=False)
    out = fa2_attention(q, k, v, traffic=None, *, block_q, block_k, is_causal=False)

    explicit_bytes(T_q, T_kv, d_head, element_bytes)                  -> {"reads", "writes"} per head
    fa1_bytes(T_q, T_kv, d_head, block_q, block_k, element_bytes)     -> {"reads", "writes"} per head, no mask
    fa2_bytes(T_q, T_kv, d_head, block_q, block_k, element_bytes)     -> {"reads", "writes"} per head, no mask

    SRAM_KEPT  {loop order: what stays in SRAM across its inner loop}
"""
from __future__ import annotations

import itertools
import math

import torch

from . import masks
from .flash import MASKED, TiledAttention, query_key_positions, tile_plan
from .hbm import STATS_BYTES, HBMTraffic

SRAM_KEPT = {
    "explicit": "nothing across steps: each of the five lines reads its inputs from HBM and writes its result back",
    "FA1 order": "K_j and V_j for a whole pass over the query blocks; Q_i, O_i, m_i and l_i come from HBM and go "
                 "back at every inner step",
    "FA2 order": "Q_i, the output accumulator and m_i, l_i until the query block is done; only K_j and V_j are "
                 "loaded at every inner step",
}


def explicit_attention_counted(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, traffic: HBMTraffic, *,
                               is_causal: bool = False) -> torch.Tensor:
    """softmax(Q Kᵀ / √d_head, masked) V as the five lines run it, each line reading from and writing to HBM."""
    group = q.shape[1] // k.shape[1]  # query heads per kv head
    scale = 1.0 / math.sqrt(q.shape[-1])
    q_pos, k_pos = query_key_positions(q.shape[2], k.shape[2], q.device)
    q_in = traffic.read("Q", q).float()  # (B, H, T_q, d_head)
    k_in = traffic.read("K", k).float().repeat_interleave(group, dim=1)  # (B, H, T_kv, d_head)
    scores = traffic.write("S", q_in @ k_in.transpose(-2, -1) * scale)  # (B, H, T_q, T_kv): out to HBM
    sees = masks.self_attention(q_pos, k_pos, is_causal=is_causal)  # (1, 1, T_q, T_kv), from positions
    scores = traffic.read("S", scores).masked_fill(~sees, MASKED)  # (B, H, T_q, T_kv): back for the softmax
    weights = traffic.write("P", torch.softmax(scores, dim=-1))  # (B, H, T_q, T_kv): out to HBM again
    v_in = traffic.read("V", v).float().repeat_interleave(group, dim=1)  # (B, H, T_kv, d_head)
    out = traffic.read("P", weights) @ v_in  # (B, H, T_q, d_head)
    return traffic.write("O", out).to(q.dtype)  # (B, H, T_q, d_head)


def fa1_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, traffic: HBMTraffic | None = None, *,
                  block_q: int, block_k: int, is_causal: bool = False) -> torch.Tensor:
    """Exact attention with FlashAttention 1's loop order: outer over K/V blocks, inner over Q blocks.

    The output O and the statistics m, l live in HBM between passes (initialised there, as the paper's
    Algorithm 1 does) and are normalised at every update, so O is right after the last pass.
    Tiles the causal mask hides entirely are skipped and move nothing.
    """
    traffic = traffic if traffic is not None else HBMTraffic()
    B, H, t_q, d_head = q.shape
    traffic.check_tiles(block_q, block_k, d_head)  # a kernel sizes its SRAM by its blocks
    t_kv = k.shape[2]
    group = H // k.shape[1]  # query heads per kv head
    scale = 1.0 / math.sqrt(d_head)
    q_pos, k_pos = query_key_positions(t_q, t_kv, q.device)
    # HBM starts with O = 0, m = -inf, l = 0 for every row
    out = traffic.write("O", torch.zeros(B, H, t_q, d_head, device=q.device))  # (B, H, T_q, d_head)
    m_hbm = traffic.write("m, l", torch.full((B, H, t_q), float("-inf"), device=q.device), STATS_BYTES)  # (B, H, T_q)
    l_hbm = traffic.write("m, l", torch.zeros(B, H, t_q, device=q.device), STATS_BYTES)  # (B, H, T_q)

    tiles = sorted(tile_plan(t_q, t_kv, block_q, block_k, is_causal=is_causal), key=lambda t: (t.k_block, t.q_block))
    for _, column in itertools.groupby(tiles, key=lambda tile: tile.k_block):
        computed = [tile for tile in column if not tile.skipped]
        if not computed:
            continue  # the mask hides this key block from every query: K_j and V_j are never loaded
        cols = slice(computed[0].k_start, computed[0].k_stop)
        # loaded once, kept in SRAM for the whole pass over the query blocks
        k_j = traffic.read("K", k[:, :, cols]).float().repeat_interleave(group, dim=1)  # (B, H, cols, d_head)
        v_j = traffic.read("V", v[:, :, cols]).float().repeat_interleave(group, dim=1)  # (B, H, cols, d_head)
        for tile in computed:
            rows = slice(tile.q_start, tile.q_stop)
            q_i = traffic.read("Q", q[:, :, rows]).float()  # (B, H, rows, d_head)
            o_i = traffic.read("O", out[:, :, rows])  # (B, H, rows, d_head): the output so far, normalised
            m_i = traffic.read("m, l", m_hbm[:, :, rows], STATS_BYTES)  # (B, H, rows)
            l_i = traffic.read("m, l", l_hbm[:, :, rows], STATS_BYTES)  # (B, H, rows)
            sees = masks.self_attention(q_pos[rows], k_pos[cols], is_causal=is_causal)  # (1, 1, rows, cols)
            scores = (q_i @ k_j.transpose(-2, -1) * scale).masked_fill(~sees, MASKED)  # (B, H, rows, cols)
            m_new = torch.maximum(m_i, scores.amax(dim=-1))  # (B, H, rows)
            probs = torch.exp(scores - m_new[..., None])  # (B, H, rows, cols)
            kept = l_i * torch.exp(m_i - m_new)  # (B, H, rows): the old sum measured against the new max
            l_new = kept + probs.sum(dim=-1)  # (B, H, rows)
            o_new = (kept[..., None] * o_i + probs @ v_j) / l_new[..., None]  # (B, H, rows, d_head)
            # everything this step learnt goes back to HBM: the next key block needs it
            out[:, :, rows] = traffic.write("O", o_new)
            m_hbm[:, :, rows] = traffic.write("m, l", m_new, STATS_BYTES)
            l_hbm[:, :, rows] = traffic.write("m, l", l_new, STATS_BYTES)
    return out.to(q.dtype)  # (B, H, T_q, d_head)


def fa2_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, traffic: HBMTraffic | None = None, *,
                  block_q: int, block_k: int, is_causal: bool = False) -> torch.Tensor:
    """Exact attention with FlashAttention 2's loop order: the library's TiledAttention, counted."""
    out, _ = TiledAttention(block_q, block_k)(q, k, v, is_causal=is_causal, traffic=traffic)
    return out  # (B, H, T_q, d_head)


# --- closed forms, per head and without a mask: what the tests hold the counts to ----------------------------


def explicit_bytes(t_q: int, t_kv: int, d_head: int, element_bytes: int) -> dict[str, int]:
    """Q, K, V read once; S and P (T_q × T_kv) each written and read back; O written once."""
    return {"reads": (t_q * d_head + 2 * t_kv * d_head + 2 * t_q * t_kv) * element_bytes,
            "writes": (2 * t_q * t_kv + t_q * d_head) * element_bytes}


def fa1_bytes(t_q: int, t_kv: int, d_head: int, block_q: int, block_k: int, element_bytes: int) -> dict[str, int]:
    """K, V read once; Q, O, m and l read once per key block; O, m, l written once to start and once per key block."""
    passes = math.ceil(t_kv / block_k)  # outer loop: one pass over the queries per key block
    rows = t_q * d_head * element_bytes  # one full sweep of Q or of O
    stats = 2 * t_q * STATS_BYTES  # m and l of every row
    return {"reads": 2 * t_kv * d_head * element_bytes + passes * (2 * rows + stats),
            "writes": (1 + passes) * (rows + stats)}


def fa2_bytes(t_q: int, t_kv: int, d_head: int, block_q: int, block_k: int, element_bytes: int) -> dict[str, int]:
    """Q read once; K and V read once per query block; O written once."""
    passes = math.ceil(t_q / block_q)  # outer loop: one pass over the keys per query block
    return {"reads": (t_q * d_head + passes * 2 * t_kv * d_head) * element_bytes,
            "writes": t_q * d_head * element_bytes}
