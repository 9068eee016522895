"""Figure builders for "Trade-offs, measured": the tournament's numbers in, plotly Figures out.

`comparison_arrays` turns one comparison of the tournament JSON into plain arrays (NaN where a run diverged or
cannot read that far); the builders take those arrays only, so a test can build the page's figures from the
JSON and check that they show its numbers. Okabe-Ito colours; a diverged run is drawn as a cross at the top of
its column, labelled "diverged", never left out.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from ui.figures.axes import OKABE_ITO, look

MEAN, DIVERGED = "#000000", OKABE_ITO[5]
SEED_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "triangle-down", "pentagon")
COST_TITLES = {"kv_bytes_per_token": "KV cache bytes per token (fp16)", "parameters": "parameters"}
RECALL_LEARNED = 0.05  # bits per character a first copy must save somewhere before recall reads as learned
VERDICT_COLOURS = {"better": OKABE_ITO[2], "worse": OKABE_ITO[5], "equivalent": OKABE_ITO[1],
                   "undecided": "#888888", None: "#bbbbbb"}  # None: the comparison measured nothing


@dataclass
class ComparisonArrays:
    choices: list[str]
    seeds: list[np.ndarray]  # per entry: (R,) seeds
    bits: list[np.ndarray]  # per entry: (R,) held-out bits per character, NaN where the run diverged
    diverged: list[np.ndarray]  # per entry: (R,) bool
    diverged_at: list[np.ndarray]  # per entry: (R,) step, -1 where it did not diverge
    by_length: np.ndarray  # (E, R_max, M) held-out bits at each length multiple, NaN where none
    multiples: list[int]
    cost: np.ndarray  # (E,) the comparison's cost axis, NaN where unknown
    cost_axis: str
    curves: list[list[tuple[int, np.ndarray, np.ndarray, bool]]]  # per entry, per run: (seed, steps, bits, diverged)


def _float(value) -> float:
    return float("nan") if value is None else float(value)


def comparison_arrays(comp: dict) -> ComparisonArrays:
    """One comparison of the tournament JSON as arrays."""
    entries = comp["entries"]
    multiples = [int(m) for m in comp.get("lengths", [1])]
    width = max((len(e["runs"]) for e in entries), default=0)
    by_length = np.full((len(entries), width, len(multiples)), np.nan)
    seeds, bits, diverged, diverged_at, curves = [], [], [], [], []
    for i, entry in enumerate(entries):
        runs = entry["runs"]
        seeds.append(np.array([r["seed"] for r in runs], dtype=int))
        failed = np.array([bool(r["diverged"]) for r in runs], dtype=bool)
        diverged.append(failed)
        diverged_at.append(np.array([r.get("diverged_at_step") if r.get("diverged_at_step") is not None else -1
                                     for r in runs], dtype=int))
        bits.append(np.array([np.nan if r["diverged"] else _float(r.get("held_out_bits_per_char")) for r in runs]))
        for j, r in enumerate(runs):
            lengths = r.get("held_out_bits_per_char_by_length") or {"1x": r.get("held_out_bits_per_char")}
            for k, m in enumerate(multiples):
                by_length[i, j, k] = np.nan if r["diverged"] else _float(lengths.get(f"{m}x"))
        curves.append([(int(r["seed"]), np.array([p[0] for p in r["curve"]], dtype=int),
                        np.array([_float(p[1]) for p in r["curve"]]), bool(r["diverged"])) for r in runs])
    cost = np.array([_float(e.get(comp["cost_axis"])) for e in entries])
    return ComparisonArrays([e["choice"] for e in entries], seeds, bits, diverged, diverged_at, by_length, multiples,
                            cost, comp["cost_axis"], curves)


def _mean(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else float("nan")


def bits_by_choice(choices: list[str], seeds: list[np.ndarray], bits: list[np.ndarray], diverged: list[np.ndarray],
                   title: str = "", unigram: float | None = None, bigram: float | None = None,
                   learned_bits: float | None = None) -> go.Figure:
    """Held-out bits per character: each seed a marker (one symbol per seed), the mean of the runs that trained as
    a black bar, and a run that diverged as a cross at the top of its column labelled "diverged"; the baselines as
    lines: where a model that learned only character frequencies (`unigram`) or pairs (`bigram`) would read, and
    the line `learned_bits` under the bigram that every entry must end below for the comparison to count."""
    fig = go.Figure(layout=look(title, 420, "", "held-out bits per character (lower is better)"))
    means = [_mean(b) for b in bits]
    fig.add_trace(go.Scatter(x=choices, y=means, mode="markers", name="mean of the seeds",
                             marker=dict(symbol="line-ew", size=40, line=dict(width=3, color=MEAN)),
                             hovertemplate="%{x}<br>mean %{y:.3f} bits per character<extra></extra>"))
    all_seeds = sorted({int(s) for row in seeds for s in row})
    for k, seed in enumerate(all_seeds):
        xs, ys = [], []
        for choice, row_seeds, row_bits in zip(choices, seeds, bits):
            for s, b in zip(row_seeds, row_bits):
                if s == seed and np.isfinite(b):
                    xs.append(choice)
                    ys.append(float(b))
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=f"seed {seed}",
                                 marker=dict(symbol=SEED_SYMBOLS[k % len(SEED_SYMBOLS)], size=11,
                                             color=OKABE_ITO[k % 5], line=dict(width=1, color="white")),
                                 hovertemplate=f"%{{x}}<br>seed {seed}: %{{y:.3f}} bits per character<extra></extra>"))
    finite = np.concatenate([b[np.isfinite(b)] for b in bits]) if bits else np.array([])
    top = float(finite.max()) + 0.05 if finite.size else 1.0
    xs, text = [], []
    for choice, row_seeds, row_failed in zip(choices, seeds, diverged):
        for s, failed in zip(row_seeds, row_failed):
            if failed:
                xs.append(choice)
                text.append(f"seed {s} diverged")
    fig.add_trace(go.Scatter(x=xs, y=[top] * len(xs), mode="markers+text", name="diverged (no held-out figure)",
                             text=["diverged"] * len(xs), textposition="top center", customdata=text,
                             marker=dict(symbol="x", size=14, color=DIVERGED), visible=True if xs else "legendonly",
                             hovertemplate="%{x}<br>%{customdata}<extra></extra>"))
    fig.update_xaxes(categoryorder="array", categoryarray=choices)
    lines = [(unigram, "dot", "character frequencies only (unigram)"),
             (bigram, "dash", "character pairs only (bigram)"),
             (None if bigram is None or learned_bits is None else bigram - learned_bits, "dashdot",
              f"{learned_bits:g} under the bigram: learned something" if learned_bits is not None else "")]
    for y, dash, label in lines:
        if y is not None:
            fig.add_hline(y=y, line_dash=dash, line_color="#555555", annotation_text=label,
                          annotation_position="bottom right")
    shown = [b for b in (finite.min() if finite.size else None, top, unigram, bigram) if b is not None]
    fig.update_yaxes(range=[min(shown) - 0.1, max(shown) + 0.15])
    return fig


def differences(labels: list[str], diffs: np.ndarray, lows: np.ndarray, highs: np.ndarray, margins: np.ndarray,
                verdicts: list[str | None], title: str = "") -> go.Figure:
    """Each measured entry's seed-paired difference against its reference (x, bits/char; below 0 is better) with
    its 95% interval as a bar, coloured by its verdict, and its equivalence margin as a grey band around 0."""
    fig = go.Figure(layout=look(title, 120 + 40 * len(labels), "difference against its reference, bits/char "
                                "(below 0: fewer bits, better)", ""))
    band_x, band_y = [], []
    for label, margin in zip(labels, margins):
        if np.isfinite(margin):
            band_x += [-margin, margin, None]
            band_y += [label, label, None]
    fig.add_trace(go.Scatter(x=band_x, y=band_y, mode="lines", name="the margin (±1% of the reference)",
                             line=dict(color="#cccccc", width=14), hoverinfo="skip"))
    for verdict in dict.fromkeys(verdicts):
        rows = [i for i, v in enumerate(verdicts) if v == verdict]
        fig.add_trace(go.Scatter(
            x=diffs[rows], y=[labels[i] for i in rows], mode="markers", name=verdict or "no verdict (measured nothing)",
            marker=dict(size=11, color=VERDICT_COLOURS.get(verdict, "#888888")),
            error_x=dict(type="data", symmetric=False, array=highs[rows] - diffs[rows],
                         arrayminus=diffs[rows] - lows[rows], color=VERDICT_COLOURS.get(verdict, "#888888")),
            hovertemplate="%{y}<br>difference %{x:+.3f} bits/char<extra></extra>"))
    fig.add_vline(x=0, line_color="#555555")
    fig.update_yaxes(categoryorder="array", categoryarray=labels[::-1], automargin=True)
    return fig


def difference_rows(comp: dict) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
    """Every measurement of a comparison as rows for `differences`: label, difference, interval (NaN where fewer
    than two seed pairs), margin and verdict; each entry against its reference, then each longer length."""
    rows = []
    for entry in comp["entries"]:
        if entry.get("against") is not None:
            rows.append((f"{entry['choice']} vs {entry['against']}", entry))
        for key, m in (entry.get("longer") or {}).items():
            rows.append((f"{entry['choice']} at {key.replace('x', '×')} vs {m['against']}", m))
    interval = [m["interval"] or [None, None] for _, m in rows]
    return ([label for label, _ in rows], np.array([_float(m["difference"]) for _, m in rows]),
            np.array([_float(i[0]) for i in interval]), np.array([_float(i[1]) for i in interval]),
            np.array([_float(m["margin"]) for _, m in rows]), [m["verdict"] for _, m in rows])


def cost_against_bits(choices: list[str], cost: np.ndarray, bits: list[np.ndarray], cost_axis: str,
                      title: str = "") -> go.Figure:
    """Each entry at its cost (x) and its mean held-out bits (y), the bar spanning its lowest and highest seed."""
    means = np.array([_mean(b) for b in bits])
    lows = np.array([np.nanmin(b) if np.isfinite(b).any() else np.nan for b in bits])
    highs = np.array([np.nanmax(b) if np.isfinite(b).any() else np.nan for b in bits])
    fig = go.Figure(layout=look(title, 420, COST_TITLES[cost_axis], "held-out bits per character"))
    fig.add_trace(go.Scatter(x=cost, y=means, mode="markers+text", text=choices, textposition="top center",
                             name="mean, bar from lowest to highest seed", marker=dict(size=12, color=OKABE_ITO[0]),
                             error_y=dict(type="data", symmetric=False, array=highs - means, arrayminus=means - lows,
                                          color=OKABE_ITO[0]),
                             hovertemplate="%{text}<br>%{x:,}<br>mean %{y:.3f} bits per character<extra></extra>"))
    return fig


def seed_lines(fig: go.Figure, choices: list[str], x: list, values: np.ndarray, hover: str) -> go.Figure:
    """(E, R, X) values: one line per entry through its seeds' mean (NaN where no seed has a value), each seed a
    faint marker; `hover` formats a point from %{x} and %{y} ("a seed" or "mean" goes before it)."""
    for i, choice in enumerate(choices):
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        runs = values[i]  # (R, X)
        counts = np.isfinite(runs).sum(0)
        means = np.where(counts > 0, np.nansum(np.where(np.isfinite(runs), runs, 0.0), 0) / np.maximum(counts, 1),
                         np.nan)
        fig.add_trace(go.Scatter(x=x, y=means, mode="lines+markers", name=choice, line=dict(color=colour, width=3),
                                 marker=dict(size=10), legendgroup=choice,
                                 hovertemplate=f"{choice}<br>mean {hover}<extra></extra>"))
        fig.add_trace(go.Scatter(x=list(x) * runs.shape[0], y=runs.reshape(-1), mode="markers", showlegend=False,
                                 legendgroup=choice, marker=dict(size=6, color=colour, opacity=0.5),
                                 hovertemplate=f"{choice}<br>a seed {hover}<extra></extra>"))
    return fig


def bits_by_length(choices: list[str], multiples: list[int], by_length: np.ndarray, trained: int,
                   title: str = "") -> go.Figure:
    """(E, R, M) held-out bits at each multiple of the trained length: one line per scheme through the seeds'
    mean, each seed a faint marker; a scheme that cannot read a length has no point there."""
    fig = go.Figure(layout=look(title, 420, "length read, × the trained length", "held-out bits per character"))
    labels = [f"{m}× ({m * trained} characters)" for m in multiples]
    return seed_lines(fig, choices, labels, by_length, "%{x}: %{y:.3f}")


def training_curves(choices: list[str], curves: list[list[tuple[int, np.ndarray, np.ndarray, bool]]],
                    title: str = "") -> go.Figure:
    """Training loss (bits per character, a mean over each stretch of steps) of every run: one colour per entry,
    one line per seed; a diverged run dashed and named so."""
    fig = go.Figure(layout=look(title, 460, "step", "training bits per character"))
    for i, (choice, runs) in enumerate(zip(choices, curves)):
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        for k, (seed, steps, bits, failed) in enumerate(runs):
            name = f"{choice}, seed {seed}" + (" (diverged)" if failed else "")
            fig.add_trace(go.Scatter(x=steps, y=bits, mode="lines", name=name, legendgroup=choice,
                                     showlegend=k == 0 or failed,
                                     line=dict(color=colour, width=2, dash="dash" if failed else "solid"),
                                     hovertemplate=f"{name}<br>step %{{x}}: %{{y:.3f}}<extra></extra>"))
    # the first steps fall from about 8 bits: start the axis a tenth of the way in, where the runs part
    later = [b[len(b) // 10:] for runs in curves for _, _, b, _ in runs if len(b)]
    finite = np.concatenate([b[np.isfinite(b)] for b in later]) if later else np.array([])
    if finite.size:
        fig.update_yaxes(range=[float(finite.min()) - 0.05, float(finite.max()) + 0.05])
    return fig


# --- what a comparison reads of its trained models besides bits (transformer/training/tournament/measures.py) ---


def recall_arrays(comp: dict) -> tuple[list[str], list[int], np.ndarray]:
    """Choices, distances and (E, R, D) recall: the bits per character the first copy of a phrase saves on its second
    (control row's bits minus the repeated row's), NaN where a run has no recall measured."""
    found = [[(r.get("measured") or {}).get("recall") for r in e["runs"]] for e in comp["entries"]]
    distances = next((rec["distances"] for runs in found for rec in runs if rec), [])
    width = max((len(runs) for runs in found), default=0)
    saved = np.full((len(found), width, len(distances)), np.nan)
    for i, runs in enumerate(found):
        for j, rec in enumerate(runs):
            if rec and rec["distances"] == distances:
                saved[i, j] = np.array(rec["control_bits"]) - np.array(rec["bits"])
    return [e["choice"] for e in comp["entries"]], distances, saved


def recall_by_distance(choices: list[str], distances: list[int], saved: np.ndarray, trained: int,
                       title: str = "") -> go.Figure:
    """(E, R, D) bits per character saved by a phrase's first copy, against how far back it was: one line per entry
    through the seeds' mean, each seed a faint marker; a dashed line where the trained crops end."""
    fig = go.Figure(layout=look(title, 420, "distance back to the first copy (characters)",
                                "bits per character the first copy saves"))
    seed_lines(fig, choices, list(distances), saved, "%{x} back: %{y:.2f} bits saved")
    fig.add_vline(x=trained, line_dash="dash", annotation_text=f"trained crops: {trained} characters")
    fig.add_hline(y=0, line_color="#888888")
    return fig


def kept_mass_arrays(comp: dict) -> tuple[list[int], int | None, dict[str, np.ndarray]]:
    """The ks, the trained top-k, and per way of choosing keys (R, K): the dense weight the k chosen keys hold, the
    mean over layers, for each run that measured it (the indexer entries)."""
    found = [(r.get("measured") or {}).get("kept_mass") for e in comp["entries"] for r in e["runs"]]
    found = [m for m in found if m]
    if not found:
        return [], None, {}
    ks = found[0]["ks"]
    labels = list(found[0]["layers"][0])[1:]  # "layer" first, then each way of choosing
    curves = {label: np.array([np.mean([layer[label] for layer in m["layers"]], axis=0) for m in found if m["ks"] == ks])
              for label in labels}
    return ks, found[0]["top_k"], curves
