"""The "Your Hugging Face model" page opens Kimi Linear from a local directory with its tokenizer, names its layers'
kinds, and the playground then draws the model's own latent attention."""
import json
from pathlib import Path

import numpy as np
import torch
from streamlit.testing.v1 import AppTest

from apptest_helpers import values as decode
from test_hf_page_modern import APP, WORDS, clean, save_with_tokenizer
from test_interop_kimi import kimi_checkpoint_lists


def test_kimi_linear_opens_with_its_tokenizer_and_the_playground_draws_its_last_latent_attention_layer(tmp_path):
    hf = kimi_checkpoint_lists()  # layers 3 and 7 latent attention, the others Kimi delta attention
    save_with_tokenizer(hf, tmp_path)
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/hf_model.py").run()
    at.text_input(key="hf_path").set_value(str(tmp_path)).run()
    clean(at)
    assert any("KimiLinearForCausalLM" in h.value for h in at.subheader)
    shown = " ".join(str(getattr(e, "value", "")) for e in at.main)
    assert "Kimi delta attention" in shown
    next(b for b in at.button if b.label == "Open on every page").click().run()
    text = "the cat sat on the mat and the dog ran to it"
    at.sidebar.text_area(key="text").set_value(text).run()
    at.switch_page("pages/playground.py").run()
    clean(at)
    figures = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    drawn = decode(next(f["data"][0]["z"] for f in figures if f["data"] and "z" in f["data"][0]))
    ids = torch.tensor([[WORDS.index(w) + 1 for w in text.split()]])
    with torch.no_grad():
        attentions = hf(ids, output_attentions=True, use_cache=False).attentions  # the latent-attention layers
    head0 = attentions[-1][0, 0].numpy()  # the playground opens on the last layer (7, latent attention), head 0
    assert drawn.shape == head0.shape == (12, 12)
    assert np.allclose(np.nan_to_num(drawn), head0, atol=1e-5)
