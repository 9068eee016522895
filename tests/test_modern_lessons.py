"""The chapter "What changed since 2023" asks about trained models: each step's answer is what the shipped
checkpoints did (their JSON, and the measurements taken on them), recomputed here from those files."""
import json
from pathlib import Path

import numpy as np

from transformer import PRESETS
from transformer.checkpoint import find_checkpoint, read_meta
from ui.lessons.steps import modern

MEASURED = Path(__file__).resolve().parent.parent / "assets" / "measurements" / "modern-variants.json"


def measured() -> dict:
    return json.loads(MEASURED.read_text())


def test_the_local_global_answer_is_the_layer_of_gemma3s_best_induction_head():
    live = modern.local_global.build()
    row = next(r for r in measured()["layer_roles"] if r["preset"] == "gemma3")
    best = int(np.argmax(row["induction"]))
    assert live.choices[live.answer].startswith(f"layer {best} ")
    assert row["induction"][best] > 10 * row["random_init"]["induction"][best]  # a head that copies, not chance
    meta, _ = read_meta(find_checkpoint(PRESETS["gemma3"], "language"))
    assert meta["figures"]["induction_head"]["layer"] == best  # the checkpoint's own figure agrees
    if row["layer_windows"][best] is not None:  # copying kept local: the step says what the global layer copies
        top_global = max(v for v, w in zip(row["induction"], row["layer_windows"]) if w is None)
        assert f"copies {top_global:.2f}" in live.why


def test_the_latent_answer_compares_held_out_bits_with_the_other_trained_models():
    live = modern.latent.build()
    points = {name: (figures["bits_per_char"], cfg) for name, figures, cfg in modern._trained_decoders()}
    mla = [name for name, (_, cfg) in points.items() if cfg.kv_rank is not None]
    assert mla == ["deepseek-v3-language"]
    gap = points[mla[0]][0] - min(bits for name, (bits, _) in points.items() if name not in mla)
    expected = 0 if gap >= 0.3 else 1 if gap >= 0.05 else 2 if gap > -0.05 else 3
    assert live.answer == expected
    cfg = points[mla[0]][1]
    assert f"caches {cfg.kv_rank + cfg.d_rope} numbers" in live.question  # the latent and the shared RoPE key
    figure = live.figure.to_dict()["data"][0]
    assert dict(zip(figure["text"], figure["x"]))[mla[0]] == cfg.kv_rank + cfg.d_rope


def test_the_qk_norm_answer_is_the_measured_ratio_of_the_largest_scores():
    live = modern.qk_norm.build()
    rows = measured()["score_sizes"]
    plain = max(max(r["score_max"]) for r in rows if r["qk_norm"] == "none")
    normed = max(max(r["score_max"]) for r in rows if r["qk_norm"] != "none")
    ratio = plain / normed
    assert live.answer == int(np.argmin([abs(o - ratio) for o in (1.0, 2.0, 4.0, 10.0)]))
    assert {r["model"] for r in rows if r["qk_norm"] != "none"} >= {"qwen3-language", "gemma3-language"}
    assert all(max(r["score_max"]) > 10 * r["random_init"]["score_max"] for r in rows if r["qk_norm"] == "none")


def test_the_sinks_answer_is_the_trained_gpt_oss_sinks_mean_share():
    live = modern.sinks.build()
    row = measured()["sinks"][0]
    assert row["preset"] == "gpt-oss"
    share = float(np.mean(row["sink_share"]))
    options = [0.01, 0.1, 0.3, 0.6]
    assert live.answer == int(np.argmin([abs(o - share) for o in options]))
    # shares are shares, one per layer and head; random init's sink (logit 0) is one extra key of score 0
    assert np.array(row["sink_share"]).shape == (len(row["layer_windows"]), PRESETS["gpt-oss"].n_heads)
    assert 0 < np.min(row["random_init"]["sink_share"]) and np.max(row["sink_share"]) < 1
