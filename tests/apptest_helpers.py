"""What the AppTest suites share: opening a page on a model the test can rebuild, checking a run, reading figures."""
import base64
import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SHORT_TEXT = "abcab"  # few tokens: every rerun stays quick


def open_page(page: str, text: str | None = SHORT_TEXT, **query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    # GPT-2's axes with three layers: no shipped checkpoint has that size, so the weights are the
    # seeded random ones a test can rebuild, and any text is valid input
    query = {"preset": "gpt2", "n_layers": 3, **query}
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.switch_page(page).run()
    if text is not None:
        at.sidebar.text_area(key="text").set_value(text).run()
    return at


def assert_clean(at: AppTest, errors_allowed: bool = False) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    if not errors_allowed:
        assert not at.error, [e.value for e in at.error]
    return at


def values(data) -> np.ndarray:
    """A figure's array as drawn: plotly sends numpy arrays base64-encoded ({"dtype", "bdata", "shape"})."""
    if isinstance(data, dict) and "bdata" in data:
        flat = np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"]))
        return flat.reshape([int(n) for n in str(data.get("shape", len(flat))).split(",")])
    return np.array(data, dtype=float)


def figures_by_title(at: AppTest) -> dict[str, dict]:
    """Every plotly figure the page drew, by its title."""
    out = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        out[spec["layout"].get("title", {}).get("text", "")] = spec
    return out
