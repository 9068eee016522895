"""What the attention playground draws: the stages of one head, routing, RoPE angles, where a query looks.

Plain functions from recorded numpy arrays to plotly Figures, so each is testable
without a server. The matrices come straight from the library's hook points; nothing
here recomputes attention.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from transformer import axes, choices
from transformer.hooks import attention_stacks, hook_name

from ui.figures.base import FONT, MASKED_BELOW, SEQUENTIAL, unique_labels, downsample, entropy, heatmap

# attention kind -> (stack, module, query side, key side, label); which kinds exist depends on the arch
ATTENTION_KINDS = {
    "self": ("", "attn", "src", "src", "self-attention"),
    "encoder": ("encoder", "attn", "src", "src", "encoder self-attention"),
    "decoder": ("decoder", "attn", "tgt", "tgt", "decoder self-attention (causal)"),
    "cross": ("decoder", "cross_attn", "tgt", "src", "cross-attention: queries from the decoder, keys from the encoder"),
}


def attention_kinds(arch: str) -> list[str]:
    """The kinds whose stack and module the architecture has (``attention_stacks``), in ATTENTION_KINDS' order."""
    stacks = attention_stacks(arch)
    present = ({(stack, "attn") for stack in stacks.self_attention}
               | {(stack, "cross_attn") for stack in stacks.cross_attention})
    return [kind for kind, (stack, module, *_) in ATTENTION_KINDS.items() if (stack, module) in present]


KINDS_OF_ARCH = {arch: attention_kinds(arch) for arch in choices("arch")}
AXIS_TITLES = {"src": "input token", "tgt": "decoder token"}


@dataclass
class AttentionView:
    """Where one attention module's hooks live in a trace, and how to label its axes."""

    stack: str  # "" or "encoder" / "decoder"
    module: str  # "attn" or "cross_attn"
    queries: str  # "src" or "tgt": which token labels run down the rows
    keys: str  # ... and along the columns
    label: str

    def hook(self, layer: int, suffix: str) -> str:
        return hook_name(layer, f"{self.module}.{suffix}", self.stack)

    def ffn_hook(self, layer: int, suffix: str) -> str:
        """The MoE router of the same stack and layer (the FFN after this attention)."""
        return hook_name(layer, f"mlp.{suffix}", self.stack)

    @property
    def y_title(self) -> str:
        return f"query ({AXIS_TITLES[self.queries]})"

    @property
    def x_title(self) -> str:
        return f"key ({AXIS_TITLES[self.keys]})"


def attention_view(kind: str) -> AttentionView:
    return AttentionView(*ATTENTION_KINDS[kind])


@dataclass
class Stage:
    """One step of the five lines for one head, as a (T_q, T_kv) matrix."""

    hook: str  # the hook suffix it was read from
    title: str
    matrix: np.ndarray  # (T_q, T_kv)
    style: str  # "signed" (blue-orange around 0), "mask" (may attend or not), "weights" (0..1)


# hook suffix -> (title, style), in the order the five lines compute them
STAGES = {
    "hook_raw_scores": ("scores  QKᵀ/√d_head", "signed"),
    "hook_capped_scores": (f"{axes.label('scores', 'softcap')}  c·tanh(scores/c)", "signed"),
    "hook_mask": ("mask (yellow = may attend)", "mask"),
    "hook_alibi_bias": (f"{axes.label('position', 'alibi')} bias  −m_h·|i−j|", "signed"),
    "hook_rel_bias": (f"{axes.label('position', 't5')} bias  b_h[bucket(j−i)]", "signed"),
    "hook_attn_scores": ("what softmax sees  (+ mask, bias)", "signed"),
    "hook_pattern": ("weights  softmax(scores)", "weights"),
}


def head_stages(arrays: dict[str, np.ndarray], view: AttentionView, layer: int, head: int) -> list[Stage]:
    """The recorded stages of one head, in order; a stage the model does not compute (ALiBi's bias, soft-capping)
    is left out."""
    stages = []
    for suffix, (title, style) in STAGES.items():
        name = view.hook(layer, suffix)
        if name not in arrays:
            continue
        tensor = arrays[name][0]  # first sequence: (H or 1, T_q, T_kv)
        matrix = tensor[min(head, tensor.shape[0] - 1)]  # the mask is shared by every head
        if style == "mask":
            matrix = (matrix > MASKED_BELOW).astype(np.float64)  # 1 = may attend, 0 = masked
        stages.append(Stage(suffix, title, matrix, style))
    return stages


def stage_figure(stage: Stage, x_labels: list[str], y_labels: list[str], x_title: str, y_title: str,
                 height: int = 380) -> go.Figure:
    """One stage as a heatmap; masked cells of the scores are left blank."""
    scale = {"signed": dict(signed=True), "mask": dict(zmin=0.0, zmax=1.0), "weights": dict(zmin=0.0, zmax=1.0)}
    return heatmap(stage.matrix, x_labels, y_labels, stage.title, x_title=x_title, y_title=y_title,
                   height=height, title_size=15, **scale[stage.style])


def label_grid_axes(fig: go.Figure, x_title: str, y_title: str) -> go.Figure:
    """Axis titles on a grid of subplots: keys under the bottom row, queries left of the first column."""
    layout = fig.layout
    x_starts = [layout[t.xaxis.replace("x", "xaxis")].domain[0] for t in fig.data]
    y_starts = [layout[t.yaxis.replace("y", "yaxis")].domain[0] for t in fig.data]
    for trace, x_start, y_start in zip(fig.data, x_starts, y_starts):
        if x_start == min(x_starts):
            layout[trace.yaxis.replace("y", "yaxis")].title = dict(text=y_title, font_size=12)
        if y_start == min(y_starts):
            layout[trace.xaxis.replace("x", "xaxis")].title = dict(text=x_title, font_size=12)
    return fig


def query_bars(weights: np.ndarray, key_labels: list[str], query_label: str) -> go.Figure:
    """One query's attention distribution over the keys, as bars (0..1)."""
    return go.Figure(go.Bar(x=unique_labels(list(key_labels)), y=np.asarray(weights, dtype=float), marker_color="#21918c",
                            hovertemplate="key %{x}<br>weight %{y:.3f}<extra></extra>"),
                     dict(title=dict(text=f"where query '{query_label}' looks"), height=320, font=FONT,
                          margin=dict(l=10, r=10, t=50, b=10), xaxis=dict(title=dict(text="key")),
                          yaxis=dict(title=dict(text="softmax weight"), range=[0, 1])))


def cross_arcs(weights: np.ndarray, query_labels: list[str], key_labels: list[str], query: int) -> go.Figure:
    """Cross-attention: lines from one decoder token (bottom row) to the encoder tokens (top row)."""
    weights = np.asarray(weights, dtype=float)
    n_q, n_k = len(query_labels), len(key_labels)
    span = max(n_q, n_k) - 1 or 1
    qx = np.linspace(0, span, n_q) if n_q > 1 else np.array([span / 2])  # spread both rows over the same width
    kx = np.linspace(0, span, n_k) if n_k > 1 else np.array([span / 2])
    fig = go.Figure()
    for key, w in enumerate(weights):
        if w < 1e-3:
            continue
        fig.add_trace(go.Scatter(x=[qx[query], kx[key]], y=[0, 1], mode="lines", showlegend=False,
                                 line=dict(width=1 + 12 * w, color="#3b528b"), opacity=0.3 + 0.7 * w,
                                 hoverinfo="text", text=f"{key_labels[key]}: {w:.3f}"))
    fig.add_trace(go.Scatter(x=kx, y=[1] * n_k, mode="markers+text", text=key_labels, textposition="top center",
                             marker=dict(size=9, color="#440154"), showlegend=False, hoverinfo="text",
                             hovertext=[f"encoder {t}: {w:.3f}" for t, w in zip(key_labels, weights)]))
    fig.add_trace(go.Scatter(x=qx, y=[0] * n_q, mode="markers+text", text=query_labels, textposition="bottom center",
                             marker=dict(size=[15 if i == query else 8 for i in range(n_q)],
                                         color=["#fde725" if i == query else "#21918c" for i in range(n_q)]),
                             showlegend=False, hoverinfo="text", hovertext=query_labels))
    fig.update_layout(title=f"decoder token {query} '{query_labels[query]}' reads the encoder", height=300, font=FONT,
                      margin=dict(l=10, r=10, t=50, b=30), xaxis=dict(visible=False),
                      yaxis=dict(visible=False, range=[-0.4, 1.4]))
    return fig


def entropy_figure(patterns: np.ndarray, query: int, n_visible: int) -> go.Figure:
    """Per-head entropy of one query's weights; the dashed line is a uniform look at every visible key."""
    per_head = entropy(patterns[:, query, :])  # (H,) nats
    heads = [f"head {h}" for h in range(patterns.shape[0])]
    fig = go.Figure(go.Bar(x=heads, y=per_head, marker_color="#5ec962",
                           hovertemplate="%{x}<br>entropy %{y:.3f} nats<extra></extra>"))
    uniform = float(np.log(max(n_visible, 1)))
    fig.add_hline(y=uniform, line_dash="dash", line_color="#440154",
                  annotation_text=f"uniform over {n_visible} keys = ln {n_visible} = {uniform:.2f}")
    fig.update_layout(title="entropy per head (low = focused, high = spread out)", height=320, font=FONT,
                      margin=dict(l=10, r=10, t=50, b=10), xaxis_title="head", yaxis_title="entropy (nats)",
                      yaxis_range=[0, max(uniform, float(per_head.max(initial=0.0))) * 1.15 + 0.05])
    return fig


def routing_figure(probs: np.ndarray, chosen: np.ndarray, labels: list[str]) -> go.Figure:
    """MoE routing strip: router probability of every expert for every token; circles mark the top-k chosen.

    probs: (T, E) softmax of the router; chosen: (T, k) expert indices.
    """
    n_tokens, n_experts = probs.shape
    experts = [f"expert {e}" for e in range(n_experts)]
    tokens = unique_labels(list(labels))
    fig = go.Figure(go.Heatmap(z=np.asarray(probs, dtype=float).T, x=tokens, y=experts, colorscale=SEQUENTIAL,
                               zmin=0, zmax=1, colorbar=dict(title="p"),
                               hovertemplate="token %{x}<br>%{y}<br>router probability %{z:.3f}<extra></extra>"))
    token_of = np.repeat(np.arange(n_tokens), chosen.shape[1])  # (T * k,)
    fig.add_trace(go.Scatter(x=[tokens[t] for t in token_of], y=[experts[e] for e in chosen.reshape(-1)],
                             mode="markers", name="chosen (top-k)",
                             marker=dict(symbol="circle-open", size=max(5, min(14, 420 // n_tokens)), color="#ff7f0e",
                                         line=dict(width=2 if n_tokens > 30 else 3)),
                             hovertemplate="token %{x} → %{y}<extra>chosen</extra>"))
    fig.update_layout(title=f"router: token × expert (circles = the top-{chosen.shape[1]} experts each token uses)",
                      height=140 + 45 * n_experts, font=FONT, margin=dict(l=10, r=10, t=60, b=10),
                      xaxis_title="token", yaxis_title="expert", legend=dict(orientation="h", y=-0.25))
    fig.update_yaxes(autorange="reversed")
    return fig


def rope_figure(angles: np.ndarray, labels: list[str]) -> go.Figure:
    """RoPE: cos of the rotation angle per position (rows) and frequency pair (columns).

    angles: (T, d_head/2), angle = position * theta^(-2i/d_head). Low pairs turn fast, high pairs slowly.
    """
    angles = np.asarray(angles, dtype=float)
    angles, labels, _ = downsample(angles, list(labels), list(range(angles.shape[1])))
    pairs = [f"pair {i}" for i in range(angles.shape[1])]
    fig = go.Figure(go.Heatmap(z=np.cos(angles), x=pairs, y=unique_labels(labels), customdata=angles,
                               colorscale=[[0.0, "#2166ac"], [0.5, "#f7f7f7"], [1.0, "#b35806"]], zmin=-1, zmax=1,
                               colorbar=dict(title="cos"),
                               hovertemplate="position %{y}<br>%{x}<br>angle %{customdata:.3f} rad<br>"
                                             "cos %{z:.3f}<extra></extra>"))
    fig.update_layout(title="RoPE: cos(position × θᵢ), the rotation applied to q and k", height=420, font=FONT,
                      margin=dict(l=10, r=10, t=50, b=10), xaxis_title="frequency pair i (fast → slow)",
                      yaxis=dict(title=dict(text="position (token)"), autorange="reversed"))
    return fig


def visible_keys(mask_row: np.ndarray) -> int:
    """How many keys one query may attend to, from its row of the additive mask."""
    return int((np.asarray(mask_row) > MASKED_BELOW).sum())


def next_token_bars(top: list[tuple[str, float]], title: str = "next token") -> go.Figure:
    """The most likely tokens (next, or behind a mask) and their probabilities, most likely first."""
    labels, probs = zip(*top) if top else ((), ())
    return go.Figure(go.Bar(x=unique_labels(list(labels)), y=np.asarray(probs, dtype=float), marker_color="#3b528b",
                            hovertemplate="%{x}<br>probability %{y:.3f}<extra></extra>"),
                     dict(title=dict(text=title), height=300, font=FONT, margin=dict(l=10, r=10, t=50, b=10),
                          xaxis=dict(title=dict(text="token")), yaxis=dict(title=dict(text="probability"), range=[0, 1])))


def actual_next_figure(labels: list[str], full: np.ndarray, ablated: np.ndarray | None = None,
                       title: str = "probability of the token that came next",
                       x_title: str = "the token predicted") -> go.Figure:
    """Per position after the first, the probability the model gave to the token actually there (the next
    token for a decoder, a hidden one for a masked-character encoder); with parts switched off, a second line
    shows what the ablation cost (an induction head's loss is the repeat)."""
    x = unique_labels(list(labels[1:]))
    traces = [go.Scatter(x=x, y=np.asarray(full, dtype=float), mode="lines+markers", name="whole model",
                         line=dict(color="#21918c", width=3),
                         hovertemplate="%{x}: p = %{y:.3f}<extra>whole model</extra>")]
    if ablated is not None:
        traces.append(go.Scatter(x=x, y=np.asarray(ablated, dtype=float), mode="lines+markers", name="parts switched off",
                                 line=dict(color="#b35806", width=3, dash="dot"),
                                 hovertemplate="%{x}: p = %{y:.3f}<extra>switched off</extra>"))
    return go.Figure(traces, dict(title=dict(text=title), height=300, font=FONT, margin=dict(l=10, r=10, t=50, b=10),
                                  xaxis=dict(title=dict(text=x_title)),
                                  yaxis=dict(title=dict(text="probability"), range=[0, 1]),
                                  legend=dict(orientation="h", y=-0.3)))
