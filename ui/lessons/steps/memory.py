"""Memory at long contexts: the KV cache that generation keeps (and how GQA and MQA shrink it), flash
attention, which never holds the T × T matrix, and the bytes each version moves between HBM and SRAM."""
from __future__ import annotations

import numpy as np

from transformer import MODEL_CARDS, analysis, kv_cache_bytes_per_token
from transformer.costs import full_attention_bytes
from transformer.flash import tile_plan
from transformer.hbm import SRAM_BYTES_A100
from ui.compute.flash_measure import hbm_counts
from ui.figures.axes import kv_cache_growth
from ui.figures.flash import tile_grid
from ui.figures.flash_io import hbm_traffic
from ui.lessons.live import Live
from ui.lessons.steps.step import binary_size, lesson_step, nearest

KV_CONTEXT = 4096


@lesson_step(
    "kv-cache", "KV cache, GQA and MQA",
    text="Generating token t + 1 needs the keys and values of all t tokens before it, so they are kept: the **KV "
         "cache**. At real sizes it can outgrow the weights. GQA lets groups of query heads share one K and V head; "
         "MQA shares a single one.",
    question="How many bytes of KV cache does LLaMA 2 70B need for 4,096 tokens?", kind="number",
    try_this="On the KV heads page, set the context to 32,768 and compare the real models' caches.",
    page="kv_heads", query={"kv_tab": "KV-cache memory at real sizes"})
def kv_cache() -> Live:
    card = MODEL_CARDS["llama2"]
    real = card.real["70B"]
    per_token = kv_cache_bytes_per_token(real)
    variants = {f"MHA (G={real.n_heads})": real.n_heads, f"GQA (G={real.n_kv_heads}), the real model": real.n_kv_heads,
                "MQA (G=1)": 1}
    per = {label: kv_cache_bytes_per_token(real.replace(n_kv_heads=g)) for label, g in variants.items()}
    totals = sorted({*(b * KV_CONTEXT for b in per.values()), 8 * max(per.values()) * KV_CONTEXT})
    truth = per_token * KV_CONTEXT
    contexts = np.linspace(0, 4 * KV_CONTEXT, 129).astype(int)
    fig = kv_cache_growth(contexts, per, f"{card.name} 70B: KV cache for one sequence (fp16)")
    fig.add_vline(x=KV_CONTEXT, line_dash="dash", line_color="#555555",
                  annotation_text=f"{KV_CONTEXT:,} tokens: {binary_size(truth)}", annotation_position="top left")
    return Live(
        question=(f"{card.name} 70B has {real.n_layers} layers, {real.n_heads} query heads and {real.n_kv_heads} "
                  f"kv heads of d_head = {real.d_head}. How many bytes of KV cache (fp16) does one sequence of "
                  f"{KV_CONTEXT:,} tokens need?"),
        choices=[binary_size(b) for b in totals], answer=totals.index(truth),
        why=(f"2 (K and V) × {real.n_layers} layers × {real.n_kv_heads} kv heads × {real.d_head} × 2 bytes = "
             f"{per_token:,} bytes per token; × {KV_CONTEXT:,} = {binary_size(truth)}. With a K and V for each of the "
             f"{real.n_heads} heads (MHA) it would be {real.group_size}× more."),
        figure=fig, query={"kv_model": "llama2 70B", "kv_ctx": str(KV_CONTEXT)})


FLASH_T, FLASH_BLOCK = 32, 8


@lesson_step(
    "flash", "Flash attention",
    text="The five lines hold a T × T matrix per head; at long contexts that is more memory than the model. Flash "
         "attention computes the same result one tile at a time, keeping only a running max, sum and output per "
         "row (the online softmax), and skips the tiles a mask hides entirely.",
    question="How many tiles can a causal flash attention skip?", kind="number",
    try_this="On the Flash attention page, step through the tiles and watch the running max rescale the old sums.",
    page="flash")
def flash() -> Live:
    tiles = tile_plan(FLASH_T, FLASH_T, FLASH_BLOCK, FLASH_BLOCK, is_causal=True)
    skipped = sum(tile.skipped for tile in tiles)
    options = sorted({0, len(tiles) // 4, skipped, len(tiles) // 2})
    allowed = analysis.allowed_matrix("causal", FLASH_T).numpy()
    real = MODEL_CARDS["llama2"].real["7B"]
    full = full_attention_bytes(1, real.n_heads, 32_768, 2)
    return Live(
        question=(f"Flash attention cuts a causal {FLASH_T} × {FLASH_T} attention into {len(tiles)} tiles of "
                  f"{FLASH_BLOCK} × {FLASH_BLOCK} and sweeps them one at a time with a running max, sum and output per row. How many "
                  "tiles does it never load at all?"),
        choices=[f"{n} of {len(tiles)}" for n in options], answer=options.index(skipped),
        why=(f"A causal query never sees a later key, so the {skipped} tiles wholly above the diagonal are known to be "
             "empty from positions alone; the diagonal tiles are computed and masked inside. And no T × T matrix is "
             f"ever held — for LLaMA 2 7B at 32,768 tokens its scores and its weights, two T × T matrices per head, would "
             f"take {binary_size(full)} per layer ({binary_size(full // 2)} each)."),
        figure=tile_grid(tiles, len(tiles) - 1, allowed, f"causal, T = {FLASH_T}, tiles of {FLASH_BLOCK} × {FLASH_BLOCK}"),
        query={"flash_src": "random", "flash_T": str(FLASH_T), "flash_bq": str(FLASH_BLOCK),
               "flash_bk": str(FLASH_BLOCK), "flash_mask": "causal"})


TRAFFIC_T, TRAFFIC_D_HEAD, TRAFFIC_BLOCK, TRAFFIC_BYTES = 4096, 64, 128, 2  # one head, tiles of 128 × 128, fp16
TRAFFIC_RATIOS = (1, 2, 4, 16, 64)  # 64 = T / d_head, the ratio of a T × T matrix to a T × d_head one


@lesson_step(
    "flash-traffic", "Bytes moved: HBM and SRAM",
    text="A GPU keeps its matrices in HBM, a large memory far from the arithmetic; each multiprocessor computes out "
         "of a small on-chip SRAM. The five lines write S and P, two T × T matrices, to HBM and read both back. The "
         "tiled loop (FlashAttention 2's order: outer over query blocks) keeps a query block's output in SRAM until "
         "it is done, but reads K and V again for every query block. The lecture's tutorial says flash attention is "
         "\"2-4x faster on A100 due to far fewer HBM reads/writes\".",
    question="How many times more bytes does the explicit version move between HBM and SRAM?", kind="choice",
    try_this="On the Flash page's HBM section, double block_q and watch the tiled loop's bytes fall; then try fp32.",
    page="flash", query={"flash_io_T": str(TRAFFIC_T), "flash_io_d": str(TRAFFIC_D_HEAD),
                         "flash_io_bq": str(TRAFFIC_BLOCK), "flash_io_bk": str(TRAFFIC_BLOCK),
                         "flash_io_bytes": str(TRAFFIC_BYTES)})
def flash_traffic() -> Live:
    moved = hbm_counts(TRAFFIC_T, TRAFFIC_D_HEAD, TRAFFIC_BLOCK, TRAFFIC_BLOCK, TRAFFIC_BYTES, SRAM_BYTES_A100)
    totals = {method: sum(sum(counted[way].values()) for way in ("reads", "writes"))
              for method, counted in moved["counts"].items()}
    ratio = totals["explicit"] / totals["FA2 order"]
    explicit = moved["counts"]["explicit"]
    passes = TRAFFIC_T // TRAFFIC_BLOCK
    return Live(
        question=(f"One head, T = {TRAFFIC_T:,} tokens, d_head = {TRAFFIC_D_HEAD}, fp16. The explicit five lines and "
                  f"the tiled loop (tiles of {TRAFFIC_BLOCK} × {TRAFFIC_BLOCK}, outer loop over query blocks) compute "
                  "the same output. Counting every byte read from HBM and written back, how many times more does the "
                  "explicit version move?"),
        choices=[f"About {r}×" for r in TRAFFIC_RATIOS], answer=nearest(list(TRAFFIC_RATIOS), ratio),
        source="the library's HBM counter",
        why=(f"The counter saw the explicit version write S and P ({binary_size(explicit['writes']['S'])} each) and "
             f"read both back: {binary_size(totals['explicit'])} in all, against {binary_size(totals['FA2 order'])} "
             f"for the tiled loop — {ratio:.2f}× more. Not {TRAFFIC_T // TRAFFIC_D_HEAD}×: the tiled loop reads K and "
             f"V once per query block, {passes} times over, so a larger block_q moves less (as far as SRAM allows). "
             f"FlashAttention 1's order (outer over K/V) moved {binary_size(totals['FA1 order'])}: its partial "
             "outputs and m, l go to HBM and back once per key block."),
        figure=hbm_traffic(moved["counts"], f"Bytes moved at T = {TRAFFIC_T:,}, d_head = {TRAFFIC_D_HEAD}, fp16"))
