"""The KV heads page's paged cache: the block pool and the reserved slots as plain figures, the batch parsed from the
reader's words, and the tab itself (AppTest) filling its table pass by pass, with bad input an error on the page."""
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from apptest_helpers import assert_clean, open_page, values
from transformer import PagedKVCache
from transformer.costs import reserved_tokens
from ui.compute.paging import parse_lengths, request_batch
from ui.figures.paging import block_pool, pool_owners, reserved_slots

TAB = "The cache in pages"


# --- figures, without a server --------------------------------------------------------------------------------------

def test_the_pool_shows_each_slot_s_owner_the_empty_slots_and_the_free_blocks():
    owners = pool_owners([[0, 2], [1]], [5, 2], block_size=3, n_blocks=4)
    assert owners.tolist() == [[0, 0, 0], [1, 1, -1], [0, 0, -1], [-2, -2, -2]]
    fig = block_pool([[0, 2], [1]], [5, 2], 3, 4, "pool")
    assert np.array_equal(values(fig.data[0].z), owners)
    assert [t.name for t in fig.data[1:]] == ["request 0", "request 1", "taken, empty"]
    assert fig.data[0].customdata[2][1] == "request 0, token 4"  # its second block holds tokens 3, 4 and one free slot


def test_the_pool_figure_draws_what_a_real_cache_handed_out(tiny_model):
    model = tiny_model()
    ids, mask = request_batch(tuple(range(1, 20)), [6, 2, 4])
    cache = PagedKVCache(block_size=4)
    model.generate(ids, 3, attention_mask=mask, cache=cache)
    owners = pool_owners(cache.tables, cache.lengths, 4, cache.n_blocks)
    assert [(owners == r).sum() for r in range(3)] == cache.lengths == [8, 4, 6]  # each token in exactly one slot
    assert (owners == -1).sum() == cache.steps[-1].empty_slots and not (owners == -2).any()


def test_reserved_slots_stack_the_filled_and_the_empty_per_request_and_layout():
    lengths = [5, 12]
    reserved = {layout: reserved_tokens(layout, lengths, 32, 8) for layout in ("contiguous", "paged")}
    fig = reserved_slots(lengths, reserved, "slots")
    filled, empty = (values(trace.y) for trace in fig.data)
    assert (filled + empty).tolist() == [32, 32, 8, 16]
    assert empty.tolist() == [27, 20, 3, 4]
    assert fig.layout.barmode == "stack"


@pytest.mark.parametrize("text,lengths", [("12, 5, 9, 2", [12, 5, 9, 2]), (" 3 4", [3, 4]), ("7", [7])])
def test_the_batch_is_read_from_the_reader_s_words(text, lengths):
    assert parse_lengths(text) == lengths


@pytest.mark.parametrize("text,message", [("", "prompt length"), ("5, x", "whole numbers"), ("0, 4", "between 1 and 64"),
                                          ("1 2 3 4 5 6 7 8 9", "9 requests")])
def test_a_batch_that_cannot_be_read_says_why(text, message):
    with pytest.raises(ValueError, match=message):
        parse_lengths(text)


def test_the_batch_is_left_padded_and_each_request_reads_its_own_tokens():
    ids, mask = request_batch((1, 2, 3, 4, 5), [2, 4])
    assert mask.tolist() == [[0, 0, 1, 1], [1, 1, 1, 1]]
    assert ids.tolist() == [[0, 0, 1, 2], [4, 5, 1, 2]]


# --- the tab ---------------------------------------------------------------------------------------------------------

def open_paged_tab(**query) -> AppTest:
    at = open_page("pages/kv_heads.py", kv_tab=TAB, **query)
    return at


def chart(at: AppTest, key: str) -> dict:
    return next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.proto.id.endswith(key))


def test_the_tab_fills_the_block_table_pass_by_pass_and_compares_the_layouts():
    at = assert_clean(open_paged_tab(kv_lengths="6, 2, 4", kv_block=4, kv_new=3, kv_reach=16))
    table = at.dataframe[0].value
    assert table["tokens stored"].tolist() == [8, 4, 6]  # after the last pass: prompt + 2 fed-back tokens
    assert table["empty slots in its last block"].tolist() == [0, 0, 2]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Tokens identical, paged vs contiguous"] == "yes"
    assert float(metrics["Largest logit difference"]) <= 1e-5
    assert metrics["contiguous: slots reserved but empty"] == "30 of 48 (62%)"
    assert metrics["paged: slots reserved but empty"] == "2 of 20 (10%)"
    pool = values(chart(at, "kv_block_pool")["data"][0]["z"])
    assert pool.shape == (5, 4) and [(pool == r).sum() for r in range(3)] == [8, 4, 6]

    at.slider(key="kv_pass").set_value(1).run()  # back to the prompt's pass: fewer tokens, the later block free
    assert_clean(at)
    assert at.dataframe[0].value["tokens stored"].tolist() == [6, 2, 4]
    pool = values(chart(at, "kv_block_pool")["data"][0]["z"])
    assert (pool == -2).sum() == 4  # one block of four slots not handed out yet


@pytest.mark.parametrize("changes,message", [
    (dict(kv_block=0), "block_size=0"),
    (dict(kv_block=-2), "block_size=-2"),
    (dict(kv_lengths="5, x"), "whole numbers"),
    (dict(kv_lengths="5, 30", kv_reach=20), "max_length=20"),
])
def test_bad_input_is_an_error_on_the_page_and_the_page_keeps_working(changes, message):
    at = open_paged_tab(kv_lengths="6, 2, 4", kv_block=4, kv_new=3)
    for key, value in changes.items():
        widget = at.text_input(key=key) if key == "kv_lengths" else at.number_input(key=key)
        widget.set_value(value).run()
    assert_clean(at, errors_allowed=True)
    assert any(message in e.value for e in at.error), [e.value for e in at.error]
    assert at.sidebar.text_area(key="text")  # the sidebar is still there
    at.text_input(key="kv_lengths").set_value("3, 1").run()
    at.number_input(key="kv_block").set_value(2).run()
    at.number_input(key="kv_reach").set_value(64).run()
    assert_clean(at)
    assert at.dataframe[0].value["tokens stored"].tolist() == [5, 3]
