"""Figure builders for the norms, FFN/MoE and compare pages, and the norm-placement diagrams.

numpy in, plotly Figure (or DOT source) out; colours from the Okabe-Ito palette and Viridis.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer import axes
from ui.figures.axes import OKABE_ITO, grid_heatmap, layout

# --- norms ----------------------------------------------------------------------------


def placement_formula(placement: str) -> str:
    """'x + sublayer(norm(x))': one sublayer's residual step, written from the placement's row."""
    row = axes.AXES["norm_position"].row(placement)
    inner = "sublayer(norm(x))" if row.before else "sublayer(x)"
    if row.after:
        inner = f"norm({inner})"
    step = f"{'norm(x)' if row.skips_normed else 'x'} + {inner}"  # a normed skip carries the normed input
    return f"norm({step})" if row.on_sum else step


def norm_placement_dot(placement: str, norm: str) -> str:
    """DOT source of one sublayer with its norms where the placement's row puts them: before the sublayer, on
    its output before the residual add, or on the residual sum; the residual path from the stream, or from the
    normed input where the placement skips it on (normed skip)."""
    row = axes.AXES["norm_position"].row(placement)
    norm_label = axes.label("norm", norm)
    nodes = {"x": "x (residual stream)", "sublayer": "attention or FFN", "out": "to the next sublayer"}
    path = ["x"]  # the sublayer's branch, from the stream to the residual add
    if row.before:
        path.append("norm")
    path.append("sublayer")
    if row.after:
        path.append("norm_out")
    path.append("add")
    on_sum = "norm_sum" if row.before else "norm"  # a norm on the residual sum (post-norm)
    tail = ["add", on_sum, "out"] if row.on_sum else ["add", "out"]
    norms = [name for name in ("norm", "norm_out", "norm_sum") if name in path + tail]
    title = f"{axes.label('norm_position', placement)}: {placement_formula(placement)}"
    lines = ["digraph G {", 'rankdir=TB; node [shape=box fontname="Helvetica" fontsize=13 style=filled fillcolor="#e8eef7"];',
             f'label="{title}"; labelloc=t; fontname="Helvetica"; fontsize=15;',
             'add [shape=circle fillcolor="#ffffff" label="+"];']
    lines += [f'{name} [fillcolor="#fde725" label="{norm_label}"];' for name in norms]
    lines += [f'{name} [label="{text}"];' for name, text in nodes.items()]
    lines += [f"{a} -> {b};" for a, b in zip(path, path[1:])]
    skip = "norm" if row.skips_normed else "x"  # a normed skip (MiniMax-01) carries the normed input to the add
    lines.append(f'{skip} -> add [style=dashed label="residual"];')
    lines += [f"{a} -> {b};" for a, b in zip(tail, tail[1:])]
    lines.append("}")
    return "\n".join(lines)


def depth_lines(series: dict[str, list[float]], title: str, y_title: str, x_title: str, log: bool = False,
                start: int = 0, dashed: set[str] | frozenset[str] = frozenset()) -> go.Figure:
    """One line per variant over layers; `start` is the x of the first value; the variants in `dashed` are
    drawn dashed (e.g. those whose residual stream is normalised after every sublayer)."""
    fig = go.Figure()
    for i, (label, values) in enumerate(series.items()):
        fig.add_trace(go.Scatter(x=list(range(start, start + len(values))), y=values, mode="lines+markers", name=label,
                                 line=dict(color=OKABE_ITO[i % 8], width=3, dash="dash" if label in dashed else "solid"),
                                 hovertemplate=f"{label}<br>{x_title} %{{x}}: %{{y:.4g}}<extra></extra>"))
    if log:
        fig.update_yaxes(type="log")
    return layout(fig, title, 400, x_title, y_title)


def norm_bars(x: np.ndarray, layernorm: np.ndarray, rmsnorm: np.ndarray) -> go.Figure:
    """The input vector and both norms' outputs, side by side for every component."""
    labels = [f"x[{i}]" for i in range(len(x))]
    fig = go.Figure()
    shown = {"input x": x, f"{axes.label('norm', 'layernorm')}(x)": layernorm, f"{axes.label('norm', 'rmsnorm')}(x)": rmsnorm}
    for i, (name, values) in enumerate(shown.items()):
        fig.add_trace(go.Bar(x=labels, y=values, name=name, marker_color=OKABE_ITO[i],
                             hovertemplate=f"{name}<br>%{{x}} = %{{y:.4g}}<extra></extra>"))
    fig.update_layout(barmode="group")
    return layout(fig, "LayerNorm subtracts the mean first; RMSNorm only divides by the RMS", 380, "component", "value")


# --- FFN and MoE ----------------------------------------------------------------------


def activation_curves(x: np.ndarray, curves: dict[str, np.ndarray]) -> go.Figure:
    fig = go.Figure()
    for i, (name, y) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=name, line=dict(color=OKABE_ITO[i % 8], width=3),
                                 hovertemplate=f"{name}(%{{x:.2f}}) = %{{y:.3f}}<extra></extra>"))
    return layout(fig, "activation functions", 380, "input x", "activation(x)")


def units_heatmap(values: np.ndarray, labels: list[str], title: str, max_units: int = 64) -> go.Figure:
    """(T, d_ff) hidden activations, tokens down, the first `max_units` units across."""
    shown = values[:, :max_units]
    return grid_heatmap(shown, list(range(shown.shape[1])), [f"{i}:{t}" for i, t in enumerate(labels)], title,
                        "hidden unit", "token", signed=True, height=420)


def router(probs: np.ndarray, chosen: np.ndarray, labels: list[str]) -> go.Figure:
    """(T, E) router probabilities with the top-k chosen experts of each token marked."""
    tokens = [f"{t}:{label}" for t, label in enumerate(labels)]
    fig = grid_heatmap(probs, list(range(probs.shape[1])), tokens, "router probabilities (○ = chosen)", "expert",
                       "token", zmin=0, zmax=1, height=max(320, 16 * len(labels) + 120))
    fig.add_trace(go.Scatter(x=[int(e) for e in chosen.reshape(-1)], y=[tokens[t] for t in range(len(labels))
                                                                         for _ in range(chosen.shape[1])],
                             mode="markers", name="chosen (top-k)", hoverinfo="skip",
                             marker=dict(symbol="circle-open", size=14, color="#ffffff", line=dict(width=3))))
    fig.update_layout(showlegend=False)
    fig.update_xaxes(dtick=1)
    return fig


def expert_load(load: np.ndarray) -> go.Figure:
    n = len(load)
    fig = go.Figure(go.Bar(x=[str(e) for e in range(n)], y=load, marker_color=OKABE_ITO[2],
                           hovertemplate="expert %{x}: %{y:.1%} of token slots<extra></extra>"))
    fig.add_hline(y=1 / n, line_dash="dash", line_color=OKABE_ITO[5], annotation_text="balanced: 1/E")
    fig.update_yaxes(tickformat=".0%")
    return layout(fig, "expert load: share of the token slots each expert got", 320, "expert", "share of slots")


# --- compare --------------------------------------------------------------------------


def per_position(series: dict[str, np.ndarray], labels: list[str], title: str, y_title: str) -> go.Figure:
    fig = go.Figure()
    xs = [f"{i}:{t}" for i, t in enumerate(labels)]
    for i, (name, values) in enumerate(series.items()):
        fig.add_trace(go.Scatter(x=xs, y=values, mode="lines+markers", name=name,
                                 line=dict(color=OKABE_ITO[i % 8], width=3),
                                 hovertemplate=f"{name}<br>%{{x}}: %{{y:.4g}}<extra></extra>"))
    return layout(fig, title, 340, "position (token)", y_title)

