"""Figure builders for the Flash page's memory hierarchy: bytes moved to and from HBM, and a tile's SRAM budget.

Plain functions, numbers in, plotly Figure out; colours from the Okabe-Ito palette of ui/figures/flash.py.
"""
from __future__ import annotations

import plotly.graph_objects as go

from ui.figures.flash import MIB, OKABE_ITO, layout

# matrix name as the counter reports it -> colour: one per matrix, the same in every bar
MATRIX_COLOURS = {"Q": OKABE_ITO[0], "K": OKABE_ITO[4], "V": OKABE_ITO[2], "S": OKABE_ITO[5], "P": OKABE_ITO[1],
                  "O": OKABE_ITO[3], "m, l": OKABE_ITO[7]}
DIRECTIONS = {"reads": "read", "writes": "written"}


def hbm_traffic(counts: dict[str, dict[str, dict[str, int]]], title: str = "") -> go.Figure:
    """Stacked bars, one pair per method (bytes read, bytes written), split by matrix, in MiB.

    counts: {method: {"reads": {matrix: bytes}, "writes": {matrix: bytes}}}, as hbm.HBMTraffic holds them.
    """
    fig = go.Figure()
    x = [[method for method in counts for _ in DIRECTIONS], [DIRECTIONS[d] for _ in counts for d in DIRECTIONS]]
    matrices = [m for m in MATRIX_COLOURS if any(m in moved[d] for moved in counts.values() for d in DIRECTIONS)]
    for matrix in matrices:
        y = [counts[method][direction].get(matrix, 0) / MIB for method in counts for direction in DIRECTIONS]
        fig.add_bar(x=x, y=y, name=matrix, marker_color=MATRIX_COLOURS[matrix],
                    hovertemplate=f"{matrix}: %{{y:,.3f}} MiB<extra></extra>")
    totals = {method: sum(moved["reads"].values()) + sum(moved["writes"].values()) for method, moved in counts.items()}
    for method, total in totals.items():
        fig.add_annotation(x=[method, DIRECTIONS["writes"]], y=max(sum(counts[method][d].values()) for d in DIRECTIONS)
                           / MIB, text=f"{total / MIB:,.2f} MiB in all", showarrow=False, yshift=14)
    fig.update_layout(barmode="stack")
    return layout(fig, title, 420, x_title="version and direction", y_title="MiB moved")


def sram_budget(parts: dict[str, int], sram_bytes: int, title: str = "") -> go.Figure:
    """One stacked horizontal bar of what a tile step holds in SRAM, against a line at the SRAM's size (KiB)."""
    fig = go.Figure()
    for colour, (part, n_bytes) in zip(OKABE_ITO, parts.items()):
        fig.add_bar(y=["this tile"], x=[n_bytes / 1024], name=part, orientation="h", marker_color=colour,
                    hovertemplate=f"{part}: %{{x:,.1f}} KiB<extra></extra>")
    fig.add_vline(x=sram_bytes / 1024, line_dash="dash", line_color="#555555",
                  annotation_text=f"SRAM: {sram_bytes / 1024:,.0f} KiB", annotation_position="top")
    fig.update_layout(barmode="stack", xaxis_range=[0, 1.1 * max(sram_bytes, sum(parts.values())) / 1024])
    return layout(fig, title, 260, x_title="KiB of SRAM", y_title="one step")
