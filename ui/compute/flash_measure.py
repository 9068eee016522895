"""Cached work for the Flash attention page: its q, k, v, the tiled run step by step, the explicit
reference, and measurements of memory and time on this machine.

Measurements run in a fresh Python process (``python -m transformer.flash_memory KIND``):
a peak of resident memory is only meaningful in a process that does nothing else, and the
server may be busy with other sessions. The child prints one JSON line per measurement, so the
page can move a progress bar as they arrive. The app only launches it and reads its lines.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import streamlit as st
import torch

from transformer import TransformerConfig, masks
from transformer.attention import AttentionInputs, attend
from transformer.flash import query_key_positions, tile_plan, trace_tiled_attention
from transformer.flash_io import explicit_attention_counted, explicit_bytes, fa1_attention, fa1_bytes, fa2_attention, fa2_bytes
from transformer.hbm import HBMTraffic, check_tiles_fit
from transformer.hooks import attention_stacks, hook_name
from transformer.positions import alibi_bias, alibi_slopes
from transformer.probes import live_qk_names

from ui.compute.model_cache import get_trace

ROOT = Path(__file__).resolve().parents[2]
MAX_T = 64  # every tile stays visible and the step-by-step record small
RANDOM_D_HEAD = 16
MEASURE_TIMEOUT_S = 300

# the page's mask -> how the library builds it: is_causal, and whether it needs W or padding
MASKS = {
    "none": dict(is_causal=False, windowed=False, padded=False),
    "causal": dict(is_causal=True, windowed=False, padded=False),
    "sliding window": dict(is_causal=True, windowed=True, padded=False),
    "padding": dict(is_causal=False, windowed=False, padded=True),
}


def check_settings(t: int, block_q: int, block_k: int, mask: str, window: int, n_pad: int) -> None:
    """Raise ValueError, naming the numbers and the fix, for settings the page cannot show."""
    if not 2 <= t <= MAX_T:
        raise ValueError(f"T={t} tokens: choose T between 2 and {MAX_T} (every tile is drawn).")
    for name, block in (("block_q", block_q), ("block_k", block_k)):
        if block < 1:
            raise ValueError(f"{name}={block}: a tile needs at least one row and one column; choose 1 to {t}.")
        if block > t:
            raise ValueError(f"{name}={block} is larger than T={t}: one tile would be the whole matrix; "
                             f"choose 1 to {t}.")
    if mask not in MASKS:
        raise ValueError(f"mask {mask!r} is unknown; choose one of {', '.join(MASKS)}.")
    if MASKS[mask]["windowed"] and window < 1:
        raise ValueError(f"window W={window}: a query always sees itself, so W must be at least 1.")
    if MASKS[mask]["padded"] and not 1 <= n_pad < t:
        raise ValueError(f"{n_pad} padding tokens of T={t}: choose 1 to {t - 1}, so at least one real token is left.")


# --- q, k, v ------------------------------------------------------------------------------


@st.cache_data(max_entries=16, show_spinner=False)
def random_qkv(t: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three (T, d_head) float32 matrices of standard normal numbers from `seed`."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(t, RANDOM_D_HEAD, generator=g) for _ in range(3))  # (T, d_head) each
    return q.numpy(), k.numpy(), v.numpy()


def live_qkv(config_json: str, seed: int, ids: tuple[int, ...], labels: tuple[str, ...], layer: int, head: int,
             weights: str = "") -> tuple[np.ndarray, np.ndarray, np.ndarray, float | None]:
    """(q, k, v) of one query head and the kv head it reads, (T, d_head) each, from the cached trace.

    q and k are what the model's scores are made of (after QK-norm and RoPE, see ``live_qk_names``). The last
    value is the head's ALiBi slope when the model's position scheme biases the scores by one, else None.
    """
    cfg = TransformerConfig.from_json(config_json)
    trace = get_trace(config_json, seed, ids, labels, weights)
    q, k = (trace.arrays[name][0] for name in live_qk_names(cfg, layer))  # (heads, T, d_head)
    v = trace.arrays[hook_name(layer, "attn.hook_v", attention_stacks(cfg.arch).input)][0]
    kv_head = head // cfg.group_size
    scheme = cfg.row("position")  # a fixed slope (ALiBi) is tiled here; T5's learned table is not
    slope = float(alibi_slopes(cfg.n_heads)[head]) if scheme.score_bias and not scheme.learned_bias else None
    return q[head], k[kv_head], v[kv_head], slope


# --- the tiled run and its reference --------------------------------------------------------------


def mask_arguments(mask: str, t: int, window: int, n_pad: int) -> dict:
    """The library's mask arguments for the page's choice: is_causal, window, and a (1, T) attention_mask."""
    kind = MASKS[mask]
    attention_mask = None
    if kind["padded"]:  # the last n_pad tokens are padding, as when a short text is batched with a longer one
        attention_mask = torch.ones(1, t, dtype=torch.long)
        attention_mask[:, t - n_pad:] = 0
    return dict(is_causal=kind["is_causal"], window=window if kind["windowed"] else None, attention_mask=attention_mask)


@st.cache_data(max_entries=32, show_spinner="Running tiled attention tile by tile…")
def tiled_run(q: np.ndarray, k: np.ndarray, v: np.ndarray, slope: float | None, block_q: int, block_k: int,
              mask: str, window: int, n_pad: int) -> dict:
    """Tiled attention on one head, recorded tile by tile, next to the explicit five lines.

    Returns steps (one dict per tile, the library's fields with the B and H axes dropped),
    tiles (the plan), out and reference (T, d_head), allowed (T, T) bool and max_abs_diff.
    """
    t = q.shape[0]
    args = mask_arguments(mask, t, window, n_pad)
    q_t, k_t, v_t = (torch.from_numpy(np.ascontiguousarray(x))[None, None] for x in (q, k, v))  # (1, 1, T, d_head)
    slopes = None if slope is None else torch.tensor([slope])  # (H=1,)
    padding = None if args["attention_mask"] is None else masks.padding(args["attention_mask"])  # (1, 1, 1, T)
    out, steps = trace_tiled_attention(q_t, k_t, v_t, block_q=block_q, block_k=block_k, allowed=padding,
                                       is_causal=args["is_causal"], window=args["window"], alibi_slopes=slopes)

    q_pos, k_pos = query_key_positions(t, t)
    allowed = masks.self_attention(q_pos, k_pos, is_causal=args["is_causal"], window=args["window"],
                                   attention_mask=args["attention_mask"])  # (1, 1, T, T)
    alibi = None if slopes is None else alibi_bias(slopes, q_pos[None], k_pos[None])  # (1, 1, T, T)
    # the library's own five lines (Attention.explicit_attention) on the same q, k, v
    reference = attend(q_t, k_t, v_t, AttentionInputs.from_allowed(allowed, alibi), fused=False)[0]  # (T, d_head)
    out = out[0, 0]  # (T, d_head)
    for step in steps:  # one batch row, one head: drop both axes
        for name, value in step.items():
            if isinstance(value, np.ndarray):
                step[name] = value[0, 0]
    return dict(steps=steps, out=out.numpy(), reference=reference.numpy(), allowed=allowed[0, 0].numpy(),
                tiles=tile_plan(t, t, block_q, block_k, is_causal=args["is_causal"], window=args["window"]),
                max_abs_diff=float((out - reference).abs().max()))


# --- bytes moved between HBM and SRAM, counted as the code runs -------------------------------------------------

MAX_IO_T = 4096  # the explicit five lines hold T × T floats; the tiled loops are Python, one tile per iteration
MAX_IO_TILES = 4096  # tiles per loop order: a few seconds on one busy core
# loop order -> (the function that runs it with a counter, its closed form per head)
IO_METHODS = {
    "explicit": (lambda q, k, v, traffic, bq, bk: explicit_attention_counted(q, k, v, traffic),
                 lambda t, d, bq, bk, eb: explicit_bytes(t, t, d, eb)),
    "FA1 order": (lambda q, k, v, traffic, bq, bk: fa1_attention(q, k, v, traffic, block_q=bq, block_k=bk),
                  lambda t, d, bq, bk, eb: fa1_bytes(t, t, d, bq, bk, eb)),
    "FA2 order": (lambda q, k, v, traffic, bq, bk: fa2_attention(q, k, v, traffic, block_q=bq, block_k=bk),
                  lambda t, d, bq, bk, eb: fa2_bytes(t, t, d, bq, bk, eb)),
}


def check_io_settings(t: int, d_head: int, block_q: int, block_k: int, element_bytes: int, sram_bytes: int) -> None:
    """Raise ValueError, naming the numbers and the fix, for an HBM count the page cannot run."""
    if not 1 <= t <= MAX_IO_T:
        raise ValueError(f"T={t} tokens: choose T between 1 and {MAX_IO_T:,} (the explicit version holds T × T).")
    if not 1 <= d_head <= 256:
        raise ValueError(f"d_head={d_head}: choose 1 to 256.")
    check_tiles_fit(block_q, block_k, d_head, element_bytes, sram_bytes)
    n_tiles = -(-t // block_q) * -(-t // block_k)
    if n_tiles > MAX_IO_TILES:
        raise ValueError(f"tiles of {block_q} × {block_k} cut T={t} into {n_tiles:,} tiles; the loops here run one "
                         f"tile per Python iteration, so keep it to {MAX_IO_TILES:,}: use larger blocks or a smaller T.")


@st.cache_data(max_entries=16, show_spinner="Running the three versions with a counter on every load and store…")
def hbm_counts(t: int, d_head: int, block_q: int, block_k: int, element_bytes: int, sram_bytes: int,
               seed: int = 0) -> dict:
    """Bytes each version moves for one head on random q, k, v, counted by the code that runs it.

    Returns counts {method: {"reads": {matrix: bytes}, "writes": {...}}}, closed {method: {"reads", "writes"}}
    (the formulas, for comparison), and max_diff {"FA1 order", "FA2 order"}: the largest |out - explicit|.
    """
    check_io_settings(t, d_head, block_q, block_k, element_bytes, sram_bytes)
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, t, d_head, generator=g) for _ in range(3))  # (1, 1, T, d_head) each
    counts, closed, outputs = {}, {}, {}
    with torch.no_grad():
        for method, (run, formula) in IO_METHODS.items():
            traffic = HBMTraffic(element_bytes, sram_bytes)
            outputs[method] = run(q, k, v, traffic, block_q, block_k)  # (1, 1, T, d_head)
            counts[method] = {"reads": dict(traffic.reads), "writes": dict(traffic.writes)}
            closed[method] = formula(t, d_head, block_q, block_k, element_bytes)
    max_diff = {method: float((outputs[method] - outputs["explicit"]).abs().max()) for method in IO_METHODS
                if method != "explicit"}
    return dict(counts=counts, closed=closed, max_diff=max_diff)


# --- measurements on this machine ----------------------------------------------------------------


@st.cache_resource(show_spinner=False)
def _measurements() -> dict:
    """(kind, lengths, block) -> result, shared by every session of this server."""
    return {}


def measure(kind: str, lengths: tuple[int, ...], block: int,
            on_progress: Callable[[float, str], None] | None = None) -> dict:
    """Peak memory ("memory", bytes) or time ("time", seconds) of each method at each T, measured once per server.

    Returns {"device", "threads", "methods", "setup", "rows": [{T, method, value}]}. The cache is a
    plain dict kept by st.cache_resource rather than st.cache_data: the progress bar it moves lives
    outside it, which st.cache_data cannot replay.
    """
    done = _measurements()
    key = (kind, tuple(lengths), block)
    if key not in done:
        done[key] = measure_in_fresh_process(kind, tuple(lengths), block, on_progress)
    return done[key]


def measure_in_fresh_process(kind: str, lengths: tuple[int, ...], block: int,
                             on_progress: Callable[[float, str], None] | None = None) -> dict:
    """Run the measurement in a child process; raise RuntimeError with its message when it fails.

    on_progress(fraction, text) follows each measurement as it arrives.
    """
    if kind not in ("memory", "time"):
        raise ValueError(f"kind={kind!r}: measure 'memory' (peak bytes) or 'time' (seconds)")
    command = [sys.executable, "-m", "transformer.flash_memory", kind, "--block", str(block),
               "--lengths", *map(str, lengths)]
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    result = {"rows": []}
    total = None
    try:
        for line in child.stdout:
            record = json.loads(line)
            if "error" in record:
                raise RuntimeError(record["error"])
            if "method" in record:
                result["rows"].append(record)
            else:
                result.update(record)  # the header: device, threads, methods
                total = len(lengths) * len(record["methods"])
            if on_progress and total:
                done = len(result["rows"])
                on_progress(done / total, f"{done} of {total} measured" + (f" (T = {record['T']}, {record['method']})"
                                                                            if "method" in record else ""))
        child.wait(timeout=MEASURE_TIMEOUT_S)
    finally:
        if child.poll() is None:
            child.kill()
    if child.returncode != 0:
        lines = child.stderr.read().strip().splitlines()
        raise RuntimeError(f"the measuring process stopped (exit code {child.returncode}): "
                           + (lines[-1] if lines else "no message"))
    return result
