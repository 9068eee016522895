"""The sidebar's Tokens choice (characters / BPE) and what it changes on the pages: the weights that read it (a shipped
checkpoint, or random weights said so), whole-token predictions, a second text in the chosen tokens, the Permutation
page's shuffle of whole words, and the lesson step that counts a sentence's tokens."""
import json

import pytest
import torch

from transformer import AXES, PRESETS, TransformerConfig, checkpoint, probes, tokens
from transformer.model import Transformer
from ui.compute.predictions import predict
from ui.compute.probe_measure import shuffle_order, shuffled_text
from ui.compute.shipped import trained_config
from ui.compute.tokens import Tokens, encode_text, ids_to_text
from ui.compute.weights import WeightsSource, weights_info
from apptest_helpers import assert_clean, figures_by_title, open_page

SENTENCE = "I ate rice. The cat sat on the mat."
BPE = tokens.get_tokenizer("bpe")


def drawn_labels(at) -> list[list]:
    """The x labels of every drawn figure that has them."""
    return [list(spec["data"][0]["x"]) for spec in figures_by_title(at).values()
            if spec["data"] and isinstance(spec["data"][0].get("x"), list)]


# --- the weights a Tokens choice reads ----------------------------------------------------------------------


def test_only_a_learned_tokenizer_changes_the_default_weights_string():
    assert WeightsSource.read_in("characters") == ""
    assert WeightsSource.read_in("bpe") == "tokens:bpe"
    assert WeightsSource.parse("tokens:bpe") == WeightsSource("tokens", "bpe")
    with pytest.raises(ValueError, match="'words' is not a valid choice"):
        WeightsSource.read_in("words")


def test_random_weights_read_in_bpe_encode_the_text_as_pieces_after_bos():
    config_json = TransformerConfig(vocab_size=BPE.vocab_size, d_model=32, n_heads=2, n_layers=2).to_json()
    info = weights_info(config_json, "tokens:bpe")
    assert info.kind == "random" and info.tokens == "bpe" and "byte-level BPE" in info.label
    encoded = encode_text(SENTENCE, config_json, "tokens:bpe")
    assert encoded.ids == [0, *BPE.encode(SENTENCE)] and encoded.pieces
    assert encoded.labels[:4] == ["<bos>", "I", "␣at", "e"]
    # characters: the same config without the tokenizer wraps each character into the vocabulary, as before
    assert encode_text("ab", config_json).ids == [ord("a"), ord("b")]


def test_a_shipped_checkpoint_is_chosen_only_for_the_tokens_it_reads():
    for name in AXES["tokens"].choices:
        trained = trained_config(PRESETS["llama2"], "language", name)
        if trained is not None:
            assert weights_info(trained.to_json()).tokens == name
    characters = trained_config(PRESETS["llama2"], "language", "characters")
    assert characters is not None and weights_info(characters.to_json()).kind == "trained"


# --- the sidebar ---------------------------------------------------------------------------------------------


def test_bpe_without_a_checkpoint_says_so_and_shows_random_weights_reading_pieces():
    at = assert_clean(open_page("pages/playground.py", SENTENCE, preset="llama2",
                                        n_layers=PRESETS["llama2"].n_layers, tokens="bpe"))
    assert at.query_params["tokens"] == "bpe"
    said = " ".join(i.value for i in at.sidebar.info)
    assert "No shipped LLaMA 2 checkpoint reads byte-level BPE tokens yet" in said and "random weights" in said
    assert "Choose characters for the trained weights" in said
    assert any("Untrained weights" in w.value and "byte-level BPE" in w.value for w in at.warning)
    assert any(labels[:3] == ["0:<bos>", "1:I", "2:␣at"] for labels in drawn_labels(at))

    at.sidebar.radio(key="tokens").set_value("characters").run()  # back to the trained character checkpoint
    assert_clean(at)
    assert at.query_params["tokens"] == "characters" and not at.sidebar.info
    assert any("Trained weights" in s.value for s in at.success)


def test_an_unknown_tokenizer_in_a_link_falls_back_to_characters():
    at = assert_clean(open_page("pages/playground.py", "abc", tokens="words"))
    assert at.sidebar.radio(key="tokens").value == "characters" and at.query_params["tokens"] == "characters"


def test_chosen_weights_bring_their_own_tokenizer_and_hide_the_choice(tmp_path):
    model = Transformer(TransformerConfig(vocab_size=BPE.vocab_size, d_model=32, n_heads=2, n_layers=2, max_len=64))
    checkpoint.save(model, tmp_path / "tiny-bpe", {"task": "language", "tokenizer": BPE.describe()})
    at = assert_clean(open_page("pages/playground.py", SENTENCE, weights=f"ckpt:{tmp_path / 'tiny-bpe'}"))
    assert not [r for r in at.sidebar.radio if r.key == "tokens"]


# --- whole-token predictions ------------------------------------------------------------------------------------


def test_a_bpe_models_prediction_shows_whole_pieces_and_its_continuation_as_text(tmp_path):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=BPE.vocab_size, d_model=32, n_heads=2, n_layers=2, max_len=64))
    checkpoint.save(model, tmp_path / "tiny-bpe", {"task": "language", "tokenizer": BPE.describe()})
    weights = f"ckpt:{tmp_path / 'tiny-bpe'}"
    config_json = model.cfg.to_json()
    ids = (0, *BPE.encode("The cat"))
    prediction = predict(config_json, 0, ids, weights, top_k=5, new_tokens=6)
    top_ids = torch.softmax(model(torch.tensor([ids]))[0, -1], -1).topk(5).indices.tolist()
    assert [label for label, _ in prediction.top] == BPE.pieces(top_ids)  # whole pieces, spaces visible
    greedy = predict(config_json, 0, ids, weights, temperature=0.0, top_k=5, new_tokens=6)
    with torch.no_grad():
        new_ids = model.generate(torch.tensor([ids]), max_new_tokens=6)[0, len(ids):].tolist()  # greedy
    assert greedy.continuation == BPE.pieces(new_ids)
    assert greedy.continuation_text == BPE.decode(new_ids)  # text, not labels: a piece's space is a space
    assert ids_to_text(BPE.encode(" the cat"), config_json, weights) == " the cat"
    # the language task's character checkpoints still join their bytes back into characters
    byte_ids = [tokens._FIRST_BYTE_ID + b for b in "é".encode("utf-8")]
    language = trained_config(PRESETS["llama2"], "language")
    assert ids_to_text(byte_ids, language.to_json()) == "é"
