"""The "Your Hugging Face model" page opens LFM2 and MiniMax-01 from a local directory with their own tokenizers; the
playground then draws their full-attention layers' weights as Hugging Face computes them, and says of an LFM2 conv
layer that it mixes by a fixed-width convolution instead of drawing weights it does not have."""
import json
from pathlib import Path

import numpy as np
import torch
from streamlit.testing.v1 import AppTest

from apptest_helpers import values as decode
from test_hf_page_modern import WORDS, clean, save_with_tokenizer
from test_interop_lfm2 import lfm2_small
from test_interop_minimax import minimax_3_to_1

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TEXT = "the cat sat on the mat and the dog ran to it"


def test_lfm2_opens_with_its_tokenizer_and_the_playground_draws_its_full_layers_attention(tmp_path):
    hf = lfm2_small()
    save_with_tokenizer(hf, tmp_path)
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/hf_model.py").run()
    at.text_input(key="hf_path").set_value(str(tmp_path)).run()
    clean(at)
    assert any("Lfm2ForCausalLM" in h.value for h in at.subheader)
    next(b for b in at.button if b.label == "Open on every page").click().run()
    at.sidebar.text_area(key="text").set_value(TEXT).run()
    at.switch_page("pages/playground.py").run()
    clean(at)
    figures = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    drawn = decode(next(f["data"][0]["z"] for f in figures if f["data"] and "z" in f["data"][0]))
    ids = torch.tensor([[WORDS.index(w) + 1 for w in TEXT.split()]])
    with torch.no_grad():
        attentions = hf(ids, output_attentions=True).attentions
    head0 = attentions[-1][0, 0].numpy()  # the playground opens on the last layer (full attention), head 0
    assert drawn.shape == head0.shape == (12, 12)
    assert np.allclose(np.nan_to_num(drawn), head0, atol=1e-5)
    at.selectbox(key="layer").set_value(0).run()  # a conv layer: no weights, said so plainly
    clean(at)
    assert any("Layer 0 is a gated short convolution: it has no attention weights to draw" in i.value for i in at.info)
    at.switch_page("pages/permutation.py").run()  # a model of softmax layers only instead of LFM2's mix
    clean(at)
    for page in ("pages/scores.py", "pages/masks.py"):  # they offer the softmax layers and name the others
        at.switch_page(page).run()
        clean(at)
        assert any(c.value.startswith("Layers 0, 1, 3 keep a state (or convolve their last few inputs)")
                   for c in at.caption)


def test_minimax_opens_with_its_tokenizer_and_every_page_draws_it(tmp_path):
    hf = minimax_3_to_1()
    save_with_tokenizer(hf, tmp_path)
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/hf_model.py").run()
    at.text_input(key="hf_path").set_value(str(tmp_path)).run()
    clean(at)
    assert any("MiniMaxForCausalLM" in h.value for h in at.subheader)
    next(b for b in at.button if b.label == "Open on every page").click().run()
    at.sidebar.text_area(key="text").set_value(TEXT).run()
    at.switch_page("pages/playground.py").run()
    clean(at)
    figures = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    drawn = decode(next(f["data"][0]["z"] for f in figures if f["data"] and "z" in f["data"][0]))
    ids = torch.tensor([[WORDS.index(w) + 1 for w in TEXT.split()]])
    with torch.no_grad():
        attentions = hf(ids, output_attentions=True).attentions
    head0 = attentions[-1][0, 0].numpy()  # the last layer is a full-attention layer
    assert drawn.shape == head0.shape == (12, 12)
    assert np.allclose(np.nan_to_num(drawn), head0, atol=1e-5)
    at.selectbox(key="layer").set_value(0).run()  # a lightning layer: its implied weights, said to be no softmax
    clean(at)
    assert any("implied weights" in w.value for w in at.warning)
