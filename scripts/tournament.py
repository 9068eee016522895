"""Trade-offs, measured: train every comparison of transformer.training.tournament and write its JSON.

    python -m scripts.tournament                                  # everything: assets/measurements/tournament.json
    python -m scripts.tournament --comparison kv-heads            # one comparison (repeat --comparison for more)
    python -m scripts.tournament --tiny --out /tmp/t.json         # seconds: the smallest budget, for tests
    python -m scripts.tournament --rewrite                        # an older file's runs judged again, in today's shape
    python -m scripts.tournament --merge a.json b.json            # files from processes that each ran some comparisons

The JSON is written after every run, so a partial tournament is usable and a rerun with the same recipe goes on
where it stopped (runs already in the file are kept, never trained again). Seeds run outermost: seed 0 of every
comparison first, then seed 1, so a stopped tournament has every comparison, labelled with the seeds it has.
After the first three seeds, an entry whose verdict is undecided gets another seed (with what it is measured
against), up to five (transformer/training/tournament/verdict.py states the rule).
The README's table is rendered here from the JSON (`readme_table`); `--readme` writes it between its markers.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python scripts/tournament.py` as well as `python -m scripts.tournament`
    sys.path.insert(0, str(ROOT))

from transformer.config import TransformerConfig  # noqa: E402
from transformer.training import language  # noqa: E402
from transformer.training.tournament.comparisons import COMPARISONS  # noqa: E402
from transformer.training.tournament.document import (  # noqa: E402
    TOURNAMENT_PATH, claim_text, comparison, finish, load, new_document, recipe_from, rewrite, run_key, same_config,
    summary_rows)
from transformer.training.tournament.measures import MEASURES  # noqa: E402
from transformer.training.tournament.run import TINY, Recipe, train_run  # noqa: E402
from transformer.training.tournament.verdict import MAX_SEEDS, MIN_SEEDS  # noqa: E402


def hardware(threads: int) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"CPU: {cpu}, {threads} torch thread{'s' if threads != 1 else ''} ({os.cpu_count()} cores on the "
            f"machine, shared with other work); torch {torch.__version__}, Python {platform.python_version()}")


def write(data: dict, path: Path) -> None:
    """Atomically: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(finish(data), indent=1) + "\n", encoding="utf-8")
    partial.replace(path)


def take_runs(data: dict, source: dict) -> dict:
    """Add to each entry of `data` the runs `source` holds for the same comparison, recipe and config, one per seed
    (a seed already there is kept). A source of the same top-level recipe that predates per-comparison recipes
    counts as the shared one."""
    comps = {c["key"]: c for c in source.get("comparisons", [])}
    for comp in data["comparisons"]:
        theirs = comps.get(comp["key"])
        if theirs is None or theirs.get("recipe", comp["recipe"]) != comp["recipe"]:
            continue  # not run there, or trained with other steps or text: its runs are not this comparison's
        entries = {e["choice"]: e for e in theirs["entries"]}
        for entry in comp["entries"]:
            match = entries.get(entry["choice"])
            if match is None or not same_config(match.get("config"), entry["config"]):
                continue
            seeds = {r["seed"] for r in entry["runs"]}
            entry["runs"] = sorted(entry["runs"] + [r for r in match["runs"] if r["seed"] not in seeds],
                                   key=lambda r: r["seed"])
    return data


def merge(old: dict, new: dict) -> dict:
    """The new document's comparisons, each entry with the runs the old file already had; a comparison the old file
    has and today's list does not stays as it was."""
    take_runs(new, old)
    kept = {c["key"] for c in new["comparisons"]}
    new["comparisons"] += [c for c in old.get("comparisons", []) if c["key"] not in kept]
    order = list(COMPARISONS)
    new["comparisons"].sort(key=lambda c: order.index(c["key"]) if c["key"] in order else len(order))
    return new


def combine(files: list[dict]) -> dict:
    """One document from several made with the same recipe (machines or processes that each trained some
    comparisons or seeds), described afresh by today's comparisons: each entry's runs are the union of the files'
    runs of that comparison, recipe and config, one per seed."""
    first, *rest = files
    for other in rest:
        if other.get("recipe") != first.get("recipe"):
            raise ValueError(f"the files were made with different recipes ({json.dumps(first.get('recipe'))} and "
                             f"{json.dumps(other.get('recipe'))}); only files of one recipe combine")
    hardware_text = "; ".join(dict.fromkeys(d["hardware"] for d in files))
    data = new_document(recipe_from(first["recipe"]), hardware_text, list(COMPARISONS))
    for source in files:
        take_runs(data, source)
    data["baselines"] = first.get("baselines")
    return finish(data)  # every verdict judged again on the runs combined


def run(recipe: Recipe, keys: list[str], seeds: list[int], out: Path, threads: int, log=print,
        more_seeds: bool = True) -> dict:
    data = new_document(recipe, hardware(threads), list(COMPARISONS))
    if out.exists():
        try:
            old = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise SystemExit(f"{out} exists but cannot be read ({exc}); move it away or pass another --out")
        if old.get("recipe") != data["recipe"]:
            raise SystemExit(f"{out} was made with another recipe; pass --fresh to start over, or another --out "
                             f"(its recipe: {json.dumps(old.get('recipe'))})")
        data = merge(old, data)
    # what a model that learned nothing but character frequencies (unigram) or pairs (bigram) reads held out
    data["baselines"] = language.ngram_baselines(recipe.corpus)
    done = {}  # run key -> (where, run): one comparison's baseline serves another's
    for comp in data["comparisons"]:
        for entry in comp["entries"]:
            for r in entry["runs"]:
                done.setdefault(run_key(comp, entry, r["seed"]),
                                (f"{comp['axis']}: {entry['choice']}", r))
    write(data, out)
    started = time.perf_counter()

    def train_seed(comp: dict, entry: dict, seed: int) -> None:
        where = f"{comp['axis']}: {entry['choice']}"
        same_run = run_key(comp, entry, seed)
        if same_run in done:
            source, shared = done[same_run]
            run_json = {**shared, "shared_with": shared.get("shared_with", source)}
            log(f"[{time.perf_counter() - started:7.0f}s] seed {seed} {where}: the same run as {source}")
        else:
            cfg = TransformerConfig.from_dict(entry["config"])
            # every run reads every length and the first token's share, so any comparison can share it
            measure = MEASURES[comp["measure"]] if comp.get("measure") else None
            run_json = train_run(cfg, recipe_from(comp["recipe"]), seed, lr=entry["lr"], warmup=entry["warmup_steps"],
                                 measure=measure)
            done[same_run] = (where, run_json)
            log(f"[{time.perf_counter() - started:7.0f}s] seed {seed} {where}: "
                f"held-out {run_json['held_out_bits_per_char']} bits/char, diverged {run_json['diverged']}, "
                f"{run_json['processor_seconds']:.1f} processor s")
        entry["runs"].append(run_json)
        entry["runs"].sort(key=lambda r: r["seed"])
        write(data, out)

    for seed in seeds:
        for key in keys:
            comp = comparison(data, key)
            for entry in comp["entries"]:
                if not any(r["seed"] == seed for r in entry["runs"]):
                    train_seed(comp, entry, seed)
    # undecided after the seeds asked for: one more seed at a time for those entries and their references
    while more_seeds and any(comparison(data, k).get("seeds_wanted") for k in keys):
        for key in keys:
            comp = comparison(data, key)
            for choice, count in comp.get("seeds_wanted", {}).items():
                entry = next(e for e in comp["entries"] if e["choice"] == choice)
                have = {r["seed"] for r in entry["runs"]}
                for seed in range(count):
                    if seed not in have:
                        train_seed(comp, entry, seed)  # write() judges the file again: seeds_wanted moves on
    return data


README = ROOT / "README.md"

COST_LABELS = {"kv_bytes_per_token": "KV bytes/token", "parameters": "parameters"}


def measured_text(row: dict) -> str:
    """An entry's measurement against its reference: the difference, its 95% interval and the verdict."""
    if row["against"] is None:
        return "reference"
    if row["difference"] is None:
        return f"vs {row['against']}: no seed pairs"
    interval = "" if row["interval"] is None else f" ({row['interval'][0]:+.3f} to {row['interval'][1]:+.3f})"
    return f"vs {row['against']}: {row['difference']:+.3f}{interval}, {row['verdict'] or 'no verdict'}"


def readme_table(data: dict) -> str:
    """The README's table: each entry's parameters, held-out bits per character (mean and the seeds' range), seeds,
    diverged runs, cost, and its difference against its reference with the 95% interval and verdict; then each
    comparison's claim (quoted, with its source) and what was measured."""
    lines = ["| comparison | choice | parameters | held-out bits/char: mean (seeds' range) | seeds | diverged | cost | "
             "against its reference: difference (95% interval), verdict |", "|---|---|---|---|---|---|---|---|"]
    for row in summary_rows(data):
        bits = ("–" if row["mean"] is None else
                f"{row['mean']:.3f} ({row['low']:.3f}–{row['high']:.3f})")
        if row["longer"] and row["mean"] is not None:  # the positions comparisons: read in longer windows
            bits += "; " + ", ".join(f"{k.replace('x', '×')} " + ("cannot read" if v is None else f"{v:.3f}")
                                     for k, v in row["longer"].items())
        cost = row["cost"]
        cost_text = "–" if cost is None else (f"{cost:,}" if isinstance(cost, int) else f"{cost:.2f}")
        lines.append(f"| {row['comparison']} | {row['choice']} | {row['parameters']:,} | {bits} | {row['seeds']} | "
                     f"{row['diverged']}/{row['runs']} | {cost_text} {COST_LABELS[row['cost_axis']]} | "
                     f"{measured_text(row)} |")
    lines.append("")
    lines.append("| comparison | the claim | measured here |")
    lines.append("|---|---|---|")
    for comp in data["comparisons"]:
        lines.append(f"| {comp['axis']} | {claim_text(comp['claim'])} | {comp['verdict']} |")
    return "\n".join(lines)


README_MARKERS = ("<!-- tournament:table -->", "<!-- /tournament:table -->")


def readme_block(data: dict) -> str:
    """The table between its markers, as the README carries it."""
    return f"{README_MARKERS[0]}\n{readme_table(data)}\n{README_MARKERS[1]}"


def write_readme(data: dict, readme: Path = README) -> Path:
    """Replace the README's tournament table (between its markers) with the one rendered from `data`."""
    text = readme.read_text(encoding="utf-8")
    start, end = README_MARKERS
    if start not in text or end not in text:
        raise SystemExit(f"{readme} has no {start} ... {end} block to fill")
    before, rest = text.split(start, 1)
    after = rest.split(end, 1)[1]
    readme.write_text(before + readme_block(data) + after, encoding="utf-8")
    return readme


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.tournament", description=__doc__.splitlines()[0])
    parser.add_argument("--comparison", action="append", choices=[*COMPARISONS, "switches", "all"],
                        help="which comparison to run (repeat for several; 'switches' = qk-norm, sinks and softcap; "
                             "default all)")
    parser.add_argument("--steps", type=int, default=None, help=f"steps per run (default {Recipe.steps})")
    parser.add_argument("--seeds", type=int, default=MIN_SEEDS, help=f"seeds per entry: 0, 1, ... (default "
                                                                     f"{MIN_SEEDS}; more where undecided)")
    parser.add_argument("--out", default=None, help=f"the JSON (default {TOURNAMENT_PATH.relative_to(ROOT)}; "
                                                     "with --tiny, a file in the temporary directory)")
    parser.add_argument("--tiny", action="store_true", help="the smallest budget (a few steps of a tiny model on the "
                                                            "Python documentation): seconds, for tests")
    parser.add_argument("--fresh", action="store_true", help="start over even if --out holds runs")
    parser.add_argument("--readme", action="store_true", help="train nothing: write the README's table from --out")
    parser.add_argument("--rewrite", action="store_true", help="train nothing: judge the runs of --out (a file of an "
                                                               "older shape) again by today's rule, in today's shape")
    parser.add_argument("--no-extra-seeds", action="store_true", help=f"stop at --seeds even where a verdict is "
                                                                      f"undecided (default: up to {MAX_SEEDS})")
    parser.add_argument("--merge", nargs="+", metavar="FILE", help="train nothing: combine files made with the same "
                                                                    "recipe (processes or machines that each ran some "
                                                                    "comparisons) into --out")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the seconds recorded are "
                                                               "one thread's)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds {args.seeds}: at least 1 (the tournament's claims need {MIN_SEEDS})")
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps {args.steps}: at least 1")
    torch.set_num_threads(args.threads)
    recipe = TINY if args.tiny else Recipe()
    if args.steps is not None:
        recipe = replace(recipe, steps=args.steps, warmup=args.steps // 10)  # the recipe's 10% warm-up
    chosen = args.comparison or ["all"]
    keys = []
    for name in chosen:
        names = list(COMPARISONS) if name == "all" else ["qk-norm", "sinks", "softcap"] if name == "switches" \
            else [name]
        keys += [k for k in names if k not in keys]
    import tempfile
    out = Path(args.out) if args.out else (Path(tempfile.gettempdir()) / "tournament-tiny.json" if args.tiny
                                          else TOURNAMENT_PATH)
    if args.readme:
        print(f"rewrote the table in {write_readme(load(out))}")
        return
    if args.merge:
        try:
            data = combine([json.loads(Path(f).read_text(encoding="utf-8")) for f in args.merge])
        except (OSError, json.JSONDecodeError, KeyError, ValueError) as exc:
            raise SystemExit(f"cannot combine {', '.join(args.merge)}: {exc}")
        write(data, out)
        print(f"combined {len(args.merge)} files into {out}: {data['runs_trained']} runs")
        return
    if args.rewrite:
        try:
            old = json.loads(out.read_text(encoding="utf-8"))
            data = rewrite(old)
        except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise SystemExit(f"{out} cannot be rewritten ({exc}); train a new one with `{parser.prog}`")
        write(data, out)
        print(f"rewrote {out} in today's shape from its {data['runs_trained']} runs")
        return
    if args.fresh and out.exists():
        out.unlink()
    start = time.perf_counter()
    run(recipe, keys, list(range(args.seeds)), out, args.threads, more_seeds=not args.no_extra_seeds)
    print(f"wrote {out} in {time.perf_counter() - start:.0f} s")
    for comp in load(out)["comparisons"]:
        print(f"{comp['axis']}: {comp['verdict']}")


if __name__ == "__main__":
    main()
