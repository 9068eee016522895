"""Trade-offs, measured: the shipped JSON, the script at a tiny budget, the verdicts recomputed from the runs, the
page and the README built from the JSON, and the Train page's warm-up and learning-rate controls. No timings are
asserted (benchmarks/)."""
import copy
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from apptest_helpers import APP, assert_clean, values
from scripts.tournament import readme_block
from transformer.training.tournament.comparisons import COMPARISONS
from transformer.training.tournament.document import (FORMAT, REWRITE, TOURNAMENT_PATH, claim_text, comparison,
                                                      finish, load, recipe_from, rewrite)
from transformer.training.tournament.run import TINY, Recipe, diverged_at, spikes
from transformer.training.tournament.statistics import entry_stats
from transformer.training.tournament.verdict import MAX_SEEDS, MIN_SEEDS, t_quantile
from ui.figures import tradeoffs as figs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


@pytest.fixture(scope="module")
def shipped() -> dict:
    """The JSON the page reads (ATTENTION_LAB_MEASUREMENTS points the page and this at another directory)."""
    return load(Path(os.environ.get("ATTENTION_LAB_MEASUREMENTS", TOURNAMENT_PATH.parent)) / TOURNAMENT_PATH.name)


# --- the shipped JSON ----------------------------------------------------------------------------------


def test_shipped_json_has_every_comparison_with_three_seeds_and_one_recipe_each(shipped):
    assert shipped["format"] == FORMAT
    assert [c["key"] for c in shipped["comparisons"]] == list(COMPARISONS)
    assert shipped["hardware"] and shipped["recipe"]["steps"] >= 100
    shared = recipe_from(shipped["recipe"])
    for comp in shipped["comparisons"]:
        assert comp["claim"]["quote"] and comp["claim"]["source"] and comp["verdict"] and comp["cannot_test"]
        own = COMPARISONS[comp["key"]].recipe(shared)
        assert comp["recipe"] == own.to_dict() and comp["measure"] == COMPARISONS[comp["key"]].measure
        assert [e["choice"] for e in comp["entries"]] == [e.choice for e in COMPARISONS[comp["key"]].entries(own)]
        budgets = set()
        for entry in comp["entries"]:
            seeds = {r["seed"] for r in entry["runs"]}
            assert len(seeds) >= MIN_SEEDS, f"{comp['axis']}: {entry['choice']} has seeds {sorted(seeds)}"
            assert len(seeds) == len(entry["runs"])  # one run per seed
            for run in entry["runs"]:
                budgets.add((run["steps"], run["tokens"]))
                assert run["curve"] and run["processor_seconds"] > 0
                if run["diverged"]:  # kept, with no held-out figure
                    assert run["held_out_bits_per_char"] is None
                else:
                    assert 0 < run["held_out_bits_per_char"] < 9
                    assert ("measured" in run) == (comp["measure"] is not None)
        assert budgets == {(own.steps, own.tokens)}, f"{comp['axis']}: every entry its comparison's steps and tokens"
        assert comp["complete"] and not comp["verdict"].startswith(("Still running", "Not measured"))


def test_shipped_runs_are_untied_but_in_the_ties_own_comparison_and_read_longer_text_as_prefixes(shipped):
    assert shipped["recipe"]["tie_embeddings"] is False and shipped["recipe"]["length_windows"] == "prefixes"
    for comp in shipped["comparisons"]:
        for entry in comp["entries"]:
            tied = comp["key"] == "embeddings" and ", tied" in entry["choice"]
            assert entry["config"]["tie_embeddings"] is tied, (comp["key"], entry["choice"])
        assert comp["caveat"] == ""  # said only of a file whose every entry tied
    assert Recipe().tie_embeddings is False and Recipe().length_windows == "prefixes"


def test_every_verdict_is_recomputed_from_the_runs_seeds_and_bits(shipped):
    """The file's verdicts are what the rule gives on its own runs, and every one is recomputed here by hand."""
    again = finish(copy.deepcopy(shipped))
    for before, after in zip(shipped["comparisons"], again["comparisons"]):
        assert before["verdict"] == after["verdict"] and before["claim_status"] == after["claim_status"]
        assert before["rule"]["margin_share"] == 0.01 and before["baselines_bits"] == shipped["baselines_bits"]
    bigram = shipped["baselines_bits"]["bigram"]
    bits = lambda e: {r["seed"]: r["held_out_bits_per_char"] for r in e["runs"] if not r["diverged"]}
    judged = 0
    for comp in shipped["comparisons"]:
        entries = {e["choice"]: e for e in comp["entries"]}
        means = {c: statistics.fmean(bits(e).values()) if bits(e) else None for c, e in entries.items()
                 if not e["stress"]}  # a rate chosen to break training may: that is what it measures
        stalled = [c for c, m in means.items() if m is None or m > bigram - 0.3]
        assert bool(comp["measured_nothing"]) == bool(stalled), comp["key"]
        for entry in comp["entries"]:
            assert entry["verdict"] in ("better", "worse", "equivalent", "undecided", "reference", None)
            if entry["against"] is None:
                continue
            reference, own = bits(entries[entry["against"]]), bits(entry)
            seeds = sorted(set(reference) & set(own))
            diffs = [own[s] - reference[s] for s in seeds]
            if len(diffs) < 2:
                continue
            half = t_quantile(len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
            low, high = statistics.fmean(diffs) - half, statistics.fmean(diffs) + half
            assert entry["difference"] == pytest.approx(statistics.fmean(diffs), abs=1e-4)
            assert entry["interval"] == pytest.approx([low, high], abs=1e-4)
            margin = 0.01 * statistics.fmean(reference.values())
            expected = ("equivalent" if -margin <= low and high <= margin else "better" if high < 0 else
                        "worse" if low > 0 else "undecided")
            assert entry["verdict"] == (None if stalled else expected), (comp["key"], entry["choice"])
            judged += 1
    assert judged >= 20


# The lecture's sentences that a claim may quote, word for word, as the course's claims list gives them
LECTURE_SENTENCES = (
    "GQA is the sweet spot — LLaMA 2 70B, Mistral, and most modern LLMs use it because you get most of MQA's memory "
    "savings with almost no quality loss",
    "KV cache shrinks by H/G× with minimal quality loss. MQA is the extreme (1 KV head)",
    "Excellent extrapolation to longer sequences", "it generalizes very well to longer sequences than seen during "
    "training.", "Can extrapolate to sequences longer than seen during training", "Harder to train, needs warmup.",
    "Pre-LN is more training-stable and does not require learning rate warmup, which is why modern models have "
    "adopted it.", "Better quality for same param count.", "improving quality for the same param count",
)


def test_claims_are_the_lectures_words_or_name_another_source():
    for spec in COMPARISONS.values():
        if spec.claim.lecture:
            assert spec.claim.quote in LECTURE_SENTENCES, spec.key
            assert spec.claim.source[:3] in ("000", "001", "002", "003", "004"), spec.key
        else:
            assert any(ch.isdigit() for ch in spec.claim.source), spec.key  # a named paper or card, with its year
            assert "not in the lecture" in claim_text(spec.claim.to_dict())
    for key in ("qk-norm", "sinks", "softcap"):  # none of the lecture's five documents mentions these
        assert not COMPARISONS[key].claim.lecture


def test_an_older_file_is_rewritten_with_its_runs_and_the_rewrite_is_stable(shipped):
    again = rewrite(copy.deepcopy(shipped))
    assert again["comparisons"] == shipped["comparisons"] and again["recipe"] == shipped["recipe"]
    older = copy.deepcopy(shipped)  # the earlier shape: no format, claims as plain text, no rule or verdicts
    del older["format"], older["baselines_bits"]
    for comp in older["comparisons"]:
        comp["claim"] = "a claim in the app's own words"
        for field in ("rule", "baselines_bits", "claim_status", "claim_why", "measured_nothing", "caveat"):
            del comp[field]
        for entry in comp["entries"]:
            for field in ("against", "predicted", "verdict", "difference", "interval", "margin", "pairs"):
                entry.pop(field, None)
    assert rewrite(older)["comparisons"] == shipped["comparisons"]


def test_entries_keep_width_and_match_their_costs(shipped):
    from transformer import TransformerConfig
    from transformer.costs import kv_cache_bytes_per_token, param_counts

    for comp in shipped["comparisons"]:
        assert {e["config"]["d_model"] for e in comp["entries"]} == {shipped["recipe"]["d_model"]}
        for entry in comp["entries"]:
            cfg = TransformerConfig.from_dict(entry["config"])
            assert entry["parameters"] == param_counts(cfg)["total"]
            assert entry["kv_bytes_per_token"] == kv_cache_bytes_per_token(cfg)
    ffn = comparison(shipped, "ffn")["entries"]
    dense = {e["parameters"] for e in ffn[:3]}
    assert max(dense) - min(dense) <= 0.01 * min(dense)  # ReLU, GELU and SwiGLU at equal parameters
    assert abs(ffn[3]["active_parameters"] - ffn[2]["parameters"]) <= 0.01 * ffn[2]["parameters"]  # MoE: active
    assert abs(ffn[4]["parameters"] - ffn[2]["parameters"]) <= 0.01 * ffn[2]["parameters"]  # MoE: total


# --- the figures and the README equal the JSON --------------------------------------------------------


def _finite(a) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    return a[np.isfinite(a)]


@pytest.mark.parametrize("key", list(COMPARISONS))
def test_page_figures_show_the_json_numbers(shipped, key):
    comp = comparison(shipped, key)
    arrays = figs.comparison_arrays(comp)
    fig = figs.bits_by_choice(arrays.choices, arrays.seeds, arrays.bits, arrays.diverged)
    traces = {t.name: t for t in fig.data}
    for entry in comp["entries"]:
        stats = entry_stats(entry)
        mean = values(traces["mean of the seeds"].y)[list(traces["mean of the seeds"].x).index(entry["choice"])]
        assert (math.isnan(mean) if stats.mean is None else mean == pytest.approx(stats.mean))
        for run in entry["runs"]:
            if run["diverged"]:
                diverged = traces["diverged (no held-out figure)"]
                assert f"seed {run['seed']} diverged" in list(diverged.customdata)
                continue
            seed = traces[f"seed {run['seed']}"]
            assert values(seed.y)[list(seed.x).index(entry["choice"])] == pytest.approx(run["held_out_bits_per_char"])
    drawn = sum(len(_finite(values(t.y))) for name, t in traces.items() if name.startswith("seed "))
    assert drawn == sum(not r["diverged"] for e in comp["entries"] for r in e["runs"])

    base = shipped["baselines_bits"]
    lined = figs.bits_by_choice(arrays.choices, arrays.seeds, arrays.bits, arrays.diverged, "", base["unigram"],
                                base["bigram"], 0.3)
    assert sorted(shape.y0 for shape in lined.layout.shapes) == pytest.approx(
        sorted([base["unigram"], base["bigram"], base["bigram"] - 0.3]))

    labels, diffs, lows, highs, margins, verdicts = figs.difference_rows(comp)
    drawn = figs.differences(labels, diffs, lows, highs, margins, verdicts)
    measured = [e for e in comp["entries"] if e["against"] is not None]
    for entry in measured:
        row = labels.index(f"{entry['choice']} vs {entry['against']}")
        assert diffs[row] == pytest.approx(entry["difference"]) and verdicts[row] == entry["verdict"]
        trace = next(t for t in drawn.data if t.name == (entry["verdict"] or "no verdict (measured nothing)"))
        assert f"{entry['choice']} vs {entry['against']}" in list(trace.y)

    cost = figs.cost_against_bits(arrays.choices, arrays.cost, arrays.bits, arrays.cost_axis)
    assert list(values(cost.data[0].x)) == [e[comp["cost_axis"]] for e in comp["entries"]]

    curves = figs.training_curves(arrays.choices, arrays.curves)
    runs = [(e, r) for e in comp["entries"] for r in e["runs"]]
    assert len(curves.data) == len(runs)
    for trace, (entry, run) in zip(curves.data, runs):
        assert trace.name.startswith(f"{entry['choice']}, seed {run['seed']}")
        assert ("diverged" in trace.name) == run["diverged"]
        expected = np.array([np.nan if p[1] is None else p[1] for p in run["curve"]], dtype=float)
        np.testing.assert_allclose(values(trace.y), expected, equal_nan=True)
        assert list(values(trace.x)) == [p[0] for p in run["curve"]]


def test_length_figure_shows_every_seed_at_every_length(shipped):
    comp = comparison(shipped, "positions")
    arrays = figs.comparison_arrays(comp)
    fig = figs.bits_by_length(arrays.choices, arrays.multiples, arrays.by_length, comp["recipe"]["context"])
    for i, entry in enumerate(comp["entries"]):
        seeds_trace = fig.data[2 * i + 1]
        expected = [run.get("held_out_bits_per_char_by_length", {}).get(f"{m}x") if not run["diverged"] else None
                    for run in entry["runs"] for m in arrays.multiples]
        np.testing.assert_allclose(values(seeds_trace.y)[:len(expected)],
                                   np.array([np.nan if v is None else v for v in expected], dtype=float),
                                   equal_nan=True)
    learned = comp["entries"][[e["choice"] for e in comp["entries"]].index("learned")]
    assert all(r["held_out_bits_per_char_by_length"]["4x"] is None for r in learned["runs"])  # cannot read that far


def test_readme_table_is_the_one_the_json_renders(shipped):
    text = README.read_text(encoding="utf-8")
    assert readme_block(shipped) in text, "README out of date: run `python -m scripts.tournament --readme`"
    assert "python -m scripts.tournament" in text


# --- the verdicts read the numbers ----------------------------------------------------------------------


def _run(seed, bits, diverged=False):
    return {"seed": seed, "steps": 10, "tokens": 100, "held_out_bits_per_char": None if diverged else bits,
            "diverged": diverged, "curve": [[0, 5.0]], "held_out_bits_per_char_by_length": {}}


def _entry(choice, bits, **extra):
    return {"choice": choice, "runs": [_run(i, b, b is None) for i, b in enumerate(bits)], **extra}


def test_diverged_runs_are_kept_counted_and_drawn():
    comp = {"key": "qk-norm", "lengths": [1], "cost_axis": "parameters", "entries": [
        _entry("off", [2.8, 2.81, 2.82], against=None, lr=3e-3), _entry("QK-norm", [2.8, 2.81, 2.82], against="off"),
        _entry("off, 10x lr", [None, None, 3.0], against="off", lr=3e-2),
        _entry("QK-norm, 10x lr", [2.9, 2.91, 2.92], against="off, 10x lr", predicted={"1x": ["better"]})]}
    from transformer.training.tournament.judgement import judge_comparison

    judge_comparison(comp, bigram=3.517)
    high = comp["entries"][3]
    assert high["pairs"] == 1 and high["verdict"] == "undecided"  # one seed pair left: no interval
    assert comp["claim_status"] == "undecided"  # the high rate did break the baseline: the claim is in reach
    arrays = figs.comparison_arrays(comp)
    fig = figs.bits_by_choice(arrays.choices, arrays.seeds, arrays.bits, arrays.diverged)
    crosses = next(t for t in fig.data if t.name.startswith("diverged"))
    assert list(crosses.x) == ["off, 10x lr", "off, 10x lr"] and list(crosses.text) == ["diverged", "diverged"]


def test_divergence_is_a_loss_that_is_not_finite_or_blows_up_for_good():
    falling = [8 - 0.01 * i for i in range(100)]
    assert diverged_at(falling) is None and spikes(falling) == []
    assert diverged_at(falling[:50] + [float("nan")] * 5) == 50
    assert diverged_at(falling[:50] + [9.0] * 50) == 50  # back above the lowest by more than a bit, to the end
    spike = falling[:50] + [9.0] * 10 + falling[50:]  # up and back down: a spike, not divergence
    assert diverged_at(spike) is None and spikes(spike) == [50]


# --- the script, end to end at a tiny budget -------------------------------------------------------------


def test_a_tiny_tournament_writes_the_new_shape_resumes_and_the_page_reads_it(tmp_path, monkeypatch):
    """Seconds: the NoPE comparison of the next recipe (untied, its lengths read as prefixes of the same windows)."""
    out = tmp_path / "tournament.json"
    command = [sys.executable, "-m", "scripts.tournament", "--tiny", "--comparison", "nope", "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    data = load(out)
    assert data["format"] == FORMAT and data["recipe"]["tie_embeddings"] is False and data["hardware"]
    nope = comparison(data, "nope")
    assert nope["complete"] and nope["rule"]["seeds"] == MIN_SEEDS and set(nope["baselines_bits"]) == {"unigram",
                                                                                                        "bigram"}
    assert nope["claim"]["source"] and not nope["claim"]["lecture"]
    for entry in nope["entries"]:
        seeds = sorted(r["seed"] for r in entry["runs"])
        assert seeds[:MIN_SEEDS] == [0, 1, 2] and len(seeds) <= MAX_SEEDS
        assert {(r["steps"], r["tokens"]) for r in entry["runs"]} == {(TINY.steps, TINY.tokens)}
        assert entry["parameters"] > 0 and not entry["config"]["tie_embeddings"]
        assert set(entry["runs"][0]["held_out_bits_per_char_by_length"]) == {"1x", "2x", "4x"}
    noped = nope["entries"][1]
    assert noped["against"] == "RoPE everywhere" and set(noped["longer"]) == {"2x", "4x"}
    assert "difference" in noped and "interval" in noped and "verdict" in noped
    assert not nope["seeds_wanted"]  # undecided entries got their extra seeds, up to the most allowed
    assert comparison(data, "kv-heads")["verdict"].startswith("Not measured")  # labelled, not faked
    first = out.read_text()
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode == 0 and "held-out" not in again.stdout  # every run was already there
    assert json.loads(first)["comparisons"] == json.loads(out.read_text())["comparisons"]

    at = _page(monkeypatch, tmp_path, trade_comparison="nope")
    assert_clean(at)
    assert at.radio(key="trade_comparison").options == ["NoPE every 4th"]  # the one comparison that finished
    assert any("Still running" in i.value and "KV heads" in i.value for i in at.info)
    text = " ".join(m.value for m in at.markdown)
    assert nope["verdict"] in text and "The lecture says" not in text


def test_the_runner_gives_an_undecided_entry_more_seeds_up_to_five(tmp_path, monkeypatch):
    """The runner's scheduling alone: a stand-in for training returns the sinks entry's bits with seeds that keep
    disagreeing, so its verdict stays undecided; it and its reference get seeds 3 and 4, then stop."""
    import scripts.tournament as script

    spread = {0: 0.0, 1: 0.1, 2: -0.1, 3: 0.12, 4: -0.12}

    def stand_in(cfg, recipe, seed, **settings):
        bits = 1.0 + (spread[seed] if cfg.sinks else 0.0)
        return {"seed": seed, "steps": recipe.steps, "tokens": recipe.tokens, "held_out_bits_per_char": bits,
                "diverged": False, "curve": [[0, bits]], "processor_seconds": 0.01}

    monkeypatch.setattr(script, "train_run", stand_in)
    data = script.run(TINY, ["sinks"], [0, 1, 2], tmp_path / "t.json", 1, log=lambda line: None)
    sinks = comparison(data, "sinks")
    assert [sorted(r["seed"] for r in e["runs"]) for e in sinks["entries"]] == [[0, 1, 2, 3, 4]] * 2
    assert sinks["entries"][1]["verdict"] == "undecided" and sinks["seeds_wanted"] == {}
    assert sinks["claim_status"] == "undecided"
    decided = script.run(TINY, ["sinks"], [0, 1, 2], tmp_path / "u.json", 1, log=lambda line: None,
                         more_seeds=False)
    assert all(len(e["runs"]) == 3 for e in comparison(decided, "sinks")["entries"])


def test_prefix_windows_make_the_shorter_reads_part_of_the_longer():
    from transformer import Transformer
    from transformer.training.tournament.run import base_config, by_length_prefixes, window_bits
    from transformer.training import language

    model = Transformer(base_config(TINY), device="cpu").eval()
    read = by_length_prefixes(model, TINY, (1, 2, 4))
    windows = language.held_out_windows(4 * TINY.context, TINY.eval_windows // 4, TINY.corpus)
    assert read["1x"] == pytest.approx(window_bits(model, windows[:, :TINY.context + 2]), abs=1e-4)
    assert read["4x"] == pytest.approx(window_bits(model, windows), abs=1e-4)


# --- the page -------------------------------------------------------------------------------------------


def _page(monkeypatch, directory=None, **query) -> AppTest:
    if directory is not None:
        monkeypatch.setenv("ATTENTION_LAB_MEASUREMENTS", str(directory))
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page("pages/tradeoffs.py").run()
    return at


def test_page_shows_each_comparison_claim_verdict_rule_and_figures(monkeypatch, shipped):
    at = _page(monkeypatch)
    assert_clean(at)
    assert any("seed by seed" in m.value and "95% t-interval" in m.value for m in at.markdown)  # the rule in words
    for comp in shipped["comparisons"]:
        at.radio(key="trade_comparison").set_value(comp["key"]).run()
        assert_clean(at)  # a contradicted claim is a finding, shown as a warning
        text = " ".join(m.value for m in at.markdown)
        assert comp["claim"]["quote"] in text and comp["verdict"] in text and comp["cannot_test"] in text
        said = next(m.value for m in at.markdown if comp["claim"]["quote"] in m.value
                    and m.value.startswith(("**The lecture says**", "**The claim**")))
        assert said.startswith("**The lecture says**") == comp["claim"]["lecture"]
        assert len(at.get("plotly_chart")) == 4 + (len(comp["lengths"]) > 1) + (comp["measure"] is not None)
        if comp["claim_status"] == "disagrees":
            assert any("They disagree" in w.value for w in at.warning)
        if comp["claim_status"] == "not tested at this size":
            assert any(comp["claim_why"] in i.value for i in at.info)
        if comp["caveat"]:
            assert any(comp["caveat"] in w.value for w in at.warning)
        table = at.dataframe[0].value
        assert list(table["parameters"]) == [e["parameters"] for e in comp["entries"]]
        assert list(table["verdict"]) == [e["verdict"] or "no verdict" for e in comp["entries"]]
        assert [g.startswith("exempt") for g in table["learning gate"]] == [e["stress"] for e in comp["entries"]]
        if len(comp["lengths"]) > 1:
            assert any("Every length reads the same windows" in c.value for c in at.caption)
        if comp["recipe"] != shipped["recipe"]:
            assert any("This comparison's recipe" in c.value for c in at.caption)
    # the every-comparison table is markdown: each claim and verdict whole
    every = next(m.value for m in at.markdown if m.value.startswith("| comparison | the claim |"))
    assert all(c["verdict"] in every for c in shipped["comparisons"])
    assert any("What this size cannot test" in m.value and "thousands" in m.value for m in at.markdown)


def test_page_names_the_file_and_the_command_when_the_json_is_missing_old_or_corrupt(monkeypatch, tmp_path, shipped):
    at = _page(monkeypatch, tmp_path)
    assert not at.exception
    assert any("tournament.json is missing" in e.value and "python -m scripts.tournament" in e.value for e in at.error)
    (tmp_path / "tournament.json").write_text("{not json")
    at = _page(monkeypatch, tmp_path)
    assert not at.exception
    assert any("cannot be read" in e.value and str(tmp_path) in e.value and "python -m scripts.tournament" in e.value
               for e in at.error)
    older = copy.deepcopy(shipped)
    del older["format"]  # the earlier shape had none
    (tmp_path / "tournament.json").write_text(json.dumps(older))
    at = _page(monkeypatch, tmp_path)
    assert not at.exception
    assert any("older shape" in e.value and str(tmp_path / "tournament.json") in e.value and REWRITE in e.value
               for e in at.error)
    (tmp_path / "tournament.json").write_text(json.dumps({"format": FORMAT, "recipe": {}, "hardware": "x",
                                                          "comparisons": [{}]}))
    at = _page(monkeypatch, tmp_path)
    assert not at.exception and any("not a tournament file" in e.value for e in at.error)


def test_a_partly_finished_tournament_shows_what_finished_and_names_what_runs(monkeypatch, tmp_path, shipped):
    data = copy.deepcopy(shipped)
    comparison(data, "ffn")["entries"][2]["runs"] = comparison(data, "ffn")["entries"][2]["runs"][:1]
    (tmp_path / "tournament.json").write_text(json.dumps(finish(data)))
    at = _page(monkeypatch, tmp_path)
    assert_clean(at)
    offered = at.radio(key="trade_comparison").options  # their labels
    assert "FFN" not in offered and "KV heads" in offered
    assert any("Still running" in i.value and "FFN (1 of 3 seeds" in i.value for i in at.info)


def test_page_shows_a_diverged_run_as_diverged(monkeypatch, tmp_path, shipped):
    data = copy.deepcopy(shipped)
    run = comparison(data, "norms")["entries"][3]["runs"][0]
    run.update(diverged=True, held_out_bits_per_char=None, diverged_at_step=7)
    (tmp_path / "tournament.json").write_text(json.dumps(finish(data)))
    at = _page(monkeypatch, tmp_path, trade_comparison="norms")
    assert not at.exception
    choice = comparison(data, "norms")["entries"][3]["choice"]
    assert any(f"{choice} (seed {run['seed']})" in w.value for w in at.warning)


# --- the Train page's new controls ----------------------------------------------------------------------

CELL = dict(preset="custom", arch="decoder", position="rope", norm="rmsnorm", norm_position="pre", ffn="swiglu",
            n_layers="2", d_model="64", n_heads="4", n_kv_heads="4", sliding_window="0")


def _train_page(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page("pages/train.py").run()
    return at


def test_train_page_refuses_a_warm_up_longer_than_the_run_and_a_rate_at_or_below_zero():
    at = _train_page()
    assert_clean(at)
    train = lambda: next(b for b in at.button if b.label == "Train")
    assert not train().disabled
    at.number_input(key="train_warmup").set_value(500).run()  # the run is 400 steps
    assert not at.exception
    assert any("longer than the run of 400 steps" in e.value for e in at.error) and train().disabled
    at.number_input(key="train_warmup").set_value(40).run()
    for bad in (0.0, -0.001):
        at.number_input(key="train_lr").set_value(bad).run()
        assert not at.exception
        assert any("must be greater than 0" in e.value for e in at.error) and train().disabled
    at.number_input(key="train_lr").set_value(0.003).run()
    assert_clean(at)
    at.number_input(key="train_warmup").set_value(40).run()
    at.number_input(key="train_steps").set_value(20).run()  # a warm-up at a tenth of the run follows its length
    assert at.number_input(key="train_warmup").value == 2 and not train().disabled
    at.number_input(key="train_warmup").set_value(30).run()  # one typed by hand stays, and is checked
    at.number_input(key="train_steps").set_value(100).run()
    assert at.number_input(key="train_warmup").value == 30
    assert_clean(at)


def test_a_live_run_of_a_tournament_cell_is_compared_with_its_seeds(shipped):
    at = _train_page(**CELL)
    assert_clean(at)
    assert any("cell of **Trade-offs, measured**" in i.value for i in at.info)
    for box in at.checkbox:  # the tournament's own text needs WordNet; the short run here reads the task's text
        box.uncheck()
    at.number_input(key="train_steps").set_value(10).run()
    at.number_input(key="train_warmup").set_value(1).run()
    next(b for b in at.button if b.label == "Train").click().run()
    assert_clean(at)
    said = [m.value for m in at.markdown if m.value.startswith("**Against the tournament**")]
    assert said and "The tournament trained this model" in said[0] and "not the same measurement" in said[0]
    assert "held-out" in said[0] and "At step 10 their training loss read" in said[0]
    assert "tie_embeddings True (the tournament's False)" in said[0]  # the sidebar ties; the tournament did not
