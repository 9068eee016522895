"""Figure builders for the Tokens page: a text's tokens as tiles, BPE's merges one at a time, what other languages
cost, and the vocabulary's share of real models. Numbers and strings in, plotly Figure out."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ui.figures.axes import OKABE_ITO, look

TILES_PER_ROW = 12  # tiles in a row of token_tiles: readable on a projector


def token_tiles(pieces: list[str], ids: list[int], title: str = "", per_row: int = TILES_PER_ROW) -> go.Figure:
    """One tile per token, in reading order and `per_row` to a row: its text on top, its id below; neighbouring
    tiles alternate colour so that where one token ends and the next begins is plain."""
    n = len(pieces)
    rows = max(1, -(-n // per_row))
    shade = np.full((rows, per_row), np.nan)  # (rows, per_row) NaN: no token there, drawn empty
    text = np.full((rows, per_row), "", dtype=object)  # (rows, per_row)
    hover = np.full((rows, per_row), "", dtype=object)
    for i, (piece, token_id) in enumerate(zip(pieces, ids)):
        row, col = divmod(i, per_row)
        shade[row, col] = i % 2
        text[row, col] = f"{piece}<br><sub>{token_id}</sub>"
        hover[row, col] = f"token {i}: {piece!r}, id {token_id}"
    return go.Figure(go.Heatmap(z=shade, text=text, customdata=hover, texttemplate="%{text}", textfont=dict(size=16),
                                colorscale=[[0.0, "#dbe9f6"], [1.0, "#fde2b8"]], zmin=0, zmax=1, showscale=False,
                                xgap=3, ygap=3, hovertemplate="%{customdata}<extra></extra>", hoverongaps=False),
                     dict(title=dict(text=title), height=70 + 56 * rows,
                          margin=dict(l=10, r=10, t=50 if title else 10, b=10),
                          xaxis=dict(visible=False), yaxis=dict(visible=False, autorange="reversed")))


def merge_curve(tokens_left: list[int], current: int | None = None, title: str = "") -> go.Figure:
    """Tokens left in the text after each merge (step 0: every byte its own token); `current` marks a step."""
    steps = np.arange(len(tokens_left))
    fig = go.Figure(go.Scatter(x=steps, y=tokens_left, mode="lines+markers", line=dict(color=OKABE_ITO[0], width=3),
                               name="tokens", hovertemplate="after merge %{x}: %{y} tokens<extra></extra>"),
                    look(title, 340, "merges applied", "tokens in the text"))
    if current is not None:
        fig.add_trace(go.Scatter(x=[current], y=[tokens_left[current]], mode="markers", name="this step",
                                 marker=dict(size=16, color=OKABE_ITO[5], symbol="diamond")))
    return fig


def language_costs(languages: list[str], characters: list[int], counts: dict[str, list[int]],
                   title: str = "") -> go.Figure:
    """Tokens per character of one sentence in each language, one bar per tokenizer (characters[i] = the
    sentence's length): a vocabulary learned on English spends more tokens on every other script."""
    fig = go.Figure(layout=look(title, 440, "language", "tokens per character"))
    length = np.asarray(characters, dtype=float)  # (n_languages,)
    for colour, (name, n_tokens) in zip(OKABE_ITO, counts.items()):
        fig.add_trace(go.Bar(x=languages, y=np.asarray(n_tokens) / length, name=name, marker_color=colour,
                             customdata=np.stack([n_tokens, characters], axis=1),
                             hovertemplate=f"{name}<br>%{{x}}: %{{customdata[0]}} tokens for %{{customdata[1]}} "
                                           "characters<extra></extra>"))
    fig.update_layout(barmode="group")
    return fig


def vocabulary_share(models: list[str], vocab_sizes: list[int], shares: list[float], title: str = "") -> go.Figure:
    """The share of each model's parameters that grows with its vocabulary (embedding, and unembedding when
    untied), one bar per model, labelled with its vocabulary size."""
    fig = go.Figure(go.Bar(x=np.asarray(shares), y=models, orientation="h", marker_color=OKABE_ITO[0],
                           text=[f"V = {v:,}" for v in vocab_sizes], textposition="auto",
                           hovertemplate="%{y}: %{x:.1%} of the parameters<extra></extra>"),
                    look(title, 120 + 30 * len(models), "share of the parameters in the vocabulary's tables", ""))
    fig.update_xaxes(tickformat=".0%")
    return fig


def bits_by_tokenizer(families: list[str], bits: dict[str, list[float]], title: str = "") -> go.Figure:
    """Held-out bits per character of each family's trained models, one bar per tokenizer (bits[name][i] for
    families[i]): per character, so a model reading pieces and one reading characters are on one scale."""
    fig = go.Figure(layout=look(title, 380, "family", "held-out bits per character (lower is better)"))
    for colour, (name, values) in zip(OKABE_ITO, bits.items()):
        fig.add_trace(go.Bar(x=families, y=values, name=name, marker_color=colour, text=[f"{v:.2f}" for v in values],
                             textposition="outside", hovertemplate=f"{name}<br>%{{x}}: %{{y:.3f}} bits per "
                                                                   "character<extra></extra>"))
    fig.update_layout(barmode="group")
    return fig
