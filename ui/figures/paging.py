"""Figure builders for the paged KV cache (the KV heads page): numpy in, plotly Figure out.

Requests take the Okabe-Ito colours in order (distinguishable with every common colour-vision deficiency); a slot
taken but not yet filled is light grey.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ui.figures.axes import MASKED_GREY, OKABE_ITO, layout

EMPTY = "#f0f0f0"


def pool_owners(tables: list[list[int]], lengths: list[int], block_size: int, n_blocks: int) -> np.ndarray:
    """(n_blocks, block_size): the request whose token fills each slot of the pool, -1 where a slot is taken but
    empty (a request's last block), -2 where the block is not handed out yet."""
    owners = np.full((n_blocks, block_size), -2)
    for request, (table, length) in enumerate(zip(tables, lengths)):
        for position, block in enumerate(table):
            filled = min(block_size, length - position * block_size)  # (slots of this block holding a token)
            owners[block] = -1
            owners[block, :filled] = request
    return owners


def block_pool(tables: list[list[int]], lengths: list[int], block_size: int, n_blocks: int, title: str = "") -> go.Figure:
    """The pool as a grid, one row per physical block, one cell per token slot, coloured by the request that owns it;
    each cell says which of its request's tokens it holds."""
    owners = pool_owners(tables, lengths, block_size, n_blocks)  # (n_blocks, block_size)
    n_requests = len(tables)
    colours = [EMPTY, MASKED_GREY] + [OKABE_ITO[r % len(OKABE_ITO)] for r in range(n_requests)]
    # a discrete scale: value v (from -2 to n_requests - 1) takes colour v + 2
    steps = len(colours)
    scale = [[edge / steps, colour] for i, colour in enumerate(colours) for edge in (i, i + 1)]
    token = np.full(owners.shape, "", dtype=object)
    for request, table in enumerate(tables):
        for position, block in enumerate(table):
            for slot in range(block_size):
                if owners[block, slot] == request:
                    token[block, slot] = f"request {request}, token {position * block_size + slot}"
    token[owners == -1] = "taken, empty"
    token[owners == -2] = "free"
    fig = go.Figure(go.Heatmap(z=owners, x=list(range(block_size)), y=list(range(n_blocks)), zmin=-2.5,
                               zmax=n_requests - 0.5, colorscale=scale, showscale=False, xgap=2, ygap=2,
                               customdata=token,
                               hovertemplate="block %{y}, slot %{x}<br>%{customdata}<extra></extra>"))
    for request in range(n_requests):  # a legend entry per request
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"request {request}",
                                 marker=dict(color=colours[request + 2], size=12, symbol="square")))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="taken, empty",
                             marker=dict(color=MASKED_GREY, size=12, symbol="square")))
    fig = layout(fig, title, max(260, min(900, 26 * n_blocks + 120)), "slot in the block", "physical block")
    fig.update_yaxes(autorange="reversed", dtick=1 if n_blocks <= 40 else None)
    fig.update_xaxes(dtick=1 if block_size <= 32 else None)
    return fig


def reserved_slots(lengths: list[int], reserved: dict[str, list[int]], title: str = "") -> go.Figure:
    """Per request, under each layout, the slots its tokens fill and the slots it holds empty."""
    requests = [f"request {r}" for r in range(len(lengths))]
    groups = [layout_name for layout_name in reserved for _ in requests]
    x = [groups, requests * len(reserved)]
    filled = [n for _ in reserved for n in lengths]
    empty = [held - n for held_by in reserved.values() for held, n in zip(held_by, lengths)]
    fig = go.Figure([
        go.Bar(x=x, y=filled, name="filled by a token", marker_color=OKABE_ITO[0],
               hovertemplate="%{x}: %{y} tokens<extra></extra>"),
        go.Bar(x=x, y=empty, name="reserved, empty", marker_color=MASKED_GREY,
               hovertemplate="%{x}: %{y} slots empty<extra></extra>"),
    ])
    fig = layout(fig, title, 360, "layout and request", "token slots")
    fig.update_layout(barmode="stack")
    return fig
