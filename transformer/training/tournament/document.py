"""The tournament's JSON: a new document for a recipe, its verdicts filled in from the runs by the rule (`finish`),
an older file rewritten in today's shape (`rewrite`), and the file read back and checked (`load`) for the page,
the Train page and the README."""
from __future__ import annotations

import json
from pathlib import Path

from ...config import TransformerConfig
from ...costs.cache import kv_cache_bytes_per_token
from ...costs.params import param_counts
from .comparisons import COMPARISONS, Entry, entry_config, reference_of
from .judgement import judge_comparison, seeds_wanted
from .run import Recipe
from .statistics import STALL_MARGIN, entry_stats
from .verdict import MIN_SEEDS, RULE_TEXT

ROOT = Path(__file__).resolve().parents[3]
TOURNAMENT_PATH = ROOT / "assets" / "measurements" / "tournament.json"
COMMAND = "python -m scripts.tournament"
REWRITE = f"{COMMAND} --rewrite"  # an older file's runs, judged again in today's shape: trains nothing
FORMAT = "seed-paired verdicts, quoted claims (2)"  # what a file of today's shape says it is
SCALE_NOTE = ("Every model here has about a hundred thousand parameters and trained for minutes on one CPU thread; "
              "the lecture's claims are about models thousands to millions of times larger, trained for weeks. "
              "A difference measured here is a fact about this size; one not measured here may still appear at scale.")


def run_key(comp: dict, entry: dict, seed: int) -> str:
    """What makes two runs the same run (deterministic on one machine and thread count): the comparison's recipe and
    measure, the entry's config, rate and warm-up, and the seed. Every run reads the same figures, so one
    comparison's baseline run serves another's that shares its recipe."""
    return json.dumps([comp["recipe"], comp.get("measure"), entry["config"], entry["lr"], entry["warmup_steps"], seed],
                      sort_keys=True)


def describe_entry(recipe: Recipe, entry: Entry, entries: list[Entry]) -> dict:
    """An entry's JSON without runs: its choice, what it is measured against, what the claim predicts for it,
    config, costs (transformer.costs) and settings."""
    cfg = entry_config(recipe, entry)
    counts = param_counts(cfg)
    return {"choice": entry.choice, "against": reference_of(entries, entry),
            "predicted": {length: list(verdicts) for length, verdicts in entry.predicted.items()},
            "config": cfg.to_dict(), "parameters": counts["total"], "active_parameters": counts["active"],
            "kv_bytes_per_token": kv_cache_bytes_per_token(cfg), "lr": recipe.lr * entry.lr_factor,
            "stress": entry.stress,
            "warmup": entry.warmup, "warmup_steps": recipe.warmup if entry.warmup else 0, "runs": []}


def finish(data: dict) -> dict:
    """Judge every comparison by the rule (judgement.py) from its runs, and count the processor seconds of every
    run trained (a shared run once). A comparison with an entry not yet run, or with fewer than MIN_SEEDS seeds,
    or with an undecided entry still owed a seed, is not complete: the page lists it as still running."""
    trained = [r for c in data["comparisons"] for e in c["entries"] for r in e["runs"] if "shared_with" not in r]
    data["runs_trained"] = len(trained)
    data["processor_seconds_total"] = round(sum(r.get("processor_seconds", 0) + r.get("evaluation_processor_seconds", 0)
                                                for r in trained), 1)
    baselines = data.get("baselines") or {}
    data["baselines_bits"] = {"unigram": baselines.get("unigram_bits"), "bigram": baselines.get("bigram_bits")}
    data["rule_text"] = RULE_TEXT
    for comp in data["comparisons"]:
        comp["baselines_bits"] = data["baselines_bits"]
        seeds = [len({r["seed"] for r in e["runs"]}) for e in comp["entries"]]
        comp["seeds_per_entry"] = min(seeds) if seeds else 0
        missing = [e["choice"] for e, n in zip(comp["entries"], seeds) if n < MIN_SEEDS]
        if not seeds or max(seeds) == 0:
            comp.update(claim_status=None, claim_why="not run yet", complete=False, seeds_wanted={},
                        verdict=f"Not measured yet: `{COMMAND} --comparison {comp['key']}` runs it.")
            continue
        judge_comparison(comp, data["baselines_bits"]["bigram"])
        comp["seeds_wanted"] = seeds_wanted(comp) if not missing else {}
        comp["complete"] = not missing  # every entry has its seeds; more may be owed where undecided
        notes = _notes(comp, data)
        if notes:
            comp["verdict"] += " " + notes
        if missing:
            comp["verdict"] = (f"Still running ({comp['seeds_per_entry']} of {MIN_SEEDS} seeds for "
                               f"{', '.join(missing)}): " + comp["verdict"])
        tied = all(e["config"].get("tie_embeddings") for e in comp["entries"])
        comp["caveat"] = COMPARISONS[comp["key"]].tied_caveat if tied else ""
    return data


def _notes(comp: dict, data: dict) -> str:
    """What the verdict line adds: runs that stalled at the unigram level, and loss spikes a run recovered from."""
    unigram = data["baselines_bits"]["unigram"]
    stalled = []
    for e in comp["entries"]:
        stuck = [v for v in entry_stats(e).values if unigram is not None and v >= unigram - STALL_MARGIN]
        if stuck:
            stalled.append(f"{e['choice']} ({len(stuck)} of {len(e['runs'])} seeds)")
    spiked = [f"{e['choice']} (seed {r['seed']}, step {', '.join(map(str, r['loss_spikes']))})"
              for e in comp["entries"] for r in e["runs"] if r.get("loss_spikes") and not r.get("diverged")]
    diverged = [f"{e['choice']} ({s.diverged} of {s.runs} seeds)" for e in comp["entries"]
                if (s := entry_stats(e)).diverged]
    notes = []
    if diverged:
        notes.append(f"Diverged: {'; '.join(diverged)}.")
    if spiked:
        notes.append(f"The loss spiked by more than {data['recipe']['blowup_bits']:g} bit and recovered: "
                     f"{'; '.join(spiked)}.")
    if stalled:
        notes.append(f"Stalled at the unigram level ({unigram:.2f} bits/char: it learned only how often each "
                     f"character occurs): {'; '.join(stalled)}.")
    return " ".join(notes)


def new_document(recipe: Recipe, hardware: str, keys: list[str], own_recipes: bool = True) -> dict:
    """A document with no runs yet: the shared recipe, and each comparison with its own (the shared one with the
    comparison's steps and repeated spans; with own_recipes=False, the shared one for all, as older files ran)."""
    comparisons = []
    for key in keys:
        spec = COMPARISONS[key]
        own = spec.recipe(recipe) if own_recipes else recipe
        entries = spec.entries(own)
        comparisons.append({"key": key, "axis": spec.axis, "group": spec.group, "claim": spec.claim.to_dict(),
                            "verdict": "", "cost_axis": spec.cost_axis, "cannot_test": spec.cannot_test,
                            "first_token": spec.first_token, "lengths": list(spec.lengths),
                            "longer_against": spec.longer_against, "recipe": own.to_dict(),
                            "measure": spec.measure if own_recipes else None,
                            "entries": [describe_entry(own, e, entries) for e in entries]})
    return {"format": FORMAT, "recipe": recipe.to_dict(), "hardware": hardware, "scale_note": SCALE_NOTE,
            "command": COMMAND, "comparisons": comparisons}


def same_config(old: dict | None, new: dict) -> bool:
    """Whether a stored config is this one (a field added to TransformerConfig since reads as its default)."""
    try:
        return old is not None and TransformerConfig.from_dict(old).to_dict() == new
    except (TypeError, ValueError):
        return False


def recipe_from(stored: dict, **missing) -> Recipe:
    """The Recipe a stored recipe dict describes; `missing` gives fields the file predates (what those runs did)."""
    fields = {k: v for k, v in stored.items() if k in Recipe.__dataclass_fields__}
    return Recipe(**{**missing, **fields})


def rewrite(old: dict) -> dict:
    """An older file in today's shape: the same recipe (with the fields it predates set to what its runs did: tied
    embeddings, each length in windows of its own), its comparisons described again, and every run kept, so every
    verdict is recomputed from the runs' seeds and held-out bits. Comparisons the old file lacks stay out."""
    missing = {"length_windows": "separate"}
    if "tie_embeddings" not in old["recipe"]:  # files before the field: what their entries did, one way for all
        configs = [e["config"] for c in old["comparisons"] for e in c["entries"]]
        tied = {bool(c.get("tie_embeddings", True)) for c in configs}
        if len(tied) != 1:
            raise ValueError("the file mixes tied and untied embeddings across its entries and its recipe does not "
                             "say which it shared; it cannot be described by one recipe: train it again with "
                             + COMMAND)
        missing["tie_embeddings"] = tied.pop()
    recipe = recipe_from(old["recipe"], **missing)
    keys = [c["key"] for c in old["comparisons"] if c["key"] in COMPARISONS]
    own = all("recipe" in c for c in old["comparisons"])  # files before per-comparison recipes ran one for all
    data = new_document(recipe, old["hardware"], keys, own_recipes=own)
    stored = {(c["key"], e["choice"]): e for c in old["comparisons"] for e in c["entries"]}
    for comp in data["comparisons"]:
        for entry in comp["entries"]:
            before = stored.get((comp["key"], entry["choice"]))
            if before is not None and same_config(before.get("config"), entry["config"]):
                entry["runs"] = before["runs"]
    data["baselines"] = old.get("baselines")
    data["rewritten_from"] = ("runs trained under the earlier rule (seeds' spread); every verdict here recomputed "
                              "from their seeds and held-out bits by " + REWRITE)
    return finish(data)


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
    if not isinstance(data, dict) or "format" not in data:
        raise TournamentError(f"{path} is in an older shape (no \"format\": its verdicts, if any, were drawn by the "
                              f"earlier rule): `{REWRITE} --out {path}` judges its runs again in today's shape, or "
                              f"{hint}.")
    try:
        if data["format"] != FORMAT:
            raise ValueError(f"format {data['format']!r}, expected {FORMAT!r}")
        if not isinstance(data["recipe"], dict) or not isinstance(data["hardware"], str):
            raise TypeError("recipe and hardware")
        for comp in data["comparisons"]:
            str(comp["axis"]), str(comp["claim"]["quote"]), str(comp["claim"]["source"]), str(comp["verdict"])
            dict(comp["rule"]) if comp["claim_status"] is not None else None
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


def claim_text(claim: dict) -> str:
    """A claim as the page and the README quote it: the lecture's words in quotation marks, another source's claim
    in this project's words, each with its source."""
    if claim["lecture"]:
        return f"\u201c{claim['quote']}\u201d (lecture {claim['source']})"
    return f"{claim['quote']} ({claim['source']}; not in the lecture, in this project's words)"


def summary_rows(data: dict) -> list[dict]:
    """One row per entry: comparison, choice, its parameters and cost, held-out bits (mean, lowest and highest
    seed), seeds, diverged runs, and its verdict against its reference (difference and interval)."""
    rows = []
    for comp in data["comparisons"]:
        for entry in comp["entries"]:
            stats = entry_stats(entry)
            longer = {f"{m}x": entry_stats(entry, f"{m}x").mean for m in comp.get("lengths", [1])[1:]}
            rows.append({"comparison": comp["axis"], "choice": entry["choice"], "cost_axis": comp["cost_axis"],
                         "cost": entry.get(comp["cost_axis"]), "parameters": entry["parameters"],
                         "mean": stats.mean, "low": stats.low, "high": stats.high, "longer": longer,
                         "seeds": len({r["seed"] for r in entry["runs"]}), "diverged": stats.diverged,
                         "runs": stats.runs, "against": entry.get("against"), "verdict": entry.get("verdict"),
                         "difference": entry.get("difference"), "interval": entry.get("interval")})
    return rows
