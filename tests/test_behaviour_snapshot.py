"""The snapshot compare finds exactly the items that changed, says by how much or where, and fails on them."""
import json

import numpy as np

from scripts import behaviour_snapshot as snapshot

FIGURE = {"data": [{"type": "heatmap", "z": [[0.5, 0.25], [0.125, 1.0]]}], "layout": {"title": {"text": "head 0"}}}


def make_snapshot(root, logits, figure, config=None):
    """A tiny snapshot: one checkpoint's arrays, one lesson figure, one preset."""
    for part in ("checkpoints", "lessons", "presets"):
        (root / part).mkdir(parents=True)
    np.savez(root / "checkpoints" / "tiny.npz", input_ids=np.array([[0, 5, 7]]), logits=logits)
    (root / "lessons" / "01-step.figure.json").write_text(json.dumps(figure))
    (root / "presets" / "tiny.json").write_text(json.dumps(config or {"d_model": 16, "position": "rope"}))
    return root


def test_identical_snapshots_compare_identical(tmp_path, capsys):
    logits = np.linspace(-1, 1, 12, dtype=np.float32).reshape(1, 3, 4)
    a = make_snapshot(tmp_path / "a", logits, FIGURE)
    b = make_snapshot(tmp_path / "b", logits.copy(), json.loads(json.dumps(FIGURE)))
    outcomes = snapshot.compare(a, b)
    assert [(o.item, o.status) for o in outcomes] == [("checkpoints/tiny.npz", "identical"),
                                                      ("lessons/01-step.figure.json", "identical"),
                                                      ("presets/tiny.json", "identical")]
    assert snapshot.report(a, b) == 0
    assert "3 identical, 0 differs, 0 only in A, 0 only in B" in capsys.readouterr().out


def test_a_changed_array_and_a_changed_figure_are_the_only_differences(tmp_path, capsys):
    logits = np.linspace(-1, 1, 12, dtype=np.float32).reshape(1, 3, 4)
    changed_logits = logits.copy()
    changed_logits[0, 2, 1] += 0.25
    changed_figure = json.loads(json.dumps(FIGURE))
    changed_figure["data"][0]["z"][1][0] = 0.5
    a = make_snapshot(tmp_path / "a", logits, FIGURE)
    b = make_snapshot(tmp_path / "b", changed_logits, changed_figure)
    outcomes = {o.item: o for o in snapshot.compare(a, b)}
    assert {item: o.status for item, o in outcomes.items()} == {
        "checkpoints/tiny.npz": "differs", "lessons/01-step.figure.json": "differs", "presets/tiny.json": "identical"}
    assert outcomes["checkpoints/tiny.npz"].detail == "logits: max abs difference 0.25"  # input_ids are unchanged
    assert outcomes["lessons/01-step.figure.json"].detail == "first differing key data[0].z[1][0]: 0.125 vs 0.5"
    assert snapshot.report(a, b) == 1
    out = capsys.readouterr().out
    assert "differs    checkpoints/tiny.npz: logits: max abs difference 0.25" in out
    assert "1 identical, 2 differs, 0 only in A, 0 only in B" in out


def test_items_on_one_side_only_are_named_and_fail(tmp_path, capsys):
    logits = np.zeros((1, 3, 4), dtype=np.float32)
    a = make_snapshot(tmp_path / "a", logits, FIGURE)
    b = make_snapshot(tmp_path / "b", logits, FIGURE, config={"d_model": 16})
    (a / "lessons" / "01-step.figure.json").rename(a / "lessons" / "01-renamed.figure.json")
    outcomes = {o.item: (o.status, o.detail) for o in snapshot.compare(a, b)}
    assert outcomes["lessons/01-renamed.figure.json"] == ("only in A", "")
    assert outcomes["lessons/01-step.figure.json"] == ("only in B", "")
    assert outcomes["presets/tiny.json"] == ("differs", "first differing key position (only in A)")
    assert snapshot.report(a, b) == 1
    assert "only in A  lessons/01-renamed.figure.json" in capsys.readouterr().out
