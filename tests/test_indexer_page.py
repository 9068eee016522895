"""The Masks page's indexer tab (DeepSeek-V3.2, GLM-5) on the sidebar's model with an indexer switched on: one
query's dense weights beside the keys its indexer keeps, and the mass kept and the output's error as k shrinks;
its figure builders without a server; a model that cannot take an indexer gets an error, not a traceback; the
"Your Hugging Face model" page opens both families."""
import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from apptest_helpers import SHORT_TEXT, assert_clean, figures_by_title, open_page, values
from test_hf_page_modern import APP, save_with_tokenizer
from test_interop_dsa import FACTORIES
from transformer.indexer import kept_by_k
from ui.figures.indexer import KEPT, dense_beside_chosen, kept_as_k_shrinks


def test_the_figures_colour_the_kept_keys_and_draw_mass_and_error_against_k():
    dense = np.array([0.1, 0.5, 0.15, 0.25])
    chosen = np.array([False, True, False, True])
    sparse = np.where(chosen, dense, 0) / dense[chosen].sum()
    fig = dense_beside_chosen(dense, sparse, np.array([0.0, 2.0, 0.5, 1.0]), chosen, list("abca"), "t")
    bars, diamonds, scores = fig.data
    assert list(bars.x) == ["0: a", "1: b", "2: c", "3: a"]  # a repeated token keeps its own bar
    assert [colour == KEPT for colour in bars.marker.color] == chosen.tolist()  # kept keys in their own colour
    assert np.allclose(diamonds.y, [0, 0.5 / 0.75, 0, 0.25 / 0.75]) and np.allclose(scores.y, [0, 2, 0.5, 1])
    kept = {"indexer": {"mass": [0.5, 0.75, 0.9, 1.0], "error": [0.4, 0.2, 0.1, 0.0]}}
    sweep = kept_as_k_shrinks([1, 2, 3, 4], kept, 2)
    assert [trace.name for trace in sweep.data] == ["indexer: mass kept", "indexer: output error"]
    assert list(sweep.data[0].y) == kept["indexer"]["mass"] and list(sweep.data[1].x) == [1, 2, 3, 4]


def test_keeping_the_first_k_keys_renormalises_the_weights_and_every_key_gives_the_dense_output():
    torch.manual_seed(0)
    dense = torch.softmax(torch.randn(2, 5), -1)  # (H, n)
    values_ = torch.randn(2, 5, 3)  # (H, n, d_v)
    order = torch.tensor([3, 0, 4, 1, 2])
    kept = kept_by_k(dense, values_, order, [1, 2, 5])
    assert kept["mass"][-1] == pytest.approx(1.0) and kept["error"][-1] == pytest.approx(0.0, abs=1e-6)
    assert kept["mass"][0] == pytest.approx(float(dense[:, 3].mean()))
    full = (dense[..., None] * values_).sum(1)  # (H, d_v)
    by_hand = (values_[:, 3] - full).norm() / full.norm()  # one key kept: its value, at weight 1
    assert kept["error"][0] == pytest.approx(float(by_hand), rel=1e-5)


def test_the_indexer_tab_draws_a_query_its_kept_keys_and_what_k_keys_keep():
    at = open_page("pages/masks.py", mask_tab="indexer top-k", mask_k=2)
    assert_clean(at)
    n = len(SHORT_TEXT)  # the default query is the last token: it may see all n keys
    figures = figures_by_title(at)
    choice = figures[f"layer 0, head 0, query {n - 1}: 2 of {n} keys kept"]
    bars, diamonds = choice["data"][0], choice["data"][1]
    kept = np.array([colour == KEPT for colour in bars["marker"]["color"]])
    assert kept.sum() == 2
    sparse = values(diamonds["y"])
    assert np.allclose(sparse[~kept], 0) and sparse.sum() == pytest.approx(1, abs=1e-5)
    dense = values(bars["y"])
    assert np.allclose(sparse[kept], dense[kept] / dense[kept].sum(), atol=1e-5)  # renormalised over the kept keys
    sweep = figures["what k keys keep of the dense attention"]["data"]
    mass = {trace["name"]: values(trace["y"]) for trace in sweep if trace["name"].endswith("mass kept")}
    assert set(mass) == {"indexer: mass kept", "best k (by the dense weights): mass kept",
                         "most recent k (a window): mass kept"}
    assert all(m[-1] == pytest.approx(1, abs=1e-5) for m in mass.values())  # every key kept: all the mass
    assert (mass["best k (by the dense weights): mass kept"] >= mass["indexer: mass kept"] - 1e-6).all()
    assert any("untrained" in caption.value for caption in at.caption)
    assert at.query_params["mask_k"] == "2"


def test_an_encoder_gets_an_error_that_names_the_fix_and_keeps_the_page():
    at = open_page("pages/masks.py", mask_tab="indexer top-k", preset="bert")
    assert_clean(at, errors_allowed=True)
    assert any("not a decoder" in error.value and "arch='decoder'" in error.value for error in at.error)
    assert at.sidebar.text_area(key="text").value == SHORT_TEXT


@pytest.mark.parametrize("name,hf_class", [("deepseek_v32_yarn", "DeepseekV32ForCausalLM"),
                                           ("glm5_small", "GlmMoeDsaForCausalLM")])
def test_the_hugging_face_page_opens_both_families(tmp_path, name, hf_class):
    save_with_tokenizer(FACTORIES[name](), tmp_path)
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/hf_model.py").run()
    at.text_input(key="hf_path").set_value(str(tmp_path)).run()
    assert_clean(at)
    assert any(hf_class in h.value for h in at.subheader)
    table = at.table[0].value
    mask_row = table[table["axis"] == "mask"]["choice"].iloc[0]
    assert "indexer top-k" in mask_row and "every layer" in mask_row
