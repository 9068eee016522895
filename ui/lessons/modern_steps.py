"""The chapter "What changed since 2023", in the lecture's order: local/global layers, MLA, QK-norm and
soft-capping, sinks, RoPE scaling. Each step's answer is computed from the library's real sizes or read from
the measurements the shipped checkpoints gave (assets/measurements/modern-variants.json)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from transformer import MODEL_CARDS, analysis, axes
from transformer.costs import kv_cache_bytes, kv_cache_bytes_per_token
from ui.figures import modern as figs
from ui.lessons.live import Live

MEASURED = Path(__file__).resolve().parent.parent.parent / "assets" / "measurements" / "modern-variants.json"
LONG = 131_072  # tokens: Gemma 3's and gpt-oss's context


def _measured() -> dict:
    return json.loads(MEASURED.read_text(encoding="utf-8"))


def local_global():
    """Gemma 3 27B at 128k tokens: what share of the all-global cache do its 5:1 local layers keep?"""
    real = MODEL_CARDS["gemma3"].real["27B"]
    everything = real.replace(layer_pattern="global")
    kept = kv_cache_bytes(real, LONG)["total"] / kv_cache_bytes(everything, LONG)["total"]
    options = sorted({round(kept, 2), 0.5, 0.83, 1.0})
    contexts = [4096, 32768, LONG]
    fig = figs.kv_cache_by_context(contexts, {
        "every layer global": [kv_cache_bytes(everything, n)["total"] for n in contexts],
        f"5 local (W = {real.sliding_window}) : 1 global": [kv_cache_bytes(real, n)["total"] for n in contexts]})
    return Live(
        question=(f"Gemma 3 27B has {real.n_layers} layers: five local ones (a window of {real.sliding_window} "
                  f"tokens) for every global one. At {LONG:,} tokens, what share of an all-global KV cache does it keep?"),
        choices=[f"{o:.0%}" for o in options], answer=options.index(round(kept, 2)),
        why=(f"A local layer holds at most {real.sliding_window} tokens, a global one all {LONG:,}: about one layer in "
             f"six pays for the length, so the cache is {kept:.0%} of the all-global one "
             f"({kv_cache_bytes(real, LONG)['total'] / 2**30:.1f} GiB instead of "
             f"{kv_cache_bytes(everything, LONG)['total'] / 2**30:.1f} GiB)."),
        figure=fig, query={"layer_pattern": "5:1", "sliding_window": "8"})


def latent():
    """DeepSeek-V3: how many numbers per token and layer does MLA cache, for 128 heads?"""
    real = MODEL_CARDS["deepseek-v3"].real["671B"]
    numbers = real.kv_rank + real.d_rope
    gqa = real.replace(kv_rank=None, q_rank=None, n_kv_heads=8)
    per_layer = {"MLA (the real model)": numbers, "MHA, a K and V per head": 2 * real.n_heads * real.d_head,
                 "GQA with 8 kv heads": 2 * 8 * real.d_head}
    options = sorted({numbers, *per_layer.values(), real.n_heads * real.d_head})
    fig = figs.cache_bytes_per_token({
        "MLA (latent 512 + RoPE key 64)": kv_cache_bytes_per_token(real),
        "GQA, 8 kv heads": kv_cache_bytes_per_token(gqa),
        "MHA, 128 kv heads": kv_cache_bytes_per_token(real.replace(kv_rank=None, q_rank=None))})
    return Live(
        question=(f"DeepSeek-V3 has {real.n_heads} heads of {real.d_head} dimensions for q and k. With multi-head "
                  "latent attention, how many numbers per token does each layer's cache hold?"),
        choices=[f"{o:,}" for o in options], answer=options.index(numbers),
        why=(f"Only the latent c ({real.kv_rank} numbers) and the one RoPE key all heads share ({real.d_rope}): "
             f"{numbers}. Every head's key and value is rebuilt from c; at inference the key up-projection even "
             f"folds into the query. A K and V per head would be {per_layer['MHA, a K and V per head']:,}."),
        figure=fig, query={"kv_model": "deepseek-v3 671B"})


def qk_norm():
    """Random q and k growing 8x: what happens to softmax over 64 keys without QK-norm?"""
    scales = [1.0, 2.0, 4.0, 8.0, 16.0]
    entropy = analysis.qk_norm_entropy(128, scales, n_keys=64)
    plain, normed = entropy["without QK-norm"], entropy["with QK-norm"]
    at_eight = float(plain[scales.index(8.0)])
    options = ["it stays about as spread as at the start", "it halves", "it collapses: one key takes nearly all"]
    answer = 2 if at_eight < 0.25 * float(plain[0]) else 1 if at_eight < 0.75 * float(plain[0]) else 0
    return Live(
        question=("During training q and k grow. If both become 8× larger, what happens to a head's softmax over 64 "
                  "keys — without QK-norm?"),
        choices=options, answer=answer,
        why=(f"The scores grow 64× (8 × 8): the entropy falls from {float(plain[0]):.1f} to {at_eight:.2f} bits, so one "
             f"key takes nearly all and the others stop getting gradients. With QK-norm q and k are normalised first: "
             f"{float(normed[scales.index(8.0)]):.1f} bits at every scale. Soft-capping (Gemma 2) bounds the "
             "scores another way: c·tanh(s/c)."),
        figure=figs.entropy_by_scale(np.array(scales), {k: v.numpy() for k, v in entropy.items()}, math.log2(64)),
        query={"qk_norm": "head"})


def sinks():
    """Trained models without sinks: the most weight a head parks on the first token."""
    spare = _measured()["spare_weight"]
    most = max(max(map(max, row["first_position"])) for row in spare)
    control = max(row["random_init"]["first_position_max"] for row in spare)
    options = [0.02, 0.25, 0.5, 0.9]
    answer = min(range(len(options)), key=lambda i: abs(options[i] - most))
    return Live(
        question=("A head that has nothing to look for must still spend its weight: softmax sums to 1. In trained models "
                  "without sinks, what is the largest share of a query's weight some head puts on the very first "
                  "token?"),
        choices=[f"about {o:.0%}" for o in options], answer=answer, source="measured on the shipped checkpoints",
        why=(f"Up to {most:.0%} (random-init weights: at most {control:.0%}). The first token becomes an "
             "\"attention sink\": a parking place that changes little. gpt-oss gives every head a learned sink logit "
             "instead, which joins each row's softmax and is dropped, so a head can attend to nothing."),
        figure=figs.spare_weight(spare), query={"sinks": "True"})


def rope_scaling():
    """The trained LLaMA 2 reads 4x its context: which scaling reads best without retraining?"""
    model = next(m for m in _measured()["rope_scaling"] if m["model"].startswith("llama2"))
    rows = [r for r in model["rows"] if r["scaling"] == "none" or r["factor"] == 4.0]
    best = min(rows, key=lambda r: r["bits_per_char"]["4x"])
    names = ["no scaling" if r["scaling"] == "none" else f"{axes.label('rope_scaling', r['scaling'])} ×4" for r in rows]
    plain = rows[0]["bits_per_char"]["4x"]
    return Live(
        question=(f"The LLaMA 2 model trained on {model['context']} characters reads a text 4× longer. Which RoPE "
                  "scaling, switched on at inference with no retraining, reads it best?"),
        choices=names, answer=rows.index(best), source="measured on the shipped checkpoint",
        why=(f"{names[rows.index(best)]}: {best['bits_per_char']['4x']:.2f} bits per character, against {plain:.2f} "
             "without scaling. Linear interpolation also slows the fast dimensions the model uses to find the "
             "character before, and loses even the trained length; the others keep them."),
        figure=figs.scaling_length_test(rows), query={"rope_scaling": "yarn", "rope_factor": "4.0"})
