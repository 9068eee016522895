"""The tournament's per-comparison recipes, what it reads of each run besides bits (recall, the indexer's kept mass),
files from several processes combined, and the page drawing all three. No timings are asserted."""
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from apptest_helpers import APP, assert_clean
from scripts.tournament import combine
from transformer import Transformer
from transformer.training.recall import PHRASE
from transformer.training.tournament.comparisons import COMPARISONS
from transformer.training.tournament.document import comparison, load, new_document, run_key
from transformer.training.tournament.measures import MEASURES, kept_mass, recall, recall_distances
from transformer.training.tournament.run import TINY, Recipe, base_config
from ui.figures import tradeoffs as figs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def test_each_comparison_has_one_recipe_for_all_its_entries_and_says_where_it_differs():
    shared = Recipe()
    doc = new_document(shared, "here", list(COMPARISONS))
    for comp in doc["comparisons"]:
        spec = COMPARISONS[comp["key"]]
        own = comp["recipe"]
        assert own["steps"] == shared.steps * spec.steps_factor and own["warmup"] == shared.warmup * spec.steps_factor
        assert {e["warmup_steps"] for e in comp["entries"] if e["warmup"]} <= {own["warmup"]}
        assert comp["measure"] == spec.measure and (spec.measure is None or spec.measure in MEASURES)
    positions = comparison(doc, "positions")
    assert positions["recipe"]["steps"] == 4 * shared.steps  # absolute positions stay on the bigram at 500 steps
    kinds = comparison(doc, "attention-kinds")
    assert kinds["recipe"]["repeat_rate"] == 0.25 and "25% of the rows repeat a span" in kinds["recipe"]["task"]
    assert comparison(doc, "kv-heads")["recipe"]["task"].count("no repeated spans") == 1
    # one comparison's baseline run serves another's only where the recipes are the same
    same = [(c, c["entries"][0]) for c in doc["comparisons"] if c["key"] in ("kv-heads", "sinks", "positions")]
    keys = {c["key"]: run_key(c, e, 0) for c, e in same}
    assert keys["kv-heads"] == keys["sinks"] and keys["kv-heads"] != keys["positions"]
    older = new_document(shared, "here", ["positions"], own_recipes=False)
    assert comparison(older, "positions")["recipe"]["steps"] == shared.steps


def test_recall_distances_reach_past_the_trained_length_and_fit_the_model():
    assert recall_distances(128, 513) == [32, 64, 100, 228, 480]
    assert recall_distances(128, 129) == [32, 64, 100]  # a model that cannot read past its crops
    for d in recall_distances(64, 257):
        assert d >= PHRASE + 2 and 1 + d + PHRASE <= 257


def test_recall_and_kept_mass_read_a_model_and_name_what_they_measured():
    torch.manual_seed(0)
    recipe = Recipe(context=64, corpus="python-docs")
    model = Transformer(base_config(recipe, n_layers=1, d_model=32), device="cpu").eval()
    found = recall(model, recipe)["recall"]
    assert found["distances"] == recall_distances(64, model.cfg.max_len)
    assert all(len(found[k]) == len(found["distances"]) for k in ("accuracy", "control_accuracy", "bits",
                                                                   "control_bits"))
    assert kept_mass(model, recipe) == {}  # no indexer: nothing to read
    indexed = Transformer(base_config(recipe, n_layers=2, d_model=32, index_top_k=16, index_heads=2,
                                      index_head_dim=16), device="cpu").eval()
    mass = kept_mass(indexed, recipe)["kept_mass"]
    assert mass["ks"] == [8, 16, 32] and mass["top_k"] == 16 and len(mass["layers"]) == 2
    for layer in mass["layers"]:
        for label in ("indexer", "random indexer", "most recent k"):
            assert all(0 <= v <= b + 1e-4 for v, b in zip(layer[label], layer["best k"]))  # nothing beats the best
        assert layer["best k"] == sorted(layer["best k"])  # more keys hold more


def _tiny(keys: list[str], out: Path) -> dict:
    command = [sys.executable, "-m", "scripts.tournament", "--tiny", "--no-extra-seeds", "--out", str(out)]
    for key in keys:
        command += ["--comparison", key]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=400,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return load(out)


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory) -> tuple[Path, dict, dict]:
    """Two processes' files, as two machines would make them: one trains the state-keeping comparison, the other
    the indexer's."""
    directory = tmp_path_factory.mktemp("tournaments")
    return directory, _tiny(["attention-kinds"], directory / "a.json"), _tiny(["indexer"], directory / "b.json")


def test_files_of_one_recipe_combine_into_one_and_other_recipes_are_refused(tiny_files):
    _, a, b = tiny_files
    both = combine([a, b])
    assert comparison(both, "attention-kinds")["entries"] == comparison(a, "attention-kinds")["entries"]
    assert comparison(both, "indexer")["entries"] == comparison(b, "indexer")["entries"]
    assert not comparison(both, "kv-heads")["entries"][0]["runs"]  # neither ran it
    assert combine([a, a])["comparisons"] == a["comparisons"]  # a seed already there is not added twice
    other = copy.deepcopy(b)
    other["recipe"]["steps"] += 1
    with pytest.raises(ValueError, match="different recipes"):
        combine([a, other])


def test_the_runs_carry_recall_and_kept_mass_and_the_figures_show_them(tiny_files):
    _, a, b = tiny_files
    kinds = comparison(a, "attention-kinds")
    choices, distances, saved = figs.recall_arrays(kinds)
    assert distances == recall_distances(TINY.context, kinds["entries"][0]["config"]["max_len"])
    first = kinds["entries"][0]["runs"][0]["measured"]["recall"]
    assert saved[0, 0] == pytest.approx(np.array(first["control_bits"]) - np.array(first["bits"]))
    fig = figs.recall_by_distance(choices, distances, saved, TINY.context, "t")
    means = [t for t in fig.data if t.mode == "lines+markers"]
    assert [t.name for t in means] == choices
    assert list(means[0].y) == pytest.approx(np.nanmean(saved[0], 0).tolist())

    indexer = comparison(b, "indexer")
    ks, top_k, kept = figs.kept_mass_arrays(indexer)
    runs = indexer["entries"][1]["runs"]
    assert top_k == indexer["entries"][1]["config"]["index_top_k"] and set(kept) == {
        "indexer", "random indexer", "most recent k", "best k"}
    layers = runs[0]["measured"]["kept_mass"]["layers"]
    assert kept["indexer"].shape == (len(runs), len(ks))
    assert kept["indexer"][0] == pytest.approx(np.mean([layer["indexer"] for layer in layers], axis=0))
    assert all(not r.get("measured") for r in indexer["entries"][0]["runs"])  # dense attention has no indexer


def test_the_page_draws_recall_kept_mass_and_each_comparisons_own_recipe(tiny_files, monkeypatch, tmp_path):
    _, a, b = tiny_files
    (tmp_path / "tournament.json").write_text(json.dumps(combine([a, b])))
    monkeypatch.setenv("ATTENTION_LAB_MEASUREMENTS", str(tmp_path))
    for key, chart in (("attention-kinds", "Recall of a phrase"), ("indexer", "What the kept keys hold")):
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["trade_comparison"] = key
        at.switch_page("pages/tradeoffs.py").run()
        assert_clean(at)
        titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
        assert any(chart in t for t in titles), titles
        captions = " ".join(c.value for c in at.caption)
        assert ("repeat a span" in captions) == (key == "attention-kinds")
        if key == "attention-kinds":  # six steps teach no copying: the page says recall was not tested
            _, _, saved = figs.recall_arrays(comparison(combine([a, b]), key))
            said = any("Recall not tested at this size" in i.value for i in at.info)
            assert said == (np.nanmax(np.abs(saved)) < figs.RECALL_LEARNED)
