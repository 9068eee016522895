"""The "Your Hugging Face model" page opens the families of 2024-2026 from a local directory, with their own
tokenizers, and every page then draws that model's own attention."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from apptest_helpers import values as decode
from hf_factories import FACTORIES

APP = str(Path(__file__).resolve().parent.parent / "app.py")
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "it", "and", "was"]


def save_with_tokenizer(hf_model, directory: Path) -> None:
    """The model and a word-level tokenizer of its own (ids 1..12 for WORDS, 0 unknown), as save_pretrained writes."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]").save_pretrained(directory)
    hf_model.save_pretrained(directory)


def clean(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


@pytest.mark.parametrize("name,hf_class", [("gemma3_pattern", "Gemma3ForCausalLM"),
                                           ("deepseek_v3_q_lora", "DeepseekV3ForCausalLM"),
                                           ("gpt_oss_small", "GptOssForCausalLM")])
def test_a_modern_family_opens_with_its_tokenizer_and_the_playground_draws_its_attention(tmp_path, name, hf_class):
    hf = FACTORIES[name]()
    save_with_tokenizer(hf, tmp_path)
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/hf_model.py").run()
    at.text_input(key="hf_path").set_value(str(tmp_path)).run()
    clean(at)
    assert any(hf_class in h.value for h in at.subheader)
    next(b for b in at.button if b.label == "Open on every page").click().run()
    at.sidebar.text_area(key="text").set_value("the cat sat on the mat and the dog ran to it").run()
    at.switch_page("pages/playground.py").run()
    clean(at)
    figures = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    drawn = decode(next(f["data"][0]["z"] for f in figures if f["data"] and "z" in f["data"][0]))
    ids = torch.tensor([[WORDS.index(w) + 1 for w in "the cat sat on the mat and the dog ran to it".split()]])
    with torch.no_grad():
        attentions = hf(ids, output_attentions=True).attentions
    head0 = attentions[-1][0, 0].numpy()  # the playground opens on the last layer, head 0
    assert drawn.shape == head0.shape == (12, 12)  # one row per word: the model's own tokens
    assert np.allclose(np.nan_to_num(drawn), head0, atol=1e-5)
