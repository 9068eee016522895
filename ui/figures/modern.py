"""Figure builders for the attention of 2024-2026: numpy (or the measurements' JSON rows) in, plotly Figure out.

Local and global layers, RoPE scaling, QK-norm, soft-capping, sinks and the latent cache. The same look,
Okabe-Ito lines and Viridis / blue-orange matrices as ui/figures/axes.py.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.axes import AXES
from ui.figures.axes import OKABE_ITO, layout
from ui.figures.base import heatmap

LOCAL, GLOBAL = OKABE_ITO[1], OKABE_ITO[0]


PLAN_FACETS = ("attention", "keys", "positions", "K/V from", "FFN")  # the layer plan's rows, top to bottom


def _turn_words(spec, position_label: str, bases: int) -> str:
    """A turning layer's positions: the scheme, with its RoPE base where the model's layers turn at several
    (Gemma 3's local layers at 10k beside 1M)."""
    return position_label if bases < 2 else f"{position_label} {spec.rope_theta:,.0f}"


def plan_cells(plan, position_label: str, rotating: bool, dense_ffn: str = "dense") -> list[dict[str, str]]:
    """One layer's words per facet, from the rows of ``cfg.layer_plan()``: its kind, the keys it sees (a window, a
    chunk, the indexer's top k, or all), its positions (a rotating scheme, with its base where layers turn at
    several, or NoPE on a layer it leaves out; any other scheme acts on every layer), the layer whose K/V it reads
    (its own, or an earlier one's: Gemma 4), and its FFN (experts on a routed layer, else `dense_ffn`)."""
    bases = len({(spec.rope_theta, spec.rope_scaling) for spec in plan if spec.rotates})
    return [{"attention": AXES["attention"].row(spec.kind).label,
             "keys": (f"local {spec.window}" if spec.window is not None
                      else f"chunk {spec.chunk}" if spec.chunk is not None
                      else f"top-{spec.index_top_k}" if spec.selects_keys else "global"),
             "positions": (_turn_words(spec, position_label, bases) if spec.rotates
                           else position_label if not rotating else "NoPE"),
             "K/V from": "own" if spec.kv_from == spec.index else f"layer {spec.kv_from}",
             "FFN": "experts" if spec.routed else dense_ffn} for spec in plan]


def plan_strip(cells: list[dict[str, str]], rotating: bool) -> go.Figure:
    """The layer plan at a glance: one column per layer, one row per facet, each cell its words; a facet's cells
    share a colour when they say the same (local layers orange, global blue; NoPE layers stand out)."""
    layers = [f"L{i}" for i in range(len(cells))]
    fig = go.Figure()
    for facet in PLAN_FACETS:
        words = [cell[facet] for cell in cells]
        distinct = list(dict.fromkeys(words))
        if facet == "keys":  # Llama 4's chunks in the third colour
            colours = [GLOBAL if w == "global" else OKABE_ITO[3] if w.startswith("chunk") else LOCAL for w in words]
        elif facet == "positions" and rotating:
            colours = [OKABE_ITO[5] if w == "NoPE" else OKABE_ITO[(2 + distinct.index(w)) % len(OKABE_ITO)]
                       for w in words]
        else:
            colours = [OKABE_ITO[(2 + distinct.index(w)) % len(OKABE_ITO)] for w in words]
        fig.add_trace(go.Bar(x=layers, y=[1] * len(cells), base=[PLAN_FACETS.index(facet)] * len(cells),
                             marker=dict(color=colours, line=dict(color="white", width=2)), text=words,
                             textposition="inside", insidetextanchor="middle", name=facet, showlegend=False,
                             hovertemplate=f"layer %{{x}} · {facet}: %{{text}}<extra></extra>"))
    fig = layout(fig, "the layer plan: what each layer does", 120 + 45 * len(PLAN_FACETS), "layer", "facet")
    fig.update_layout(barmode="overlay", bargap=0.05)
    fig.update_yaxes(tickvals=[i + 0.5 for i in range(len(PLAN_FACETS))], ticktext=list(PLAN_FACETS),
                     autorange="reversed", showgrid=False)
    return fig


def kv_cache_by_context(contexts: list[int], bytes_by_model: dict[str, list[float]]) -> go.Figure:
    """KV-cache GiB at each context length (log x), one line per model or layer pattern."""
    fig = go.Figure()
    for i, (name, values) in enumerate(bytes_by_model.items()):
        fig.add_trace(go.Scatter(x=contexts, y=np.asarray(values) / 2 ** 30, mode="lines+markers", name=name,
                                 line=dict(color=OKABE_ITO[i % len(OKABE_ITO)], width=3),
                                 hovertemplate=f"{name}<br>%{{x:,}} tokens: %{{y:.2f}} GiB<extra></extra>"))
    fig = layout(fig, "KV cache for one sequence (16-bit)", 360, "context (tokens)", "GiB")
    fig.update_xaxes(type="log")
    return fig


def rope_wavelengths(wavelengths: dict[str, np.ndarray], trained: int) -> go.Figure:
    """Each frequency pair's wavelength (tokens per full turn, log y) under each scaling, and the trained context."""
    fig = go.Figure()
    for i, (name, values) in enumerate(wavelengths.items()):
        fig.add_trace(go.Scatter(x=np.arange(len(values)), y=values, mode="lines+markers", name=name,
                                 line=dict(color=OKABE_ITO[i % len(OKABE_ITO)], width=3),
                                 hovertemplate=f"{name}<br>pair %{{x}}: a turn every %{{y:,.0f}} tokens<extra></extra>"))
    fig.add_hline(y=trained, line_dash="dash", annotation_text=f"trained context ({trained:,})")
    fig = layout(fig, "wavelength of each RoPE frequency, before and after scaling", 380,
                 "frequency pair i (fast to slow)", "tokens per turn")
    fig.update_yaxes(type="log")
    return fig


def scaling_length_test(rows: list[dict]) -> go.Figure:
    """Held-out bits per character at 1x, 2x, 4x the trained context, one line per scaling and factor.
    rows: {"scaling", "factor", "bits_per_char": {"1x": bpc, ...}} as scripts/measure_modern.py writes them."""
    fig = go.Figure()
    for i, row in enumerate(rows):
        rescales = AXES["rope_scaling"].row(row["scaling"]).rescales
        name = f"{row['scaling']} ×{row['factor']:g}" if rescales else "no scaling"
        multiples = list(row["bits_per_char"])
        fig.add_trace(go.Scatter(x=multiples, y=[row["bits_per_char"][m] for m in multiples], mode="lines+markers",
                                 name=name, line=dict(color=OKABE_ITO[i % len(OKABE_ITO)], width=3,
                                                      dash="solid" if row["factor"] <= 2 else "dot"),
                                 hovertemplate=f"{name}<br>%{{x}}: %{{y:.2f}} bits per character<extra></extra>"))
    return layout(fig, "the trained RoPE model read past its context, with each scaling (no retraining)", 400,
                  "input length (× the trained context)", "bits per character (lower is better)")


def score_histograms(scores: dict[str, np.ndarray], bins: int = 60) -> go.Figure:
    """Overlaid histograms of attention scores (e.g. with and without QK-norm)."""
    fig = go.Figure()
    for i, (name, values) in enumerate(scores.items()):
        fig.add_trace(go.Histogram(x=np.asarray(values).ravel(), nbinsx=bins, name=name, opacity=0.6,
                                   marker_color=OKABE_ITO[i % len(OKABE_ITO)]))
    fig.update_layout(barmode="overlay")
    return layout(fig, "scores q·k/√d, every head and pair", 340, "score", "count")


def entropy_by_scale(scales: np.ndarray, entropy: dict[str, np.ndarray], uniform: float) -> go.Figure:
    """Mean softmax entropy (bits) as q and k grow, with and without QK-norm; the uniform row's entropy dashed."""
    fig = go.Figure()
    for i, (name, values) in enumerate(entropy.items()):
        fig.add_trace(go.Scatter(x=scales, y=values, mode="lines+markers", name=name,
                                 line=dict(color=OKABE_ITO[i % len(OKABE_ITO)], width=3)))
    fig.add_hline(y=uniform, line_dash="dash", annotation_text="uniform")
    fig = layout(fig, "softmax entropy as q and k grow during training", 340, "scale of q and k (× their start)",
                 "entropy (bits)")
    # one tick per measured scale: a log axis left to itself adds unlabelled ticks between them
    fig.update_xaxes(type="log", tickvals=list(scales), ticktext=[f"{s:g}×" for s in scales], minor=dict(ticks=""))
    return fig


def softcap_curve(raw: np.ndarray, cap: float) -> go.Figure:
    """Scores before the cap against after it, over the curve c·tanh(s/c) and the identity."""
    raw = np.asarray(raw, dtype=np.float64).ravel()
    span = max(float(np.abs(raw).max()) if raw.size else 1.0, 2 * cap)
    line = np.linspace(-span, span, 200)
    fig = go.Figure([
        go.Scatter(x=line, y=line, mode="lines", name="no cap", line=dict(color="#999999", dash="dash")),
        go.Scatter(x=line, y=cap * np.tanh(line / cap), mode="lines", name=f"{cap:g}·tanh(s/{cap:g})",
                   line=dict(color=OKABE_ITO[0], width=3)),
        go.Scatter(x=raw, y=cap * np.tanh(raw / cap), mode="markers", name="this model's scores",
                   marker=dict(color=OKABE_ITO[1], size=5, opacity=0.5))])
    return layout(fig, "soft-capping: every score squeezed into (−c, c)", 360, "score before the cap", "after")


def sink_share(share: np.ndarray, tokens: list[str],
               title: str = "the sink's share of each query's weight") -> go.Figure:
    """(H, T) a share of each query's weight per head: what its sink took, or (a model without one) the first token."""
    fig = heatmap(np.asarray(share), tokens, [f"head {h}" for h in range(share.shape[0])], title, x_title="query", y_title="head", zmin=0.0, zmax=1.0,
                  height=120 + 28 * share.shape[0])
    fig.update_yaxes(autorange="reversed", type="category")
    return fig


def spare_weight(rows: list[dict]) -> go.Figure:
    """Per checkpoint, the largest share any head puts on the first position and on spaces, beside random init."""
    names = [row["model"] for row in rows]
    first = [max(map(max, row["first_position"])) for row in rows]
    spaces = [max(map(max, row["spaces"])) for row in rows]
    fig = go.Figure([
        go.Bar(x=names, y=first, name="first position (<bos>), trained", marker_color=OKABE_ITO[0]),
        go.Bar(x=names, y=[row["random_init"]["first_position_max"] for row in rows],
               name="first position, random init (highest of 3 seeds)", marker_color=OKABE_ITO[4]),
        go.Bar(x=names, y=spaces, name="spaces, trained", marker_color=OKABE_ITO[1]),
        go.Bar(x=names, y=[row["random_init"]["spaces_max"] for row in rows],
               name="spaces, random init (highest of 3 seeds)", marker_color=OKABE_ITO[6])])
    fig.update_layout(barmode="group")
    return layout(fig, "where models without sinks park weight: the most any head puts there", 420,
                  "checkpoint", "share of a query's weight")


def sinks_measured(row: dict) -> go.Figure:
    """One checkpoint with sinks: each head's mean sink share (and weight on the first position), beside the mean of
    random-init weights of its shape; a head per bar, labelled L{layer}H{head} and whether its layer is local."""
    windows = row["layer_windows"]
    heads = [(layer, head) for layer, shares in enumerate(row["sink_share"]) for head in range(len(shares))]
    names = [f"L{layer}H{head} ({'local' if windows[layer] else 'global'})" for layer, head in heads]

    def per_head(grid: list[list[float]]) -> list[float]:
        return [grid[layer][head] for layer, head in heads]

    def random_mean(key: str) -> list[float]:
        return list(np.mean([per_head(seed) for seed in row["random_init"][key]], axis=0))

    fig = go.Figure([
        go.Bar(x=names, y=per_head(row["sink_share"]), name="sink's share, trained", marker_color=OKABE_ITO[0]),
        go.Bar(x=names, y=random_mean("sink_share"), name="sink's share, random init (mean of seeds)",
               marker_color=OKABE_ITO[4]),
        go.Bar(x=names, y=per_head(row["first_position"]), name="first position (<bos>), trained",
               marker_color=OKABE_ITO[1]),
        go.Bar(x=names, y=random_mean("first_position"), name="first position, random init", marker_color=OKABE_ITO[6])])
    fig.update_layout(barmode="group")
    return layout(fig, f"what the sinks of {row['model']} take, per head (held-out English)", 420,
                  "head", "mean share of a query's weight")


def layer_roles(row: dict) -> go.Figure:
    """One checkpoint that mixes kinds of layer (local and global, chunked and NoPE): each layer's best induction
    and previous-token head, beside random init."""
    names = ([f"layer {i} ({kind})" for i, kind in enumerate(row["layer_kinds"])] if "layer_kinds" in row else
             [f"layer {i} ({'local ' + str(w) if w else 'global'})" for i, w in enumerate(row["layer_windows"])])
    fig = go.Figure([
        go.Bar(x=names, y=row["induction"], name="induction head, trained", marker_color=OKABE_ITO[0]),
        go.Bar(x=names, y=row["random_init"]["induction"], name="induction, random init (highest seed)",
               marker_color=OKABE_ITO[4]),
        go.Bar(x=names, y=row["previous_token"], name="previous-token head, trained", marker_color=OKABE_ITO[1]),
        go.Bar(x=names, y=row["random_init"]["previous_token"], name="previous-token, random init (highest seed)",
               marker_color=OKABE_ITO[6])])
    fig.update_layout(barmode="group")
    return layout(fig, f"what each layer of {row['model']} does (best head per layer, held-out English)", 420,
                  "layer", "score")


def cache_and_bits(points: list[dict]) -> go.Figure:
    """Trained checkpoints: numbers each layer caches per token (x) against held-out bits per character (y)."""
    fig = go.Figure(go.Scatter(
        x=[p["cached"] for p in points], y=[p["bits"] for p in points], mode="markers",
        text=[p["model"] for p in points],
        marker=dict(size=12, color=[OKABE_ITO[0] if p["latent"] else OKABE_ITO[4] for p in points]),
        hovertemplate="%{text}: %{x} numbers per token and layer, %{y:.3f} bits per character<extra></extra>"))
    # models that cache the same number share one label, a list from the worst reader down: labels drawn point by
    # point would sit on one another where several models read within a hundredth of a bit
    columns = sorted({p["cached"] for p in points})
    for x in columns:
        same = sorted((p for p in points if p["cached"] == x), key=lambda p: -p["bits"])
        left = x == columns[0] and len(columns) > 1  # the first column's neighbour is close on its right
        fig.add_annotation(x=x, y=same[0]["bits"], yanchor="top", yshift=14, showarrow=False,
                           text="<br>".join(f"{p['model'].removesuffix('-language')} {p['bits']:.2f}" for p in same),
                           xanchor="right" if left else "left", xshift=-12 if left else 12,
                           align="right" if left else "left")
    fig.update_xaxes(range=[0, 1.3 * columns[-1]])  # room for the labels on both sides
    low, high = min(p["bits"] for p in points), max(p["bits"] for p in points)
    fig.update_yaxes(range=[low - 0.5 * (high - low), high + 0.1 * (high - low)])  # and below the lowest column
    return layout(fig, "what a layer caches per token, and how well the trained model reads", 460,
                  "numbers cached per token and layer (K and V, or latent + RoPE key)", "held-out bits per character")


def largest_scores(rows: list[dict]) -> go.Figure:
    """Trained decoders: the largest |q.k / sqrt(d)| in any layer, QK-normed ones marked, beside random init."""
    names = [row["model"] for row in rows]
    normalised = [AXES["qk_norm"].row(row["qk_norm"]).normalises for row in rows]
    fig = go.Figure([
        go.Bar(x=names, y=[max(row["score_max"]) for row in rows], name="trained",
               marker_color=[OKABE_ITO[0] if normed else OKABE_ITO[1] for normed in normalised],
               text=["QK-norm" if normed else "" for normed in normalised], textposition="outside"),
        go.Bar(x=names, y=[row["random_init"]["score_max"] for row in rows], name="random init (highest seed)",
               marker_color=OKABE_ITO[4])])
    fig.update_layout(barmode="group")
    return layout(fig, "the largest attention score in any layer, on held-out English", 420, "checkpoint",
                  "largest |q·k / √d|")



def distance_profiles(profiles: dict[str, np.ndarray], limit: int = 64) -> go.Figure:
    """The mean weight a query puts on the key d tokens back (d = 0 .. limit), one line per layer, log y: a RoPE
    layer's falls with distance as its rotation lets it; a NoPE layer has no distance in its scores at all."""
    fig = go.Figure()
    for i, (name, values) in enumerate(profiles.items()):
        shown = np.asarray(values)[:limit + 1]
        fig.add_trace(go.Scatter(x=np.arange(len(shown)), y=np.maximum(shown, 1e-6), mode="lines+markers", name=name,
                                 line=dict(color=OKABE_ITO[i % len(OKABE_ITO)], width=3),
                                 hovertemplate=f"{name}<br>%{{x}} back: %{{y:.3f}}<extra></extra>"))
    fig = layout(fig, "weight on the key d tokens back, mean over heads and queries", 380, "distance d (tokens back)",
                 "mean weight")
    fig.update_yaxes(type="log")
    return fig
