"""The chapter "What changed since 2023": local/global layers, MLA, QK-norm and soft-capping, sinks, RoPE
scaling, an indexer that chooses the keys, layers without positions. Each step asks what a trained model did: its answer is read from the shipped
checkpoints (their JSON) and the measurements taken on them (assets/measurements/modern-variants.json); the
real models' sizes come from the library."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from transformer import MODEL_CARDS, axes
from transformer.checkpoint import read_meta, shipped
from transformer.costs import kv_cache_bytes, kv_cache_bytes_per_token
from ui.figures import indexer as indexer_figs
from ui.figures import modern as figs
from ui.lessons.live import Live
from ui.lessons.steps.step import lesson_step, nearest

MEASURED = Path(__file__).resolve().parents[3] / "assets" / "measurements" / "modern-variants.json"
LONG = 131_072  # tokens: Gemma 3's and gpt-oss's context
# Bits per character closer than this read as a tie: in the tournament, three seeds of one recipe at this size
# spread by 0.02 to 0.2 bits (assets/measurements/tournament.json), and these steps have one checkpoint each
BITS_TIE = 0.1
# A head share (induction, sink share) within this of a choice's line reads as on the line: one held-out text
SHARE_TIE = 0.05
SINK_ALL, SINK_NONE = 0.9, 0.05  # a head that gives its sink more than 90% attends to nothing; under 5%: ignores it


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
    text="Many long-context models no longer let every layer see everything. **Local** layers see a sliding window "
         "of W tokens; **global** layers see all. Gemma 2 and gpt-oss alternate them, Gemma 3 puts five local "
         "layers before each global one: the cost and the cache of the local layers stop growing at W. Others keep "
         "every layer global (LLaMA 3.1, Qwen3, DeepSeek-V3). What does each kind of layer do in a trained model?",
    question="Which layer of the trained Gemma 3 copies most from a sentence's first copy?", kind="choice",
    try_this="The Masks page opens the trained Gemma 3: each layer's mask in its strip, and the bytes local layers "
             "save at 4k, 32k and 128k tokens.",
    page="masks")
def local_global() -> Live:
    """The trained Gemma 3: which layer copies a sentence written twice, when most copies lie beyond the window?"""
    row = next(r for r in _measured()["layer_roles"] if r["preset"] == "gemma3")
    windows = row["layer_windows"]
    window = max(w for w in windows if w)
    best = int(np.argmax(row["induction"]))
    runner_up = int(np.argsort(row["induction"])[-2])
    lead = row["induction"][best] - row["induction"][runner_up]
    top_global = max(v for v, w in zip(row["induction"], windows) if w is None)
    choices = [f"layer {i} ({'local' if w else 'global'})" for i, w in enumerate(windows)]
    real = MODEL_CARDS["gemma3"].real["27B"]
    kept = kv_cache_bytes(real, LONG)["total"] / kv_cache_bytes(real.replace(layer_pattern="global"), LONG)["total"]
    where = (f"A local layer can copy only the sentences whose first copy lies within its {window} keys, so this is "
             f"copying from near, not far back; the global "
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
             f"init: at most {row['random_init']['induction'][best]:.2f}), "
             + (f"{lead:.2f} ahead of {choices[runner_up]}. " if lead > SHARE_TIE else
                f"a tie with {choices[runner_up]} ({row['induction'][runner_up]:.2f}) on one text. ")
             + f"{where} Local layers are what let Gemma 3 "
             f"27B keep {kept:.0%} of an all-global cache at {LONG:,} tokens."),
        figure=figs.layer_roles(row), query={"preset": "gemma3"})


@lesson_step(
    "latent", "Since 2023: multi-head latent attention",
    text="DeepSeek-V2/V3 cache neither K nor V. Each token is squeezed into a small **latent**; every head rebuilds "
         "its key and value from it. At inference the key's up-projection folds into the query, so no key is ever "
         "rebuilt; a rotation that depends on the position, between the two, would stop that fold. So one small "
         "rotated key part is cached apart and shared by all heads. How small is that cache next to MHA's and MQA's?",
    question="How does DeepSeek-V3's latent cache compare with MQA's of the same width?", kind="choice",
    try_this="The KV heads page opens the trained DeepSeek-V3: what its cache holds per token and the absorbed form "
             "giving the same weights; its KV-cache tab sets the real 671B model's latent beside GQA and MHA of the "
             "same width.",
    page="kv_heads")
def latent() -> Live:
    """DeepSeek-V3's latent cache against MHA and MQA of the same width (the library's count), beside how the
    trained classroom models read."""
    points = [{"model": name, "bits": figures["bits_per_char"], "latent": cfg.row("kv_heads").latent,
               "cached": round(kv_cache_bytes_per_token(cfg) / 2 / cfg.n_layers)}
              for name, figures, cfg in _trained_decoders()
              if not any(spec.selects_keys for spec in cfg.layer_plan())]  # an indexer's model: a step of its own
    mla = next(p for p in points if p["latent"])
    others = [p for p in points if not p["latent"]]
    real = MODEL_CARDS["deepseek-v3"].real["671B"]
    cached = latent_cache_numbers(real)
    multiples = [1.0, 2.0, 8.0, 64.0]  # MLA's cache as a multiple of MQA's
    ratio = cached["MLA"] / cached["MQA"]
    fewer_and_better = [p["model"] for p in others if p["cached"] < mla["cached"] and p["bits"] < mla["bits"]]
    return Live(
        question=(f"At its real size DeepSeek-V3 has {real.n_heads} heads; each key is {real.d_head} numbers wide "
                  f"({real.d_head - real.d_rope} from the latent, {real.d_rope} rotated), each value "
                  f"{real.v_head_dim}. It caches a latent of {real.kv_rank} and one shared rotated key of "
                  f"{real.d_rope} per token and layer. How large is that next to MQA of the same width (one K and "
                  "one V head for all the heads)?"),
        choices=[f"about {m:g}× MQA's" for m in multiples], answer=nearest(multiples, ratio),
        source="the library's count (transformer.costs)",
        why=(f"{ratio:.1f}× MQA's: {cached['MLA']:,} numbers per token and layer against {cached['MQA']:,} for MQA "
             f"({real.d_head} + {real.v_head_dim}), and {cached['MHA']:,} for {real.n_heads} heads with their own K "
             f"and V ({real.n_heads} × ({real.d_head} + {real.v_head_dim})): {cached['MHA'] / cached['MLA']:.0f}× "
             "smaller than MHA, yet every head rebuilds keys and values of its own. The figure does not say what the "
             f"latent costs in quality: the trained DeepSeek-V3 reads {mla['bits']:.2f} bits per character against "
             f"{min(p['bits'] for p in others):.2f} for the best other model, but it also differs in its tiny "
             f"experts, and {' and '.join(fewer_and_better) or 'no model'} cache fewer numbers and read better. The "
             "Trade-offs page compares MLA with MHA, GQA and MQA on one recipe."),
        figure=figs.cache_and_bits(points), query={"preset": "deepseek-v3", "kv_model": "deepseek-v3 671B"},
        caption="The classroom models, each trained once: they differ in more than their cache.")


def latent_cache_numbers(cfg) -> dict[str, int]:
    """Numbers a layer caches per token for a latent model and for MHA and MQA of its width (transformer.costs)."""
    plain = cfg.replace(kv_rank=None, q_rank=None)
    variants = {"MLA": cfg, "MHA": plain, "MQA": plain.replace(n_kv_heads=1)}
    return {name: round(kv_cache_bytes_per_token(v, 1) / v.n_layers) for name, v in variants.items()}


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
    question="How do the trained gpt-oss's heads use their sinks?", kind="choice",
    try_this="The Scores page opens the trained gpt-oss: each head's sink share per query, on your own text.",
    page="scores")
def sinks() -> Live:
    """The trained gpt-oss: which of its heads give their weight to the sink, and how much?"""
    row = _measured()["sinks"][0]
    shares = np.array(row["sink_share"]).ravel()  # (L * H,) each head's mean sink share on held-out English
    random_share = float(np.mean(row["random_init"]["sink_share"]))
    spare = _measured()["spare_weight"]
    parked = max(max(map(max, r["first_position"])) for r in spare)
    answer, choices = sink_pattern(shares)
    return Live(
        question=("gpt-oss gives each head a learned sink logit that joins the softmax and is then dropped. On held-out "
                  f"English, how do the trained model's {shares.size} heads use their sinks?"),
        choices=choices, answer=answer, source="measured on the shipped checkpoint",
        why=(f"{int((shares > SINK_ALL).sum())} heads give more than {SINK_ALL:.0%} of their weight to the sink "
             f"(they attend to nothing), while {int((shares < SINK_NONE).sum())} of {shares.size} give it under "
             f"{SINK_NONE:.0%} (random init: {random_share:.1%}, what one extra key of score 0 gets); the mean, "
             f"{shares.mean():.0%}, describes no head. Models without sinks park spare weight on the first token "
             f"instead: up to {parked:.0%} in a head of the shipped checkpoints."),
        figure=figs.sinks_measured(row), query={"preset": "gpt-oss"})


def sink_pattern(shares: np.ndarray, all_line: float = SINK_ALL, none_line: float = SINK_NONE) -> tuple[int, list[str]]:
    """The choices for how heads use a sink, and which one the measured shares (one per head) match."""
    n = shares.size
    nearly_all, nearly_none = int((shares > all_line).sum()), int((shares < none_line).sum())
    patterns = {"A little in every head, as at random init": nearly_none == n,
                "A few heads give it nearly everything; most give it almost nothing": 0 < nearly_all <= n // 4
                and nearly_none > n // 2,
                "About half of the weight, in every head": bool(np.all(np.abs(shares - 0.5) < 0.25)),
                "Most heads give it most of their weight": nearly_all > n // 2}
    patterns["None of these: the heads use it in many different ways"] = not any(patterns.values())
    return list(patterns.values()).index(True), list(patterns)


@lesson_step(
    "rope-scaling", "Since 2023: RoPE scaling",
    text="Past its trained length RoPE's slow dimensions reach angles never seen, and a model whose layers see every "
         "key reads worse there (a sliding window, as in Mistral, never lets it see that far). Many long-context models "
         "rescale the frequencies — linear (position interpolation), dynamic NTK, YaRN (Qwen, DeepSeek-V3, gpt-oss), "
         "LLaMA 3's bands (LLaMA 3.1) — usually with some training at the longer length; dynamic NTK needs none.",
    question="Which scaling reads 4× the trained LLaMA 2's context worst?", kind="choice",
    try_this="On the Positions page, see each frequency's wavelength under each scaling, and the measured length "
             "test for every trained RoPE model.",
    page="positions")
def rope_scaling() -> Live:
    """The trained LLaMA 2 reads 4x its context with each scaling switched on: which reads worst, and which tie?"""
    model = next(m for m in _measured()["rope_scaling"] if m["model"].startswith("llama2"))
    rows = [r for r in model["rows"] if not axes.row("rope_scaling", r["scaling"]).rescales or r["factor"] == 4.0]
    bits = [r["bits_per_char"]["4x"] for r in rows]
    names = ["no scaling" if not axes.row("rope_scaling", r["scaling"]).rescales
             else f"{axes.label('rope_scaling', r['scaling'])} ×4" for r in rows]
    worst, best = int(np.argmax(bits)), int(np.argmin(bits))
    tied = [names[i] for i in np.argsort(bits) if bits[i] - bits[best] < BITS_TIE]
    plain = bits[0]
    return Live(
        question=(f"The LLaMA 2 model trained on {model['context']} characters reads a text 4× longer, each RoPE "
                  "scaling switched on at inference with no retraining. Which reads it worst — worse even than no "
                  "scaling?"),
        choices=names, answer=worst, source="measured on the shipped checkpoint",
        why=(f"{names[worst]} ({axes.row('rope_scaling', rows[worst]['scaling']).does}): {bits[worst]:.2f} bits "
             f"per character, against {plain:.2f} without scaling. "
             + (f"{', '.join(tied[:-1])} and {tied[-1]} read within {BITS_TIE} bits of each other "
                f"({', '.join(f'{bits[names.index(n)]:.2f}' for n in tied)}): one checkpoint each, a tie at this "
                "resolution; all read far better than no scaling." if len(tied) > 1 else
                f"{names[best]} reads best ({bits[best]:.2f}).")),
        figure=figs.scaling_length_test(rows), query={"rope_scaling": "yarn", "rope_factor": "4.0"})


MASS_BANDS = [0.5, 0.75, 0.9]  # the choices' edges: under half, to three quarters, to 90%, over 90%


@lesson_step(
    "indexer-keeps", "Since 2023: an indexer chooses the keys",
    text="DeepSeek-V3.2 and GLM-5 keep softmax attention but let each query read only 2,048 keys, however long the "
         "text. A **lightning indexer**, a few small heads with ReLU instead of softmax, scores every earlier key "
         "cheaply; the query attends to its top k. The indexer learns to rank keys as the dense weights would "
         "(DeepSeek trains it on that alone, the model frozen, before the sparse training). How much of the "
         "attention do the kept keys hold?",
    question="What share of the dense weight do a quarter of the keys, the indexer's choice, hold?", kind="choice",
    try_this="The Indexer view (Masks page) opens the trained DeepSeek-V3.2: one query's dense weights beside the "
             "keys its indexer keeps, and the mass and output error as k shrinks.",
    page="masks", query={"preset": "deepseek-v3.2"})
def indexer_keeps() -> Live:
    """The trained DeepSeek-V3.2-style indexer at k = T/4: the dense mass its keys hold, beside controls."""
    row = next(r for r in _measured()["indexer_mass"] if r["preset"] == "deepseek-v3.2")
    ks, quarter = row["ks"], (row["tokens"] - 1) // 4  # characters after <bos>
    at = ks.index(quarter)
    curves = {label: list(np.mean([layer[label] for layer in row["layers"]], axis=0))
              for label in ("indexer", "random indexer", "most recent k", "best k")}
    kept = curves["indexer"][at]
    bands = ["under half", "half to three quarters", "three quarters to 90%", "over 90%"]
    answer = int(np.searchsorted(MASS_BANDS, kept))
    return Live(
        question=(f"The trained DeepSeek-V3.2-style model reads held-out English {row['tokens'] - 1} characters at a "
                  f"time; in each of its {len(row['layers'])} layers the indexer keeps a query's top {quarter} keys "
                  "(a quarter of the text, or all of them where fewer came before). What share of the weight the "
                  "dense attention would give do they hold, on average?"),
        choices=bands, answer=answer, source="measured on the shipped checkpoint",
        why=(f"{kept:.0%}: the indexer's {quarter} keys hold {kept:.0%} of the dense weight, where a randomly "
             f"initialised indexer's hold {curves['random indexer'][at]:.0%}, the {quarter} most recent keys (a "
             f"window) {curves['most recent k'][at]:.0%} and the best {quarter} any choice could keep "
             f"{curves['best k'][at]:.0%}. It trained with {row['trained_top_k']} keys per query; at that k its "
             f"keys hold {curves['indexer'][ks.index(row['trained_top_k'])]:.0%}."),
        figure=indexer_figs.measured_mass_by_k(ks, curves, quarter, f"{row['model']}: what the kept keys hold, mean "
                                                                 "over layers"),
        query={"preset": "deepseek-v3.2"},
        caption="Measured on 8 held-out windows by `python -m scripts.measure_modern --only indexer_mass`.")


ROLE_LINE = 0.3  # a best head scoring above this (and above random init) does the job


@lesson_step(
    "nope-layer", "Since 2023: layers without positions",
    text="Llama 4 and SmolLM3 leave RoPE out of every fourth layer (**NoPE**). Such a layer cannot tell how far back "
         "a key is: its scores see only what the keys hold, and the causal mask. Llama 4's other layers see only "
         "their own chunk of the text, so the NoPE layers alone reach further. What does a layer without positions "
         "learn to do?",
    question="What does the trained model's NoPE layer do best?", kind="choice",
    try_this="The Positions page's NoPE tab draws the NoPE layer's weights beside a RoPE layer's on any text, and "
             "their weight by distance against random init.",
    page="positions", query={"pos_tab": "Layers without positions (NoPE)"})
def nope_layer() -> Live:
    """The trained Llama 4-style model: the best previous-token and induction heads of its NoPE layer."""
    row = next(r for r in _measured()["layer_roles"] if r["preset"] == "llama4")
    nope = next(i for i, kind in enumerate(row["layer_kinds"]) if kind.endswith("NoPE"))
    first = next(r for r in _measured()["spare_weight"] if r["preset"] == "llama4")["first_position"][nope]
    roles = {"previous": row["previous_token"][nope], "induction": row["induction"][nope]}
    random = {"previous": row["random_init"]["previous_token"][nope], "induction": row["random_init"]["induction"][nope]}
    doing = [r for r in roles if roles[r] > ROLE_LINE and roles[r] > random[r]]
    answer = (1 if roles["induction"] >= roles["previous"] else 0) if doing else 2 if max(first) > 0.5 else 3
    choices = ["finds the character just before (a previous-token head)",
               "copies from a sentence's first copy (an induction head)",
               "rests most of its weight on the first token", "spreads its weight over what it sees"]
    return Live(
        question=(f"The trained Llama 4-style model has {len(row['layer_kinds'])} layers: "
                  f"{', '.join(row['layer_kinds'][:-1])} and {row['layer_kinds'][-1]}. Reading held-out English, "
                  f"and sentences written twice 20–200 characters apart, what does layer {nope}, the one without "
                  "positions, do best?"),
        choices=choices, answer=answer, source="measured on the shipped checkpoint",
        why=(f"Its best induction head scores {roles['induction']:.2f} (random init: {random['induction']:.2f}), its "
             f"best previous-token head {roles['previous']:.2f} (random: {random['previous']:.2f}); its heads put "
             f"{min(first):.0%}–{max(first):.0%} of their weight on the first token. Copying needs no distance, only "
             "a match on what a key holds, which the layers below wrote into it; finding the character before needs "
             "to know which key is one back, which a NoPE layer cannot compute itself: it reads what the RoPE layers below "
             "wrote into the keys, or counts keys through the causal mask."),
        figure=figs.layer_roles(row), query={"pos_tab": "Layers without positions (NoPE)"})
