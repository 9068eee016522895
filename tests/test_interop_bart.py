"""BART opens, and computes what Hugging Face computes: logits, every attention layer, and greedy generation.

Each factory is a small random-init BartForConditionalGeneration (BartModel is built from the same config and seed)
with every 1-D parameter and final_logits_bias moved off its initial value by hf_factories' ``_build``. In float32,
on a right-padded source batch: the logits (BartModel: the decoder's last hidden states) within 1e-4, and the weights
of every attention layer (the encoder's, the decoder's self- and cross-attention) within 1e-5 of HF's eager
attention, at the real tokens, from an instance and from a directory written by save_pretrained.
"""
from pathlib import Path

import pytest
import torch
import transformers as tf
from streamlit.testing.v1 import AppTest

from hf_factories import V, _build
from test_hf_page_modern import clean, save_with_tokenizer
from transformer.interop import describe_hf, from_hf

LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5
S, T = 12, 7  # source and target lengths
APP = str(Path(__file__).resolve().parent.parent / "app.py")
SIZES = dict(vocab_size=V, init_std=0.2, attn_implementation="eager")


def bart_large_layout():
    # bart-large's settings at a tiny size: GELU, no embedding scale, tied head, decoder_start_token_id 2 (and a
    # forced BOS, set by build)
    return tf.BartConfig(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                         decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48, max_position_embeddings=40,
                         **SIZES)


def bart_scaled_tanh_gelu():
    # scale_embedding (sqrt(d_model)), tanh-approximated GELU, 3 layers of 2 heads, no forced BOS
    return tf.BartConfig(d_model=64, encoder_layers=3, decoder_layers=3, encoder_attention_heads=2,
                         decoder_attention_heads=2, encoder_ffn_dim=80, decoder_ffn_dim=80, max_position_embeddings=24,
                         scale_embedding=True, activation_function="gelu_new", **SIZES)


FACTORIES = {fn.__name__: fn for fn in (bart_large_layout, bart_scaled_tanh_gelu)}
FORCED_BOS = {"bart_large_layout": 0}  # as bart-large's generation config: token 0 is forced as the first token


def build(name: str, head: bool = True, seed: int = 0):
    model = _build(tf.BartForConditionalGeneration if head else tf.BartModel, FACTORIES[name](), seed)
    if head:
        model.generation_config.forced_bos_token_id = FORCED_BOS.get(name)
    return model


def batch(pad_id: int, seed: int = 0):
    """(3, S) source ids right-padded with `pad_id`, its mask, and (3, T) target ids; no special id among them."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V, (3, S), generator=g)
    mask = torch.ones(3, S, dtype=torch.long)
    mask[1, 9:] = 0
    mask[2, 5:] = 0
    return src.masked_fill(mask == 0, pad_id), mask, torch.randint(3, V, (3, T), generator=g)


def largest_gaps(hf_model, ours) -> dict[str, float]:
    """Max abs differences: the output (logits, or the decoder's last hidden states) through our traced and our fused
    path, and each kind of attention layer's weights (the encoder's at its real query rows)."""
    src, mask, tgt = batch(hf_model.config.pad_token_id)
    real = mask.bool()
    last = f"decoder.blocks.{ours.cfg.n_layers - 1}.hook_resid_post"  # post-norm: the blocks end on a LayerNorm
    with torch.no_grad():
        out = hf_model(src, attention_mask=mask, decoder_input_ids=tgt, output_attentions=True)
        logits, trace = ours.run_with_trace(src, tgt, attention_mask=mask, names=["*hook_pattern", last])
        fused = ours(src, tgt, attention_mask=mask)
    if hasattr(out, "logits"):
        expected, traced = out.logits, logits
    else:
        expected, traced, fused = out.last_hidden_state, trace[last], trace[last]
    kinds = {"encoder": (out.encoder_attentions, "encoder.blocks.{}.attn"),
             "decoder self": (out.decoder_attentions, "decoder.blocks.{}.attn"),
             "cross": (out.cross_attentions, "decoder.blocks.{}.cross_attn")}
    gaps = {"output": max((expected - traced).abs().max().item(), (expected - fused).abs().max().item()),
            "spread": expected.std().item()}
    for kind, (theirs, name) in kinds.items():
        assert len(theirs) == ours.cfg.n_layers
        per_layer = [(hf - trace[name.format(i) + ".hook_pattern"]) for i, hf in enumerate(theirs)]
        # the encoder's padded query rows are no token's: only real rows are compared there
        gaps[kind] = max((d.transpose(1, 2)[real] if kind == "encoder" else d).abs().max().item() for d in per_layer)
    gaps["cross masked"] = max(trace[f"decoder.blocks.{i}.cross_attn.hook_pattern"][~real[:, None, None, :].expand(
        -1, ours.cfg.n_heads, T, -1)].abs().max().item() for i in range(ours.cfg.n_layers))
    return gaps


def assert_agree(gaps: dict[str, float]) -> None:
    assert gaps["output"] <= LOGITS_TOL, gaps
    assert max(gaps["encoder"], gaps["decoder self"], gaps["cross"]) <= PATTERN_TOL, gaps
    assert gaps["cross masked"] == 0.0, gaps  # no query reads a padded source token
    assert gaps["spread"] > 1000 * LOGITS_TOL, gaps  # the outputs differ from each other: the comparison has teeth


@pytest.mark.parametrize("head", [True, False], ids=["generation", "base"])
@pytest.mark.parametrize("name", list(FACTORIES))
def test_logits_and_every_attention_layers_weights_match(name, head):
    hf_model = build(name, head)
    ours = from_hf(hf_model)
    assert ours.cfg.arch == "encoder-decoder" and ours.cfg.tie_embeddings
    assert_agree(largest_gaps(hf_model, ours))


def test_a_saved_directory_opens_the_same_model(tmp_path):
    hf_model = build("bart_scaled_tanh_gelu")
    hf_model.save_pretrained(tmp_path)
    ours = from_hf(str(tmp_path))
    assert_agree(largest_gaps(hf_model, ours))
    mapping = describe_hf(tmp_path)  # reads only the config
    assert mapping.hf_class == "BartForConditionalGeneration"
    assert mapping.config == ours.cfg


def test_positions_read_each_table_from_row_two_and_the_logits_bias_is_final_logits_bias():
    hf_model = build("bart_large_layout")
    ours = from_hf(hf_model)
    assert ours.cfg.max_len == 40
    for stack in ("encoder", "decoder"):
        stored = getattr(hf_model.model, stack).embed_positions.weight  # (42, D)
        assert stored.shape[0] == 42 and torch.equal(getattr(ours, stack).pos.table.weight, stored[2:])
    assert torch.equal(ours.unembed.bias, hf_model.final_logits_bias[0])
    assert ours.unembed.bias.abs().min() > 0  # moved off its zero start, so dropping it would show
    # a table read from row 0 shifts every token's position by two: the logits no longer agree
    with torch.no_grad():
        ours.decoder.pos.table.weight.copy_(hf_model.model.decoder.embed_positions.weight[:40])
    assert largest_gaps(hf_model, ours)["output"] > 100 * LOGITS_TOL


@pytest.mark.parametrize("name", list(FACTORIES))
def test_greedy_generation_equals_hugging_faces(name):
    hf_model = build(name)
    ours = from_hf(hf_model)
    src, mask, _ = batch(hf_model.config.pad_token_id)
    c = hf_model.generation_config
    # no stop at the end-of-sequence token, and no forced one at the last step: both run the full 10 tokens
    expected = hf_model.generate(src, attention_mask=mask, max_new_tokens=10, do_sample=False, num_beams=1,
                                 eos_token_id=None, forced_eos_token_id=None)
    # HF starts from decoder_start_token_id and, where forced_bos_token_id is set, forces it as the first token
    start = [c.decoder_start_token_id] + ([c.forced_bos_token_id] if c.forced_bos_token_id is not None else [])
    assert expected[:, :len(start)].tolist() == [start] * 3
    tgt = torch.tensor([start] * 3)  # (3, 1 or 2)
    got = ours.generate(src, 11 - len(start), attention_mask=mask, tgt_ids=tgt)
    assert got.shape == expected.shape == (3, 11)
    assert torch.equal(got, expected)
    assert len(set(got[:, -4:].flatten().tolist())) > 1  # the rows go different ways
    assert torch.equal(ours.generate(src, 11 - len(start), use_cache=False, attention_mask=mask, tgt_ids=tgt), got)


def test_describe_hf_says_what_bart_is():
    mapping = describe_hf(build("bart_large_layout"))
    assert (mapping.family, mapping.hf_class) == ("BART", "BartForConditionalGeneration")
    assert mapping.axes["mask"] == "causal decoder, cross-attention"
    assert mapping.axes["position"] == "learned table of 40 positions"
    assert mapping.axes["norm"] == "post-LayerNorm, eps = 1e-05, plus a LayerNorm after the embeddings"
    assert (mapping.axes["FFN"], mapping.axes["head"]) == ("GELU", "tied to the embedding")
    assert any("row p + 2" in note for note in mapping.notes)
    scaled = describe_hf(build("bart_scaled_tanh_gelu", head=False))
    assert (scaled.hf_class, scaled.axes["head"]) == ("BartModel", "none (hidden states only)")
    assert scaled.config.scale_embeddings and scaled.axes["FFN"] == "GELU (tanh approximation)"


@pytest.mark.parametrize("change,match", [
    (dict(decoder_layers=3), r"BartForConditionalGeneration with encoder_layers=2 and decoder_layers=3 is not "
                             r"supported.*set both layers to the same number"),
    (dict(decoder_attention_heads=2), r"encoder_attention_heads=4 and decoder_attention_heads=2"),
    (dict(encoder_ffn_dim=64), r"encoder_ffn_dim=64 and decoder_ffn_dim=48"),
    (dict(activation_function="silu"), r"activation 'silu' is not supported"),
    (dict(tie_word_embeddings=False), r"tie_word_embeddings=False is not supported.*set tie_word_embeddings=True"),
])
def test_settings_that_do_not_map_are_refused_by_name(change, match):
    config = tf.BartConfig(**bart_large_layout().to_dict() | change)
    with pytest.raises(ValueError, match=match):
        describe_hf(tf.BartForConditionalGeneration(config))
    with pytest.raises(ValueError, match=match):
        from_hf(tf.BartForConditionalGeneration(config))


def test_the_hugging_face_page_opens_bart(tmp_path):
    save_with_tokenizer(build("bart_large_layout"), tmp_path)
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/hf_model.py").run()
    at.text_input(key="hf_path").set_value(str(tmp_path)).run()
    clean(at)
    assert any("BartForConditionalGeneration: the BART family" in h.value for h in at.subheader)
    rows = dict(zip(at.table[0].value["axis"], at.table[0].value["choice"]))
    assert rows["mask"] == "causal decoder, cross-attention"
    next(b for b in at.button if b.label == "Open on every page").click().run()
    clean(at)
    at.switch_page("pages/playground.py").run()
    clean(at)
    assert at.get("plotly_chart")


def test_the_bart_large_card_is_what_bart_large_s_config_opens_as(tmp_path):
    from transformer import MODEL_CARDS

    config = tf.BartConfig()  # its defaults are bart-large's dimensions
    config.architectures = ["BartForConditionalGeneration"]
    config.save_pretrained(tmp_path)
    assert describe_hf(tmp_path).config == MODEL_CARDS["bart"].real["large"]
