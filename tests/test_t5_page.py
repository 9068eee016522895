"""T5's buckets on the Positions page: the figure holds the library's buckets and bias (no server), and the tab
draws them beside ALiBi's, for an encoder and a decoder, with a clear message for a setting below 1."""
import json

import numpy as np
import torch

from apptest_helpers import assert_clean, open_page, values
from transformer.positions import relative_buckets
from ui.figures import axes as af


def test_the_figure_draws_each_heads_bias_and_marks_where_each_bucket_starts():
    distances = np.arange(-40, 41)  # (81,)
    buckets = relative_buckets(torch.from_numpy(distances), 16, 32, bidirectional=True).numpy()  # (81,)
    table = np.random.default_rng(0).normal(size=(16, 3))  # (buckets, H)
    bias = table[buckets].T  # (3, 81)
    fig = af.relative_bias(distances, buckets, bias)
    assert [trace.name for trace in fig.data] == ["head 0", "head 1", "head 2"]
    for h, trace in enumerate(fig.data):
        assert np.array_equal(np.asarray(trace.x), distances) and np.allclose(np.asarray(trace.y), bias[h])
    edges = [shape.x0 + 0.5 for shape in fig.layout.shapes]  # each dotted line sits just before a bucket's first distance
    assert edges == af.bucket_edges(distances, buckets).tolist()
    # 16 buckets split by sign: 0 and 3 exact distances each way, then 4 logarithmic ones each way, the last from
    # 4 * 8^(3/4) = 19.03 on: no new bucket starts past 20 either way
    assert len(edges) == len(set(buckets.tolist())) - 1 == 14
    assert edges == [-19, -11, -6, -3, -2, -1, 0, 1, 2, 3, 4, 7, 12, 20]


def test_the_t5_tab_draws_the_buckets_for_both_stacks_and_refuses_a_setting_below_one():
    at = open_page("pages/positions.py")
    at.session_state["pos_tab"] = "T5 buckets"
    assert_clean(at.run())
    chart = next(c for c in at.get("plotly_chart") if "T5: learned bias" in c.proto.spec)
    assert "bucket" in chart.proto.spec
    caption = " ".join(c.value for c in at.caption)
    # 32 buckets up to 128, 48 distances each way shown: the encoder's last bucket starts past what is shown
    assert "The last bucket (31) starts at distance 91; 0 of the 97 distances shown read it" in caption
    at.radio(key="t5_stack").set_value("decoder").run()
    assert_clean(at)
    at.number_input(key="t5_buckets").set_value(8).run()
    at.number_input(key="t5_max_distance").set_value(12).run()
    assert_clean(at)
    caption = " ".join(c.value for c in at.caption)
    # a decoder's 8 buckets: 4 exact, 4 logarithmic up to 12; from 4 * 3^(3/4) = 9.1 on, bucket 7
    assert "The last bucket (7) starts at distance 10; 39 of the 49 distances shown read it" in caption
    figure = json.loads(next(c for c in at.get("plotly_chart") if "T5: learned bias" in c.proto.spec).proto.spec)
    x = values(figure["data"][0]["x"])
    assert x.min() == -48 and x.max() == 0  # a decoder looks back only
    for key in ("t5_buckets", "t5_max_distance"):
        at.number_input(key=key).set_value(0).run()
        assert_clean(at, errors_allowed=True)
        assert any(f"{key.replace('t5_', 'relative_')}=0 must be at least 1" in e.value for e in at.error)
        at.number_input(key=key).set_value(16).run()
        assert_clean(at)  # back to a valid setting, the page works again
