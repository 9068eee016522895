"""Figure builders for the State page: the state being written, what a query reads, the delta rule's correction, an
old association overwritten, the cache against the state, and how many pairs a state recalls.

Plain functions from numpy to a plotly Figure, testable without a server. Matrices whose entries take either sign
(a state, a write, implied weights) use the blue-white-orange diverging scale, white at 0; lines and bars the
Okabe-Ito palette, as the other figures.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ui.figures.axes import GIB, OKABE_ITO, look
from ui.figures.base import DIVERGING, FONT, subplot_grid, unique_labels



def _bound(*arrays: np.ndarray) -> float:
    """A symmetric colour range that holds every entry (1e-12 when all are 0, so the scale stays valid)."""
    return max(float(np.abs(a).max()) if a.size else 0.0 for a in arrays) or 1e-12


def state_write(before: np.ndarray, write: np.ndarray, after: np.ndarray, token: str,
                decay: float | np.ndarray | None = None) -> go.Figure:
    """S_t = (decay ·) S_{t-1} + k_t uᵀ as three heatmaps of d_k × d_v on one diverging scale: the state the token
    found, what it wrote, the state it left. `decay`: one number, or one per row (Kimi delta attention)."""
    if decay is None:
        found = "Sₜ₋₁"
    elif np.ndim(decay):  # a decay per key channel: each row of the state scaled by its own
        found = f"diag(αₜ)·Sₜ₋₁ (αₜ from {np.min(decay):.3f} to {np.max(decay):.3f})"
    else:
        found = f"αₜ·Sₜ₋₁ (αₜ = {float(decay):.3f})"
    titles = [f"the state it found: {found}", "+ its write kₜ uₜᵀ", f"= Sₜ, after '{token}'"]
    cells, grid = subplot_grid(titles, 3, gap_x=0.05)
    bound = _bound(before, write, after)
    traces = [go.Heatmap(z=m, coloraxis="coloraxis", **cell,
                         hovertemplate="row (key dim) %{y}<br>column (value dim) %{x}<br>%{z:.4g}<extra></extra>")
              for m, cell in zip((before, write, after), cells)]
    for i in range(3):
        suffix = "" if i == 0 else str(i + 1)
        grid[f"yaxis{suffix}"].update(autorange="reversed", title=dict(text="key dim" if i == 0 else ""),
                                      showticklabels=i == 0, scaleanchor=f"x{suffix}")
        grid[f"xaxis{suffix}"].update(title=dict(text="value dim"))
    return go.Figure(traces, dict(grid, font=FONT, height=380, margin=dict(l=10, r=10, t=60, b=10),
                                  coloraxis=dict(colorscale=DIVERGING, cmin=-bound, cmax=bound,
                                                 colorbar=dict(title=dict(text="entry"), thickness=12))))


def delta_write(value: np.ndarray, predicted: np.ndarray, correction: np.ndarray, beta: float, token: str
                ) -> go.Figure:
    """The delta rule at one token, per value dimension: what the token brings (v_t), what the state already said
    for its key (the prediction), and what it stores instead, β (v_t − prediction)."""
    dims = list(range(len(value)))
    fig = go.Figure()
    for i, (name, bars) in enumerate((("vₜ: what the token brings", value),
                                      ("Sᵀkₜ: what the state predicted", predicted),
                                      (f"stored: β(vₜ − prediction), β = {beta:.2f}", correction))):
        fig.add_trace(go.Bar(x=dims, y=bars, name=name, marker_color=OKABE_ITO[i],
                             hovertemplate=f"{name}<br>dim %{{x}}: %{{y:.4g}}<extra></extra>"))
    fig.update_layout(look(f"The delta rule at '{token}'", 360, "value dimension", "value"), barmode="group")
    return fig


def read_bars(read: np.ndarray, token: str) -> go.Figure:
    """What query t reads from the state: q_tᵀ S_t / √d_k, one bar per value dimension (``hook_z``)."""
    fig = go.Figure(go.Bar(x=list(range(len(read))), y=read, marker_color=OKABE_ITO[0],
                           hovertemplate="dim %{x}: %{y:.4g}<extra></extra>"))
    return fig.update_layout(look(f"What '{token}' reads: qₜᵀ Sₜ / √d_k", 320, "value dimension", "read"))


def implied_row(weights: np.ndarray, labels: list[str], token: str) -> go.Figure:
    """One query's implied weights over the keys it has seen: the read equals Σ_j w_j v_j. Orange above 0, blue
    below (the delta rule gives a key a negative weight where a later, similar key overwrote its value)."""
    w = np.asarray(weights, dtype=float)
    colours = [DIVERGING[-1][1] if x >= 0 else DIVERGING[0][1] for x in w]
    fig = go.Figure(go.Bar(x=unique_labels(list(labels)), y=w, marker_color=colours,
                           hovertemplate="key %{x}: %{y:.4g}<extra></extra>"))
    fig.add_hline(y=0, line_color="#555555", line_width=1)
    return fig.update_layout(look(f"'{token}' reads Σ wⱼ vⱼ: implied weights, sum {w.sum():.3g}", 320, "key",
                                  "implied weight (not a softmax)"))


def overwrite_reads(reads: dict[str, np.ndarray], rules: dict[str, str], similarity: float) -> go.Figure:
    """Two panels, the read with the old key k₁ and with the new key k₃, each a group of bars per rule over the value's
    four dimensions; v₁ is dimension 0, the unrelated v₂ dimension 1, the new v₃ dimension 2."""
    dims = ["0 (v₁, old)", "1 (v₂)", "2 (v₃, new)", "3"]
    titles = ["read with the old key k₁", f"read with the new key k₃ (k₁·k₃ = {similarity:.2f})"]
    cells, grid = subplot_grid(titles, 2, gap_x=0.08)
    traces = []
    for panel, cell in enumerate(cells):
        for i, (rule, words) in enumerate(rules.items()):
            traces.append(go.Bar(x=dims, y=reads[rule][panel], name=words, marker_color=OKABE_ITO[i],
                                 showlegend=panel == 0, legendgroup=rule, **cell,
                                 hovertemplate=f"{words}<br>%{{x}}: %{{y:.3f}}<extra></extra>"))
    for i in range(2):
        suffix = "" if i == 0 else str(i + 1)
        grid[f"yaxis{suffix}"].update(range=[-0.2, 2.0], title=dict(text="read" if i == 0 else ""))
        grid[f"xaxis{suffix}"].update(title=dict(text="value dimension"))
    return go.Figure(traces, dict(grid, font=FONT, height=380, barmode="group", legend=dict(orientation="h", y=-0.3),
                                  margin=dict(l=10, r=10, t=60, b=10)))


def cache_against_context(contexts: np.ndarray, totals: dict[str, np.ndarray], marked: int | None = None
                          ) -> go.Figure:
    """Bytes held for one sequence against its length, one line per model, both axes logarithmic: a cache grows by a
    constant per token (a straight line of slope 1), a state stays flat."""
    fig = go.Figure()
    for i, (name, n_bytes) in enumerate(totals.items()):
        fig.add_trace(go.Scatter(x=contexts, y=np.asarray(n_bytes) / GIB, mode="lines", name=name,
                                 line=dict(color=OKABE_ITO[i % len(OKABE_ITO)], width=3),
                                 hovertemplate=f"{name}<br>%{{x:,}} tokens: %{{y:.4g}} GiB<extra></extra>"))
    if marked is not None:
        fig.add_vline(x=marked, line_dash="dash", line_color="#555555")
        # an annotation on a log axis is placed in log10 units (add_vline's own label would land off the chart)
        fig.add_annotation(x=np.log10(marked), y=1, yref="paper", text=f" {marked:,} tokens", showarrow=False,
                           xanchor="left", yanchor="top")
    fig.update_layout(look("What generation holds of the past, one sequence", 440, "context (tokens)",
                           "bytes held (GiB)"))
    fig.update_xaxes(type="log", dtick=1)  # one tick per power of ten: 1k, 10k, 100k, 1M
    fig.update_yaxes(type="log", dtick=1)
    fig.update_layout(legend=dict(orientation="h", y=-0.3))
    return fig


def capacity_curves(n: np.ndarray, recall: dict[str, np.ndarray], rules: dict[str, str], d_k: int, title: str,
                    chance: bool = False) -> go.Figure:
    """Recall (share of the N stored pairs) against N, one line per rule: the mean over seeds and a band from the
    worst to the best seed; a dashed line at N = d_k, and 1/N (guessing among N values) where it applies."""
    fig = go.Figure()
    for i, (rule, per_seed) in enumerate(recall.items()):
        colour = OKABE_ITO[i]
        fig.add_trace(go.Scatter(x=np.concatenate([n, n[::-1]]),
                                 y=np.concatenate([per_seed.max(-1), per_seed.min(-1)[::-1]]), fill="toself",
                                 fillcolor=colour, opacity=0.2, line=dict(width=0), hoverinfo="skip", showlegend=False))
        fig.add_trace(go.Scatter(x=n, y=per_seed.mean(-1), mode="lines+markers", name=rules[rule],
                                 line=dict(color=colour, width=3),
                                 hovertemplate=f"{rules[rule]}<br>N = %{{x}}: %{{y:.0%}} (mean of seeds)<extra></extra>"))
    if chance:
        fig.add_trace(go.Scatter(x=n, y=1 / n, mode="lines", name="guessing: 1/N", line=dict(color="#555555",
                                 dash="dot", width=2)))
    fig.add_vline(x=d_k, line_dash="dash", line_color="#555555", annotation_text=f"N = d_k = {d_k}")
    fig.update_layout(look(title, 400, "pairs stored (N)", "pairs recalled"), yaxis=dict(range=[0, 1.05],
                      tickformat=".0%", title=dict(text="pairs recalled")))
    return fig


def recall_curves(distances: list[int], models: dict[str, tuple[list[float], list[float]]]) -> go.Figure:
    """Recall at distance: per model, the share of the second copy's characters predicted exactly (solid) and the
    same characters in control rows whose first phrase is another (dotted, same colour) against the distance d
    between the two copies. The gap between a model's two lines is what it recalls."""
    fig = go.Figure()
    for i, (label, (accuracy, control)) in enumerate(models.items()):
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        fig.add_trace(go.Scatter(x=distances, y=accuracy, mode="lines+markers", name=label,
                                 line=dict(color=colour, width=3),
                                 hovertemplate=f"{label}<br>d = %{{x}}: %{{y:.0%}} with the first copy<extra></extra>"))
        fig.add_trace(go.Scatter(x=distances, y=control, mode="lines", name=f"{label}: control", showlegend=False,
                                 line=dict(color=colour, width=2, dash="dot"),
                                 hovertemplate=f"{label}<br>d = %{{x}}: %{{y:.0%}} without it<extra></extra>"))
    fig.update_layout(look("Recall of a phrase read d characters earlier (dotted: the control rows)", 420,
                           "distance d between the two copies (characters)", "characters predicted exactly"),
                      yaxis=dict(range=[0, 1.02], tickformat=".0%", title=dict(text="characters predicted exactly")),
                      xaxis=dict(type="log", tickvals=distances, ticktext=[str(d) for d in distances],
                                 title=dict(text="distance d between the two copies (characters)")))
    return fig
