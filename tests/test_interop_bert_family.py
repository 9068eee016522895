"""RoBERTa and DistilBERT open, and compute what Hugging Face computes, as BERT does.

Each factory is a small random-init model (the masked-LM class; the base class is built from the same config and
seed) with every 1-D parameter (norm weights and biases, linear biases, the head's bias) moved off its initial value
by hf_factories' ``_build``. In float32, on a right-padded batch: the MLM logits (the base model's last hidden states)
within 1e-4 and every layer's attention weights within 1e-5 of HF's eager attention, at the real tokens, from an
instance and from a directory written by save_pretrained; the "Your Hugging Face model" page opens them and the
playground draws HF's own attention. HF gives a padding token RoBERTa's padding row of the
position table and us the next position: the padded rows differ and are not compared (their keys are masked alike).
"""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as tf
from streamlit.testing.v1 import AppTest

from apptest_helpers import values as decode
from hf_factories import COMMON, V, _build
from test_hf_page_modern import WORDS, clean, save_with_tokenizer
from transformer.interop import describe_hf, from_hf
from transformer.positions import sinusoidal_table

LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5
T = 14
APP = str(Path(__file__).resolve().parent.parent / "app.py")
TEXT = "the cat sat on the mat and the dog ran to it"
SIZES = dict(initializer_range=0.2, attn_implementation="eager", bos_token_id=None, eos_token_id=None)


def roberta_released_padding():
    # pad_token_id 1 as in the released models: the first real token reads row 2; one token type; GELU
    config = tf.RobertaConfig(vocab_size=V, hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
                              intermediate_size=96, max_position_embeddings=40, type_vocab_size=1, pad_token_id=1,
                              **SIZES)
    return tf.RobertaForMaskedLM, config


def roberta_relu_two_types_untied():
    # pad 0 (rows from 1), ReLU in the FFN (the head keeps its exact GELU), two token types (type 0 is used),
    # its own output matrix, 3 layers of 2 heads
    config = tf.RobertaConfig(hidden_size=32, num_attention_heads=2, num_hidden_layers=3, intermediate_size=48,
                              max_position_embeddings=30, type_vocab_size=2, hidden_act="relu",
                              tie_word_embeddings=False, **COMMON, initializer_range=0.2)
    return tf.RobertaForMaskedLM, config


def distilbert_learned():
    config = tf.DistilBertConfig(dim=64, n_heads=4, n_layers=2, hidden_dim=96, max_position_embeddings=40,
                                 **COMMON, initializer_range=0.2)
    return tf.DistilBertForMaskedLM, config


def distilbert_sinusoidal_untied():
    # sine/cosine positions, tanh GELU (FFN and head alike), its own output matrix, 3 layers of 8 heads
    config = tf.DistilBertConfig(dim=64, n_heads=8, n_layers=3, hidden_dim=80, max_position_embeddings=32,
                                 sinusoidal_pos_embds=True, activation="gelu_new", tie_word_embeddings=False,
                                 **COMMON, initializer_range=0.2)
    return tf.DistilBertForMaskedLM, config


FACTORIES = {fn.__name__: fn for fn in (roberta_released_padding, roberta_relu_two_types_untied, distilbert_learned,
                                        distilbert_sinusoidal_untied)}
BASE_CLASS = {tf.RobertaForMaskedLM: tf.RobertaModel, tf.DistilBertForMaskedLM: tf.DistilBertModel}


def build(name: str, head: bool = True, seed: int = 0):
    mlm_class, config = FACTORIES[name]()
    return _build(mlm_class if head else BASE_CLASS[mlm_class], config, seed)


def padded_batch(pad_id: int, seed: int = 0):
    """(3, T) ids with no padding id among the real tokens, right-padded with `pad_id`, and the mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, V, (3, T), generator=g)
    mask = torch.ones(3, T, dtype=torch.long)
    mask[1, 10:] = 0
    mask[2, 6:] = 0
    return ids.masked_fill(mask == 0, pad_id), mask


def largest_gaps(hf_model, ours) -> dict[str, float]:
    """Max abs difference at the real tokens: the output (MLM logits, or the last hidden states) through our traced
    and our fused path, and every layer's attention weights (real query rows)."""
    ids, mask = padded_batch(hf_model.config.pad_token_id)
    real = mask.bool()
    last = f"blocks.{ours.cfg.n_layers - 1}.hook_resid_post"  # post-norm: the blocks end on a LayerNorm
    with torch.no_grad():
        out = hf_model(ids, attention_mask=mask, output_attentions=True)
        logits, trace = ours.run_with_trace(ids, attention_mask=mask, names=["*hook_pattern", last])
        fused = ours(ids, attention_mask=mask)
    if hasattr(out, "logits"):
        expected, traced = out.logits, logits
    else:
        expected, traced, fused = out.last_hidden_state, trace[last], trace[last]
    assert len(out.attentions) == ours.cfg.n_layers
    patterns = [(hf - trace[f"blocks.{i}.attn.hook_pattern"]).transpose(1, 2)[real].abs().max().item()
                for i, hf in enumerate(out.attentions)]
    return {"output": max((expected - traced)[real].abs().max().item(), (expected - fused)[real].abs().max().item()),
            "pattern": max(patterns), "spread": expected[real].std().item(),
            "peak": trace["blocks.0.attn.hook_pattern"][0].max().item()}


def assert_agree(gaps: dict[str, float]) -> None:
    assert gaps["output"] <= LOGITS_TOL, gaps
    assert gaps["pattern"] <= PATTERN_TOL, gaps
    # the comparison has teeth: outputs far apart from each other, attention far from uniform
    assert gaps["spread"] > 1000 * LOGITS_TOL and gaps["peak"] > 3 / T, gaps


@pytest.mark.parametrize("head", [True, False], ids=["mlm", "base"])
@pytest.mark.parametrize("name", list(FACTORIES))
def test_logits_and_every_layers_attention_weights_match(name, head):
    hf_model = build(name, head)
    assert_agree(largest_gaps(hf_model, from_hf(hf_model)))


@pytest.mark.parametrize("head", [True, False], ids=["mlm", "base"])
@pytest.mark.parametrize("name", ["roberta_released_padding", "distilbert_sinusoidal_untied"])
def test_a_saved_directory_opens_the_same_model(tmp_path, name, head):
    hf_model = build(name, head)
    hf_model.save_pretrained(tmp_path)
    ours = from_hf(str(tmp_path))
    assert_agree(largest_gaps(hf_model, ours))
    mapping = describe_hf(tmp_path)  # reads only the config
    assert mapping.hf_class == type(hf_model).__name__
    assert mapping.config == ours.cfg


def test_roberta_reads_its_table_from_row_padding_idx_plus_one():
    hf_model = build("roberta_released_padding")
    ours = from_hf(hf_model)
    emb = hf_model.roberta.embeddings
    assert ours.cfg.max_len == 40 - 2
    expected = emb.position_embeddings.weight[2:] + emb.token_type_embeddings.weight[0]  # (38, D)
    assert torch.equal(ours.pos.table.weight, expected)
    # a table read from row 0 would move every token's embedding: the logits would no longer agree
    with torch.no_grad():
        ours.pos.table.weight.copy_(emb.position_embeddings.weight[:38] + emb.token_type_embeddings.weight[0])
    assert largest_gaps(hf_model, ours)["output"] > 100 * LOGITS_TOL


def test_distilbert_sinusoidal_positions_are_ours_computed():
    hf_model = build("distilbert_sinusoidal_untied")
    ours = from_hf(hf_model)
    assert ours.cfg.position == "sinusoidal"
    assert not any("pos" in name for name, _ in ours.named_parameters())  # no table of weights: the formula
    stored = hf_model.distilbert.embeddings.position_embeddings.weight
    assert (stored - sinusoidal_table(32, 64)).abs().max() <= 1e-5
    assert from_hf(build("distilbert_learned")).cfg.position == "learned"
    assert from_hf(hf_model.to(torch.bfloat16)).cfg.dtype == "bfloat16"  # its table rounded, still the formula's


def test_describe_hf_says_what_each_model_is():
    roberta = describe_hf(build("roberta_released_padding"))
    assert (roberta.family, roberta.hf_class) == ("RoBERTa", "RobertaForMaskedLM")
    assert roberta.axes["position"] == "learned table of 38 positions"
    assert roberta.axes["mask"] == "none (bidirectional)"
    assert roberta.axes["head"] == "masked-LM transform, tied to the embedding"
    assert roberta.axes["norm"] == "post-LayerNorm, eps = 1e-12, plus a LayerNorm after the embeddings"
    assert any("padding_idx + 1" in note for note in roberta.notes)
    relu = describe_hf(build("roberta_relu_two_types_untied"))
    assert relu.axes["FFN"] == "ReLU" and relu.axes["head"] == "masked-LM transform, its own matrix"
    distil = describe_hf(build("distilbert_sinusoidal_untied", head=False))
    assert (distil.family, distil.hf_class) == ("DistilBERT", "DistilBertModel")
    assert distil.axes["head"] == "none (hidden states only)"
    assert (distil.axes["position"], distil.axes["FFN"]) == ("sinusoidal", "GELU (tanh approximation)")
    assert distil.axes["KV heads"] == "MHA: 8 query heads, 8 kv heads"


def _refused(model_class, config, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        from_hf(model_class(config))
    with pytest.raises(ValueError, match=match):
        describe_hf(model_class(config))


def test_settings_that_do_not_map_are_refused_by_name():
    _, roberta = roberta_released_padding()
    _refused(tf.RobertaForMaskedLM, roberta.__class__(**roberta.to_dict() | dict(hidden_act="gelu_new")),
             r"RobertaForMaskedLM with hidden_act='gelu_new' and a masked-LM head applying 'gelu' is not supported.*"
             r"set hidden_act='gelu'")
    _refused(tf.RobertaModel, roberta.__class__(**roberta.to_dict() | dict(max_position_embeddings=2)),
             r"RobertaModel with max_position_embeddings=2 and pad_token_id=1 is not supported.*row")
    _refused(tf.RobertaModel, roberta.__class__(**roberta.to_dict() | dict(pad_token_id=None)),
             r"RobertaModel with pad_token_id=None is not supported: RoBERTa counts positions from padding_idx \+ 1")
    _refused(tf.RobertaModel, roberta.__class__(**roberta.to_dict() | dict(position_embedding_type="relative_key")),
             r"position_embedding_type='relative_key' is not supported")
    _refused(tf.RobertaModel, roberta.__class__(**roberta.to_dict() | dict(is_decoder=True)),
             r"RobertaModel with is_decoder=True or add_cross_attention=True is not supported")
    _, distil = distilbert_learned()
    _refused(tf.DistilBertForMaskedLM, distil.__class__(**distil.to_dict() | dict(activation="relu")),
             r"DistilBertForMaskedLM with activation='relu' and a masked-LM head applying 'relu'.*"
             r"set activation='gelu'")
    _refused(tf.DistilBertModel, distil.__class__(**distil.to_dict() | dict(activation="silu")),
             r"activation 'silu' is not supported")


def test_a_sinusoidal_table_that_was_changed_is_refused():
    hf_model = build("distilbert_sinusoidal_untied", head=False)
    with torch.no_grad():
        hf_model.base_model.embeddings.position_embeddings.weight[5].add_(0.5)
    with pytest.raises(ValueError, match=r"sinusoidal_pos_embds=True and a position table 0.5 away.*"
                                         r"sinusoidal_pos_embds=False"):
        from_hf(hf_model)


@pytest.mark.parametrize("name,hf_class", [("roberta_relu_two_types_untied", "RobertaForMaskedLM"),
                                           ("distilbert_sinusoidal_untied", "DistilBertForMaskedLM")])
def test_the_hugging_face_page_opens_them_and_the_playground_draws_their_attention(tmp_path, name, hf_class):
    hf = build(name)
    save_with_tokenizer(hf, tmp_path)
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/hf_model.py").run()
    at.text_input(key="hf_path").set_value(str(tmp_path)).run()
    clean(at)
    assert any(hf_class in h.value for h in at.subheader)
    next(b for b in at.button if b.label == "Open on every page").click().run()
    at.sidebar.text_area(key="text").set_value(TEXT).run()
    at.switch_page("pages/playground.py").run()
    clean(at)
    figures = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    drawn = decode(next(f["data"][0]["z"] for f in figures if f["data"] and "z" in f["data"][0]))
    ids = torch.tensor([[WORDS.index(w) + 1 for w in TEXT.split()]])  # the word-level tokenizer's ids, no padding
    with torch.no_grad():
        attentions = hf(ids, output_attentions=True).attentions
    head0 = attentions[-1][0, 0].numpy()  # the playground opens on the last layer, head 0: every key, both ways
    assert drawn.shape == head0.shape == (12, 12)
    assert np.allclose(np.nan_to_num(drawn), head0, atol=PATTERN_TOL)
    assert (head0[np.triu_indices(12, 1)] > 0).all()  # an encoder: each word also attends to the words after it
