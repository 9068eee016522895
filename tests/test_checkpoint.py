"""Checkpoints: exact round trips (tied weights, encoder-decoder, MoE), a clear error for every broken file,
and the shipped checkpoints, which must load and still do their task."""
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from scripts import train_checkpoints
from transformer import AXES, MODEL_CARDS, PRESETS, Transformer
from transformer.checkpoint import (SHIPPED_DIR, CheckpointError, find_checkpoint, load, read_meta, same_model, save,
                                    shipped, trained_tokens)
from transformer.checkpoint_format import checkpoint_paths
from transformer.training.task_measures import head_scores, random_router_specialisation, routing_specialisation
from transformer.training.tasks import TASKS
from transformer.training.train import config_for, trained_length

SMALL = dict(vocab_size=30, d_model=32, n_heads=4, n_layers=2, max_len=32)


def small_model(preset: str, seed: int = 0, **changes) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(PRESETS[preset].replace(**{**SMALL, **changes}), device="cpu").eval()


def logits(model, ids):
    return model(ids, ids) if model.cfg.arch == "encoder-decoder" else model(ids)


@pytest.fixture
def saved(tmp_path):
    """saved(preset) -> (model, path) of a small model written to tmp_path."""
    def write(preset="gpt2", **changes):
        model = small_model(preset, **changes)
        save(model, tmp_path / preset, {"task": "demo", "accuracy": 0.5})
        return model, tmp_path / preset
    return write


@pytest.mark.parametrize("preset", ["gpt2", "llama2", "original", "mixtral", "bert"])
def test_round_trip_gives_identical_logits(saved, preset):
    model, path = saved(preset)
    loaded, meta = load(path, device="cpu")
    ids = torch.randint(0, SMALL["vocab_size"], (2, 9), generator=torch.Generator().manual_seed(1))
    assert torch.equal(logits(model, ids), logits(loaded, ids))
    assert loaded.cfg == model.cfg
    assert meta["task"] == "demo" and meta["accuracy"] == 0.5 and meta["format_version"] == 1


def test_tied_weights_are_stored_once_and_tied_again_on_load(saved):
    model, path = saved("gpt2")
    stored = load_file(str(path) + ".safetensors")
    assert "embed.weight" in stored and "unembed.weight" not in stored
    loaded, meta = load(path)
    assert meta["shared"] == {"unembed.weight": "embed.weight"}
    assert loaded.unembed.weight is loaded.embed.weight  # one tensor, as in the model that was saved
    untied, untied_path = saved("llama2")
    assert "unembed.weight" in load_file(str(untied_path) + ".safetensors")


def test_path_may_carry_either_extension(saved):
    model, path = saved("gpt2")
    for variant in (str(path) + ".json", str(path) + ".safetensors"):
        assert load(variant)[0].cfg == model.cfg


def test_missing_files_name_the_file(saved, tmp_path):
    with pytest.raises(CheckpointError, match="nowhere.json: no such checkpoint file"):
        load(tmp_path / "nowhere")
    _, path = saved("gpt2")
    (tmp_path / "gpt2.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"gpt2\.safetensors: no such file"):
        load(path)


def test_truncated_and_corrupt_weights_say_so(saved, tmp_path):
    _, path = saved("gpt2")
    weights = tmp_path / "gpt2.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"gpt2\.safetensors: cannot be read as safetensors.*truncated or corrupt"):
        load(path)
    weights.write_bytes(b"\x00\xff" * 64)
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load(path)


def test_json_that_is_not_json_names_the_file(saved, tmp_path):
    _, path = saved("gpt2")
    (tmp_path / "gpt2.json").write_text("{ not json")
    with pytest.raises(CheckpointError, match=r"gpt2\.json: not valid JSON"):
        load(path)


@pytest.mark.parametrize("edit, message", [
    (lambda doc: {**doc, "config": {**doc["config"], "d_model": 30}},
     r"gpt2\.json: its config is not valid: d_model=30 is not divisible by n_heads=4"),
    (lambda doc: {**doc, "config": {**doc["config"], "colour": "red"}}, "unknown config fields"),
    (lambda doc: {**doc, "format_version": 99}, "format_version 99"),
    (lambda doc: [1, 2], "not an Attention Lab checkpoint"),
    (lambda doc: {**doc, "config": {**doc["config"], "d_model": 64}},
     r"weights do not fit the config in gpt2\.json: .*k_proj\.weight is \(32, 32\), the config needs \(64, 64\)"
     r".* more with other shapes"),
    (lambda doc: {**doc, "config": {**doc["config"], "n_layers": 3}}, r"missing blocks\.2\."),
    (lambda doc: {**doc, "config": {**doc["config"], "n_layers": 1}}, r"unexpected blocks\.1\."),
], ids=["invalid config", "unknown field", "format version", "not a checkpoint", "weights do not fit",
        "weights missing", "weights unexpected"])
def test_a_json_that_does_not_describe_the_weights_says_why(saved, tmp_path, edit, message):
    _, path = saved("gpt2")
    meta_file = tmp_path / "gpt2.json"
    meta_file.write_text(json.dumps(edit(json.loads(meta_file.read_text()))))
    with pytest.raises(CheckpointError, match=message):
        load(path)


def test_checkpoint_error_is_a_value_error_and_meta_keys_are_checked(tmp_path):
    assert issubclass(CheckpointError, ValueError)
    with pytest.raises(ValueError, match="reserved"):
        save(small_model("gpt2"), tmp_path / "x", {"config": {}})


def test_a_broken_index_names_itself(tmp_path):
    with pytest.raises(CheckpointError, match=r"index\.json: no such file"):
        shipped(tmp_path)
    (tmp_path / "index.json").write_text(json.dumps({"checkpoints": [{"name": "x"}]}))
    with pytest.raises(CheckpointError, match=r"index\.json: an entry lacks 'preset'"):
        shipped(tmp_path)


# --- the shipped checkpoints ------------------------------------------------------------

SHIPPED = shipped()
FRESH_SEED = 2024  # training draws batches from its own seed; this batch is new to the model


def test_every_preset_family_has_a_shipped_checkpoint():
    # every sidebar preset, and cards opened at classroom size from Home (T5 reverses words)
    assert set(PRESETS) <= {entry.preset for entry in SHIPPED} <= set(MODEL_CARDS)
    tasks = {(entry.preset, entry.task) for entry in SHIPPED}
    assert {("original", "reverse"), ("bert", "mirror"), ("mixtral", "mixed"), ("t5", "reverse")} <= tasks
    assert sum(task == "induction" for _, task in tasks) >= 3
    for entry in SHIPPED:
        assert MODEL_CARDS[entry.preset].config.arch in TASKS[entry.task].archs  # language trains decoders and BERT


# the lowest share of a head's attention that goes where the task's solution looks (uniform attention
# over a sort input gives about 0.1: the sort models point, if less sharply than the others)
PATTERN_FLOOR = {"induction": 0.5, "reverse": 0.8, "copy": 0.8, "sort": 0.3, "mirror": 0.5}


SYNTHETIC = [entry for entry in SHIPPED if entry.task != "language"]  # language: tests/test_language_checkpoints.py


@pytest.mark.parametrize("entry", SYNTHETIC, ids=[entry.name for entry in SYNTHETIC])
def test_shipped_checkpoint_loads_and_does_its_task(entry):
    model, meta = load(entry.path, device="cpu")
    task = TASKS[meta["task"]]
    batch = task.sample(128, seed=FRESH_SEED)
    with torch.no_grad():
        assert task.accuracy(model(*batch.model_args()), batch) >= 0.95
    if entry.task == "mixed":  # digits and letters go to different experts, further apart than random routers set them
        chance = random_router_specialisation(model.cfg, task, batch)
        assert routing_specialisation(model, task, batch) > max(chance)
        torch.manual_seed(len(chance))  # a random router the control did not include fails the same test
        assert routing_specialisation(Transformer(model.cfg, device="cpu").eval(), task, batch) <= max(chance)
        return
    scores = head_scores(model, task, batch)
    solution = scores["solution"]  # (L, H)
    assert solution.max() >= PATTERN_FLOOR[entry.task]
    if entry.task == "induction":
        induction_layer = int(solution.max(dim=1).values.argmax())
        assert induction_layer >= 1
        assert scores["previous_token"][:induction_layer].max() >= 0.5  # a previous-token head below it


def test_find_checkpoint_matches_a_preset_and_nothing_else():
    for entry in SHIPPED:
        classroom = MODEL_CARDS[entry.preset].config  # a preset's, or a card's opened from Home
        found = find_checkpoint(classroom, task=entry.task)
        assert found == entry.path
        _, cfg = read_meta(found)
        assert cfg.replace(vocab_size=128, max_len=classroom.max_len) == classroom
    for preset in {entry.preset for entry in SHIPPED}:  # what a page opens: the index's first file of the preset
        assert find_checkpoint(MODEL_CARDS[preset].config) == next(e.path for e in SHIPPED if e.preset == preset), preset
    assert find_checkpoint(PRESETS["llama2"].replace(position="alibi")) is None
    assert find_checkpoint(PRESETS["llama2"], task="mixed") is None


def test_every_recipe_builds_the_config_its_shipped_file_holds():
    """The recipes read their sizes from the presets' cards: each builds exactly the config of the file it shipped
    (vocabulary and length included), with nothing retrained, and only a variant changes its preset or its tokens.
    A recipe not yet trained is named in NOT_YET_SHIPPED and ships no file."""
    names = [recipe.name for recipe in train_checkpoints.RECIPES]
    assert set(train_checkpoints.NOT_YET_SHIPPED) <= set(names)
    for recipe in train_checkpoints.RECIPES:
        learned = AXES["tokens"].row(recipe.tokens).learned
        assert bool(recipe.changes or learned) == bool(recipe.variant), recipe.name
        if recipe.name in train_checkpoints.NOT_YET_SHIPPED:
            assert not checkpoint_paths(SHIPPED_DIR / recipe.name)[1].exists(), f"{recipe.name} ships: unlist it"
            continue
        _, trained = read_meta(SHIPPED_DIR / recipe.name)
        built = config_for(recipe.preset, train_checkpoints.recipe_task(recipe), **recipe.changes)
        assert built == trained, recipe.name


def test_same_model_sets_aside_only_what_a_task_sizes():
    llama = PRESETS["llama2"]
    assert same_model(llama.replace(vocab_size=99, max_len=17), llama)
    assert not same_model(llama.replace(n_kv_heads=1), llama)


def test_a_checkpoint_that_records_no_length_is_measured_by_its_task(tmp_path):
    save(small_model("original"), tmp_path / "copy", {"task": "copy"})  # as the Train page saves one
    meta, _ = read_meta(tmp_path / "copy")
    assert trained_tokens(meta) is None  # the file says nothing
    assert trained_length(meta) == TASKS["copy"].max_tokens
    assert trained_length({**meta, "trained_tokens": 9}) == 9


def test_load_reads_every_checkpoint_file_in_assets():
    """One loader for every kind: each JSON under assets/ (the index, measurements and tokenizers aside) loads with
    its weights, whatever it holds."""
    from pathlib import Path

    found = sorted(p for p in (Path(__file__).resolve().parents[1] / "assets").rglob("*.json")
                   if p.name != "index.json" and not {"measurements", "tokenizers"} & set(p.parent.parts))
    assert len(found) >= 20
    for path in found:
        model, meta = load(path)
        assert meta["config"] == model.cfg.to_dict() and not model.training, path.name


def test_everything_shipped_in_assets_stays_under_60_mb():
    assets = Path(__file__).resolve().parent.parent / "assets"
    total = sum(f.stat().st_size for f in assets.rglob("*") if f.is_file())
    assert 0 < total < 60e6, f"assets/ holds {total / 1e6:.1f} MB"


def test_weights_stored_in_bfloat16_load_into_the_configs_dtype_at_half_the_size(tmp_path, tiny_model):
    model = tiny_model()
    full, _ = save(model, tmp_path / "full")
    half, _ = save(model, tmp_path / "half", store_as=torch.bfloat16)
    assert half.stat().st_size < 0.6 * full.stat().st_size
    loaded, _ = load(tmp_path / "half", device="cpu")
    assert all(p.dtype == torch.float32 for p in loaded.parameters())
    for (name, ours), (_, theirs) in zip(model.state_dict().items(), loaded.state_dict().items()):
        torch.testing.assert_close(theirs, ours.to(torch.bfloat16).float(), msg=name)


def test_every_checkpoint_stored_in_bfloat16_records_that_its_measure_barely_moved():
    """Halving a file is allowed only where its own measure stays: held-out bits per character or accuracy move by
    at most 0.005. The JSON records both numbers, and its weights are bfloat16."""
    halved = [p for p in sorted(SHIPPED_DIR.glob("*.json")) if p.name != "index.json"
              and json.loads(p.read_text()).get("storage", {}).get("dtype") == "bfloat16"]
    assert len(halved) >= 20
    for path in halved:
        storage = json.loads(path.read_text())["storage"]
        if "accuracy_stored" in storage:
            assert abs(storage["accuracy_stored"] - storage["accuracy_float32"]) <= 0.005, path.name
        else:
            assert abs(storage["held_out_bits_per_char_stored"] - storage["held_out_bits_per_char_float32"]) <= 0.005
        weights = load_file(checkpoint_paths(path)[0])
        assert {t.dtype for t in weights.values() if t.is_floating_point()} == {torch.bfloat16}, path.name


def test_a_task_model_is_halved_only_where_its_accuracy_stays(monkeypatch):
    model, _ = load(SHIPPED_DIR / "original-copy", device="cpu")
    storage, store_as = train_checkpoints.halved_accuracy(model, TASKS["copy"])
    assert store_as is torch.bfloat16 and storage["accuracy_stored"] >= 0.99
    # a model whose answers change when rounded: 0.01 of accuracy lost is more than the 0.005 allowed
    monkeypatch.setattr(train_checkpoints, "evaluate", lambda measured, task: 1.0 if measured is model else 0.99)
    storage, store_as = train_checkpoints.halved_accuracy(model, TASKS["copy"])
    assert store_as is None and storage["accuracy_float32"] - storage["accuracy_stored"] == pytest.approx(0.01)
