"""Where weights come from, under AppTest: shipped checkpoints by default, the Train page, your own
checkpoint on every page, and a local Hugging Face model on every page."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from benchmarks.app_latency import app_pages
from transformer import checkpoint
from transformer.training.tasks import get_task
from ui.app.state import DEFAULT_PRESET
from apptest_helpers import values as decode

pytestmark = pytest.mark.slow

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def clean(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at




def pattern_chart(at: AppTest) -> list:
    """The z values of the first heatmap the page drew."""
    figures = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    return next(f["data"][0]["z"] for f in figures if f["data"] and "z" in f["data"][0])


def test_default_view_shows_a_trained_checkpoint_with_its_task_input():
    at = clean(AppTest.from_file(APP, default_timeout=120))
    at.run()
    at.switch_page("pages/playground.py").run()
    clean(at)
    assert any("Trained weights" in s.value for s in at.success)
    entry = next(e for e in checkpoint.shipped() if e.preset == DEFAULT_PRESET)
    assert entry.task == "language"  # any typed text runs on trained weights
    assert at.sidebar.text_area(key="text").value == get_task(entry.task).example_text


def test_an_axis_away_from_every_checkpoint_says_untrained_and_offers_training():
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/playground.py").run()
    at.sidebar.number_input(key="n_layers").set_value(3).run()
    clean(at)
    assert any("Untrained weights" in w.value for w in at.warning)
    assert not any("Trained weights" in s.value for s in at.success)


def test_train_page_trains_and_its_model_opens_on_every_page():
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    at.switch_page("pages/train.py").run()
    clean(at)
    assert at.selectbox(key="train_task").options  # tasks for the sidebar's architecture
    at.number_input(key="train_steps").set_value(20).run()
    next(b for b in at.button if b.label == "Train").click().run()
    clean(at)
    assert any("Training finished" in h.value for h in at.subheader)
    assert len(at.get("plotly_chart")) >= 2  # loss curve and attention heatmap
    assert any(d.label.startswith("Download the checkpoint") for d in at.get("download_button"))

    next(b for b in at.button if b.label == "Use it on every page").click().run()
    weights = at.session_state["weights"]
    assert weights.startswith("ckpt:")
    at.switch_page("pages/stepper.py").run()
    clean(at)
    assert any("your checkpoint" in s.value for s in at.success)
    _, meta = checkpoint.load(weights[len("ckpt:"):])
    task = get_task(meta["task"])
    assert at.sidebar.text_area(key="text").value == task.example_text

    next(b for b in at.sidebar.button if b.label == "Back to the presets").click().run()
    assert "weights" not in at.session_state


def test_hugging_face_page_opens_a_local_model_on_every_page(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    hf = LlamaForCausalLM(LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
    hf.save_pretrained(tmp_path)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/hf_model.py").run()
    clean(at)
    at.text_input(key="hf_path").set_value(str(tmp_path)).run()
    clean(at)
    assert any("LlamaForCausalLM" in h.value for h in at.subheader)
    next(b for b in at.button if b.label == "Open on every page").click().run()
    at.switch_page("pages/playground.py").run()
    clean(at)
    assert any("Hugging Face model" in s.value for s in at.success)

    # the playground draws the Hugging Face model's own attention, head by head
    grid = pattern_chart(at)
    text = at.sidebar.text_area(key="text").value
    ids = torch.tensor([[ord(c) % 128 for c in text]])
    hf.config._attn_implementation = "eager"
    with torch.no_grad():
        attentions = hf(ids, output_attentions=True).attentions
    drawn = decode(grid)
    head0 = attentions[-1][0, 0].numpy()  # the playground opens on the last layer
    assert drawn.shape == head0.shape
    assert np.allclose(np.nan_to_num(drawn), head0, atol=1e-5)


def test_hugging_face_page_reports_a_missing_model_and_keeps_working():
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/hf_model.py").run()
    at.text_input(key="hf_path").set_value("/no/such/model/here").run()
    assert not at.exception
    assert any("Cannot open" in e.value for e in at.error)
    at.switch_page("pages/playground.py").run()
    clean(at)


# the attention of 2024-2026, as a checkpoint (or a Hugging Face model) can carry it although the sidebar has no
# widget for it: every page opens on it, drawing what applies and saying why where a view does not
MODERN = {
    "MLA, sinks, soft caps, local/global layers, sandwich norms, DeepSeek-style MoE": dict(
        kv_rank=16, q_rank=24, head_dim=12, rope_dim=4, v_head_dim=6, sinks=True, attn_softcap=20.0,
        logit_softcap=30.0, sliding_window=4, layer_pattern="alternate", norm_position="sandwich", ffn="moe",
        n_experts=4, top_k=2, n_shared_experts=1, first_dense_layers=1, router="sigmoid", norm_plus_one=True,
        scale_embeddings=True),
    "GQA with QK-norm, an output gate, YaRN, norms after the sublayer, GeGLU": dict(
        n_kv_heads=2, head_dim=10, qk_norm="head", attn_gate=True, ffn="geglu", norm_position="after",
        rope_scaling="yarn", rope_factor=2.0, qkv_bias=True, rope_local_theta=1000.0, sliding_window=3,
        layer_pattern="1:1"),
}
PAGE_SCRIPTS = [script for script, _title in app_pages()]  # every page app.py lists


@pytest.mark.parametrize("name", MODERN)
def test_a_checkpoint_with_modern_attention_opens_on_every_page(tmp_path, name):
    from transformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=128, d_model=32, n_heads=4, n_layers=2, max_len=64, **MODERN[name])
    path = tmp_path / "modern"
    checkpoint.save(Transformer(cfg, device="cpu").eval(), path)
    for page in PAGE_SCRIPTS:
        at = AppTest.from_file(APP, default_timeout=180)
        at.query_params["weights"] = f"ckpt:{path}"
        at.query_params["text"] = "the cat sat"
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert not at.error, (page, [e.value for e in at.error])
