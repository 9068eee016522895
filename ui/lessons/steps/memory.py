"""Memory at long contexts: the KV cache that generation keeps (and how GQA and MQA shrink it), and flash
attention, which never holds the T × T matrix."""
from __future__ import annotations

import numpy as np

from transformer import MODEL_CARDS, analysis, kv_cache_bytes_per_token
from transformer.costs import full_attention_bytes
from transformer.flash import tile_plan
from ui.figures.axes import kv_cache_growth
from ui.figures.flash import tile_grid
from ui.lessons.live import Live
from ui.lessons.steps.step import binary_size, lesson_step

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
