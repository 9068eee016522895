"""Home, the attention playground and the forward-pass stepper under Streamlit's AppTest: default views, every
sidebar axis, presets and "custom", the URL, bad input, the pages' own controls, and the size of what is sent."""
import json

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from transformer import AXES, MODEL_CARDS, PRESETS, Transformer, choices
from ui.app.source import five_lines
from ui.app.state import config_from_values
from apptest_helpers import APP, SHORT_TEXT, assert_clean, open_page, values

pytestmark = pytest.mark.slow

PAGES = ["pages/home.py", "pages/playground.py", "pages/stepper.py"]
SIDEBAR_KEYS = ["preset", "text", "seed", "arch", "position", "norm", "norm_position", "ffn", "n_layers", "d_model",
                "n_heads", "n_kv_heads", "n_experts", "top_k", "sliding_window"]


def charts(at: AppTest) -> dict[str, dict]:
    """Plotly figures by their widget key (the part of the element id after the last dash)."""
    return {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


# the playground's tabs (pages/playground.py): only the open one is computed and drawn
GRID_TAB, STAGES_TAB, QUERY_TAB, PREDICTION_TAB, POSITION_TAB = (
    "Every head", "One head, stage by stage", "Where one query looks", "Prediction", "Position, experts, the model")


# the tabs of the pages that show their views in lazy tabs (computed when open): the session key and every label
LAZY_TABS = {"pages/playground.py": ("play_tab", [GRID_TAB, STAGES_TAB, QUERY_TAB, PREDICTION_TAB, POSITION_TAB]),
             "pages/stepper.py": ("step_tab", ["This step", "Where it sits in the model", "Shape trace"]),
             "pages/compare.py": ("cmp_tab", ["Attention, side by side", "Cost", "Next-token distributions"]),
             "pages/kv_heads.py": ("kv_tab", ["Who reads which K and V", "KV-cache memory at real sizes",
                                              "Generation step by step", "The cache in pages"]),
             "pages/norms.py": ("norm_tab", ["Where the norm sits", "Residual and gradient norms with depth",
                                             "LayerNorm vs RMSNorm on one vector"])}


def open_tab(at: AppTest, label: str) -> AppTest:
    """Open one of the playground's tabs (a reader's click reruns the page with it open)."""
    at.session_state["play_tab"] = label
    return at.run()


def charts_in_tabs(at: AppTest, *labels: str) -> dict[str, dict]:
    """The figures of these tabs, each opened in turn (the last one stays open)."""
    drawn = {}
    for label in labels:
        drawn |= charts(open_tab(at, label))
    return drawn


def untrained(at: AppTest) -> AppTest:
    """Three layers: sizes no shipped checkpoint has, so the app runs seeded random weights the test can rebuild."""
    at.sidebar.number_input(key="n_layers").set_value(3).run()
    return at


def library_trace(at: AppTest):
    """The library's own trace of the app's current (untrained) model on its text, built here the way the app
    builds it: the sidebar's config, weights seeded by the sidebar's seed, one token per character."""
    values = {key: at.session_state[key] for key in SIDEBAR_KEYS if key not in ("preset", "text", "seed")}
    cfg = config_from_values(values, at.session_state["preset"])
    torch.manual_seed(int(at.session_state["seed"]))
    model = Transformer(cfg, device="cpu").eval()
    ids = torch.tensor([[ord(c) % cfg.vocab_size for c in at.session_state["text"]]])
    _, trace = model.run_with_trace(ids)
    return trace


# --- default views and every sidebar axis ---------------------------------------------------------

@pytest.mark.parametrize("page", PAGES)
def test_default_view(page):
    at = open_page(page, text=None)
    assert_clean(at)
    if page == "pages/home.py":
        assert {b.key for b in at.button} >= {f"open_{key}" for key in MODEL_CARDS}
    elif page == "pages/playground.py":
        assert set(charts(at)) == {"head_grid"}  # the first tab's view only: the others are computed when opened
        drawn = charts_in_tabs(at, GRID_TAB, STAGES_TAB, QUERY_TAB)
        assert {"head_grid", "stage_hook_raw_scores", "stage_hook_mask", "stage_hook_attn_scores",
                "stage_hook_pattern", "query_bars", "query_arcs", "entropy"} <= set(drawn)
        for key in ("stage_hook_raw_scores", "stage_hook_pattern", "query_bars", "entropy"):
            layout = drawn[key]["layout"]
            assert layout["xaxis"]["title"]["text"] and layout["yaxis"]["title"]["text"], key
        assert open_tab(at, STAGES_TAB).main.code[0].value == five_lines()  # the library's own lines
        assert "digraph" in open_tab(at, POSITION_TAB).get("graphviz_chart")[0].proto.spec
    else:
        events = library_trace(at).events  # the event names and their number do not depend on the weights
        assert at.slider(key="step").max == len(events) - 1
        assert at.latex and "hook_embed(" in at.main.code[0].value  # the formula and the source line of step 0
        at.session_state["step_tab"] = "Shape trace"  # every step's shape, one tab away
        assert len(assert_clean(at.run()).dataframe[0].value) == len(events)


@pytest.mark.parametrize("page", PAGES)
def test_every_sidebar_axis_option_runs(page):
    at = open_page(page)
    preset = PRESETS["gpt2"].replace(n_layers=3)
    for key in ("arch", "position", "norm", "norm_position", "ffn"):
        for option in choices(key):
            at.sidebar.selectbox(key=key).set_value(option).run()
            assert_clean(at)
            state = at.session_state
            encoder_decoder = state["arch"] == "encoder-decoder"
            if page == "pages/playground.py":
                drawn = charts_in_tabs(at, POSITION_TAB, STAGES_TAB)  # the stages' tab stays open for the next run
                assert_clean(at)
                position = AXES["position"].row(state["position"])
                bias_drawn = any(stage in drawn for stage in ("stage_hook_alibi_bias", "stage_hook_rel_bias"))
                assert bias_drawn == position.score_bias
                assert ("rope" in drawn) == position.rotates_qk  # RoPE and xPos turn q and k
                assert ("routing" in drawn) == AXES["ffn"].row(state["ffn"]).routed
                kinds = at.selectbox(key="attn").options if encoder_decoder else []
                assert len(kinds) == (3 if encoder_decoder else 0)
            if page == "pages/stepper.py":
                steps = at.selectbox(key="step_jump").options
                assert any("cross_attn" in s for s in steps) == encoder_decoder
                assert any("rot_q" in s for s in steps) == AXES["position"].row(state["position"]).rotates_qk
        at.sidebar.selectbox(key=key).set_value(getattr(preset, key)).run()
    for g in (1, 2, 4):
        at.sidebar.selectbox(key="n_kv_heads").set_value(g).run()
        assert_clean(at)
    for window in (3, 0):
        at.sidebar.number_input(key="sliding_window").set_value(window).run()
        assert_clean(at)
    at.sidebar.selectbox(key="ffn").set_value("moe").run()
    at.sidebar.number_input(key="n_experts").set_value(6).run()
    at.sidebar.number_input(key="top_k").set_value(3).run()
    assert_clean(at)
    if page == "pages/playground.py":
        routing = charts(open_tab(at, POSITION_TAB))["routing"]["data"]
        assert values(routing[0]["z"]).shape == (6, 5)  # 6 experts x 5 tokens
        assert len(routing[1]["x"]) == 5 * 3  # each token marks its top-3


def test_preset_fills_the_axes_and_an_edit_shows_custom():
    at = open_page("pages/playground.py")
    at.sidebar.selectbox(key="preset").set_value("mixtral").run()
    assert_clean(at)
    mixtral = PRESETS["mixtral"]
    for key in ("arch", "position", "norm", "ffn", "n_kv_heads"):
        assert at.sidebar.selectbox(key=key).value == getattr(mixtral, key), key
    for key in ("n_experts", "top_k", "d_model", "n_heads"):
        assert at.sidebar.number_input(key=key).value == getattr(mixtral, key), key
    assert "routing" in charts(open_tab(at, POSITION_TAB))
    at.sidebar.selectbox(key="position").set_value("alibi").run()
    assert at.sidebar.selectbox(key="preset").value == "custom"
    assert any("custom" in c.value for c in at.sidebar.caption)
    assert at.query_params["preset"] == "custom" and at.query_params["position"] == "alibi"


# --- the URL ----------------------------------------------------------------------------------------

def test_playground_state_comes_from_the_url_and_goes_back_to_it():
    query = dict(preset="custom", position="alibi", n_kv_heads="2", norm="rmsnorm", n_layers="3", text="hello",
                 layer="2", head="3", query="1", attn="self")
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page("pages/playground.py").run()
    assert_clean(at)
    assert at.sidebar.selectbox(key="position").value == "alibi"
    assert at.sidebar.selectbox(key="n_kv_heads").value == 2
    assert at.sidebar.number_input(key="n_layers").value == 3
    assert (at.selectbox(key="layer").value, at.selectbox(key="head").value, at.selectbox(key="query").value) == (2, 3, 1)
    assert set(at.query_params) >= set(SIDEBAR_KEYS) | {"layer", "head", "query", "attn"}  # the full state
    for key, value in query.items():
        assert at.query_params[key] == value, key
    at.selectbox(key="head").set_value(0).run()
    assert at.query_params["head"] == "0"


def test_stepper_step_comes_from_the_url_and_a_bad_value_falls_back():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["step"] = "12"
    at.switch_page("pages/stepper.py").run()
    assert_clean(at)
    assert at.slider(key="step").value == 12 and at.selectbox(key="step_jump").value == 12
    assert at.query_params["step"] == "12"
    for bad in ("9999", "minus"):
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params["step"] = bad
        at.switch_page("pages/stepper.py").run()
        assert_clean(at)
        assert at.slider(key="step").value == 0 and at.query_params["step"] == "0"


# --- bad input ----------------------------------------------------------------------------------------

UNUSUAL_TEXT = {
    "emoji": ("🙂👍🏽 ok", "🙂"),
    "right-to-left": ("שלום مرحبا", "ש"),
    "combining": ("Z\u0324\u0354\u0367\u0311a\u0308", "◌\u0324"),  # marks that NFC cannot fold into a letter
    "control": ("a\x00b\x07c\x1b", "U+0007"),
}


@pytest.mark.parametrize("page", PAGES)
def test_bad_input_shows_a_message_never_a_traceback(page):
    at = open_page(page)
    at.sidebar.text_area(key="text").set_value("").run()
    assert_clean(at, errors_allowed=True)
    if page != "pages/home.py":  # home draws no model, so an empty text is no problem there
        assert any("empty" in e.value for e in at.error)
    at.sidebar.text_area(key="text").set_value("x" * 10_000).run()
    assert_clean(at)
    if page != "pages/home.py":
        assert any("10000" in w.value and "128" in w.value for w in at.warning)  # said visibly
    if page == "pages/playground.py":
        open_tab(at, STAGES_TAB)
    for text, label in UNUSUAL_TEXT.values():
        at.sidebar.text_area(key="text").set_value(text).run()
        assert_clean(at)
        if page == "pages/playground.py":
            drawn_labels = charts(at)["stage_hook_pattern"]["data"][0]["y"]
            assert any(label in y for y in drawn_labels), (label, drawn_labels)
    at.sidebar.text_area(key="text").set_value(SHORT_TEXT).run()

    impossible = [  # (widget changes, the library's words)
        ({"n_heads": 6}, f"d_model={PRESETS['gpt2'].d_model} is not divisible by n_heads=6"),
        ({"d_model": 48, "n_heads": 6}, "n_heads=6 is not divisible by n_kv_heads=4"),
        ({"d_model": 40, "n_heads": 8, "position": "rope"}, "is odd"),
    ]
    for changes, message in impossible:
        for key, value in changes.items():
            widget = at.sidebar.selectbox(key=key) if key == "position" else at.sidebar.number_input(key=key)
            widget.set_value(value).run()
        assert_clean(at, errors_allowed=True)
        assert any(message in e.value for e in at.error), [e.value for e in at.error]
        at.sidebar.selectbox(key="preset").set_value("gpt2").run()  # the widgets still work: back to a valid model
        assert_clean(at)
    at.sidebar.selectbox(key="ffn").set_value("moe").run()
    at.sidebar.number_input(key="top_k").set_value(5).run()
    assert_clean(at, errors_allowed=True)
    assert any("top_k=5" in e.value for e in at.error)


# --- the pages' own controls ------------------------------------------------------------------------

def test_playground_controls_draw_the_library_numbers():
    at = untrained(open_page("pages/playground.py", text="hello world"))
    trace = library_trace(at)
    for layer, head, query in [(0, 0, 10), (2, 2, 4), (1, 3, 0)]:
        at.selectbox(key="layer").set_value(layer).run()
        at.selectbox(key="head").set_value(head).run()
        at.selectbox(key="query").set_value(query).run()
        assert_clean(at)
        drawn = charts_in_tabs(at, GRID_TAB, STAGES_TAB, QUERY_TAB)
        assert_clean(at)
        pattern = trace[f"blocks.{layer}.attn.hook_pattern"][0].numpy()  # (H, T, T)
        assert np.allclose(values(drawn["query_bars"]["data"][0]["y"]), pattern[head, query], atol=1e-6)
        stage = values(drawn["stage_hook_raw_scores"]["data"][0]["z"])
        assert np.allclose(stage, trace[f"blocks.{layer}.attn.hook_raw_scores"][0, head].numpy(), atol=1e-6)
        allowed = trace[f"blocks.{layer}.attn.hook_mask"][0, 0].numpy() == 0  # (T, T) causal
        grid = np.asarray(values(drawn["head_grid"]["data"][head]["z"]), dtype=float)
        assert np.allclose(grid[allowed], pattern[head][allowed], atol=1e-6)
        assert np.isnan(grid[~allowed]).all() and (~allowed).any()  # masked cells are drawn blank
        entropy = values(drawn["entropy"]["data"][0]["y"])
        p = np.clip(pattern[:, query].astype(np.float64), 1e-12, 1)
        assert np.allclose(entropy, -(p * np.log(p)).sum(-1), atol=1e-5)


def test_playground_says_when_the_sliding_window_covers_the_whole_text():
    at = open_page("pages/playground.py", text="hello world", sliding_window=16)
    assert_clean(at)
    said = [c.value for c in at.caption if "sliding window is 16 tokens" in c.value]
    assert said and "11-token text" in said[0] and "more than 16 tokens" in said[0]
    at.sidebar.number_input(key="sliding_window").set_value(4).run()  # now the band shows: no caption
    assert_clean(at)
    assert not [c.value for c in at.caption if "sliding window is" in c.value]
    mask = charts(at)["head_grid"]["data"][0]["z"]
    assert np.isnan(values(mask)[10, 0])  # the last query cannot see the first key through a window of 4


def test_playground_encoder_decoder_kinds_label_their_axes():
    at = open_tab(open_page("pages/playground.py", preset="original"), STAGES_TAB)
    assert_clean(at)
    assert at.selectbox(key="attn").value == "cross"  # the view an encoder-decoder adds
    layout = charts(at)["stage_hook_pattern"]["layout"]
    assert layout["yaxis"]["title"]["text"] == "query (decoder token)"
    assert layout["xaxis"]["title"]["text"] == "key (input token)"
    assert charts(at)["stage_hook_pattern"]["data"][0]["y"][0] == "0:<s>"  # the decoder starts from <s>
    for kind, title in [("encoder", "query (input token)"), ("decoder", "query (decoder token)")]:
        at.selectbox(key="attn").set_value(kind).run()
        assert_clean(at)
        drawn = charts(at)
        assert drawn["stage_hook_pattern"]["layout"]["yaxis"]["title"]["text"] == title
        scores = values(drawn["stage_hook_attn_scores"]["data"][0]["z"])
        assert np.isnan(scores[0, 1]) == (kind == "decoder")  # the decoder is causal (blank), the encoder is not
    assert at.query_params["attn"] == "decoder"


def test_stepper_moves_through_the_recorded_steps():
    at = untrained(open_page("pages/stepper.py"))
    events = library_trace(at).events
    names = [e.name for e in events]
    title = lambda: at.subheader[0].value
    assert f"`{names[0]}`" in title() and at.button(key="prev").disabled
    at.button(key="next").click().run()
    at.button(key="next").click().run()
    assert at.slider(key="step").value == 2 and f"`{names[2]}`" in title()
    at.button(key="prev").click().run()
    assert at.slider(key="step").value == 1 and at.selectbox(key="step_jump").value == 1
    at.slider(key="step").set_value(10).run()
    assert f"`{names[10]}`" in title() and at.selectbox(key="step_jump").value == 10
    at.selectbox(key="step_jump").set_value(len(names) - 1).run()
    assert at.slider(key="step").value == len(names) - 1 and at.button(key="next").disabled
    assert at.query_params["step"] == str(len(names) - 1)
    for step in range(len(names)):  # every step draws without error
        at.slider(key="step").set_value(step).run()
        assert_clean(at)
        assert f"`{names[step]}`" in title()
    at.session_state["step_tab"] = "Shape trace"
    table = assert_clean(at.run()).dataframe[0].value
    assert list(table["name"]) == names
    assert list(table["elements"]) == [e.tensor.numel() for e in events]
    assert list(table["shape"]) == [e.named_shape for e in events]


def test_stepper_values_slice_and_shapes():
    at = untrained(open_page("pages/stepper.py"))
    events = library_trace(at).events
    step = next(i for i, e in enumerate(events) if e.name == "blocks.1.attn.hook_raw_scores")
    at.slider(key="step").set_value(step).run()
    shapes = [m.value for m in at.markdown if m.value.startswith("**Shapes**")][0]
    assert "blocks.1.attn.hook_q" in shapes and "blocks.1.attn.hook_k" in shapes
    assert "(B=1, H=4, T_q=5, T_kv=5)" in shapes
    assert "hook_raw_scores(" in at.main.code[0].value
    at.selectbox(key=f"rows_{step}").set_value(0).run()  # rows: heads; columns: keys; query held
    at.number_input(key=f"fix_{step}_1").set_value(3).run()
    assert_clean(at)
    z = values(charts(at)["values"]["data"][0]["z"])
    assert np.allclose(z, events[step].tensor[0, :, 3, :].numpy(), atol=1e-6)
    at.selectbox(key=f"cols_{step}").set_value(0).run()
    assert any("two different dimensions" in w.value for w in at.warning)


def test_home_open_buttons_switch_to_the_playground_with_that_preset():
    for key in ("mixtral", "original"):
        at = AppTest.from_file(APP, default_timeout=120)
        at.run()
        at.button(key=f"open_{key}").click().run()
        assert_clean(at)
        assert at.title[0].value == "Attention playground"
        assert at.sidebar.selectbox(key="preset").value == key
        assert at.sidebar.selectbox(key="arch").value == PRESETS[key].arch
        assert at.query_params["preset"] == key
        assert charts(at)  # the playground drew its figures


@pytest.mark.parametrize("page", ["pages/playground.py", "pages/stepper.py"])
def test_switching_pages_keeps_the_sidebar_and_the_page_controls(page):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.sidebar.text_area(key="text").set_value("hello").run()
    at.sidebar.selectbox(key="position").set_value("alibi").run()
    at.switch_page(page).run()
    assert_clean(at)
    assert at.sidebar.selectbox(key="position").value == "alibi" and at.sidebar.text_area(key="text").value == "hello"
    control = at.selectbox(key="head") if page == "pages/playground.py" else at.slider(key="step")
    control.set_value(3).run()
    at.switch_page("pages/home.py").run()
    at.switch_page(page).run()
    assert_clean(at)
    control = at.selectbox(key="head") if page == "pages/playground.py" else at.slider(key="step")
    assert control.value == 3 and at.sidebar.selectbox(key="position").value == "alibi"


# --- limits -----------------------------------------------------------------------------------------

def test_largest_view_keeps_the_figures_small():
    text = "the quick brown fox jumps over the lazy dog. " * 5  # 225 characters, capped at 128 tokens
    at = open_page("pages/playground.py", text=text)
    at.sidebar.number_input(key="n_heads").set_value(16).run()
    at.sidebar.selectbox(key="ffn").set_value("moe").run()
    at.sidebar.number_input(key="n_experts").set_value(16).run()
    at.sidebar.selectbox(key="position").set_value("rope").run()
    assert_clean(at)
    assert any("128" in w.value for w in at.warning)
    grid = charts(at)["head_grid"]["data"]  # the first tab
    tab_bytes = {}  # what one rerun sends: the open tab's figures
    for label in (GRID_TAB, STAGES_TAB, QUERY_TAB, PREDICTION_TAB, POSITION_TAB):
        tab_bytes[label] = sum(len(c.proto.spec) for c in open_tab(at, label).get("plotly_chart"))
        assert_clean(at)
    print(f"\nplayground, 128 tokens x 16 heads x 16 experts: {sum(tab_bytes.values()) / 2**20:.2f} MiB of figure "
          f"JSON in its five tabs, {max(tab_bytes.values()) / 2**20:.2f} MiB at most in one")
    assert sum(tab_bytes.values()) < 10 * 2**20
    assert len(grid) == 16 and values(grid[0]["z"]).shape[0] <= 64  # each small heatmap is downsampled
    at = open_page("pages/stepper.py", text=text)
    at.sidebar.number_input(key="n_heads").set_value(16).run()
    sizes = []
    for step in range(int(at.slider(key="step").max) + 1):
        at.slider(key="step").set_value(step).run()
        sizes.append(sum(len(c.proto.spec) for c in at.get("plotly_chart")))
    assert_clean(at)
    print(f"stepper, 128 tokens: largest step {max(sizes) / 2**20:.2f} MiB of figure JSON")
    assert max(sizes) < 10 * 2**20


@pytest.mark.parametrize("page", ["pages/playground.py", "pages/stepper.py", "pages/compare.py", "pages/kv_heads.py",
                                  "pages/norms.py", "pages/positions.py", "pages/ffn.py"])
def test_downloads_are_built_on_click_only(page):
    """A download whose bytes are sent with every rerun registers a file the next rerun may already have replaced
    (a 404 for a slow browser); each download button hands Streamlit a callable instead."""
    at = open_page(page, preset="mixtral")  # MoE: the FFN page shows its routing table
    assert_clean(at)
    buttons = list(at.get("download_button"))
    key, labels = LAZY_TABS.get(page, (None, []))
    for label in labels:  # a tabbed page's downloads, every tab opened
        at.session_state[key] = label
        buttons += assert_clean(at.run()).get("download_button")
    assert buttons
    for button in buttons:
        assert button.proto.deferred_file_id and not button.proto.url, button.proto.label


def test_the_server_freezes_its_long_lived_objects_once_and_still_collects_new_garbage():
    """Streamlit runs a full collection after every script run; the libraries' objects are frozen out of it."""
    import gc

    from ui.figures import base as figures
    from ui.app.server import freeze_long_lived_objects

    freeze_long_lived_objects()
    frozen = gc.get_freeze_count()
    assert frozen > 10_000
    assert not any(obj is figures.head_grid for obj in gc.get_objects())  # frozen objects leave the generations
    freeze_long_lived_objects()
    assert gc.get_freeze_count() == frozen  # once per process: later garbage is never frozen

    cycle = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1  # new cyclic garbage is still found


def test_each_script_run_is_logged_when_asked_even_when_it_ends_by_raising(tmp_path, monkeypatch):
    from ui.app.server import RUN_LOG_ENV, logged_run

    log = tmp_path / "runs.jsonl"
    monkeypatch.delenv(RUN_LOG_ENV, raising=False)
    with logged_run("home"):
        pass
    assert not log.exists()  # off unless asked
    monkeypatch.setenv(RUN_LOG_ENV, str(log))
    with logged_run("playground"):
        sum(range(100_000))
    with pytest.raises(RuntimeError), logged_run("stepper"):
        raise RuntimeError("st.stop and st.switch_page end a run like this")
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["page"] for r in runs] == ["playground", "stepper"]
    assert all(r["wall_s"] >= 0 and r["cpu_s"] >= 0 and r["end"] > 0 for r in runs)


def test_freed_memory_is_given_back_at_most_once_per_interval(monkeypatch):
    from ui.app import server

    calls = []
    monkeypatch.setattr(server, "_malloc_trim", lambda: lambda pad: calls.append(pad) or 1)
    monkeypatch.setattr(server, "_last_trim", [0.0])
    for _ in range(5):
        server.release_freed_memory()
    assert calls == [0]
    monkeypatch.setattr(server, "_last_trim", [server.time.monotonic() - server.TRIM_EVERY_S])
    server.release_freed_memory()
    assert calls == [0, 0]
