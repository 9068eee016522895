"""The chapter "What changed since 2023": local/global layers, MLA, QK-norm and soft-capping, sinks, RoPE
scaling. Each step asks what a trained model did: its answer is read from the shipped
checkpoints (their JSON) and the measurements taken on them (assets/measurements/modern-variants.json); the
real models' sizes come from the library."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from transformer import MODEL_CARDS, axes
from transformer.checkpoint import read_meta, shipped
from transformer.costs import kv_cache_bytes, kv_cache_bytes_per_token
from ui.figures import modern as figs
from ui.lessons.live import Live
from ui.lessons.steps.step import lesson_step

MEASURED = Path(__file__).resolve().parents[3] / "assets" / "measurements" / "modern-variants.json"
LONG = 131_072  # tokens: Gemma 3's and gpt-oss's context


def _measured() -> dict:
    return json.loads(MEASURED.read_text(encoding="utf-8"))


def _trained_decoders() -> list[tuple[str, dict, object]]:
    """(name, figures, config) of every shipped English decoder language checkpoint."""
    found = []
    for entry in shipped():
        if entry.task == "language":
            meta, cfg = read_meta(entry.path)
            if cfg.row("arch").next_token and meta["corpus"].get("name") == "english":
                found.append((entry.name, meta["figures"], cfg))
    return found


def _nearest(options: list[float], value: float) -> int:
    return min(range(len(options)), key=lambda i: abs(options[i] - value))


@lesson_step(
    "local-global", "Since 2023: local and global layers",
    text="Most long-context models no longer let every layer see everything. **Local** layers see a sliding window "
         "of W tokens; **global** layers see all. Gemma 2 and gpt-oss alternate them, Gemma 3 puts five local "
         "layers before each global one: the cost and the cache of the local layers stop growing at W. What does "
         "each kind of layer do in a trained model?",
    question="Which layer of the trained Gemma 3 copies from far back?", kind="choice",
    try_this="The Masks page opens the trained Gemma 3: each layer's mask in its strip, and the bytes local layers "
             "save at 4k, 32k and 128k tokens.",
    page="masks")
def local_global() -> Live:
    """The trained Gemma 3: which layer copies a sentence written twice, when most copies lie beyond the window?"""
    row = next(r for r in _measured()["layer_roles"] if r["preset"] == "gemma3")
    windows = row["layer_windows"]
    window = max(w for w in windows if w)
    best = int(np.argmax(row["induction"]))
    top_global = max(v for v, w in zip(row["induction"], windows) if w is None)
    choices = [f"layer {i} ({'local' if w else 'global'})" for i, w in enumerate(windows)]
    real = MODEL_CARDS["gemma3"].real["27B"]
    kept = kv_cache_bytes(real, LONG)["total"] / kv_cache_bytes(real.replace(layer_pattern="global"), LONG)["total"]
    where = (f"A local layer can copy only the sentences whose first copy lies within its {window} keys; the global "
             f"layer, the only one that reaches the rest, copies {top_global:.2f}. At this size the model kept its "
             "copying in a local layer and left the long reach mostly unused."
             if windows[best] else
             f"Only the global layer reaches a first copy more than {window} characters back.")
    return Live(
        question=(f"The trained Gemma 3 has {len(windows)} layers: five local ones that see the last {window} "
                  "characters, then one global layer. Shown held-out sentences written twice (20–200 characters "
                  "apart), which layer's best head copies most from the first copy?"),
        choices=choices, answer=best, source="measured on the shipped checkpoint",
        why=(f"{choices[best]}: its best head scores {row['induction'][best]:.2f} over all the sentences (random "
             f"init: at most {row['random_init']['induction'][best]:.2f}). {where} Local layers are what let Gemma 3 "
             f"27B keep {kept:.0%} of an all-global cache at {LONG:,} tokens."),
        figure=figs.layer_roles(row), query={"preset": "gemma3"})


@lesson_step(
    "latent", "Since 2023: multi-head latent attention",
    text="DeepSeek-V2/V3 cache neither K nor V. Each token is squeezed into a small **latent**; every head rebuilds "
         "its key and value from it. RoPE would not survive the squeeze, so one extra rotated key part is cached "
         "and shared by all heads. Does a model that caches so little still read well?",
    question="How well does the trained DeepSeek-V3 read, caching a latent?", kind="choice",
    try_this="The KV heads page opens the trained DeepSeek-V3: what its cache holds per token and the absorbed form "
             "giving the same weights; its KV-cache tab sets the real 671B model's latent beside GQA and MHA of the "
             "same width.",
    page="kv_heads")
def latent() -> Live:
    """The trained DeepSeek-V3 caches a latent: what does that cost in how well it reads?"""
    points = [{"model": name, "bits": figures["bits_per_char"], "latent": cfg.row("kv_heads").latent,
               "cached": round(kv_cache_bytes_per_token(cfg) / 2 / cfg.n_layers)}
              for name, figures, cfg in _trained_decoders()]
    mla = next(p for p in points if p["latent"])
    others = [p for p in points if not p["latent"]]
    gap = mla["bits"] - min(p["bits"] for p in others)
    options = ["far worse (0.3 bits or more)", "a little worse (0.05–0.3 bits)", "about the same (within 0.05)",
               "better"]
    answer = 0 if gap >= 0.3 else 1 if gap >= 0.05 else 2 if gap > -0.05 else 3
    real = MODEL_CARDS["deepseek-v3"].real["671B"]
    return Live(
        question=(f"The trained DeepSeek-V3 caches {mla['cached']} numbers per token and layer — its latent and one "
                  f"shared RoPE key — where the other trained models cache {min(p['cached'] for p in others)} to "
                  f"{max(p['cached'] for p in others)}. Next to the best of them, how well does it read held-out "
                  "English?"),
        choices=options, answer=answer, source="measured on the shipped checkpoints",
        why=(f"{mla['bits']:.2f} bits per character, against {min(p['bits'] for p in others):.2f} for the best other "
             f"model (a gap of {gap:+.2f}). Every head's key and value is rebuilt from the latent, so the heads keep "
             f"their own views; at real size DeepSeek-V3 caches {real.kv_rank + real.d_rope} numbers per token and "
             f"layer where {real.n_heads} heads with their own K and V would cache {2 * real.n_heads * real.d_head:,}."),
        figure=figs.cache_and_bits(points), query={"preset": "deepseek-v3", "kv_model": "deepseek-v3 671B"})


@lesson_step(
    "qk-norm", "Since 2023: QK-norm and soft-capping",
    text="Dividing by √d fixes the head size, not the size of q and k, which grows in training. **QK-norm** "
         "(Qwen3, Gemma 3, OLMo 2) puts an RMSNorm on q and k; **soft-capping** (Gemma 2) squeezes every score into "
         "(−c, c).",
    question="How large did the scores grow in models trained without QK-norm?", kind="choice",
    try_this="On the Scores page, compare the trained model's scores with the same weights under QK-norm.",
    page="scores")
def qk_norm() -> Live:
    """Trained with and without QK-norm: how large did the attention scores grow?"""
    rows = _measured()["score_sizes"]
    normed = [r for r in rows if axes.row("qk_norm", r["qk_norm"]).normalises]
    plain = [r for r in rows if not axes.row("qk_norm", r["qk_norm"]).normalises]
    ratio = max(max(r["score_max"]) for r in plain) / max(max(r["score_max"]) for r in normed)
    options = [1.0, 2.0, 4.0, 10.0]
    return Live(
        question=(f"{' and '.join(r['model'] for r in normed)} trained with QK-norm, {len(plain)} other models without, "
                  "all on the same English text. Compared with the largest score of a QK-normed model, how large is "
                  "the largest attention score any model without QK-norm reached?"),
        choices=["about the same", "about 2×", "about 4×", "about 10×"], answer=_nearest(options, ratio),
        source="measured on the shipped checkpoints",
        why=(f"{ratio:.1f}×: up to {max(max(r['score_max']) for r in plain):.0f} without QK-norm, "
             f"{max(max(r['score_max']) for r in normed):.0f} with it (random init: below "
             f"{max(r['random_init']['score_max'] for r in rows):.0f}). Without the norm, q and k grow in training and "
             "the scores with them, until softmax puts a row on one key and the others stop learning; QK-norm bounds "
             "q and k by its learned weights. Soft-capping (Gemma 2) bounds the scores themselves: c·tanh(s/c)."),
        figure=figs.largest_scores(rows), query={"qk_norm": "head"})


@lesson_step(
    "sinks", "Since 2023: attention sinks",
    text="Softmax must spend all of a row's weight, even when a head has nothing to find. gpt-oss gives each head a "
         "learned **sink** logit that joins the softmax and is dropped: the head can attend to nothing.",
    question="How much of a query's weight do the trained gpt-oss sinks take?", kind="choice",
    try_this="The Scores page opens the trained gpt-oss: each head's sink share per query, on your own text.",
    page="scores")
def sinks() -> Live:
    """The trained gpt-oss: how much of a query's weight do its sinks take?"""
    row = _measured()["sinks"][0]
    share = float(np.mean(row["sink_share"]))
    random_share = float(np.mean(row["random_init"]["sink_share"]))
    spare = _measured()["spare_weight"]
    parked = max(max(map(max, r["first_position"])) for r in spare)
    options = [0.01, 0.1, 0.3, 0.6]
    return Live(
        question=("gpt-oss gives each head a learned sink logit that joins the softmax and is then dropped. On held-out "
                  "English, what share of a query's weight do the trained model's sinks take, averaged over its heads?"),
        choices=[f"about {o:.0%}" for o in options], answer=_nearest(options, share),
        source="measured on the shipped checkpoint",
        why=(f"{share:.0%} on average, but unevenly: {int((np.array(row['sink_share']) > 0.9).sum())} heads give more "
             "than 90% of their weight to the sink (they attend to nothing), while "
             f"{int((np.array(row['sink_share']) < 0.05).sum())} of {np.size(row['sink_share'])} give it under 5% "
             f"(random init: {random_share:.1%}, what one extra key of score 0 gets). Models without sinks park spare "
             f"weight on the first token instead: up to {parked:.0%} in a head of the shipped checkpoints."),
        figure=figs.sinks_measured(row), query={"preset": "gpt-oss"})


@lesson_step(
    "rope-scaling", "Since 2023: RoPE scaling",
    text="RoPE fails past its trained length: its slow dimensions reach angles never seen. Every long-context model "
         "rescales the frequencies — linear, dynamic NTK, YaRN, LLaMA 3's bands — often with no retraining at all.",
    question="Which scaling lets the trained LLaMA 2 read 4× its context best?", kind="choice",
    try_this="On the Positions page, see each frequency's wavelength under each scaling, and the measured length "
             "test for every trained RoPE model.",
    page="positions")
def rope_scaling() -> Live:
    """The trained LLaMA 2 reads 4x its context: which scaling reads best without retraining?"""
    model = next(m for m in _measured()["rope_scaling"] if m["model"].startswith("llama2"))
    rows = [r for r in model["rows"] if not axes.row("rope_scaling", r["scaling"]).rescales or r["factor"] == 4.0]
    best = min(rows, key=lambda r: r["bits_per_char"]["4x"])
    names = ["no scaling" if not axes.row("rope_scaling", r["scaling"]).rescales
             else f"{axes.label('rope_scaling', r['scaling'])} ×4" for r in rows]
    plain = rows[0]["bits_per_char"]["4x"]
    return Live(
        question=(f"The LLaMA 2 model trained on {model['context']} characters reads a text 4× longer. Which RoPE "
                  "scaling, switched on at inference with no retraining, reads it best?"),
        choices=names, answer=rows.index(best), source="measured on the shipped checkpoint",
        why=(f"{names[rows.index(best)]}: {best['bits_per_char']['4x']:.2f} bits per character, against {plain:.2f} "
             "without scaling. Linear interpolation also slows the fast dimensions the model uses to find the "
             "character before, and loses even the trained length; the others keep them."),
        figure=figs.scaling_length_test(rows), query={"rope_scaling": "yarn", "rope_factor": "4.0"})
