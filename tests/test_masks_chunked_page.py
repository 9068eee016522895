"""The Masks page's chunked tab (Llama 4), beside the sliding window: the mask transformer.masks.chunked builds,
drawn cell by cell with the live model's weights under it, its chunk C in the link."""
import json

import numpy as np

from apptest_helpers import SHORT_TEXT, assert_clean, open_page, values


def drawn_mask(at, title: str) -> np.ndarray:
    """The allowed (1) / masked (0) cells of the mask figure with this title, as drawn."""
    figure = next(spec for spec in (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
                  if spec["layout"]["title"]["text"] == title)
    return values(figure["data"][0]["z"])


def test_the_chunked_tab_draws_each_query_seeing_only_its_own_chunk_up_to_itself():
    at = open_page("pages/masks.py")
    at.session_state["mask_tab"] = "chunked"  # a reader's click on the tab
    assert_clean(at.run())
    at.number_input(key="mask_chunk").set_value(3).run()
    assert_clean(at)
    n = len(SHORT_TEXT)
    i, j = np.arange(n)[:, None], np.arange(n)[None]
    expected = (j <= i) & (i // 3 == j // 3)
    assert np.array_equal(drawn_mask(at, "chunked, C = 3"), expected.astype(float))
    # a chunk's first query sees itself alone, where a window of 3 would see two keys before it
    assert drawn_mask(at, "chunked, C = 3")[3].tolist() == [0, 0, 0, 1] + [0] * (n - 4)
    assert [m.value for m in at.metric if m.label == "max weight on masked cells"] == ["0.0"]
    assert [m.value for m in at.metric if m.label == "masked cells"] == [f"{int((~expected).sum())} of {n * n}"]
    assert at.query_params["mask_tab"] == "chunked" and at.query_params["mask_chunk"] == "3"


def test_a_link_opens_the_chunked_tab_with_its_chunk():
    at = open_page("pages/masks.py", mask_tab="chunked", mask_chunk=5)
    assert_clean(at)
    n = len(SHORT_TEXT)
    i, j = np.arange(n)[:, None], np.arange(n)[None]
    assert np.array_equal(drawn_mask(at, "chunked, C = 5"), ((j <= i) & (i // 5 == j // 5)).astype(float))
