"""The views of the attention of 2024-2026: figure builders (numpy in, plotly out) and the measurements they draw."""
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from transformer import TransformerConfig
from transformer.analysis import qk_norm_entropy, rope_wavelengths
from ui.figures import modern

MEASURED = Path(__file__).resolve().parent.parent / "assets" / "measurements" / "modern-variants.json"


def test_the_plan_strip_draws_each_layers_row_of_the_plan():
    cfg = TransformerConfig(n_layers=8, layer_pattern="3:1", sliding_window=4, nope_layers="every 4")
    fig = modern.plan_strip(modern.plan_cells(cfg.layer_plan(), "RoPE", rotating=True), rotating=True)
    keys, positions = (next(bar for bar in fig.data if bar.name == facet) for facet in ("keys", "positions"))
    assert list(keys.text) == ["local 4"] * 3 + ["global"] + ["local 4"] * 3 + ["global"]
    assert list(keys.marker.color) == ([modern.LOCAL] * 3 + [modern.GLOBAL]) * 2
    assert list(positions.text) == ["RoPE", "RoPE", "RoPE", "NoPE"] * 2  # Llama 4's every fourth layer
    assert len(set(positions.marker.color)) == 2
    assert set(next(bar for bar in fig.data if bar.name == "K/V from").text) == {"own"}
    llama4 = TransformerConfig(n_layers=4, attention_chunk=8, chunked_layers="rope", nope_layers="every 4")
    cells = modern.plan_cells(llama4.layer_plan(), "RoPE", rotating=True)
    assert [c["keys"] for c in cells] == ["chunk 8"] * 3 + ["global"]  # the NoPE layer sees every key
    gemma4 = TransformerConfig(n_layers=4, kv_shared_layers="last 1")  # the last layer reads layer 2's K and V
    assert [c["K/V from"] for c in modern.plan_cells(gemma4.layer_plan(), "RoPE", rotating=True)] == [
        "own", "own", "own", "layer 2"]
    indexed = TransformerConfig(n_layers=2, index_top_k=16, index_heads=2, index_head_dim=16)  # DeepSeek-V3.2's
    assert [c["keys"] for c in modern.plan_cells(indexed.layer_plan(), "RoPE", rotating=True)] == ["top-16"] * 2
    alibi = modern.plan_cells(TransformerConfig(position="alibi").layer_plan(), "ALiBi", rotating=False)
    assert [cell["positions"] for cell in alibi] == ["ALiBi", "ALiBi"]  # a bias on every layer's scores


def test_the_plan_strip_says_each_layers_rope_base_and_whether_its_ffn_routes():
    gemma3 = TransformerConfig(n_layers=4, layer_pattern="alternate", sliding_window=4, rope_theta=1e6,
                               rope_local_theta=1e4)
    cells = modern.plan_cells(gemma3.layer_plan(), "RoPE", rotating=True, dense_ffn="SwiGLU")
    assert [c["positions"] for c in cells] == ["RoPE 10,000", "RoPE 1,000,000"] * 2  # local layers turn slower
    assert [c["FFN"] for c in cells] == ["SwiGLU"] * 4
    maverick = TransformerConfig(n_layers=4, ffn="moe", n_experts=4, top_k=1, moe_layers="every 2",
                                 nope_layers="1", kv_shared_layers="last 1")
    fig = modern.plan_strip(modern.plan_cells(maverick.layer_plan(), "RoPE", rotating=True, dense_ffn="SwiGLU"),
                            rotating=True)
    bars = {bar.name: list(bar.text) for bar in fig.data}
    assert list(bars) == list(modern.PLAN_FACETS)  # one row per facet, none left out
    assert bars["FFN"] == ["SwiGLU", "experts", "SwiGLU", "experts"]  # dense and routed layers alternate
    assert bars["positions"] == ["RoPE", "NoPE", "RoPE", "RoPE"]  # one base: no number to tell layers apart
    assert bars["K/V from"] == ["own", "own", "own", "layer 2"]


def test_rope_wavelengths_under_each_scaling_follow_its_rule():
    cfg = TransformerConfig(head_dim=32)
    waves = rope_wavelengths(cfg, factor=4.0, original=512)
    plain = waves["none"]
    torch.testing.assert_close(waves["linear"], plain * 4)  # every wavelength stretched
    assert waves["yarn"][0] == plain[0] and torch.isclose(waves["yarn"][-1], plain[-1] * 4)  # fast kept, slow stretched
    assert waves["llama3"][0] == plain[0] and torch.isclose(waves["llama3"][-1], plain[-1] * 4)
    assert waves["dynamic"][0] == plain[0] and (waves["dynamic"][1:] > plain[1:]).all()  # a larger base
    fig = modern.rope_wavelengths({k: v.numpy() for k, v in waves.items()}, 512)
    assert [t.name for t in fig.data] == list(waves)
    np.testing.assert_allclose(fig.data[1].y, waves["linear"].numpy())
    assert fig.layout.yaxis.type == "log" and fig.layout.xaxis.title.text


def test_qk_norm_keeps_softmax_entropy_whatever_the_scale_of_q_and_k():
    scales = [1.0, 2.0, 4.0, 8.0]
    entropy = qk_norm_entropy(64, scales)
    plain, normed = entropy["without QK-norm"], entropy["with QK-norm"]
    assert (plain[1:] < plain[:-1]).all() and plain[-1] < 0.5  # softmax collapses onto one key
    torch.testing.assert_close(normed, torch.full_like(normed, float(normed[0])))
    assert normed[0] > 0.8 * math.log2(64)
    fig = modern.entropy_by_scale(np.array(scales), {k: v.numpy() for k, v in entropy.items()}, math.log2(64))
    np.testing.assert_allclose(fig.data[0].y, plain.numpy())


def test_softcap_curve_keeps_every_score_inside_the_cap():
    raw = np.linspace(-40, 40, 81)
    fig = modern.softcap_curve(raw, 5.0)
    capped = fig.data[2].y
    assert np.abs(capped).max() < 5.0 and np.allclose(capped, 5 * np.tanh(raw / 5))


def test_sink_share_heatmap_has_one_row_per_head():
    share = np.random.default_rng(0).uniform(0, 1, (4, 7))
    fig = modern.sink_share(share, list("abcdefg"))
    np.testing.assert_allclose(fig.data[0].z, share)
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0.0, 1.0)


def test_kv_cache_by_context_is_in_gib():
    fig = modern.kv_cache_by_context([4096, 131072], {"a": [2 ** 30, 2 ** 32]})
    assert list(fig.data[0].y) == [1.0, 4.0] and fig.layout.xaxis.type == "log"


def test_the_shipped_measurements_are_what_the_figures_draw():
    measured = json.loads(MEASURED.read_text())
    assert measured["rope_scaling"], "no trained RoPE checkpoint was measured"
    for model in measured["rope_scaling"]:
        rows = model["rows"]
        assert {r["scaling"] for r in rows} == {"none", "linear", "dynamic", "yarn", "llama3"}
        fig = modern.scaling_length_test(rows)
        for trace, row in zip(fig.data, rows):
            assert list(trace.y) == list(row["bits_per_char"].values())
        plain = next(r for r in rows if r["scaling"] == "none")["bits_per_char"]
        for row in rows:  # dynamic NTK changes nothing inside the trained context: the same model exactly
            if row["scaling"] == "dynamic":
                assert round(abs(row["bits_per_char"]["1x"] - plain["1x"]), 3) <= 0.001  # one unit of the JSON's rounding
    spare = measured["spare_weight"]
    assert spare and all(len(r["first_position"]) >= 1 for r in spare)
    fig = modern.spare_weight(spare)
    assert list(fig.data[0].y) == [max(map(max, r["first_position"])) for r in spare]
    assert list(fig.data[1].y) == [r["random_init"]["first_position_max"] for r in spare]


def test_the_readme_quotes_the_measured_numbers():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    measured = json.loads(MEASURED.read_text())
    llama2 = next(m for m in measured["rope_scaling"] if m["model"] == "llama2-language")["rows"]
    at_4x = {(r["scaling"], r["factor"]): r["bits_per_char"]["4x"] for r in llama2}
    assert (f"LLaMA 2 at 4×: {at_4x[('none', 1.0)]:.2f} bits plain, {at_4x[('llama3', 4.0)]:.2f} with LLaMA 3 ×4, "
            f"{at_4x[('yarn', 4.0)]:.2f} with YaRN ×4") in readme
    spare = measured["spare_weight"]
    first = max(max(map(max, r["first_position"])) for r in spare)
    spaces = max(max(map(max, r["spaces"])) for r in spare)
    controls = (max(r["random_init"]["first_position_max"] for r in spare),
                max(r["random_init"]["spaces_max"] for r in spare))
    assert (f"first token up to {first:.2f}, spaces up to {spaces:.2f}) beside random-init weights "
            f"({controls[0]:.2f}, {controls[1]:.2f})") in readme
