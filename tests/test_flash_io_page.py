"""The Flash page's memory hierarchy: its figures draw the bytes they are given, the cached counts are the running
code's and equal the closed forms, and under AppTest the section shows them, names what each loop order keeps in
SRAM, gives the versions, and answers bad input (a tile larger than SRAM, T < 1) with a message."""
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from transformer.flash_io import explicit_bytes, fa1_bytes, fa2_bytes
from transformer.hbm import SRAM_BYTES_A100, tile_sram_bytes
from ui.compute.flash_measure import check_io_settings, hbm_counts
from ui.figures.flash import MIB
from ui.figures.flash_io import hbm_traffic, sram_budget
from apptest_helpers import assert_clean
from test_flash_page import values

APP = str(Path(__file__).resolve().parent.parent / "app.py")


# --- figures, without a server ---------------------------------------------------------------------


def test_hbm_traffic_stacks_each_matrix_under_its_method_and_direction():
    counts = {"explicit": {"reads": {"Q": 2 * MIB, "S": 8 * MIB}, "writes": {"S": 8 * MIB, "O": MIB}},
              "FA2 order": {"reads": {"Q": 2 * MIB, "K": 4 * MIB}, "writes": {"O": MIB}}}
    fig = hbm_traffic(counts, "traffic")
    bars = {bar.name: values(bar.y) for bar in fig.data}
    assert list(bars) == ["Q", "K", "S", "O"]  # the counter's matrices, in the page's fixed order
    # x: (explicit read, explicit written, FA2 read, FA2 written)
    np.testing.assert_allclose(bars["S"], [8, 8, 0, 0])
    np.testing.assert_allclose(bars["Q"], [2, 0, 2, 0])
    np.testing.assert_allclose(bars["O"], [0, 1, 0, 1])
    assert list(fig.data[0].x[0]) == ["explicit", "explicit", "FA2 order", "FA2 order"]
    notes = [a.text for a in fig.layout.annotations]
    assert "19.00 MiB in all" in notes and "7.00 MiB in all" in notes
    assert fig.layout.barmode == "stack" and fig.layout.yaxis.title.text == "MiB moved"


def test_sram_budget_draws_each_part_against_the_sram_line():
    parts = tile_sram_bytes(128, 64, 64, 2)
    fig = sram_budget(parts, SRAM_BYTES_A100, "budget")
    assert [bar.name for bar in fig.data] == list(parts)
    assert sum(float(values(bar.x)[0]) for bar in fig.data) == pytest.approx(sum(parts.values()) / 1024)
    assert fig.layout.shapes[0].x0 == SRAM_BYTES_A100 / 1024 == 192


# --- the cached counts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("t, d_head, block_q, block_k, element_bytes", [(96, 32, 32, 16, 2), (50, 16, 16, 16, 4)])
def test_cached_counts_are_the_closed_forms_and_the_outputs_agree(t, d_head, block_q, block_k, element_bytes):
    result = hbm_counts(t, d_head, block_q, block_k, element_bytes, SRAM_BYTES_A100)
    expected = {"explicit": explicit_bytes(t, t, d_head, element_bytes),
                "FA1 order": fa1_bytes(t, t, d_head, block_q, block_k, element_bytes),
                "FA2 order": fa2_bytes(t, t, d_head, block_q, block_k, element_bytes)}
    for method, counted in result["counts"].items():
        assert {way: sum(counted[way].values()) for way in ("reads", "writes")} == expected[method] == \
            result["closed"][method]
    assert max(result["max_diff"].values()) < 1e-5


@pytest.mark.parametrize("settings, words", [
    ((0, 64, 64, 64, 2, SRAM_BYTES_A100), "T=0 tokens"),
    ((8192, 64, 64, 64, 2, SRAM_BYTES_A100), "T=8192 tokens"),
    ((1024, 64, 256, 256, 2, SRAM_BYTES_A100), "need 428,032 bytes of SRAM"),
    ((4096, 64, 16, 16, 2, SRAM_BYTES_A100), "65,536 tiles"),
    ((64, 0, 8, 8, 2, SRAM_BYTES_A100), "d_head=0"),
])
def test_bad_io_settings_name_their_numbers(settings, words):
    with pytest.raises(ValueError, match=words):
        check_io_settings(*settings)


# --- the page under AppTest ---------------------------------------------------------------------------


def open_page(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)  # the first run imports and draws the whole page
    query = {"preset": "gpt2", "n_layers": 2, **query}
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.switch_page("pages/flash.py").run()
    assert_clean(at)
    return at


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def chart_titles(at: AppTest) -> list[str]:
    return [json.loads(chart.proto.spec)["layout"]["title"]["text"] for chart in at.get("plotly_chart")]


def test_the_section_shows_the_counted_bytes_what_each_order_keeps_and_the_versions():
    at = open_page(flash_io_T=256, flash_io_bq=64, flash_io_bk=64)
    titles = chart_titles(at)
    assert "Bytes moved to and from HBM at T = 256, d_head = 64 (one head)" in titles
    assert "What one tile step holds in SRAM: tiles of 64 × 64" in titles
    expected = {"explicit": explicit_bytes(256, 256, 64, 2), "FA2 order": fa2_bytes(256, 256, 64, 64, 64, 2),
                "FA1 order": fa1_bytes(256, 256, 64, 64, 64, 2)}
    for method, moved in expected.items():
        assert metric(at, f"{method}: bytes moved") == f"{sum(moved.values()) / MIB:,.2f} MiB"
    table = at.dataframe[-1].value
    assert (table["read (counted)"] == table["read (closed form)"]).all()
    assert (table["written (counted)"] == table["written (closed form)"]).all()
    kept = dict(zip(table["version"], table["keeps in SRAM across its inner loop"]))
    assert kept["FA2 order"].startswith("Q_i, the output accumulator") and kept["FA1 order"].startswith("K_j and V_j")
    text = " ".join(m.value for m in at.markdown)
    for words in ("FlashAttention 1** (Dao et al., 2022)", "FlashAttention 2** (Dao, 2023)",
                  "FlashAttention 3** (Shah et al., 2024)", "warps specialised", "FP8",
                  '"2-4x faster on A100 due to far fewer HBM reads/writes"'):
        assert words in text

    at.selectbox(key="flash_io_bytes").set_value(4).run()  # fp32 doubles every matrix but not m and l
    assert_clean(at)
    assert metric(at, "FA2 order: bytes moved") == f"{2 * sum(expected['FA2 order'].values()) / MIB:,.2f} MiB"
    assert at.query_params["flash_io_bytes"] == "4"


def test_a_tile_larger_than_sram_and_t_below_one_get_messages_and_the_page_keeps_working():
    at = open_page(flash_io_T=256, flash_io_bq=64, flash_io_bk=64)
    at.number_input(key="flash_io_bq").set_value(512).run()
    assert_clean(at, errors_allowed=True)
    needed = sum(tile_sram_bytes(512, 64, 64, 2).values())
    assert any(f"need {needed:,} bytes of SRAM" in e.value and "196,608 bytes" in e.value for e in at.error)
    assert any(t.endswith("bytes held beyond q, k, v and the output") for t in chart_titles(at))  # the rest is drawn
    at.number_input(key="flash_io_sram").set_value(1024).run()  # a larger SRAM fits the same tile
    assert_clean(at)
    at.number_input(key="flash_io_T").set_value(0).run()
    assert_clean(at, errors_allowed=True)
    assert any("T=0 tokens" in e.value for e in at.error)
    at.number_input(key="flash_io_T").set_value(256).run()
    assert_clean(at)
    assert metric(at, "explicit ÷ FA2 order").endswith("×")


def test_the_traffic_lesson_answer_is_the_ratio_of_the_closed_forms():
    from ui.lessons.steps import STEPS, memory
    assert STEPS[STEPS.index(memory.flash) + 1] is memory.flash_traffic  # right after the tiles
    live = memory.flash_traffic.build()
    explicit = sum(explicit_bytes(4096, 4096, 64, 2).values())
    tiled = sum(fa2_bytes(4096, 4096, 64, 128, 128, 2).values())
    assert live.choices[live.answer] == "About 4×" and 3.8 < explicit / tiled < 4.1
    assert f"{explicit / tiled:.2f}× more" in live.why and "32 MiB each" in live.why
    assert memory.flash_traffic.link(live).startswith("flash?flash_io_T=4096")
