"""Downloads: the trace as .npz, tables as CSV, a checkpoint as one zip, and heatmaps as slide-ready PNGs (matplotlib).

Plotly's own PNG export needs a separate browser engine; matplotlib renders the same
matrices on the server with no extra install. Figures are built without pyplot, so a
download rendered on its own thread never touches pyplot's global state.
"""
from __future__ import annotations

import io
import math
import warnings
import zipfile
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure

from transformer.checkpoint_format import checkpoint_paths

from ui.figures.base import DIVERGING, masked_to_nan

MAX_TICKS = 40  # more token labels than this are thinned so they stay legible on a slide
# the same colour-blind-safe scales as the plotly figures
CMAPS = {"signed": LinearSegmentedColormap.from_list("blue_orange", [(stop, colour) for stop, colour in DIVERGING]),
         "mask": matplotlib.colormaps["viridis"], "weights": matplotlib.colormaps["viridis"]}


def trace_npz(arrays: dict[str, np.ndarray]) -> bytes:
    """Every recorded tensor, keyed by its hook name (``np.load(f)["blocks.0.attn.hook_pattern"]``)."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def table_csv(table: pd.DataFrame) -> bytes:
    return table.to_csv(index=False).encode("utf-8")


def checkpoint_zip(path: str | Path) -> bytes:
    """A checkpoint's two files (.safetensors and .json) in one zip archive."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        for file in checkpoint_paths(path):
            zf.write(file, file.name)
    return archive.getvalue()


def _ticks(labels: list[str]) -> tuple[list[int], list[str]]:
    step = max(1, math.ceil(len(labels) / MAX_TICKS))
    positions = list(range(0, len(labels), step))
    return positions, [labels[i] for i in positions]


def heatmaps_png(panels: list[tuple[str, np.ndarray, str]], x_labels: list[str], y_labels: list[str], *,
                 title: str = "", x_title: str = "key", y_title: str = "query", dpi: int = 120) -> bytes:
    """Heatmaps side by side, one per (title, matrix, style) panel, as PNG bytes (16:9-ish, for slides).

    style is "signed" (symmetric blue-orange scale), "mask" or "weights" (0..1, Viridis). Masked cells
    (-inf or the most negative float) are left light grey.
    """
    n = len(panels)
    fig = Figure(figsize=(4.2 * n + 0.8, 4.8), layout="constrained")
    axes = fig.subplots(1, n, squeeze=False)
    for ax, (panel_title, matrix, style) in zip(axes[0], panels):
        values = masked_to_nan(matrix)
        if style == "signed":
            bound = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
            vmin, vmax = -bound, bound
        else:
            vmin, vmax = 0.0, 1.0
        cmap = CMAPS[style].with_extremes(bad="#dddddd")  # masked cells in light grey
        image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                          interpolation="nearest")
        fig.colorbar(image, ax=ax, shrink=0.8)
        ax.set_title(panel_title, fontsize=12)
        xs, xl = _ticks(list(x_labels))
        ys, yl = _ticks(list(y_labels))
        ax.set_xticks(xs, xl, fontsize=9, rotation=90)
        ax.set_yticks(ys, yl, fontsize=9)
        ax.set_xlabel(x_title)
        ax.set_ylabel(y_title)
    if title:
        fig.suptitle(title, fontsize=14)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # emoji and rare scripts have no glyph in the default font
        fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
