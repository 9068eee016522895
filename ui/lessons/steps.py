"""The lecture as data: one idea per step, each with a question to predict before its figure answers it.

A ``Step`` holds the words (title, text, question, a "try this", the page that shows the idea in
full with the query that opens it in the step's state); its ``build`` function asks the library
and the cached measurements of ui/ for everything live -- the choices, the true answer (from the
trained model's trace, or from the library's arithmetic; never typed in here), one sentence why,
and one figure from the existing figure builders with its axes set for the step.

The lessons run on one model of their own, not the sidebar's, so that a teacher and thirty
students answering the same question see the same choices: LLaMA 2's recipe at classroom size
with the shipped checkpoint of its axes (the language model when there is one) on that
checkpoint's example text.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import urlencode

import numpy as np
import plotly.graph_objects as go
import torch

from transformer import MODEL_CARDS, PRESETS, TransformerConfig, analysis, axes, kv_cache_bytes_per_token, param_counts, probes
from transformer import scaling
from transformer.costs import full_attention_bytes
from transformer.block import NORM_PLACEMENTS
from transformer.ffn import FFN_KINDS
from transformer.flash import tile_plan
from transformer.hooks import hook_name
from transformer.interpret import residual_labels
from transformer.positions import POSITIONS
from transformer.training.tasks import attention_mass, get_task, induction_targets, previous_token_targets

from ui.figures import lesson as lesson_figures
from ui.figures import chapters as chapter_figures
from ui.figures.axes import kv_cache_growth, mask_and_weights, rope_scores
from ui.figures.block import depth_lines
from ui.figures.base import head_grid
from ui.figures.flash import tile_grid
from ui.compute.measure import depth_profile, masked_attention, rope_geometry
from ui.figures.playground import query_bars
from ui.figures.probe import equivariance_bars, softmax_rows
from ui.figures.interpret import effect_heatmaps, lens_grid
from ui.compute.probe_measure import permutation_results, scaling_curves
from ui.compute.probe_measure import softmax_rows as softmax_row_values
from ui.compute.interpret_measure import PAIRS, answer_token, lens_view, patching
from ui.compute.chapters_measure import CONTEXTS, accuracy_curves, gru_models, sparse_attention
from ui.compute.runtime import TraceData, Tokens, encode_text, get_trace, trained_config, weights_info
from ui.app.source import five_lines
from ui.lessons import modern_steps
from ui.lessons.live import Live
from ui.app.state import DEFAULT_TASK, DEFAULT_TEXT

ROOT = Path(__file__).resolve().parents[2]
LESSON_PRESET = "llama2"
LESSON_SEED = 0
MAX_SHOWN = 16  # tokens in the matrices and the shuffles: every cell readable on a projector
GIB, MIB = 2 ** 30, 2 ** 20


# --- the lessons' model -----------------------------------------------------------------------


@dataclass(frozen=True)
class LessonModel:
    config: TransformerConfig
    config_json: str
    task: str | None  # the checkpoint's task; None for random weights
    weights: str  # what the banner says about them
    trained: bool
    text: str
    tokens: Tokens
    trace: TraceData

    @property
    def labels(self) -> list[str]:
        return self.tokens.labels

    def link_query(self) -> dict[str, str]:
        """The sidebar's URL keys that open this model on this text on any page."""
        return {"preset": LESSON_PRESET, "task": self.task or DEFAULT_TASK, "text": self.text}

    def patterns(self) -> torch.Tensor:
        """(L, 1, H, T, T) every layer's softmax weights from the recorded trace."""
        return torch.stack([torch.from_numpy(self.trace.pattern(layer))[None] for layer in range(self.config.n_layers)])


def lesson_model() -> LessonModel:
    """LLaMA 2 at classroom size with its shipped checkpoint and that checkpoint's example text (all cached)."""
    config = trained_config(PRESETS[LESSON_PRESET], DEFAULT_TASK) or PRESETS[LESSON_PRESET]
    key = config.to_json()
    info = weights_info(key)
    text = DEFAULT_TEXT if info.task in (None, DEFAULT_TASK) else get_task(info.task).example_text
    tokens = encode_text(text, key)
    trace = get_trace(key, LESSON_SEED, tuple(tokens.ids), tuple(tokens.labels))
    return LessonModel(config, key, info.task, info.label, info.kind == "trained", text, tokens, trace)


def head_shares(model: LessonModel, targets: torch.Tensor) -> torch.Tensor:
    """(L, H) the weight each head puts on `targets` (T, T), averaged over the queries that have one."""
    patterns = model.patterns()
    return torch.stack([attention_mass(patterns[layer], targets[None]) for layer in range(len(patterns))])


# --- steps --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    slug: str
    title: str
    text: str  # markdown: the idea in a few sentences
    question: str  # the question in general terms (the live one is Live.question)
    kind: str  # what the learner picks: "token", "choice" or "number"
    build: Callable[[], Live]
    try_this: str
    page: str | None  # url path of the page that shows the idea in full ("" = Home); None = no page yet
    query: dict[str, str] = field(default_factory=dict)
    uses_model: bool = False  # the link carries the lessons' model and text

    def link(self, live: Live | None = None, model: LessonModel | None = None) -> str | None:
        """A relative link that opens the full page in this step's state (a fresh session reads it)."""
        if self.page is None or not page_exists(self.page):
            return None
        query = {**(model.link_query() if self.uses_model and model else {}), **self.query,
                 **(live.query if live else {})}
        return (self.page or "./") + ("?" + urlencode(query) if query else "")


def page_exists(page: str) -> bool:
    return page == "" or (ROOT / "pages" / f"{page}.py").exists()


def letter(index: int) -> str:
    return chr(ord("A") + index)


def nearest(options: list[float], value: float) -> int:
    return int(np.argmin([abs(math.log(o) - math.log(value)) for o in options]))


def binary_size(n_bytes: float) -> str:
    for unit, size in (("TiB", 2 ** 40), ("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if n_bytes >= size:
            value = n_bytes / size
            return f"{value:,.0f} {unit}" if value >= 100 or value == int(value) else f"{value:,.2f} {unit}"
    return f"{n_bytes:,.0f} bytes"


def token_name(model: LessonModel, position: int) -> str:
    return f"token {position} '{model.labels[position]}'"


# before attention: the lecture's opening -----------------------------------------------------

FALLS = 0.3  # a model whose accuracy drops by this much from the shortest to the longest string "falls"


def _before_attention() -> Live:
    curves = accuracy_curves()  # {model name: {letters: share right}}
    bottleneck, attention = curves[CONTEXTS["bottleneck"]], curves[CONTEXTS["attention"]]
    shortest, longest = min(attention), max(attention)
    falls = tuple(acc[shortest] - acc[longest] > FALLS for acc in (bottleneck, attention))
    outcomes = {(False, False): "Both stay near 100%", (True, True): "Both fall",
                (True, False): "The one-vector model falls; the attention model stays near 100%",
                (False, True): "The attention model falls; the one-vector model stays near 100%"}
    d_hidden = gru_models()["bottleneck"][0].cfg.d_hidden
    return Live(
        question=("Two GRU encoder-decoders learn to copy random letters. One hands its decoder only the encoder's last "
                  f"state, {d_hidden} numbers; the other attends to every encoder state. From {shortest} to {longest} "
                  "letters, what happens to the share of letters each copies right?"),
        choices=list(outcomes.values()), answer=list(outcomes).index(falls), source="the trained models' answer",
        why=(f"At {longest} letters the one-vector model gets {bottleneck[longest]:.0%} right, the attention model "
             f"{attention[longest]:.0%}: one vector of {d_hidden} numbers must carry every letter at once, and the "
             "decoder can never look back; with attention it reads each letter's own encoder state when it writes "
             "that letter."),
        figure=chapter_figures.accuracy_by_length(curves, "copying random letters: share of output letters right"),
        caption="Measured on 256 fresh strings of each length when the two checkpoints were trained, seconds each on "
                "one CPU thread.")


# 1 -------------------------------------------------------------------------------------------

INDUCTION_MIN = 0.3  # a head whose weight on the token after an earlier copy averages this much is an induction head


def _soft_lookup() -> Live:
    m = lesson_model()
    ids = torch.tensor([m.tokens.ids])
    t = ids.shape[1]
    # queries in a repeat whose token occurred exactly once before, more than two tokens back: the token after
    # that occurrence is unambiguous, the place an induction head looks
    once = torch.tensor([m.tokens.ids[:q].count(m.tokens.ids[q]) == 1 for q in range(t)])
    targets = induction_targets(ids, once[None])[0]  # (T, T)
    repeats = [q for q in range(t) if targets[q].any() and q - int(targets[q].nonzero()[0, 0]) > 2]
    pattern = targets  # (T, T) where the head we look for puts its weight
    shares = head_shares(m, pattern)  # (L, H): weight on the token after the earlier occurrence
    clearest = "induction head"
    if float(shares.max()) < INDUCTION_MIN:  # no head follows earlier copies: show the clearest head there is
        pattern, clearest = previous_token_targets(1, t)[0], "previous-token head"
        shares = head_shares(m, pattern)
    layer, head = divmod(int(shares.argmax()), shares.shape[1])
    on_pattern = (m.trace.pattern(layer)[head] * pattern.numpy()).sum(-1)  # (T,) per query
    query = max(repeats, key=lambda q: on_pattern[q]) if repeats else t - 1  # the head's clearest example
    weights = m.trace.pattern(layer)[head, query]  # (T,)
    looked = int(np.argmax(weights[: query + 1]))
    target = int(targets[query].nonzero()[0, 0]) if targets[query].any() else None
    earlier_same = [j for j in range(query) if m.tokens.ids[j] == m.tokens.ids[query]]
    candidates = sorted({looked, max(query - 1, 0), 0, query, *([target] if target is not None else []),
                         *(earlier_same[-1:])})
    choices = [token_name(m, j) for j in candidates]
    if looked == target:
        reason = (f"that is the token right after the earlier '{m.labels[query]}' — the head finds where this token "
                  "occurred before and copies what came next (an induction head)")
    elif looked == query - 1:
        reason = "the token just before it: a previous-token head"
    elif looked == query:
        reason = "its own token: at this query the head mostly keeps what the token already is"
    else:
        reason = "the query's q matched that key's k best, and softmax turned the match into most of the weight"
    figure = query_bars(weights[: query + 1], m.labels[: query + 1], m.labels[query])  # the keys it may see
    figure.update_layout(title=f"layer {layer}, head {head}: the weights of {token_name(m, query)} over the keys",
                         height=420)
    return Live(
        question=(f"The query is {token_name(m, query)} of “{m.text}”. Which token — an earlier one or the query "
                  f"itself — does head {head} of layer {layer} give the most weight?"),
        choices=choices, answer=candidates.index(looked), source="the trained model's answer" if m.trained else
        "the model's answer (untrained weights)",
        why=f"Head {head} of layer {layer} puts {weights[looked]:.0%} of its weight on {token_name(m, looked)}: {reason}.",
        figure=figure,
        query={"layer": str(layer), "head": str(head), "query": str(query)},
        caption=f"Weights of {m.weights}; the head shown is the model's clearest {clearest} on this text. "
                "Every key up to the query gets a weight; they sum to 1.")


# 2 -------------------------------------------------------------------------------------------

D_HEADS = (4, 8, 16, 32, 64, 128, 256, 512)
SCALE_KEYS, SCALE_SEED, SCALE_D = 16, 0, 512


def _scaling() -> Live:
    curves = scaling_curves(D_HEADS, SCALE_KEYS, SCALE_SEED)
    unscaled, scaled = softmax_row_values(SCALE_D, SCALE_KEYS, SCALE_SEED)
    h_unscaled, h_scaled = curves["entropy_unscaled"][-1], curves["entropy_scaled"][-1]
    choices = ["They spread out evenly over the keys", "One key takes almost all the weight",
               "Nothing changes: softmax ignores the size of the scores"]
    answer = 1 if h_unscaled < 0.5 * h_scaled else 0 if h_unscaled > 1.05 * h_scaled else 2
    return Live(
        question=f"q and k have {SCALE_D} dimensions of random numbers and we skip the division by √d_head. What "
                 f"happens to one query's weights over {SCALE_KEYS} keys?",
        choices=choices, answer=answer,
        why=(f"q · k sums {SCALE_D} products, so its variance is about d_head = {curves['var_unscaled'][-1]:.0f}: "
             f"exp() then makes the largest score win ({float(unscaled.max()):.2f} of the weight, against "
             f"{float(scaled.max()):.2f} scaled) and the other keys get almost no gradient."),
        figure=softmax_rows(unscaled, scaled, SCALE_D),
        caption=f"Average entropy of a row at d_head = {SCALE_D}: {h_unscaled:.2f} nats unscaled, {h_scaled:.2f} "
                f"scaled (uniform: log {SCALE_KEYS} = {curves['max_entropy']:.2f}).")


# 3 -------------------------------------------------------------------------------------------


def _masks() -> Live:
    m = lesson_model()
    ids, labels = tuple(m.tokens.ids[:MAX_SHOWN]), m.labels[:MAX_SHOWN]
    additive, weights = masked_attention(m.config_json, LESSON_SEED, ids, 0, "causal", 1)
    blank = additive != 0  # (T, T) True where the mask adds the most negative float
    ones = np.ones_like(blank, dtype=bool)
    regions = {"Above the diagonal: the keys after each query": np.triu(ones, 1),
               "Below the diagonal: the keys before each query": np.tril(ones, -1),
               "The diagonal: each token itself": np.eye(len(ids), dtype=bool),
               "None: a mask only nudges the scores": ~ones}
    choices = list(regions)
    answer = int(np.argmax([(region == blank).mean() for region in regions.values()]))
    largest = float(weights[:, blank].max()) if blank.any() else 0.0
    return Live(
        question=f"A decoder reads “{''.join(labels)}” with a causal mask. Which cells of the {len(ids)} × {len(ids)} "
                 "matrix (queries down, keys across) does the mask blank?",
        choices=choices, answer=answer,
        why=(f"Query i may only see keys 0 … i: the {int(blank.sum())} cells above the diagonal get the most negative "
             f"float added before softmax, and exp of it is exactly 0.0 (largest masked weight here: {largest!r})."),
        figure=mask_and_weights(additive, weights[0], labels, labels, "causal mask and head 0's weights, layer 0"),
        query={"mask_layer": "0", "mask_head": "0"},
        caption="Grey cells are masked; on the right, white is a weight of exactly 0.")


# 4 -------------------------------------------------------------------------------------------

HALF = 0.5


def _multi_head() -> Live:
    m = lesson_model()
    t = len(m.tokens.ids)
    shares = head_shares(m, previous_token_targets(1, t)[0])  # (L, H)
    layer = int(shares.max(-1).values.argmax())
    per_head = shares[layer]
    heads = [h for h in range(len(per_head)) if per_head[h] > HALF]
    n_heads = m.config.n_heads
    shown = ", ".join(f"head {h} {float(s):.0%}" for h, s in enumerate(per_head))
    return Live(
        question=(f"Layer {layer} has {n_heads} heads, each with its own Q, K and V projections, all reading the same "
                  "tokens. How many of them put more than half of their weight on the token just before each query?"),
        choices=[f"{k} head{'s' if k != 1 else ''}" for k in range(n_heads + 1)], answer=len(heads),
        source="the trained model's answer" if m.trained else "the model's answer (untrained weights)",
        why=(f"Weight on the previous token — {shown}: each head learns its own pattern, and the layer concatenates "
             "what all of them read before W_o mixes them."),
        figure=head_grid(m.trace.pattern(layer), m.labels, m.labels, m.config.n_kv_heads,
                         f"layer {layer}: every head's weights (rows: queries, columns: keys)", cols=min(n_heads, 4),
                         mask=m.trace.arrays[hook_name(layer, "attn.hook_mask")][0]),
        query={"layer": str(layer)},
        caption="A previous-token head draws the line just below the diagonal. Heads in one row of the grid share "
                "their K and V (GQA).")


# 5 -------------------------------------------------------------------------------------------

SHUFFLE_SEED = 1


def _permutation() -> Live:
    m = lesson_model()
    ids = tuple(m.tokens.ids[:MAX_SHOWN])
    perm = tuple(probes.seeded_permutation(len(ids), SHUFFLE_SEED).tolist())
    results = permutation_results(m.config_json, ids, perm, LESSON_SEED, "float32")
    tolerance = probes.rounding_tolerance(torch.float32, max(r["output_scale"] for r in results.values()))
    positions = [p for mask, p in results if mask == "none"]
    plain = results[("none", "none")]
    worst = max(plain["outputs"], plain["patterns"])
    choices = ["The same outputs, shuffled the same way", "Different outputs: the model notices the new order",
               "The same outputs in the original order: attention sorts them back"]
    return Live(
        question=("Take a model with no position information and no mask, shuffle the order of its input tokens, "
                  "and put its outputs back in the original order. Compared with the unshuffled run, they are …"),
        choices=choices, answer=0 if worst <= tolerance else 1,
        why=(f"Nothing in q · k says where a token is, so every token gets the same q, k and v and the same sums "
             f"in another order: the largest difference is {worst:.1e}, float rounding. Every position scheme breaks "
             "this symmetry (the other bars)."),
        figure=equivariance_bars(positions, [results[("none", p)]["outputs"] for p in positions],
                                 [results[("none", p)]["patterns"] for p in positions], tolerance,
                                 "no mask: max |difference| after un-shuffling, per position scheme"),
        query={"perm_seed": str(SHUFFLE_SEED), "perm_pos": "none", "perm_mask": "none"},
        caption="Models with the lessons' sizes and random weights; bars drawn at the floor are exactly 0.")


# 6 -------------------------------------------------------------------------------------------

ROPE_POSITIONS = 24


def _positions() -> Live:
    m = lesson_model()
    q = m.trace.arrays[hook_name(0, "attn.hook_q")][0, 0, -1]  # (d_head,) the last token's q, head 0, before RoPE
    k = m.trace.arrays[hook_name(0, "attn.hook_k")][0, 0, 0]  # (d_head,) the first token's k
    geo = rope_geometry(tuple(map(float, q)), tuple(map(float, k)), ROPE_POSITIONS, m.config.rope_theta)
    relative = float(geo["spread"].max()) / (float(np.abs(geo["scores"]).max()) or 1.0)
    choices = ["On m and n separately: every pair of positions differs", "Only on the distance m − n",
               "Only on the query's position m"]
    return Live(
        question=("RoPE rotates q by an angle proportional to its position m, and k by one proportional to its "
                  "position n. Put the same q and k contents at every pair of positions: the score q · k depends …"),
        choices=choices, answer=1 if relative < 1e-4 else 0,
        why=(f"Rotating q by mθ and k by nθ leaves their dot product with the angle (m − n)θ only: every diagonal "
             f"holds one value (largest spread along a diagonal: {relative:.1e} of the largest score). Sinusoidal and "
             "learned positions add vectors instead; ALiBi subtracts a penalty proportional to |m − n|."),
        figure=rope_scores(geo["scores"], "RoPE(q, m) · RoPE(k, n), the live model's q and k (layer 0, head 0)"),
        query={"pos_n": str(ROPE_POSITIONS)},
        caption="Constant along every diagonal: absolute position is gone, relative position remains.")


# 7 -------------------------------------------------------------------------------------------

DEPTH = 12


def _block() -> Live:
    m = lesson_model()
    cfg = m.config
    ids = tuple(m.tokens.ids[:MAX_SHOWN])
    name = axes.label("norm", cfg.norm)
    profiles = {placement: depth_profile(cfg.position, cfg.ffn, cfg.norm, placement, DEPTH, "variance-preserving", ids)
                for placement in ("pre", "post")}
    flat = {p: float(np.ptp(v["resid_norms"][1:]) / np.mean(v["resid_norms"][1:])) < 0.01 for p, v in profiles.items()}
    answer = {(True, True): 2, (True, False): 0, (False, True): 1, (False, False): 3}[(flat["pre"], flat["post"])]
    growth = profiles["pre"]["resid_norms"][-1] / profiles["pre"]["resid_norms"][1]
    return Live(
        question=(f"A stack of {DEPTH} blocks, freshly initialised. After which placement of the {name} does the "
                  "residual stream keep the same size ‖x‖ after every block?"),
        choices=[f"Pre-norm: x + f({name}(x))", f"Post-norm: {name}(x + f(x))", "Both", "Neither"], answer=answer,
        why=(f"Post-norm ends every block on a norm, which pins ‖x‖ at √d_model; pre-norm only normalises what enters "
             f"each sublayer, so every block adds to the stream ({growth:.1f}× from the first block to the last) — "
             "and keeps an untouched identity path for the gradient, which is why deep models train with it."),
        figure=depth_lines({f"{p}-{name}": v["resid_norms"] for p, v in profiles.items()},
                           f"residual stream after each of {DEPTH} blocks, at initialisation", "mean ‖x‖ per token",
                           "after block (0 = embedding)",
                           dashed={f"{p}-{name}" for p in profiles if NORM_PLACEMENTS[p].on_sum}),
        query={"norm_depth": str(DEPTH), "norm_init": "variance-preserving"},
        caption="Every matrix N(0, 1/fan_in), the lessons' positions and FFN, next-token loss on the lesson text.")


# 8 -------------------------------------------------------------------------------------------


def _ffn() -> Live:
    card = MODEL_CARDS["mixtral"]
    size, real = next(iter(card.real.items()))
    counts = param_counts(real)
    share = counts["active"] / counts["total"]
    options = {1 / 8: "About 1/8: one expert of eight", 1 / 4: "About 1/4", 1 / 2: "About 1/2", 1.0: "All of them"}
    answer = nearest(list(options), share)
    total, active = counts["total"] / 1e9, counts["active"] / 1e9
    return Live(
        question=(f"{card.name} {size} keeps {real.n_experts} SwiGLU experts in every layer and its router sends each "
                  f"token to the top {real.top_k}. What share of the model's parameters does one token use?"),
        choices=list(options.values()), answer=answer,
        why=(f"Only {real.top_k} of {real.n_experts} experts run per token, but attention, embeddings and norms are "
             f"shared by every token: {active:.1f}B of {total:.1f}B parameters ({share:.0%}) — a "
             f"{active:.0f}B model's compute with {total:.0f}B parameters of capacity."),
        figure=lesson_figures.labelled_bars(["stored (total)", "used per token (active)"], [total, active],
                                            f"{card.name} {size}: parameters, from its real dimensions", "",
                                            "parameters (billions)", [f"{total:.1f}B", f"{active:.1f}B"]),
        caption=f"Published: {card.published_params[size] / 1e9:.1f}B total, "
                f"{card.published_active[size] / 1e9:.1f}B active.")


# 9 -------------------------------------------------------------------------------------------

KV_CONTEXT = 4096


def _kv_cache() -> Live:
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


# 10 ------------------------------------------------------------------------------------------

FLASH_T, FLASH_BLOCK = 32, 8


def _flash() -> Live:
    tiles = tile_plan(FLASH_T, FLASH_T, FLASH_BLOCK, FLASH_BLOCK, is_causal=True)
    skipped = sum(tile.skipped for tile in tiles)
    options = sorted({0, len(tiles) // 4, skipped, len(tiles) // 2})
    allowed = analysis.allowed_matrix("causal", FLASH_T).numpy()
    real = MODEL_CARDS["llama2"].real["7B"]
    full = full_attention_bytes(1, real.n_heads, 32_768, 2)
    return Live(
        question=(f"Flash attention cuts a causal {FLASH_T} × {FLASH_T} attention into {len(tiles)} tiles of "
                  f"{FLASH_BLOCK} × {FLASH_BLOCK} and sweeps them one at a time with a running max and sum. How many "
                  "tiles does it never load at all?"),
        choices=[f"{n} of {len(tiles)}" for n in options], answer=options.index(skipped),
        why=(f"A causal query never sees a later key, so the {skipped} tiles wholly above the diagonal are known to be "
             "empty from positions alone; the diagonal tiles are computed and masked inside. And no T × T matrix is "
             f"ever held — for LLaMA 2 7B at 32,768 tokens it would be {binary_size(full)} per layer."),
        figure=tile_grid(tiles, len(tiles) - 1, allowed, f"causal, T = {FLASH_T}, tiles of {FLASH_BLOCK} × {FLASH_BLOCK}"),
        query={"flash_src": "random", "flash_T": str(FLASH_T), "flash_bq": str(FLASH_BLOCK),
               "flash_bk": str(FLASH_BLOCK), "flash_mask": "causal"})


# 11 ------------------------------------------------------------------------------------------

IMAGE_SIZE, PATCH = 8, 2


def synthetic_image() -> np.ndarray:
    """An 8 x 8 picture with something in every patch row: a frame's corner, a diagonal and a dot."""
    image = np.zeros((IMAGE_SIZE, IMAGE_SIZE))
    image[1, 1:6] = 1.0  # top bar
    image[1:6, 1] = 1.0  # left bar
    image[np.arange(3, 8), np.arange(3, 8)] = 0.7  # diagonal
    image[6, 2] = 0.4
    return image


def patches_of(image: np.ndarray, patch: int) -> np.ndarray:
    """(N, patch * patch): the image's patches in reading order, each flattened row by row."""
    try:
        from transformer.vision import patchify
    except ImportError:  # a library without the vision module: the same reshape
        side = image.shape[0]
        grid = image.reshape(side // patch, patch, side // patch, patch).transpose(0, 2, 1, 3)
        return grid.reshape(-1, patch * patch)
    return patchify(torch.from_numpy(image)[None], patch)[0].numpy()


def _images() -> Live:
    image = synthetic_image()
    patches = patches_of(image, PATCH)
    n, area = patches.shape
    options = sorted({n // 4, n, 2 * n, IMAGE_SIZE * IMAGE_SIZE})
    return Live(
        question=(f"A Vision Transformer reads an {IMAGE_SIZE}×{IMAGE_SIZE} image cut into {PATCH}×{PATCH} patches, "
                  "each patch flattened into one token. How many tokens does it see (not counting [CLS])?"),
        choices=[str(k) for k in options], answer=options.index(n),
        why=(f"({IMAGE_SIZE} / {PATCH})² = {n} patches, read row by row like words; each is {area} pixel values, "
             "mapped to d_model by one linear layer (the image's token embedding). Then the very same encoder blocks "
             "run: no causal mask, learned positions, a [CLS] token in front whose output is the class."),
        figure=lesson_figures.image_as_tokens(image, patches, PATCH))


# 12 ------------------------------------------------------------------------------------------


def _largest(card) -> TransformerConfig:
    return list(card.real.values())[-1]


def model_rows() -> list[dict[str, str]]:
    """The real-model table: each model's choices on the five axes, from the library's model cards."""
    rows = []
    for card in MODEL_CARDS.values():
        size, real = list(card.real.items())[-1]
        ffn = axes.label("ffn", real.ffn)
        if FFN_KINDS[real.ffn].routed:
            ffn += f" {real.n_experts}×, top-{real.top_k}"
        heads = f"latent {real.kv_rank}" if real.kv_rank is not None else f"{real.n_kv_heads}/{real.n_heads}"
        windows = real.layer_windows()
        local = [w for w in windows if w is not None]
        window = ""
        if local:
            window = f", window {'/'.join(map(str, sorted(set(local))))}"
            window += f" on {len(local)} of {len(windows)} layers" if len(local) < len(windows) else ""
        placement = (axes.label("block", "parallel") if real.parallel_block
                     else axes.label("norm_position", real.norm_position))
        rows.append({"model": card.name, "year": str(card.year), "size": size, "arch": real.arch,
                     "KV heads": f"{axes.label('kv_heads', real.attention_kind)} ({heads})",
                     "position": axes.label("position", real.position) + window,
                     "norm": f"{axes.label('norm', real.norm)}, {placement}", "FFN": ffn,
                     "KV cache / token": binary_size(kv_cache_bytes_per_token(real))})
    return rows


def _real_models() -> Live:
    recent = [card for card in MODEL_CARDS.values() if card.year >= 2022 and _largest(card).arch == "decoder"]
    rotating = [card for card in recent if POSITIONS[_largest(card).position].rotates_qk]
    other = [card for card in recent if not POSITIONS[_largest(card).position].rotates_qk]
    odd_one = other[0] if other else rotating.pop()
    shown = sorted([*rotating[:3], odd_one], key=lambda card: (card.year, card.name))
    return Live(
        question="Every recent decoder in the table made the same choice of position scheme — except one. Which?",
        choices=[card.name for card in shown], answer=shown.index(odd_one),
        why=(f"{odd_one.name} ({odd_one.year}) uses {axes.label('position', _largest(odd_one).position)}; the others "
             f"rotate q and k with {axes.label('position', 'rope')}. "
             "Read across the rows: the Original Transformer and LLaMA share one skeleton, and each model is a choice "
             "on each of the five axes."),
        figure=lesson_figures.model_table(model_rows(), odd_one.name),
        caption="Real sizes from transformer.presets (the largest size of each model); KV cache in fp16.")


# what a model costs, how models grow, attention below N²: the lecture's closing ---------------


def _costs() -> Live:
    card = MODEL_CARDS["gpt2"]
    size, real = next(iter(card.real.items()))
    counts = param_counts(real)
    share = counts["embedding"] / counts["total"]
    options = {0.01: "About 1%", 0.1: "About 10%", 0.3: "About 30%", 0.6: "About 60%"}
    rows = [{"model": f"{card.name} {name}", **param_counts(cfg)} for name, cfg in card.real.items()]
    largest = rows[-1]
    return Live(
        question=(f"{card.name} {size} has {counts['total'] / 1e6:.0f}M parameters: a vocabulary of "
                  f"{real.vocab_size:,} tokens, D = {real.d_model}, {real.n_layers} blocks. What share of its "
                  "parameters are the embeddings (tokens and positions)?"),
        choices=list(options.values()), answer=nearest(list(options), share),
        why=(f"V·D = {real.vocab_size:,} × {real.d_model} plus {real.max_len:,} positions × {real.d_model}: "
             f"{counts['embedding'] / 1e6:.1f}M, {share:.0%}. Each block holds about 12·D² = "
             f"{12 * real.d_model ** 2 / 1e6:.1f}M, so the blocks outgrow the embedding as D grows: in "
             f"{largest['model']} it is {largest['embedding'] / largest['total']:.1%}."),
        figure=chapter_figures.parameter_shares(rows, f"{card.name}'s recipe at three sizes: where the parameters sit"),
        query={"cost_model": f"{card.name} {size}"},
        caption="Counted term by term from the real dimensions (transformer.costs.param_terms).")


COMPUTE_STEP = 10  # how much more compute the question gives


def _growth() -> Live:
    base = scaling.compute_optimal(1e21)
    bigger = scaling.compute_optimal(COMPUTE_STEP * base.budget)
    ratio = bigger.params / base.params
    options = {1.0: "The same size, trained 10× longer", 3.16: "About 3× bigger", 10.0: "10× bigger",
               100.0: "100× bigger"}
    fitted = scaling.fitted_optimal(COMPUTE_STEP * base.budget).params / scaling.fitted_optimal(base.budget).params
    budgets = np.logspace(18, 26, 81)
    return Live(
        question=(f"You get {COMPUTE_STEP}× the training compute. For the lowest loss, how much bigger should the "
                  "model be?"),
        choices=list(options.values()), answer=nearest(list(options), ratio),
        why=(f"Compute-optimal models read about {scaling.TOKENS_PER_PARAM} tokens per parameter, so C = 6·N·D = "
             f"{6 * scaling.TOKENS_PER_PARAM}·N²: N grows as √C, {ratio:.2f}× for 10× the compute, and the tokens "
             f"too. The fitted law itself says {fitted:.2f}×."),
        figure=chapter_figures.loss_against_compute(budgets, scaling.frontier_loss(budgets), scaling.published_points(),
                                                    title="the fitted loss of compute-optimal models (Hoffmann et al. "
                                                          "2022)"),
        query={"grow_budget": f"{COMPUTE_STEP * base.budget:.0e}"},
        caption=scaling.CHINCHILLA_SOURCE + ".")


SPARSE_T, SPARSE_BLOCK = 4096, 64  # the question's text and block
SHOWN_BLOCK = 4  # the block drawn on the lesson text


def _sparse() -> Live:
    pairs = analysis.allowed_pairs("block-local", SPARSE_T, SPARSE_BLOCK, causal=True)
    dense = SPARSE_T * (SPARSE_T + 1) // 2  # every pair a causal mask allows
    share = pairs / dense
    options = {1 / 64: "About 1/64", 1 / 8: "About 1/8", 1 / 2: "About 1/2",
               1.0: "All of them: a mask only hides pairs"}
    m = lesson_model()
    ids, labels = tuple(m.tokens.ids[:MAX_SHOWN]), m.labels[:MAX_SHOWN]
    view = sparse_attention(m.config_json, LESSON_SEED, ids, 0, "block-local", SHOWN_BLOCK, 1)
    return Live(
        question=(f"A decoder reads {SPARSE_T:,} tokens with block-local attention: each token sees only the earlier "
                  f"tokens of its own block of {SPARSE_BLOCK}. What share of the pairs full causal attention scores "
                  "does it score?"),
        choices=list(options.values()), answer=nearest(list(options), share),
        why=(f"{pairs:,} of {dense:,} pairs, {share:.1%}: T·b/2 instead of T²/2, so the cost grows linearly with T. "
             "But given as a mask to a dense kernel (torch's SDPA), every score is still computed and the masked "
             "ones thrown away: only a block-sparse kernel that skips the empty tiles turns the saving into time."),
        figure=mask_and_weights(view.additive, view.weights[0], labels, labels,
                                f"block-local, blocks of {SHOWN_BLOCK}: head 0's weights, layer 0"),
        query={"mask_block": str(SHOWN_BLOCK), "mask_layer": "0", "mask_head": "0"},
        caption=f"Weights of {m.weights} with the pattern in every layer; the fused SDPA path and the explicit "
                f"five lines agree to {view.gap:.0e}.")


# 13 ------------------------------------------------------------------------------------------


def _logit_lens() -> Live:
    m = lesson_model()
    ids = tuple(m.tokens.ids)
    lens = lens_view(m.config_json, LESSON_SEED, ids)
    rows = residual_labels(m.config.n_layers)
    # a position whose next token the model gets right, best one it can copy from earlier in the text (the same
    # two tokens occurred before), where that answer appears latest (and most clearly at the output)
    right = [q for q in range(len(ids) - 1) if lens.answers[q] == ids[q + 1]] or [len(ids) - 1]
    copied = [q for q in right if any(ids[j:j + 2] == ids[q:q + 2] for j in range(q))]
    query = max(copied or right, key=lambda q: (lens.first_row(q), lens.answer_probs[-1, q]))
    row = lens.first_row(query)
    answer = lens.top_labels[-1, query, 0]
    shown = list(range(max(0, query - MAX_SHOWN + 1), query + 1))
    figure = lens_grid(lens.top_labels[:, shown], lens.top_probs[:, shown], lens.answer_probs[:, shown], rows,
                       [f"{i}:{m.labels[i]}" for i in shown],
                       f"the logit lens on “{m.text}”, up to {token_name(m, query)}")
    control = lens_view(m.config_json, LESSON_SEED, ids, random_init=True)
    before = f"{rows[row - 1]} the top token was '{lens.top_labels[row - 1, query, 0]}'" if row else "from the start"
    return Live(
        question=(f"After {token_name(m, query)} of “{m.text}” the model predicts '{answer}'. Read the residual stream "
                  "through the final norm and the unembedding at every depth: from which point on is "
                  f"'{answer}' the top token?"),
        choices=rows, answer=row,
        source="the trained model's answer" if m.trained else "the model's answer (untrained weights)",
        why=(f"'{answer}' leads from {rows[row]} on ({lens.answer_probs[row, query]:.0%}, "
             f"{lens.answer_probs[-1, query]:.0%} at the output); {before}: "
             + ("the embedding of the token alone already points to it." if row == 0 else
                f"block {row - 1} wrote the answer into the stream.")),
        figure=figure, query={"lens_end": str(query)},
        caption=(f"Weights of {m.weights}. With random-init weights of the same shape the output here is "
                 f"'{control.top_labels[-1, query, 0]}' at {control.top_probs[-1, query, 0]:.1%}: the answer is "
                 "what training wrote into the blocks."))


# 14 ------------------------------------------------------------------------------------------

COPY_PAIR = "a word changed"  # the answer copies a character of an earlier word, which the corruption changes
MAX_HEAD_CHOICES = 6


def _copying_head() -> Live:
    m = lesson_model()
    pair = PAIRS[COPY_PAIR]
    clean, corrupt = (encode_text(text, m.config_json) for text in (pair.clean, pair.corrupt))
    right, wrong = (answer_token(text, answer, m.config_json) for text, answer in
                    ((pair.clean, pair.right), (pair.corrupt, pair.wrong)))
    result = patching(m.config_json, LESSON_SEED, tuple(clean.ids), tuple(corrupt.ids), right, wrong)
    L, H = result.heads.shape
    effects = torch.from_numpy(result.heads).flatten()  # (L * H,)
    best = int(effects.argmax())
    # the playground's induction head on this prompt: the head whose last query looks most at the token after
    # the earlier copy of its own token
    ids = torch.tensor([clean.ids])
    last = torch.zeros_like(ids, dtype=torch.bool)
    last[0, -1] = True
    targets = induction_targets(ids, last)  # (1, T, T)
    trace = get_trace(m.config_json, LESSON_SEED, tuple(clean.ids), tuple(clean.labels))
    looks = torch.stack([attention_mass(torch.from_numpy(trace.pattern(layer))[None], targets) for layer in range(L)])
    induction = int(looks.argmax())  # (L, H) flattened
    candidates = sorted({best, induction, *effects.topk(min(MAX_HEAD_CHOICES - 2, L * H)).indices.tolist()})
    name = lambda index: f"layer {index // H}, head {index % H}"  # noqa: E731
    same = "the same head" if induction == best else f"not this head but {name(induction)}"
    runner_up = float(effects.topk(2).values[-1]) if L * H > 1 else 0.0
    return Live(
        question=(f"Clean: “{pair.clean}” → '{pair.right}'. Corrupted: “{pair.corrupt}” → '{pair.wrong}'. Run the "
                  "corrupted prompt, but take one head's output from the clean run. Which head brings back most of "
                  f"the clean answer '{pair.right}'?"),
        choices=[name(c) for c in candidates], answer=candidates.index(best),
        source="the trained model's answer" if m.trained else "the model's answer (untrained weights)",
        why=(f"Patching {name(best)} alone moves the logit difference '{pair.right}' − '{pair.wrong}' by "
             f"{effects[best]:+.2f} of the {result.gap:+.2f} between the two prompts (the next best head: "
             f"{runner_up:+.2f}). The playground's induction head — the head whose last query puts most weight "
             f"({float(looks.flatten()[induction]):.0%}) on the token after the earlier '{clean.labels[-1]}' — is "
             f"{same}: it finds the earlier copy and moves what followed it. With random-init weights of the same "
             f"shape no head moves it by more than {float(abs(result.control_heads).max()):.2f}."),
        figure=effect_heatmaps([("trained weights", result.heads), ("random-init weights", result.control_heads)],
                               [f"head {h}" for h in range(H)], [f"layer {layer}" for layer in range(L)], "head",
                               "layer", result.gap, "one head patched from the clean run: the logit difference it "
                                                    "brings back"),
        query={"text": pair.clean, "layer": str(induction // H), "head": str(induction % H),
               "query": str(len(clean.ids) - 1)},
        caption=(f"Weights of {m.weights}. Each cell: the corrupted run with that head's output (every position, "
                 "before W_o) taken from the clean run. The link opens the playground on the clean prompt at the "
                 "induction head."))

STEPS: list[Step] = [
    Step("before-attention", "Before attention: one vector for a sentence",
         "Before 2015, a sequence-to-sequence model read its input with a recurrent network, one token at a time, "
         "and handed the decoder **one fixed vector**: the encoder's last state. **Attention** (Bahdanau et al., "
         "2015) keeps every encoder state, and at each output step scores them all, softmaxes the scores and reads "
         "their weighted mix.",
         "What happens to each model's accuracy as the strings get longer?", "choice", _before_attention,
         "On the Before attention page, type 20 letters: the one-vector model's copy goes wrong after the first few; "
         "the attention model's weights draw the diagonal.", "before_attention"),
    Step("soft-lookup", "Attention is a soft lookup",
         "A dictionary lookup finds the one key equal to the query and returns its value. Attention compares the "
         "query with **every** key (q · k), turns the scores into weights that sum to 1 (softmax), and returns the "
         "weighted **mix** of all the values. A trained head learns what to look for.",
         "Which earlier token will this head look at?", "token", _soft_lookup,
         "In the playground, pick other query tokens and heads: some heads look at the token just before, an "
         "induction head at the token after an earlier copy of the query's token.", "playground", uses_model=True),
    Step("five-lines", "The five lines and the √d scaling",
         "All of attention is five lines, in every model on this site:\n\n```python\n" + five_lines() + "\n```\n\n"
         "Line 1 divides the scores by √d_head. Why would a division matter, if softmax only compares scores?",
         "What happens to the weights when d_head grows and we do not scale?", "choice", _scaling,
         "On the √d page, move d_head down to 16: the unscaled row softens too — the problem grows with d_head.",
         "scaling", {"scale_d": str(SCALE_D), "scale_keys": str(SCALE_KEYS), "scale_seed": str(SCALE_SEED)}),
    Step("masks", "Softmax and masks",
         "Softmax turns any row of scores into weights: exp(s) / Σ exp(s). A mask adds a huge negative number to "
         "the scores of the pairs that are not allowed, **before** softmax: their exp is exactly 0, and the other "
         "weights of the row still sum to 1.",
         "Which cells does a causal mask blank?", "choice", _masks,
         "On the Masks page, open the sliding-window tab with W = 3: each query keeps only its 3 most recent keys.",
         "masks", uses_model=True),
    Step("multi-head", "Multi-head attention",
         "One head computes one weighted mix. A layer runs H heads side by side, each with its own projections "
         "(d_head = d_model / H), and concatenates their outputs before W_o: one head can follow the previous "
         "token while another looks for earlier copies.",
         "How many heads of this layer follow the previous token?", "number", _multi_head,
         "In the playground, pick the last layer: the heads there look for the token after an earlier copy.",
         "playground", uses_model=True),
    Step("no-positions", "No positions: attention sees a set",
         "Attention is a weighted sum over a set: q · k knows what a token is, not where it is. Shuffle the input "
         "of a model without positions and without a mask, and see what changes.",
         "What happens to the outputs when the input is shuffled?", "choice", _permutation,
         "On the Why positions page, pick a causal mask: order leaks back in through who may see whom.",
         "permutation", uses_model=True),
    Step("positions", "Sinusoidal, learned, RoPE, ALiBi",
         "Four ways to tell attention where tokens are: **add** a fixed wave (sinusoidal, 2017) or a trained vector "
         "(learned, GPT-2) to each embedding; **rotate** q and k by their position (RoPE, LLaMA); or **subtract** a "
         "penalty growing with distance from the scores (ALiBi, BLOOM).",
         "On what does a RoPE score depend?", "choice", _positions,
         "On the Positions page, ALiBi tab: make the input longer than max_len — learned positions stop with an "
         "error, RoPE and ALiBi run on.", "positions", uses_model=True),
    Step("block", "The block: residual stream and norms",
         "A block adds to a **residual stream**: x + attention(x), then x + FFN(x). A norm keeps the numbers in "
         "range; it can sit after the sum (post-norm, 2017, BERT) or before each sublayer (pre-norm, GPT-2, LLaMA). "
         "RMSNorm drops LayerNorm's mean subtraction.",
         "Which placement keeps the residual stream's size constant?", "choice", _block,
         "On the Norms page, compare the gradient plot: where does each placement put the largest gradients?",
         "norms", uses_model=True),
    Step("ffn", "FFN, SwiGLU and mixtures of experts",
         "After attention mixes tokens, a feed-forward network transforms each token on its own — and holds most "
         "of the parameters. SwiGLU gates it: SiLU(x W_gate) ⊙ (x W_up). A **mixture of experts** keeps several "
         "FFNs and routes each token to its top-k.",
         "What share of Mixtral's parameters does one token use?", "choice", _ffn,
         "On the FFN and MoE page with the Mixtral preset, watch the router pick 2 experts for every character.",
         "ffn", {"preset": "mixtral"}),
    Step("kv-cache", "KV cache, GQA and MQA",
         "Generating token t + 1 needs the keys and values of all t tokens before it, so they are kept: the **KV "
         "cache**. At real sizes it can outgrow the weights. GQA lets groups of query heads share one K and V head; "
         "MQA shares a single one.",
         "How many bytes of KV cache does LLaMA 2 70B need for 4,096 tokens?", "number", _kv_cache,
         "On the KV heads page, set the context to 32,768 and compare the real models' caches.", "kv_heads"),
    Step("flash", "Flash attention",
         "The five lines hold a T × T matrix per head; at long contexts that is more memory than the model. Flash "
         "attention computes the same result one tile at a time, keeping only a running max and sum per row "
         "(the online softmax), and skips the tiles a mask hides entirely.",
         "How many tiles can a causal flash attention skip?", "number", _flash,
         "On the Flash attention page, step through the tiles and watch the running max rescale the old sums.",
         "flash"),
    Step("images", "The same block on images",
         "Nothing in the block knows it reads text. Cut an image into patches, flatten each patch into a vector and "
         "treat it as a token: a Vision Transformer is the encoder you already know, with a patch embedding instead "
         "of a token embedding.",
         "How many tokens does an 8×8 image make?", "number", _images,
         "Think of 4×4 patches: the same image makes 4 tokens of 16 values — fewer, coarser tokens, and attention "
         "over them costs 16× less.",
         "vit"),
    Step("real-models", "What real models chose",
         "The Original Transformer (2017) and LLaMA 2 (2023) are the same skeleton; each real model is one choice on "
         "each of the five axes. The table is computed from the models' real dimensions.",
         "Which recent model does not use RoPE?", "choice", _real_models,
         "On Home, open a row of the table: the app loads that model's recipe at classroom size.", ""),
    Step("costs", "What a model costs",
         "Every count follows from the dimensions: a block holds about 4·D² in attention and 8·D² in its FFN, the "
         "embeddings V·D. A token costs about 2 FLOPs per parameter forward and 6 to train on; training with Adam "
         "holds 16 bytes per parameter before a single activation.",
         "What share of GPT-2's parameters are the embeddings?", "choice", _costs,
         "On What a model costs, pick GPT-3 175B and a context of 2,048: compare the memory of training with the "
         "memory of generating.", "costs"),
    Step("growth", "How models grow",
         "A training budget is about 6·N·D FLOPs for N parameters and D tokens. Hoffmann et al. (2022) fitted the "
         "loss of hundreds of runs and found the best split: grow the model and the data together, about 20 tokens "
         "per parameter; the loss then falls as a power law of compute.",
         "With 10× the compute, how much bigger should the model be?", "choice", _growth,
         "On How models grow, type GPT-3's 3.14e23 FLOPs: the compute-optimal model is far smaller than 175B.",
         "growth"),
    Step("sparse", "Attention below N²",
         "Dense attention scores every pair: T² for T tokens. Sparse patterns score only some — a local window, "
         "blocks, every s-th token, a few global tokens (Sparse Transformer, Longformer, BigBird) — and the layers "
         "still carry information across the whole text.",
         "What share of the pairs does block-local attention score?", "choice", _sparse,
         "On the Masks page, open the block-local tab and make the block larger than the text: the page says why "
         "that is impossible.", "masks", uses_model=True),
    Step("logit-lens", "At which layer does the answer appear?",
         "Every block adds to the residual stream, and only the last one is read out. The **logit lens** reads the "
         "stream earlier — through the same final norm and unembedding — as if the model stopped there: what would "
         "it say after block 0? After block 1?",
         "From which block on is the model's answer the top token?", "choice", _logit_lens,
         "On the Why this prediction? page, move along the lens to the first copy of the sentence: there the answer "
         "appears later, or never, because nothing can be copied yet.", "interpret", uses_model=True),
    Step("copying-head", "Which head copies the repeated word?",
         "Attention weights say where a head looks, not what its output does. **Activation patching** asks the "
         "output: run a corrupted prompt, put back one head's output from the clean prompt, and see how much of "
         "the clean answer returns. A head that brings it all back carries the difference.",
         "Which head brings the clean answer back?", "choice", _copying_head,
         "In the playground, switch that head off on a repeated sentence: the second copy gets harder to predict.",
         "playground", uses_model=True),
    # --- What changed since 2023 ---
    Step("local-global", "Since 2023: local and global layers",
         "Most long-context models no longer let every layer see everything. **Local** layers see a sliding window "
         "of W tokens; **global** layers see all. Gemma 2 and gpt-oss alternate them, Gemma 3 puts five local layers "
         "before each global one: the cost and the cache of the local layers stop growing at W. What does each kind "
         "of layer do in a trained model?",
         "Which layer of the trained Gemma 3 copies from far back?", "choice", modern_steps.local_global,
         "The Masks page opens the trained Gemma 3: each layer's mask in its strip, and the bytes local layers save "
         "at 4k, 32k and 128k tokens.", "masks"),
    Step("latent", "Since 2023: multi-head latent attention",
         "DeepSeek-V2/V3 cache neither K nor V. Each token is squeezed into a small **latent**; every head rebuilds "
         "its key and value from it. RoPE would not survive the squeeze, so one extra rotated key part is cached and "
         "shared by all heads. Does a model that caches so little still read well?",
         "How well does the trained DeepSeek-V3 read, caching a latent?", "choice", modern_steps.latent,
         "The KV heads page opens the trained DeepSeek-V3: what its cache holds per token, the absorbed form giving "
         "the same weights, and the real 671B model's latent beside GQA and MHA of the same width.", "kv_heads"),
    Step("qk-norm", "Since 2023: QK-norm and soft-capping",
         "Dividing by √d fixes the head size, not the size of q and k, which grows in training. **QK-norm** (Qwen3, "
         "Gemma 3, OLMo 2) puts an RMSNorm on q and k; **soft-capping** (Gemma 2) squeezes every score into (−c, c).",
         "How large did the scores grow in models trained without QK-norm?", "choice", modern_steps.qk_norm,
         "On the Scores page, compare the trained model's scores with the same weights under QK-norm.", "scores"),
    Step("sinks", "Since 2023: attention sinks",
         "Softmax must spend all of a row's weight, even when a head has nothing to find. gpt-oss gives each head a "
         "learned **sink** logit that joins the softmax and is dropped: the head can attend to nothing.",
         "How much of a query's weight do the trained gpt-oss sinks take?", "choice", modern_steps.sinks,
         "The Scores page opens the trained gpt-oss: each head's sink share per query, on your own text.", "scores"),
    Step("rope-scaling", "Since 2023: RoPE scaling",
         "RoPE fails past its trained length: its slow dimensions reach angles never seen. Every long-context model "
         "rescales the frequencies — linear, dynamic NTK, YaRN, LLaMA 3's bands — often with no retraining at all.",
         "Which scaling lets the trained LLaMA 2 read 4× its context best?", "choice", modern_steps.rope_scaling,
         "On the Positions page, see each frequency's wavelength under each scaling, and the measured length test "
         "for every trained RoPE model.", "positions"),
]
