"""Flash attention: exact attention without ever holding the T x T matrix.

The five lines of attention build a (T_q, T_kv) matrix of scores and another of
weights for every head. Tiled attention computes the same output one tile at a
time: the queries are cut into blocks of ``block_q`` rows, the keys and values
into blocks of ``block_k`` columns, and each query block sweeps across the key
blocks keeping only three things per query row:

    m    the running maximum of the scores seen so far
    l    the running sum of exp(score - m)
    acc  the running sum of exp(score - m) * value        (d_head numbers)

When a key block arrives with a larger maximum, everything summed so far was
measured against a maximum that was too small, so it is rescaled by
exp(m_old - m_new) before the new tile is added (the "online softmax"). After the
last key block, ``out = acc / l`` is exactly softmax(scores) @ V.

Tiles that the causal mask or the sliding window hide completely are known from
positions alone, before any data is read, so they are skipped, not computed.

API (everything a page needs; shapes use B batch, H query heads, G kv heads)::

    out, tiles = tiled_attention(q, k, v, bias=None, *, allowed=None, is_causal=False,
                                 window=None, alibi_slopes=None, block_q=64, block_k=64, traffic=None)
        q (B, H, T_q, d_head); k, v (B, G, T_kv, d_head); query head h reads kv head h // (H / G).
        bias     float, broadcastable to (B, H, T_q, T_kv): added to the scores
                 (a positions.alibi_bias, or an additive mask from masks.to_additive).
        allowed  bool, broadcastable to (B, H, T_q, T_kv): True = may attend
                 (masks.padding(attention_mask) is (B, 1, 1, T_kv): no T x T matrix needed).
        is_causal, window  the library's causal mask and sliding window (masks.self_attention);
                 they decide which tiles are skipped.
        alibi_slopes (H,)  ALiBi computed tile by tile (positions.alibi_bias on the tile's positions).
        Positions follow the library's KV cache: keys sit at 0..T_kv-1, queries at the last
        T_q of them (T_kv - T_q .. T_kv - 1).
        out (B, H, T_q, d_head) in q's dtype; tiles: list[Tile] in the order they were visited.
        traffic  an hbm.HBMTraffic that counts what this loop order (FlashAttention 2's: outer over
                 query blocks) moves: each Q block read once, the K and V blocks of every computed
                 tile read once per query block, each output block written once. Skipped tiles
                 move nothing; a bias or allowed mask is not counted.

    tile_plan(T_q, T_kv, block_q, block_k, *, is_causal=False, window=None) -> list[Tile]
        Which tiles are computed and which skipped, without any data (draw it as a grid).

    TiledAttention(block_q, block_k)  the nn.Module doing the work, with hook points
        hook_tile          (7,)  q_block, k_block, q_start, q_stop, k_start, k_stop, skipped
        hook_tile_scores   (B, H, rows, cols)  S = Q_i K_j^T / sqrt(d_head) + bias, masked
        hook_running_max   (B, H, rows)        m_new
        hook_rescale       (B, H, rows)        exp(m_old - m_new)
        hook_tile_probs    (B, H, rows, cols)  exp(S - m_new)
        hook_running_sum   (B, H, rows)        l_new
        hook_partial_out   (B, H, rows, d_head) acc after the tile
        hook_out           (B, H, T_q, d_head) the final output
      Inside ``hooks.recording()`` every computed tile fires them in this order (a skipped
      tile fires hook_tile only), so a trace walks the algorithm step by step.

    out, steps = trace_tiled_attention(q, k, v, bias=None, *, block_q, block_k, max_bytes=1 GiB,
                                       allowed=, is_causal=, window=, alibi_slopes=)
    steps = steps_from_trace(trace, prefix="")   # the same from any trace ("blocks.0.flash." inside a model)
        One plain dict per tile, in order (numpy float32 arrays keep the B and H axes):
        step, q_block, k_block (ints); q_rows, k_cols ((start, stop)); skipped (bool);
        scores, probs (B, H, rows, cols), None when skipped;
        m_before, m_after, l_before, l_after, rescale (B, H, rows);
        acc (B, H, rows, d_head) the accumulator after the tile, rescaled and added to;
        out_so_far (B, H, rows, d_head) = acc / l_after, the output if the keys stopped here
        (0 while l is 0). Each query block starts from m = -inf, l = 0, acc = 0; a skipped
        step changes nothing (after == before, rescale 1). The last step of a query block
        holds its final output, except for rows that see no key (below).

    The memory each way holds: full_attention_bytes and tiled_attention_bytes in transformer.costs.

Masked scores are the most negative float32, as in the library's additive masks,
not -inf. So a row that may see no key at all (a padding query) is what the
library makes of it: softmax of a constant row, uniform weights over all T_kv
keys, the mean of V, even where some of its tiles were skipped. A row is taken
to see nothing when its running max ends at that value (or at -inf, when every
tile of its block was skipped). Skipping follows is_causal and window only: masks
given as ``allowed`` or inside ``bias`` are applied inside the tiles they touch.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from . import masks
from .hbm import HBMTraffic
from .hooks import DEFAULT_MAX_BYTES, HookPoint, Trace, name_hook_points, recording
from .positions import alibi_bias

MASKED = torch.finfo(torch.float32).min  # a masked score: the most negative float32, as masks.to_additive puts


@dataclass(frozen=True)
class Tile:
    """One (query block, key block) pair: rows q_start..q_stop-1 against keys k_start..k_stop-1."""

    q_block: int
    k_block: int
    q_start: int
    q_stop: int
    k_start: int
    k_stop: int
    skipped: bool  # every (query, key) pair in it is hidden by the causal mask or the window


def query_key_positions(t_q: int, t_kv: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys at 0..T_kv-1, queries at the last T_q positions: the library's layout with a KV cache."""
    return torch.arange(t_kv - t_q, t_kv, device=device), torch.arange(t_kv, device=device)


def tile_plan(t_q: int, t_kv: int, block_q: int, block_k: int, *, is_causal: bool = False,
              window: int | None = None) -> list[Tile]:
    """Every tile in visiting order (query block by query block), each marked computed or skipped.

    A tile is skipped when masks.self_attention allows none of its pairs; that depends on
    positions only, so the plan is known before any query or key is read.
    """
    _check_blocks(block_q, block_k)
    q_pos, k_pos = query_key_positions(t_q, t_kv)
    tiles = []
    for i, q_start in enumerate(range(0, t_q, block_q)):
        q_stop = min(q_start + block_q, t_q)
        for j, k_start in enumerate(range(0, t_kv, block_k)):
            k_stop = min(k_start + block_k, t_kv)
            sees = masks.self_attention(q_pos[q_start:q_stop], k_pos[k_start:k_stop], is_causal=is_causal, window=window)
            tiles.append(Tile(i, j, q_start, q_stop, k_start, k_stop, skipped=not bool(sees.any())))
    return tiles


class TiledAttention(nn.Module):
    """Tiled attention with online softmax, recordable tile by tile through its hook points."""

    def __init__(self, block_q: int = 64, block_k: int = 64):
        super().__init__()
        _check_blocks(block_q, block_k)
        self.block_q, self.block_k = block_q, block_k
        self.hook_tile = HookPoint("hook_tile")
        self.hook_tile_scores = HookPoint("hook_tile_scores")
        self.hook_running_max = HookPoint("hook_running_max")
        self.hook_rescale = HookPoint("hook_rescale")
        self.hook_tile_probs = HookPoint("hook_tile_probs")
        self.hook_running_sum = HookPoint("hook_running_sum")
        self.hook_partial_out = HookPoint("hook_partial_out")
        self.hook_out = HookPoint("hook_out")
        name_hook_points(self)  # standalone names; a parent model renames them to their full path

    def extra_repr(self) -> str:
        return f"block_q={self.block_q}, block_k={self.block_k}"

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None = None, *,
                allowed: torch.Tensor | None = None, is_causal: bool = False, window: int | None = None,
                alibi_slopes: torch.Tensor | None = None,
                traffic: HBMTraffic | None = None) -> tuple[torch.Tensor, list[Tile]]:
        _check_inputs(q, k, v, bias, allowed, window, alibi_slopes)
        # every load of a Q, K or V block from HBM and every store of an output block is reported to `traffic`
        load = traffic.read if traffic is not None else _uncounted
        store = traffic.write if traffic is not None else _uncounted
        if traffic is not None:
            traffic.check_tiles(self.block_q, self.block_k, q.shape[-1])  # a kernel sizes its SRAM by its blocks
        B, H, t_q, d_head = q.shape
        t_kv = k.shape[2]
        group = H // k.shape[1]  # query heads per kv head
        scale = 1.0 / math.sqrt(d_head)
        full = (B, H, t_q, t_kv)
        bias = None if bias is None else bias.broadcast_to(full)  # a view: nothing T x T is allocated here
        allowed = None if allowed is None else allowed.broadcast_to(full)
        q_pos, k_pos = query_key_positions(t_q, t_kv, q.device)
        slopes = None if alibi_slopes is None else alibi_slopes.to(q.device, torch.float32)  # (H,)
        tiles = tile_plan(t_q, t_kv, self.block_q, self.block_k, is_causal=is_causal, window=window)
        # a row that may see no key gets the library's uniform weights: the mean of every value
        v_mean = v.float().mean(dim=2, keepdim=True).repeat_interleave(group, dim=1)  # (B, H, 1, d_head)
        out = torch.empty(B, H, t_q, d_head, dtype=q.dtype, device=q.device)

        for _, row_tiles in itertools.groupby(tiles, key=lambda tile: tile.q_block):
            row_tiles = list(row_tiles)
            rows = slice(row_tiles[0].q_start, row_tiles[0].q_stop)
            q_i = load("Q", q[:, :, rows]).float()  # (B, H, rows, d_head): once per query block, kept in SRAM
            n_rows = q_i.shape[2]
            m = torch.full((B, H, n_rows), float("-inf"), device=q.device)  # max of nothing yet
            l = torch.zeros(B, H, n_rows, device=q.device)  # (B, H, rows)
            acc = torch.zeros(B, H, n_rows, d_head, device=q.device)  # (B, H, rows, d_head)
            for tile in row_tiles:
                self.hook_tile(torch.tensor([tile.q_block, tile.k_block, tile.q_start, tile.q_stop,
                                             tile.k_start, tile.k_stop, int(tile.skipped)]))
                if tile.skipped:
                    continue
                cols = slice(tile.k_start, tile.k_stop)
                # each query head reads its group's kv head; repeating one tile costs block_k rows only
                k_j = load("K", k[:, :, cols]).float().repeat_interleave(group, dim=1)  # (B, H, cols, d_head)
                v_j = load("V", v[:, :, cols]).float().repeat_interleave(group, dim=1)  # (B, H, cols, d_head)
                scores = q_i @ k_j.transpose(-2, -1) * scale  # (B, H, rows, cols)
                if bias is not None:
                    scores = scores + bias[:, :, rows, cols].float()
                if slopes is not None:  # ALiBi for this tile only: (1, H, rows, cols)
                    scores = scores + alibi_bias(slopes, q_pos[None, rows], k_pos[None, cols])
                sees = masks.self_attention(q_pos[rows], k_pos[cols], is_causal=is_causal, window=window)  # (1, 1, rows, cols)
                if allowed is not None:
                    sees = sees & allowed[:, :, rows, cols]
                scores = self.hook_tile_scores(scores.masked_fill(~sees, MASKED))  # (B, H, rows, cols)
                # --- online softmax: fold one tile into the running max, sum and output ---
                m_new = self.hook_running_max(torch.maximum(m, scores.amax(dim=-1)))  # (B, H, rows)
                rescale = self.hook_rescale(torch.exp(m - m_new))  # (B, H, rows): 0 on the first tile
                probs = self.hook_tile_probs(torch.exp(scores - m_new[..., None]))  # (B, H, rows, cols)
                l = self.hook_running_sum(l * rescale + probs.sum(dim=-1))  # (B, H, rows)
                acc = self.hook_partial_out(acc * rescale[..., None] + probs @ v_j)  # (B, H, rows, d_head)
                m = m_new
            # l >= 1 once a tile is computed (its maximum adds exp(0)); it is 0 only if all were skipped
            sees_nothing = (m <= MASKED)[..., None]  # (B, H, rows, 1): only masked scores, or none at all
            # the output block leaves SRAM once, finished: acc, m and l never go to HBM
            out[:, :, rows] = store("O", torch.where(sees_nothing, v_mean, acc / l.clamp(min=1.0)[..., None])
                                    ).to(q.dtype)  # (B, H, rows, d_head)
        return self.hook_out(out), tiles


def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None = None, *,
                    allowed: torch.Tensor | None = None, is_causal: bool = False, window: int | None = None,
                    alibi_slopes: torch.Tensor | None = None, block_q: int = 64, block_k: int = 64,
                    traffic: HBMTraffic | None = None) -> tuple[torch.Tensor, list[Tile]]:
    """softmax(Q K^T / sqrt(d_head) + bias, masked) @ V, one tile at a time. Returns (out, tiles).

    out (B, H, T_q, d_head); tiles lists every tile visited, skipped ones marked. Arguments
    are described in the module docstring.
    """
    return TiledAttention(block_q, block_k)(q, k, v, bias, allowed=allowed, is_causal=is_causal,
                                            window=window, alibi_slopes=alibi_slopes, traffic=traffic)


# --- step records for a page -----------------------------------------------------------

# hook point -> the step-record field it fills
STEP_FIELDS = {
    "hook_tile_scores": "scores",
    "hook_running_max": "m_after",
    "hook_rescale": "rescale",
    "hook_tile_probs": "probs",
    "hook_running_sum": "l_after",
    "hook_partial_out": "acc",
}


def trace_tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None = None, *,
                          block_q: int, block_k: int, max_bytes: int | None = DEFAULT_MAX_BYTES,
                          **mask_args) -> tuple[torch.Tensor, list[dict]]:
    """Run tiled attention under recording and return (out, steps): one plain dict per tile.

    mask_args: allowed, is_causal, window, alibi_slopes as for tiled_attention.
    The step fields are listed in the module docstring.
    """
    module = TiledAttention(block_q, block_k)
    with torch.no_grad(), recording(max_bytes=max_bytes) as recorder:
        out, _ = module(q, k, v, bias, **mask_args)
    return out, steps_from_trace(recorder.trace)


def steps_from_trace(trace: Trace, prefix: str = "") -> list[dict]:
    """Turn a trace of one TiledAttention call into step records (see the module docstring).

    prefix: the module path of the TiledAttention inside a larger model, with its dot
    ("blocks.0.flash."); "" for a standalone one.
    """
    B, H, _, d_head = trace[prefix + "hook_out"].shape
    steps: list[dict] = []
    for event in trace.events:
        if not event.name.startswith(prefix):
            continue
        hook = event.name[len(prefix):]
        if hook == "hook_tile":
            q_block, k_block, q_start, q_stop, k_start, k_stop, skipped = event.tensor.tolist()
            steps.append({"step": len(steps), "q_block": q_block, "k_block": k_block, "q_rows": (q_start, q_stop),
                          "k_cols": (k_start, k_stop), "skipped": bool(skipped), "scores": None, "probs": None})
        elif hook in STEP_FIELDS:
            steps[-1][STEP_FIELDS[hook]] = event.tensor.detach().float().cpu().numpy()

    # each query block starts from m = -inf, l = 0, acc = 0; a step starts where the one before it ended
    for previous, step in zip([None] + steps, steps):
        if previous is None or previous["q_block"] != step["q_block"]:
            n_rows = step["q_rows"][1] - step["q_rows"][0]
            m, l = np.full((B, H, n_rows), -np.inf, np.float32), np.zeros((B, H, n_rows), np.float32)
            acc = np.zeros((B, H, n_rows, d_head), np.float32)
        else:
            m, l, acc = previous["m_after"], previous["l_after"], previous["acc"]
        step["m_before"], step["l_before"] = m, l
        if step["skipped"]:  # nothing changes
            step.update(m_after=m, l_after=l, acc=acc, rescale=np.ones_like(l))
        step["out_so_far"] = step["acc"] / np.maximum(step["l_after"], 1.0)[..., None]  # l is 0 or >= 1
    return steps


# --- validation ---------------------------------------------------------------------------

def _uncounted(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """A load or store when no HBMTraffic is counting: the tensor as it is."""
    return tensor


def _check_blocks(block_q: int, block_k: int) -> None:
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block_q={block_q} and block_k={block_k} must both be at least 1 (rows and keys per tile)")


def _broadcasts(shape: torch.Size, target: tuple[int, ...]) -> bool:
    try:
        return torch.broadcast_shapes(shape, target) == target
    except RuntimeError:
        return False


def _check_inputs(q, k, v, bias, allowed, window, alibi_slopes) -> None:
    if q.dim() != 4 or k.dim() != 4:
        raise ValueError(f"q must be (B, H, T_q, d_head) and k, v (B, G, T_kv, d_head); got q {tuple(q.shape)}, k {tuple(k.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have the same shape (B, G, T_kv, d_head)")
    (B, H, t_q, d_head), (B_kv, G, t_kv, d_kv) = q.shape, k.shape
    if B != B_kv or d_head != d_kv:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} must share batch size and d_head (dims 0 and 3)")
    if H % G:
        raise ValueError(f"H={H} query heads cannot share G={G} kv heads evenly; use a G that divides {H}")
    full = (B, H, t_q, t_kv)
    for name, mask in (("bias", bias), ("allowed", allowed)):
        if mask is not None and not _broadcasts(mask.shape, full):
            raise ValueError(f"{name} of shape {tuple(mask.shape)} does not broadcast to (B, H, T_q, T_kv) = {full}; "
                             "give it size 1 or the full size on each axis")
    if allowed is not None and allowed.dtype != torch.bool:
        raise ValueError(f"allowed must be a bool mask (True = may attend), got {allowed.dtype}; pass additive masks as bias")
    if window is not None and window < 1:
        raise ValueError(f"window={window} must be at least 1 (a query always sees itself), or None for no window")
    if alibi_slopes is not None and tuple(alibi_slopes.shape) != (H,):
        raise ValueError(f"alibi_slopes has shape {tuple(alibi_slopes.shape)}; it needs one slope per query head: ({H},)")
