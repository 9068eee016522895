"""The chapter "What changed since 2023" asks about trained models: each step's answer is what the shipped
checkpoints did (their JSON, and the measurements taken on them), recomputed here from those files."""
import json
from pathlib import Path

import numpy as np

from transformer import MODEL_CARDS, PRESETS
from transformer.costs import kv_cache_bytes_per_token
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


def test_the_latent_answer_is_the_librarys_count_of_mla_against_mqa_and_mha():
    live = modern.latent.build()
    real = MODEL_CARDS["deepseek-v3"].real["671B"]
    mla = kv_cache_bytes_per_token(real, 1) / real.n_layers
    plain = real.replace(kv_rank=None, q_rank=None)
    mqa = kv_cache_bytes_per_token(plain.replace(n_kv_heads=1), 1) / real.n_layers
    mha = kv_cache_bytes_per_token(plain, 1) / real.n_layers
    assert (mla, mqa, mha) == (512 + 64, 192 + 128, 128 * (192 + 128))  # a value is 128 wide, a key 192
    assert 1.5 < mla / mqa < 2  # about twice MQA's, not as small
    assert live.choices[live.answer] == "about 2× MQA's"
    assert "40,960" in live.why and "49,152" not in live.why
    # the classroom DeepSeek-V3 also differs in its experts: the step says the figure cannot blame the latent
    points = {name: (figures["bits_per_char"], cfg) for name, figures, cfg in modern._trained_decoders()
              if cfg.index_top_k is None}  # DeepSeek-V3.2's indexer model is the indexer step's
    (latent_name,) = [name for name, (_, cfg) in points.items() if cfg.kv_rank is not None]
    latent_cfg = points[latent_name][1]
    assert latent_cfg.row("ffn").routed and "tiny experts" in live.why
    cached = round(kv_cache_bytes_per_token(latent_cfg) / 2 / latent_cfg.n_layers)
    assert cached == latent_cfg.kv_rank + latent_cfg.d_rope
    figure = live.figure.to_dict()["data"][0]
    assert dict(zip(figure["text"], figure["x"]))[latent_name] == cached


def test_the_qk_norm_answer_is_the_measured_ratio_of_the_largest_scores():
    live = modern.qk_norm.build()
    rows = measured()["score_sizes"]
    plain = max(max(r["score_max"]) for r in rows if r["qk_norm"] == "none")
    normed = max(max(r["score_max"]) for r in rows if r["qk_norm"] != "none")
    ratio = plain / normed
    assert live.answer == int(np.argmin([abs(o - ratio) for o in (1.0, 2.0, 4.0, 10.0)]))
    assert {r["model"] for r in rows if r["qk_norm"] != "none"} >= {"qwen3-language", "gemma3-language"}
    assert all(max(r["score_max"]) > 10 * r["random_init"]["score_max"] for r in rows if r["qk_norm"] == "none")


def test_the_sinks_answer_is_how_the_trained_gpt_oss_heads_share_their_weight():
    live = modern.sinks.build()
    row = measured()["sinks"][0]
    assert row["preset"] == "gpt-oss"
    shares = np.array(row["sink_share"]).ravel()
    few, most = (shares > 0.9).sum(), (shares < 0.05).sum()
    assert 0 < few <= shares.size // 4 and most > shares.size // 2
    assert live.choices[live.answer] == "A few heads give it nearly everything; most give it almost nothing"
    assert f"{few} heads give more than 90%" in live.why and f"{most} of {shares.size}" in live.why
    # shares are shares, one per layer and head; random init's sink (logit 0) is one extra key of score 0
    assert np.array(row["sink_share"]).shape == (len(row["layer_windows"]), PRESETS["gpt-oss"].n_heads)
    assert 0 < np.min(row["random_init"]["sink_share"]) and np.max(row["sink_share"]) < 1


def test_each_sink_pattern_is_recognised():
    assert modern.sink_pattern(np.full(16, 0.02))[0] == 0
    assert modern.sink_pattern(np.array([0.99, 0.98] + [0.01] * 14))[0] == 1
    assert modern.sink_pattern(np.full(16, 0.5))[0] == 2
    assert modern.sink_pattern(np.full(16, 0.95))[0] == 3
    assert modern.sink_pattern(np.linspace(0.1, 0.8, 16))[0] == 4  # no pattern: "none of these"


def test_the_rope_scaling_answer_is_the_worst_reader_and_the_close_ones_are_called_a_tie():
    live = modern.rope_scaling.build()
    model = next(m for m in measured()["rope_scaling"] if m["model"].startswith("llama2"))
    rows = [r for r in model["rows"] if r["scaling"] == "none" or r["factor"] == 4.0]
    bits = [r["bits_per_char"]["4x"] for r in rows]
    assert live.answer == int(np.argmax(bits)) and rows[live.answer]["scaling"] == "linear"
    best = min(bits)
    tied = [r for r, b in zip(rows, bits) if b - best < modern.BITS_TIE]
    assert len(tied) > 1 and "a tie at this resolution" in live.why  # dynamic NTK, YaRN and LLaMA 3 within 0.1
    assert all(f"{r['bits_per_char']['4x']:.2f}" in live.why for r in tied)
