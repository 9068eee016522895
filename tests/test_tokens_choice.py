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
    at = assert_clean(open_page("pages/playground.py", SENTENCE, preset="falcon",
                                n_layers=PRESETS["falcon"].n_layers, tokens="bpe"))
    assert at.query_params["tokens"] == "bpe"
    said = " ".join(i.value for i in at.sidebar.info)
    assert "No shipped Falcon checkpoint reads byte-level BPE tokens yet" in said and "random weights" in said
    assert "Choose characters for the trained weights" in said
    assert any("Untrained weights" in w.value and "byte-level BPE" in w.value for w in at.warning)
    assert any(labels[:3] == ["0:<bos>", "1:I", "2:␣at"] for labels in drawn_labels(at))

    at.sidebar.radio(key="tokens").set_value("characters").run()  # back to the trained character checkpoint
    assert_clean(at)
    assert at.query_params["tokens"] == "characters" and not at.sidebar.info
    assert any("Trained weights" in s.value for s in at.success)


def test_llama2_in_bpe_opens_its_trained_bpe_checkpoint_and_characters_open_the_character_one():
    at = assert_clean(open_page("pages/playground.py", SENTENCE, preset="llama2",
                                n_layers=PRESETS["llama2"].n_layers, tokens="bpe"))
    assert not at.sidebar.info  # nothing to apologise for: the trained weights read BPE
    assert any("Trained weights" in s.value and "llama2-bpe-language" in s.value for s in at.success)
    assert any(labels[:3] == ["0:<bos>", "1:I", "2:␣at"] for labels in drawn_labels(at))  # pieces on the axes

    at.sidebar.radio(key="tokens").set_value("characters").run()
    assert_clean(at)
    assert any("Trained weights" in s.value and "llama2-language" in s.value and "bpe" not in s.value
               for s in at.success)
    assert any(labels[:3] == ["0:<bos>", "1:I", "2:␣"] for labels in drawn_labels(at))  # one character each


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


# --- the Permutation page shuffles whole words when the tokens are pieces ---------------------------------------


def test_a_word_permutation_moves_whole_words_and_keeps_their_pieces_in_order():
    words = [0, 1, 1, 2, 3, 3, 3]  # <bos>, then words of 2, 1 and 3 pieces
    for seed in range(20):
        order = probes.seeded_word_permutation(words, seed, keep_first=True).tolist()
        assert sorted(order) == list(range(7)) and order[0] == 0 and order != list(range(7))
        moved = [words[i] for i in order]
        assert all(moved[j] != moved[j - 1] or order[j] == order[j - 1] + 1 for j in range(1, 7))  # pieces together
        assert [w for j, w in enumerate(moved) if j == 0 or w != moved[j - 1]] != [0, 1, 2, 3]  # words reordered
    assert probes.seeded_word_permutation([0, 0, 0], 3).tolist() == [0, 1, 2]  # one word: nothing to move


def test_pieces_group_into_words_and_characters_do_not():
    pieces = Tokens([0, 42, 407, 70, 405], ["<bos>", "I", "␣at", "e", "␣r"], None, pieces=True)
    assert pieces.words() == [0, 1, 2, 2, 3]
    assert Tokens([1, 2], ["a", "b"], None).words() is None


def test_i_ate_rice_shuffles_into_its_words_in_another_order():
    config_json = TransformerConfig(vocab_size=BPE.vocab_size, d_model=32, n_heads=2, n_layers=2).to_json()
    text = encode_text("I ate rice", config_json, "tokens:bpe")  # <bos> I ␣at e ␣r ice
    assert shuffled_text(text, range(len(text.ids))) == "<bos> I ate rice"
    seen = {shuffled_text(text, shuffle_order(text, len(text.ids), seed)) for seed in range(12)}
    assert "<bos> rice ate I" in seen
    assert all(sorted(s.split()) == sorted("<bos> I ate rice".split()) and s.startswith("<bos> ") for s in seen)
    characters = encode_text("abc", TransformerConfig(d_model=32, n_heads=2, n_layers=2).to_json())
    assert len(shuffle_order(characters, 3, 1)) == 3 and shuffled_text(characters, (2, 1, 0)) == "c b a"


def test_the_permutation_page_shuffles_words_with_bpe_and_characters_without():
    at = assert_clean(open_page("pages/permutation.py", "I ate rice and the dog ran", tokens="bpe"))
    shown = " ".join(m.value for m in at.markdown)
    assert "**Text:** `<bos> I ate rice and the dog ran`" in shown
    shuffled = shown.split("**Shuffled:** `")[1].split("`")[0]
    assert sorted(shuffled.split()) == sorted("<bos> I ate rice and the dog ran".split())
    assert any("moves whole words" in c.value for c in at.caption)
    verdict = next(m.value for m in at.metric if m.label == "verdict")
    assert verdict in ("exactly 0", "zero up to float rounding")  # the word shuffle is a shuffle of tokens all the same

    at = assert_clean(open_page("pages/permutation.py", "I ate rice"))
    assert not any("moves whole words" in c.value for c in at.caption)


# --- a second text goes through the chosen tokenizer ---------------------------------------------------------


def test_the_masks_pages_second_text_is_read_in_the_chosen_tokens():
    at = open_page("pages/masks.py", SENTENCE, tokens="bpe", mask_tab="padding", mask_text2="a dog ran")
    assert_clean(at)
    second = figures_by_title(at)["sequence 2 of the batch"]
    assert "␣dog" in json.dumps(second, ensure_ascii=False)


def test_compare_reads_bs_text_in_as_pieces_when_a_reads_bpe():
    at = assert_clean(open_page("pages/compare.py", SENTENCE, tokens="bpe", cmp_base="mistral"))
    (spec,) = [spec for title, spec in figures_by_title(at).items() if title.startswith("layer 0, head 0")]
    maps = {trace["name"]: trace["x"] for trace in spec["data"]}
    assert maps["B"] == maps["A"] and "8:␣cat" in maps["B"]  # B, from a preset, reads the same BPE pieces as A


# --- the lesson step ------------------------------------------------------------------------------------------


def test_the_lesson_counts_the_sentence_in_bpe_pieces():
    from ui.lessons.steps import STEPS, lesson_model

    step = next(s for s in STEPS if s.slug == "how-many-tokens")
    assert STEPS.index(step) == 1  # near the start: right after the chapter before attention
    live, m = step.build(), lesson_model()
    assert live.choices[live.answer] == f"{len(BPE.encode(m.text)):,} tokens"
    assert f"{len(m.text):,} tokens" in live.choices  # one per character, as the lessons' model reads it
    assert step.link(live, m).startswith("tokens?")


# --- bad input --------------------------------------------------------------------------------------------------


def test_one_word_or_no_text_in_bpe_gets_a_message_not_a_traceback():
    at = open_page("pages/permutation.py", "rice", tokens="bpe")
    assert not at.exception and any("at least two words" in e.value for e in at.error)
    at = open_page("pages/playground.py", "", tokens="bpe")
    assert not at.exception and any("empty" in e.value for e in at.error)


def test_a_checkpoint_whose_tokenizer_is_not_its_vocabulary_says_so_on_the_page(tmp_path):
    model = Transformer(TransformerConfig(vocab_size=512, d_model=32, n_heads=2, n_layers=2, max_len=64))
    checkpoint.save(model, tmp_path / "wrong-bpe", {"task": "language", "tokenizer": BPE.describe()})
    at = open_page("pages/playground.py", SENTENCE, weights=f"ckpt:{tmp_path / 'wrong-bpe'}")
    assert not at.exception
    assert any("2048 tokens" in e.value and "vocab_size is 512" in e.value for e in at.error)


# --- every page the lecture's examples use runs on BPE pieces ----------------------------------------------------


@pytest.mark.parametrize("page", ["stepper", "interpret", "kv_heads", "positions"])
def test_the_pages_run_on_bpe_pieces(page):
    at = assert_clean(open_page(f"pages/{page}.py", SENTENCE, tokens="bpe"))
    assert any("byte-level BPE" in w.value for w in at.warning)  # the banner: random weights reading BPE


def test_the_flash_page_tiles_the_live_models_bpe_pieces():
    at = assert_clean(open_page("pages/flash.py", SENTENCE, tokens="bpe", flash_src="live"))
    n_tokens = 1 + len(BPE.encode(SENTENCE))  # <bos> and the pieces
    assert any(f"on its {n_tokens}-token input" in c.value for c in [*at.caption, *at.markdown, *at.info])


# (the lessons run a model of their own, the same for a whole class: their BPE step is tested below)
TRAINED_BPE_PAGES = ["playground", "stepper", "compare", "interpret", "kv_heads", "positions", "permutation"]


@pytest.mark.parametrize("page", TRAINED_BPE_PAGES)
def test_the_lecture_pages_run_on_the_trained_llama2_bpe_checkpoint(page):
    at = assert_clean(open_page(f"pages/{page}.py", SENTENCE, preset="llama2", n_layers=PRESETS["llama2"].n_layers,
                                tokens="bpe"))
    assert any("llama2-bpe-language" in s.value for s in at.success), page  # trained weights, reading BPE
    assert not any("Untrained weights" in w.value for w in at.warning)


def test_the_lessons_no_positions_step_shuffles_whole_words_read_by_the_bpe_checkpoint():
    from ui.lessons.steps import STEPS, lesson_model
    from ui.lessons.steps.lesson_model import lesson_pieces

    step = next(s for s in STEPS if s.slug == "no-positions")
    live, (config_json, pieces) = step.build(), lesson_pieces()
    assert json.loads(config_json)["vocab_size"] == BPE.vocab_size and pieces.pieces
    assert pieces.ids[1:] == BPE.encode(lesson_model().text)[:len(pieces.ids) - 1]
    shuffled = live.caption.split("“")[1].split("”")[0].split()
    assert shuffled[0] == "<bos>" and sorted(shuffled[1:]) == sorted("The cat sat on the mat. The cat sat on the mat"
                                                                     .split())  # words moved whole, none split
    assert live.answer == 0 and live.query["tokens"] == "bpe"
    assert "tokens=bpe" in step.link(live, lesson_model())
