"""The tournament's JSON: a new document for a recipe, its verdicts filled in from the runs (`finish`), and the file
read back and checked (`load`) for the page, the Train page and the README."""
from __future__ import annotations

import json
from pathlib import Path

from ...costs.cache import kv_cache_bytes_per_token
from ...costs.params import param_counts
from .comparisons import COMPARISONS, Entry, entry_config
from .run import Recipe
from .statistics import STALL_MARGIN, entry_stats

ROOT = Path(__file__).resolve().parents[3]
TOURNAMENT_PATH = ROOT / "assets" / "measurements" / "tournament.json"
COMMAND = "python -m scripts.tournament"
MIN_SEEDS = 3
SCALE_NOTE = ("Every model here has about a hundred thousand parameters and trained for minutes on one CPU thread; "
              "the lecture's claims are about models thousands to millions of times larger, trained for weeks. "
              "A difference measured here is a fact about this size; one not measured here may still appear at scale.")


def run_key(config: dict, lr: float, warmup: int, seed: int) -> str:
    """What makes two runs the same run (deterministic on one machine and thread count): every run reads the
    same figures, so one comparison's baseline run serves another's."""
    return json.dumps([config, lr, warmup, seed], sort_keys=True)


def describe_entry(recipe: Recipe, entry: Entry) -> dict:
    """An entry's JSON without runs: its choice, config, costs (transformer.costs) and settings."""
    cfg = entry_config(recipe, entry)
    counts = param_counts(cfg)
    return {"choice": entry.choice, "config": cfg.to_dict(), "parameters": counts["total"],
            "active_parameters": counts["active"], "kv_bytes_per_token": kv_cache_bytes_per_token(cfg),
            "lr": recipe.lr * entry.lr_factor, "warmup": entry.warmup, "warmup_steps": recipe.warmup if entry.warmup else 0,
            "forward_ms": None, "runs": []}


def finish(data: dict) -> dict:
    """Fill in each comparison's verdict and its seed count from the runs (labelled provisional when an entry
    has fewer than MIN_SEEDS seeds), and the processor seconds of every run trained (a shared run once)."""
    trained = [r for c in data["comparisons"] for e in c["entries"] for r in e["runs"] if "shared_with" not in r]
    data["runs_trained"] = len(trained)
    data["processor_seconds_total"] = round(sum(r.get("processor_seconds", 0) + r.get("evaluation_processor_seconds", 0)
                                                for r in trained), 1)
    for comp in data["comparisons"]:
        spec = COMPARISONS[comp["key"]]
        seeds = [len({r["seed"] for r in e["runs"]}) for e in comp["entries"]]
        comp["seeds_per_entry"] = min(seeds) if seeds else 0
        comp["complete"] = bool(seeds) and min(seeds) >= MIN_SEEDS
        if not seeds or max(seeds) == 0:
            comp["verdict"] = "Not measured yet: run " + f"`{COMMAND} --comparison {comp['key']}`."
            continue
        missing = [e["choice"] for e in comp["entries"] if not e["runs"]]
        if missing:  # a verdict compares every entry: say what is still to run instead of guessing
            comp["verdict"] = (f"Provisional: not every entry has run yet (still to run: {', '.join(missing)}); "
                               f"`{COMMAND} --comparison {comp['key']}` goes on.")
            continue
        comp["recipe_small_loss"] = data["recipe"]["small_loss"]
        try:
            verdict = spec.verdict(comp)
        except (KeyError, ValueError, ZeroDivisionError, TypeError) as exc:  # a partial file: say so, do not guess
            verdict = f"Not enough runs to judge yet ({exc})."
        comp.pop("recipe_small_loss")
        unigram = (data.get("baselines") or {}).get("unigram_bits")
        stalled = []
        for e in comp["entries"]:
            stuck = [v for v in entry_stats(e).values if unigram is not None and v >= unigram - STALL_MARGIN]
            if stuck:
                stalled.append(f"{e['choice']} ({len(stuck)} of {len(e['runs'])} seeds)")
        spiked = [f"{e['choice']} (seed {r['seed']}, step {', '.join(map(str, r['loss_spikes']))})"
                  for e in comp["entries"] for r in e["runs"] if r.get("loss_spikes") and not r.get("diverged")]
        if spiked:
            verdict += f" The loss spiked by more than {data['recipe']['blowup_bits']:g} bit and recovered: " \
                       f"{'; '.join(spiked)}."
        if stalled:
            verdict += (f" Stalled at the unigram level ({unigram:.2f} bits/char: it learned only how often each "
                        f"character occurs): {'; '.join(stalled)}.")
        if not comp["complete"]:
            verdict = (f"Provisional, {min(seeds)} of {MIN_SEEDS} seeds per entry so far"
                       + (" (some entries not yet run)" if min(seeds) == 0 else "") + ": " + verdict)
        comp["verdict"] = verdict
    return data


def new_document(recipe: Recipe, hardware: str, keys: list[str]) -> dict:
    comparisons = []
    for key in keys:
        spec = COMPARISONS[key]
        comparisons.append({"key": key, "axis": spec.axis, "group": spec.group, "claim": spec.claim,
                            "verdict": "", "cost_axis": spec.cost_axis, "cannot_test": spec.cannot_test,
                            "first_token": spec.first_token, "lengths": list(spec.lengths),
                            "entries": [describe_entry(recipe, e) for e in spec.entries(recipe)]})
    return {"recipe": recipe.to_dict(), "hardware": hardware, "scale_note": SCALE_NOTE, "command": COMMAND,
            "comparisons": comparisons}



# --- reading the JSON back ------------------------------------------------------------------------------


class TournamentError(ValueError):
    """A tournament JSON that is missing or unreadable: the message names the file and the command that makes it."""


def load(path: str | Path = TOURNAMENT_PATH) -> dict:
    """The tournament JSON, checked for the fields the page and the README read."""
    path = Path(path)
    hint = f"`{COMMAND}` makes it (`{COMMAND} --tiny --out {path}` for a quick one)"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TournamentError(f"{path} is missing; {hint}.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TournamentError(f"{path} cannot be read ({exc}); {hint}.") from None
    try:
        if not isinstance(data["recipe"], dict) or not isinstance(data["hardware"], str):
            raise TypeError("recipe and hardware")
        for comp in data["comparisons"]:
            str(comp["axis"]), str(comp["claim"]), str(comp["verdict"])
            for entry in comp["entries"]:
                str(entry["choice"]), int(entry["parameters"])
                for run in entry["runs"]:
                    int(run["seed"]), bool(run["diverged"]), list(run["curve"])
    except (KeyError, TypeError, ValueError) as exc:
        raise TournamentError(f"{path} is not a tournament file (missing or wrong field: {exc}); {hint}.") from None
    return data


def comparison(data: dict, key: str) -> dict:
    for comp in data["comparisons"]:
        if comp["key"] == key:
            return comp
    raise KeyError(f"no comparison {key!r}; the file has {', '.join(c['key'] for c in data['comparisons'])}")


def summary_rows(data: dict) -> list[dict]:
    """One row per entry: comparison, choice, its cost, held-out bits (mean, lowest and highest seed), seeds,
    diverged runs."""
    rows = []
    for comp in data["comparisons"]:
        for entry in comp["entries"]:
            stats = entry_stats(entry)
            cost = entry.get(comp["cost_axis"])
            longer = {f"{m}x": entry_stats(entry, f"{m}x").mean for m in comp.get("lengths", [1])[1:]}
            rows.append({"comparison": comp["axis"], "choice": entry["choice"], "cost_axis": comp["cost_axis"],
                         "cost": cost, "mean": stats.mean, "low": stats.low, "high": stats.high, "longer": longer,
                         "seeds": len({r["seed"] for r in entry["runs"]}), "diverged": stats.diverged,
                         "runs": stats.runs})
    return rows
