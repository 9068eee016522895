"""The Flash attention page: its figure builders draw the numbers they are given, its cached runs match the
explicit attention, and under Streamlit's AppTest every control works, stepping walks the tiles in the library's
order, bad input gets a message and measurements run in a fresh process."""
import base64
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from transformer import PRESETS, masks
from transformer.costs import full_attention_bytes, tiled_attention_bytes
from transformer.flash import tile_plan
from ui.figures import flash as ff
from ui.compute.flash_measure import MASKS, check_settings, live_qkv, measure_in_fresh_process, random_qkv, tiled_run
from ui.compute.model_cache import get_trace
from ui.compute.tokens import tokenize
from apptest_helpers import assert_clean

pytestmark = pytest.mark.slow

APP = str(Path(__file__).resolve().parent.parent / "app.py")
CODES = {state: code for state, (code, _, _) in ff.TILE_STATES.items()}
MASK_ARGS = {"none": dict(is_causal=False), "causal": dict(is_causal=True),
             "sliding window": dict(is_causal=True, window=5), "padding": dict(is_causal=False)}


def values(data) -> np.ndarray:
    """An array as a figure's JSON holds it: plain lists, or numpy's bytes in base64 ({"dtype", "bdata", "shape"})."""
    if isinstance(data, dict) and "bdata" in data:
        flat = np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"]))
        return flat.reshape([int(n) for n in str(data.get("shape", len(flat))).split(",")])
    return np.array([np.nan if x is None else x for x in np.ravel(data)], dtype=float).reshape(np.shape(data))


# --- figure builders --------------------------------------------------------------------------


@pytest.mark.parametrize("mask", [dict(is_causal=True), dict(is_causal=True, window=4), dict(is_causal=False)])
def test_tile_grid_colours_each_tile_by_its_state_and_draws_true_sizes(mask):
    tiles = tile_plan(10, 10, 3, 4, **mask)  # 10 is divisible by neither block size
    computed = [i for i, tile in enumerate(tiles) if not tile.skipped]
    for current in (computed[0], computed[len(computed) // 2], len(tiles) - 1):
        fig = ff.tile_grid(tiles, current)
        grid = np.asarray(fig.data[0].z)
        assert list(fig.data[0].x) == [0, 4, 8, 10] and list(fig.data[0].y) == [0, 3, 6, 9, 10]
        for step, tile in enumerate(tiles):
            expected = ("skipped" if tile.skipped else "current" if step == current else
                        "done" if step < current else "to do")
            assert grid[tile.q_block, tile.k_block] == CODES[expected], (step, expected)
            assert fig.data[0].text[tile.q_block][tile.k_block] == ("skip" if tile.skipped else str(step))
        outline = fig.layout.shapes[0]  # the step shown is outlined, skipped or not
        now = tiles[current]
        assert (outline.x0, outline.x1, outline.y0, outline.y1) == (now.k_start, now.k_stop, now.q_start, now.q_stop)
    assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text


def test_tile_grid_crosses_exactly_the_masked_pairs_inside_computed_tiles():
    t = 9
    positions = torch.arange(t)
    allowed = masks.self_attention(positions, positions, is_causal=True, window=3)[0, 0].numpy()  # (T, T)
    tiles = tile_plan(t, t, 4, 4, is_causal=True, window=3)
    fig = ff.tile_grid(tiles, 0, allowed)
    crosses = next(trace for trace in fig.data if trace.name == "masked pair in a computed tile")
    drawn = {(int(q - 0.5), int(k - 0.5)) for q, k in zip(crosses.y, crosses.x)}
    expected = {(q, k) for tile in tiles if not tile.skipped
                for q in range(tile.q_start, tile.q_stop) for k in range(tile.k_start, tile.k_stop) if not allowed[q, k]}
    assert drawn == expected and expected  # e.g. the upper triangle of each diagonal tile
    assert all(allowed[q, k] == 0 for q, k in drawn)


def test_tile_matrices_draw_scores_with_masked_cells_blank_and_the_probabilities():
    scores = np.array([[0.5, np.finfo(np.float32).min], [1.5, -0.25]], dtype=np.float32)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    fig = ff.tile_matrices(scores, probs, (6, 8), (2, 4))
    drawn_scores, drawn_probs = np.asarray(fig.data[0].z, dtype=float), np.asarray(fig.data[1].z, dtype=float)
    assert np.isnan(drawn_scores[0, 1]) and drawn_scores[1, 0] == 1.5 and drawn_scores[1, 1] == -0.25
    np.testing.assert_allclose(drawn_probs, probs)
    assert list(fig.data[0].y) == [6, 7] and list(fig.data[0].x) == [2, 3]  # absolute positions


def test_running_stats_draw_before_and_after_with_minus_infinity_as_a_gap():
    rows = np.array([4, 5, 6])
    m_before, m_after = np.array([-np.inf, 0.5, 1.0]), np.array([0.2, 0.9, 1.0])
    l_before, l_after = np.array([0.0, 1.5, 2.0]), np.array([1.0, 2.1, 3.0])
    fig = ff.running_stats(rows, m_before, m_after, l_before, l_after)
    bars = {(trace.name, trace.xaxis): np.asarray(trace.y, dtype=float) for trace in fig.data}
    assert np.isnan(bars["before this tile", "x"][0]) and bars["before this tile", "x"][1] == 0.5
    np.testing.assert_allclose(bars["after this tile", "x"], m_after)
    np.testing.assert_allclose(bars["before this tile", "x2"], l_before)
    np.testing.assert_allclose(bars["after this tile", "x2"], l_after)
    assert all(list(trace.x) == [4, 5, 6] for trace in fig.data)


def test_rescale_figure_draws_the_factors_and_the_partial_output():
    m_before, m_after = np.array([0.3, 1.0]), np.array([1.3, 1.0])
    rescale = np.exp(m_before - m_after)
    out = np.arange(6, dtype=float).reshape(2, 3) - 2
    fig = ff.rescale_and_output(np.array([10, 11]), rescale, out)
    np.testing.assert_allclose(fig.data[0].y, [math.exp(-1.0), 1.0])
    np.testing.assert_allclose(fig.data[1].z, out)
    assert fig.data[1].zmin == -3 and fig.data[1].zmax == 3  # a symmetric scale around 0


def test_result_comparison_draws_both_outputs_and_their_difference():
    rng = np.random.default_rng(0)
    tiled, explicit = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    fig = ff.result_comparison(tiled, explicit)
    np.testing.assert_allclose(fig.data[0].z, tiled)
    np.testing.assert_allclose(fig.data[1].z, explicit)
    np.testing.assert_allclose(fig.data[2].z, tiled - explicit)
    assert fig.layout.coloraxis2.cmax == pytest.approx(np.abs(tiled - explicit).max())


def test_memory_formula_is_quadratic_for_the_full_matrix_and_linear_for_tiles():
    lengths = 2 ** np.arange(9, 15)
    full = np.array([full_attention_bytes(1, 32, int(n), 2) for n in lengths])
    tiled = np.array([tiled_attention_bytes(1, 32, int(n), 128, 128, 128) for n in lengths])
    fig = ff.memory_formula(lengths, full, tiled)
    drawn_full, drawn_tiled = (np.asarray(trace.y, dtype=float) for trace in fig.data)
    np.testing.assert_array_equal(drawn_full, full)
    assert drawn_full[1] == 2 * 32 * 1024 ** 2 * 2  # 128 MiB at T = 1024: scores and weights in fp16
    np.testing.assert_allclose(drawn_full[1:] / drawn_full[:-1], 4)  # doubling T: four times the bytes
    assert np.all(drawn_tiled[1:] / drawn_tiled[:-1] < 2.01)  # at most twice: linear plus a constant tile
    assert fig.layout.yaxis.type == "log" and fig.layout.xaxis.type == "log"
    ticks = dict(zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext))  # powers of 16 bytes, binary units
    assert ticks[2 ** 20] == "1 MiB" and ticks[2 ** 28] == "256 MiB" and ticks[2 ** 36] == "64 GiB"


def test_measured_curves_convert_units_and_draw_the_formula_dashed():
    rows = [{"T": t, "method": m, "value": v} for t, m, v in
            [(256, "explicit", 4 * 2 ** 20), (512, "explicit", 12 * 2 ** 20), (256, "tiled", 2 ** 20), (512, "tiled", 0)]]
    fig = ff.measured_curves(rows, "MiB", formula={"explicit": [2 ** 21, 2 ** 23]}, log_y=False)
    lines = {trace.name: trace for trace in fig.data}
    np.testing.assert_allclose(lines[ff.METHOD_STYLE["explicit"][2]].y, [4, 12])
    np.testing.assert_allclose(lines[ff.METHOD_STYLE["tiled"][2]].y, [1, 0])  # a measured 0 stays visible
    np.testing.assert_allclose(lines["explicit: formula"].y, [2, 8])
    assert lines["explicit: formula"].line.dash == "dash"
    timing = ff.measured_curves([{"T": 256, "method": "sdpa", "value": 0.0025}], "ms")
    assert timing.data[0].y == (2.5,) and timing.layout.yaxis.type == "log"


# --- cached computations ---------------------------------------------------------------------------


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("block_q,block_k", [(4, 4), (5, 3), (13, 1)])
def test_tiled_run_matches_the_explicit_attention_and_records_every_tile(mask, block_q, block_k):
    t = 13
    q, k, v = random_qkv(t, 1)
    run = tiled_run(q, k, v, 0.25 if mask == "none" else None, block_q, block_k, mask, 5, 3)
    assert run["max_abs_diff"] < 1e-5
    np.testing.assert_allclose(run["out"], run["reference"], atol=1e-5)
    args = MASK_ARGS[mask]
    assert run["tiles"] == tile_plan(t, t, block_q, block_k, **args)
    assert [(s["q_rows"], s["k_cols"], s["skipped"]) for s in run["steps"]] == \
           [((x.q_start, x.q_stop), (x.k_start, x.k_stop), x.skipped) for x in run["tiles"]]
    last_of_block = {}
    for step in run["steps"]:
        if not step["skipped"]:
            seen = np.isfinite(step["m_before"])
            np.testing.assert_allclose(step["rescale"][seen], np.exp(step["m_before"] - step["m_after"])[seen], rtol=1e-6)
        last_of_block[step["q_block"]] = step
    for step in last_of_block.values():  # each block's last partial output is its final output
        q0, q1 = step["q_rows"]
        np.testing.assert_allclose(step["out_so_far"], run["out"][q0:q1], atol=1e-6)
    if mask == "padding":  # the last 3 keys are masked for every query, inside the tiles
        assert not run["allowed"][:, -3:].any() and run["allowed"][:, :-3].all()


@pytest.mark.parametrize("preset,head", [("llama2", 3), ("bloom", 2)])  # RoPE with GQA; ALiBi
def test_live_qkv_are_the_heads_the_model_itself_attends_with(preset, head):
    """Under the model's own causal mask the page's tiled output equals the model's recorded hook_z for that head."""
    config_json = json.dumps(PRESETS[preset].to_dict(), sort_keys=True)
    tokens = tokenize("flash attention in tiles", PRESETS[preset].vocab_size)
    q, k, v, slope = live_qkv(config_json, 0, tuple(tokens.ids), tuple(tokens.labels), 1, head)
    assert (slope is not None) == (preset == "bloom")
    run = tiled_run(q, k, v, slope, 5, 3, "causal", 1, 1)
    z = get_trace(config_json, 0, tuple(tokens.ids), tuple(tokens.labels)).arrays["blocks.1.attn.hook_z"][0, head]
    np.testing.assert_allclose(run["out"], z, atol=1e-5)


@pytest.mark.parametrize("settings,numbers", [
    (dict(block_q=0), ["block_q=0", "1 to 16"]),
    (dict(block_k=17), ["block_k=17", "T=16"]),
    (dict(mask="sliding window", window=0), ["W=0", "at least 1"]),
    (dict(mask="padding", n_pad=16), ["16 padding", "1 to 15"]),
    (dict(t=1), ["T=1", "2 and 64"]),
    (dict(t=65), ["T=65", "2 and 64"]),
])
def test_bad_settings_name_their_numbers_and_the_fix(settings, numbers):
    args = dict(t=16, block_q=4, block_k=4, mask="causal", window=3, n_pad=2) | settings
    with pytest.raises(ValueError) as error:
        check_settings(**args)
    assert all(text in str(error.value) for text in numbers), str(error.value)


def test_a_failing_measurement_reports_the_reason():
    with pytest.raises(ValueError, match="kind='speed'"):
        measure_in_fresh_process("speed", (256,), 128)
    with pytest.raises(RuntimeError, match="block_q=0"):  # the child's own error, from tiled_attention
        measure_in_fresh_process("time", (256,), 0)


# --- the page under AppTest ------------------------------------------------------------------------


def open_page(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    # GPT-2's axes with three layers: no shipped checkpoint has that size, so the weights are the
    # seeded random ones a test can rebuild, and any text is valid input
    query = {"preset": "gpt2", "n_layers": 3, **query}
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.switch_page("pages/flash.py").run()
    assert_clean(at)
    return at




def charts(at: AppTest) -> dict[str, dict]:
    """Chart title -> figure JSON."""
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    return {spec["layout"]["title"]["text"]: spec for spec in specs}


def tile_chart(at: AppTest) -> dict:
    return next(spec for title, spec in charts(at).items() if title.startswith("Tile ("))


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def assert_grid_matches_plan(at: AppTest, t: int, block_q: int, block_k: int, **mask) -> None:
    grid = values(tile_chart(at)["data"][0]["z"])
    plan = tile_plan(t, t, block_q, block_k, **mask)
    for tile in plan:
        assert (grid[tile.q_block, tile.k_block] == CODES["skipped"]) == tile.skipped, tile
    assert metric(at, "Tiles skipped by the mask") == str(sum(tile.skipped for tile in plan))


def test_default_view_steps_through_tiles_and_ends_at_the_explicit_result():
    at = open_page()
    assert metric(at, "Step") == "0 of 15"  # T = 32 in blocks of 8: 4 x 4 tiles
    assert float(metric(at, "max |tiled − explicit|")) < 1e-5
    for title, spec in charts(at).items():  # every chart names its axes
        layout = spec["layout"]
        assert layout["xaxis"]["title"]["text"] and layout["yaxis"]["title"]["text"], title
    assert_grid_matches_plan(at, 32, 8, 8, is_causal=True)

    at.number_input(key="flash_T").set_value(12).run()
    at.number_input(key="flash_bq").set_value(4).run()
    at.number_input(key="flash_bk").set_value(4).run()
    plan = tile_plan(12, 12, 4, 4, is_causal=True)
    for step in range(1, len(plan)):  # to the end with "Next"
        at.button(key="flash_next").click().run()
        assert_clean(at)
        assert at.slider(key="flash_step").value == step
        tile = plan[step]
        grid = values(tile_chart(at)["data"][0]["z"])
        assert grid[tile.q_block, tile.k_block] == CODES["skipped" if tile.skipped else "current"]
        outline = tile_chart(at)["layout"]["shapes"][0]
        assert (outline["x0"], outline["y0"]) == (tile.k_start, tile.q_start)
        assert any("is skipped" in info.value for info in at.info) == tile.skipped
    assert at.button(key="flash_next").disabled and not at.button(key="flash_prev").disabled
    for step in (len(plan) - 2, len(plan) - 3):
        at.button(key="flash_prev").click().run()
        assert at.slider(key="flash_step").value == step
    at.slider(key="flash_step").set_value(0).run()
    assert at.button(key="flash_prev").disabled
    assert at.query_params["flash_step"] == "0" and at.query_params["flash_bq"] == "4"  # the link reproduces the view


def test_every_mask_with_blocks_that_do_and_do_not_divide_t():
    at = open_page(flash_T=12, flash_bq=4, flash_bk=4, flash_step=99)
    assert at.slider(key="flash_step").value == 8  # a step past the end clamps to the last tile
    for mask in MASKS:
        at.selectbox(key="flash_mask").set_value(mask).run()
        if mask == "sliding window":
            at.number_input(key="flash_w").set_value(5).run()
        if mask == "padding":
            at.number_input(key="flash_pad").set_value(3).run()
        for block_q, block_k in [(4, 4), (5, 3), (12, 1)]:
            at.number_input(key="flash_bq").set_value(block_q).run()
            at.number_input(key="flash_bk").set_value(block_k).run()
            assert_clean(at)
            assert float(metric(at, "max |tiled − explicit|")) < 1e-5, (mask, block_q, block_k)
            assert_grid_matches_plan(at, 12, block_q, block_k, **MASK_ARGS[mask])
            n_tiles = math.ceil(12 / block_q) * math.ceil(12 / block_k)
            assert metric(at, "Step").endswith(f"of {n_tiles - 1}")
        crosses = [trace for trace in tile_chart(at)["data"] if trace.get("name") == "masked pair in a computed tile"]
        assert (len(values(crosses[0]["x"])) > 0) == (mask != "none")


def test_bad_input_gets_a_message_and_the_page_keeps_working():
    at = open_page(flash_T=16)
    for key, bad, fix, text in [("flash_bq", 0, 4, "block_q=0"), ("flash_bk", 40, 4, "block_k=40 is larger than T=16"),
                                ("flash_T", 1, 16, "T=1"), ("flash_T", 500, 16, "T=500")]:
        at.number_input(key=key).set_value(bad).run()
        assert_clean(at, errors_allowed=True)
        assert any(text in e.value for e in at.error), [e.value for e in at.error]
        assert any(title.endswith("bytes held beyond q, k, v and the output") for title in charts(at))
        at.number_input(key=key).set_value(fix).run()
        assert_clean(at)
    at.selectbox(key="flash_mask").set_value("sliding window").run()
    at.number_input(key="flash_w").set_value(0).run()
    assert any("W=0" in e.value for e in at.error)
    at.number_input(key="flash_w").set_value(2).run()
    at.selectbox(key="flash_mask").set_value("padding").run()
    at.number_input(key="flash_pad").set_value(16).run()
    assert any("16 padding tokens" in e.value for e in at.error)
    at.number_input(key="flash_pad").set_value(15).run()
    assert_clean(at)
    assert float(metric(at, "max |tiled − explicit|")) < 1e-5  # one real key: every query attends to it alone


@pytest.mark.parametrize("preset", ["llama2", "bloom", "original"])  # RoPE; ALiBi; an encoder-decoder
def test_live_model_source_uses_the_chosen_layer_and_head(preset):
    at = open_page(preset=preset, flash_src="live", flash_bq=5, flash_bk=3)
    at.sidebar.text_area(key="text").set_value("flash attention in tiles").run()
    at.selectbox(key="flash_layer").set_value(1).run()
    at.selectbox(key="flash_head").set_value(2).run()
    assert_clean(at)
    note = next(c.value for c in at.caption if "layer 1, head 2" in c.value)
    t = int(note.split("-token input")[0].rsplit(" ", 1)[-1])  # the text's length in the model's own tokens
    assert float(metric(at, "max |tiled − explicit|")) < 1e-5
    assert metric(at, "Step").endswith(f"of {math.ceil(t / 5) * math.ceil(t / 3) - 1}")
    at.sidebar.text_area(key="text").set_value("").run()  # nothing to run the model on: random q, k, v instead
    assert_clean(at)
    assert "Showing random q, k, v instead" in at.warning[0].value
    assert float(metric(at, "max |tiled − explicit|")) < 1e-5


def test_measurements_run_in_a_fresh_process_and_show_their_numbers():
    at = open_page()
    at.select_slider(key="flash_mem_max").set_value(512).run()
    at.button(key="flash_mem_max_go").click().run()
    assert_clean(at)
    memory = next(spec for title, spec in charts(at).items() if title.startswith("Peak memory on"))
    peak = {trace["name"]: values(trace["y"]) for trace in memory["data"]}
    explicit, tiled = peak[ff.METHOD_STYLE["explicit"][2]], peak[ff.METHOD_STYLE["tiled"][2]]
    scores_and_weights = full_attention_bytes(1, 4, 512, 4) / ff.MIB  # 8 MiB at T = 512
    assert explicit[-1] >= 0.9 * scores_and_weights and tiled[-1] < explicit[-1] / 2
    at.select_slider(key="flash_time_max").set_value(512).run()
    at.button(key="flash_time_max_go").click().run()
    assert_clean(at)
    timing = next(spec for title, spec in charts(at).items() if title.startswith("Time per call"))
    assert len(timing["data"]) == 3 and all((values(trace["y"]) > 0).all() for trace in timing["data"])
    at.button(key="flash_next").click().run()  # both results stay shown on later reruns
    assert sum(title.startswith(("Peak memory on", "Time per call")) for title in charts(at)) == 2
