"""Tokenizers (transformer/tokens.py): one per row of AXES["tokens"], exact round trips on any text, BPE's
merges replayed, checkpoints that name their tokenizer, and bits per character on one scale."""
import json
import math

import pytest
import torch

from transformer import AXES, TransformerConfig, checkpoint, tokens
from transformer.model import Transformer
from transformer.training import per_character

HARD_TEXTS = {
    "emoji with joiners": "Family: 👨‍👩‍👧‍👦, flag 🇺🇦, skin tone 👍🏽.",
    "arabic": "مرحبا بالعالم، كيف حالك؟",
    "hebrew": "שלום עולם, מה שלומך?",
    "control characters": "a\x00b\x07c\x1b[0m\r\n\t\x7f\u200b\ufeffz",
    "combining marks": "e\u0301 vs é, n\u0303",
    "ten thousand characters": ("The cat sat on the mat. 🐈 ") * 400,
    "empty": "",
    "one space": " ",
    "leading spaces": "   three spaces first",
    "lone surrogate-free astral": "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𓀀",
}


@pytest.fixture(scope="module")
def bpe():
    return tokens.get_tokenizer("bpe")


def test_one_tokenizer_per_row_of_the_table():
    assert set(tokens.TOKENIZERS) == set(AXES["tokens"].choices)
    for name, row in AXES["tokens"].choices.items():
        tokenizer = tokens.get_tokenizer(name)
        assert tokenizer.name == name and tokenizer.row is row
        assert (row.file is not None) == row.learned  # a learned tokenizer ships as a file


@pytest.mark.parametrize("name", list(AXES["tokens"].choices))
@pytest.mark.parametrize("label", list(HARD_TEXTS))
def test_any_text_comes_back_exactly(name, label):
    tokenizer = tokens.get_tokenizer(name)
    text = HARD_TEXTS[label]
    ids = tokenizer.encode(text)
    assert all(0 <= i < tokenizer.vocab_size for i in ids)
    assert tokenizer.decode(ids) == text
    assert len(tokenizer.pieces(ids)) == len(ids)
    assert sum(per_character.characters_per_token(tokenizer, ids).tolist()) == len(text)


def test_bpe_reads_english_in_words_and_other_scripts_in_more_pieces(bpe):
    sentence = "The cat sat on the mat. The cat sat on the mat."
    ids = bpe.encode(sentence)
    assert len(tokens.get_tokenizer("characters").encode(sentence)) == len(sentence) == 47
    assert len(ids) <= 20  # about one token per word and full stop
    assert "␣cat" in bpe.pieces(ids)  # a word with the space before it
    assert 1000 <= bpe.vocab_size <= 4000
    english, hebrew = "Good morning, how are you today?", "בוקר טוב, מה שלומך היום?"
    assert len(bpe.encode(hebrew)) / len(hebrew) > 1.5 * len(bpe.encode(english)) / len(english)


def test_pieces_show_spaces_and_half_characters_as_bytes(bpe):
    ids = bpe.encode("a 🐈")
    pieces = bpe.pieces(ids)
    assert pieces[0] == "a" and "␣" in "".join(pieces)
    assert any(piece.startswith("<0x") for piece in pieces)  # the cat's four bytes are not one learned piece
    assert tokens.visible_text("\n".encode()) == "⏎"


def test_the_merges_replayed_one_at_a_time_end_on_the_tokenizers_tokens(bpe):
    text = "The unhappiest cats sat on 3 mats."
    steps = tokens.merge_steps(bpe, text)
    assert len(steps[0].pieces) == len(text.encode()) and steps[0].rank is None  # every byte its own piece
    assert list(steps[-1].ids) == bpe.encode(text) and list(steps[-1].pieces) == bpe.pieces(bpe.encode(text))
    for before, step in zip(steps, steps[1:]):
        assert len(before.pieces) - len(step.pieces) == step.count >= 1  # each merge joins `count` pairs
        assert step.left + step.right in step.pieces
        assert bpe.merges[step.rank]  # a merge the tokenizer learned
    ranks = [s.rank for s in steps[1:]]
    assert len(set(ranks)) == len(ranks)  # each learned merge applies once, everywhere it fits


def test_train_bpe_learns_the_pieces_of_its_text_and_round_trips():
    text = "\n".join(["the lazy dog sleeps", "the lazy cat sleeps", "a dog and a cat"] * 50)
    learned = tokens.train_bpe(text, vocab_size=300)
    assert 258 < learned.get_vocab_size() <= 300  # fewer when the text runs out of pairs to merge
    assert learned.token_to_id("<bos>") == 0 and learned.token_to_id("<mask>") == 1
    assert learned.token_to_id("Ġlazy") is not None  # a frequent word became one piece
    assert learned.decode(learned.encode("zebra ✓").ids) == "zebra ✓"  # unseen text still encodes, by bytes


# --- checkpoints name their tokenizer ---------------------------------------------------------

def tiny(vocab_size: int, **changes) -> Transformer:
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=vocab_size, d_model=32, n_heads=2, n_layers=2, max_len=300,
                                         **changes), device="cpu").eval()


def test_a_checkpoint_names_its_tokenizer_and_load_returns_it(tmp_path, bpe):
    checkpoint.save(tiny(bpe.vocab_size), tmp_path / "bpe-model", {"task": "language", "tokenizer": bpe.describe()})
    model, meta = checkpoint.load(tmp_path / "bpe-model")
    assert meta["tokenizer"] == {"name": "bpe", "file": "bpe-english-2048.json", "vocab_size": bpe.vocab_size}
    assert model.tokenizer.decode(model.tokenizer.encode("Hello, world")) == "Hello, world"
    assert model.tokenizer.name == "bpe"


def test_characters_stay_the_default_of_every_shipped_language_checkpoint():
    for entry in checkpoint.shipped():
        if entry.task == "language":
            model, meta = checkpoint.load(entry.path)
            assert meta["tokenizer"]["name"] == "characters", entry.name
            assert model.tokenizer.vocab_size == model.cfg.vocab_size


def test_a_missing_or_mismatched_tokenizer_file_is_a_clear_error(tmp_path, bpe):
    checkpoint.save(tiny(bpe.vocab_size), tmp_path / "lost", {"task": "language", "tokenizer": {
        "name": "bpe", "file": "bpe-nowhere.json", "vocab_size": bpe.vocab_size}})
    with pytest.raises(checkpoint.CheckpointError, match="bpe-nowhere.json.*missing.*train_tokenizer.py"):
        checkpoint.load(tmp_path / "lost")
    checkpoint.save(tiny(512), tmp_path / "small", {"task": "language", "tokenizer": bpe.describe()})
    with pytest.raises(checkpoint.CheckpointError, match="2048 tokens but the model's vocab_size is 512"):
        checkpoint.load(tmp_path / "small")
    document = json.loads((tmp_path / "small.json").read_text())
    document["tokenizer"] = {"name": "wordpiece"}
    (tmp_path / "small.json").write_text(json.dumps(document))
    with pytest.raises(checkpoint.CheckpointError, match="tokenizer='wordpiece'.*'bpe'"):
        checkpoint.load(tmp_path / "small")


def test_a_tokenizer_file_beside_the_checkpoint_is_found_first(tmp_path, bpe):
    learned = tokens.train_bpe("the cat sat on the mat\n" * 20, vocab_size=280)
    learned.save(str(tmp_path / "mine.json"))
    size = learned.get_vocab_size()
    checkpoint.save(tiny(size), tmp_path / "own", {"task": "language", "tokenizer": {"name": "bpe", "file": "mine.json"}})
    model, meta = checkpoint.load(tmp_path / "own")
    assert meta["tokenizer"]["vocab_size"] == size and model.tokenizer.path == tmp_path / "mine.json"


# --- bits per character -----------------------------------------------------------------------------

def test_bits_per_char_divides_the_total_bits_by_characters_not_tokens(bpe):
    model = tiny(bpe.vocab_size)
    text = "The dog barked at the mailman all night long, and the cat slept through it. " * 12
    ids = torch.tensor(bpe.encode(text))
    context = 64
    measured = per_character.bits_per_char(model, bpe, text, context=context)
    windows = per_character.token_windows(ids, context)  # (N, 1 + context + 1)
    with torch.no_grad():
        logp = model(windows[:, :-1]).log_softmax(-1)  # (N, 1 + context, vocab)
    bits = -logp.gather(-1, windows[:, 1:, None]).sum().item() / math.log(2)
    predicted = windows[:, 1:]  # (N, 1 + context)
    characters = len(bpe.decode(predicted.flatten().tolist()))  # the predicted tokens hold whole words here
    assert measured == pytest.approx(bits / characters, rel=1e-4)
    per_token = bits / predicted.numel()
    assert measured < per_token / 2  # a BPE token holds about three characters


def test_bits_per_char_of_a_character_model_matches_the_character_measure():
    from transformer.training import language

    characters = tokens.get_tokenizer("characters")
    model = tiny(characters.vocab_size)
    text = "Plain ASCII prose, one token per character, so both measures read the same windows. " * 8
    assert per_character.bits_per_char(model, characters, text, context=128) == pytest.approx(
        language.text_bits_per_char(model, text, context=128), rel=1e-4)


def test_repeated_ids_point_each_second_copy_token_at_the_token_after_its_first_occurrence(bpe):
    ids, queries, keys = per_character.repeated_ids(bpe, "The cat sat on the mat.")
    first = bpe.encode("The cat sat on the mat.")
    assert ids[0].tolist() == [0, *first, *first] and len(queries) == len(keys) == len(first)
    assert (ids[0, keys - 1] == ids[0, queries]).all()  # the key follows the query's token in the first copy
    assert (ids[0, keys[:-1]] == ids[0, queries[:-1] + 1]).all()  # and is the token the query must predict


def test_a_learned_position_table_is_measured_in_windows_no_longer_than_it_trained_on(bpe):
    from transformer.training.tasks import Language
    from transformer.training.train import evaluate

    torch.manual_seed(0)  # GPT-2's table: a row per trained position, 1 + 48 of them
    model = Transformer(TransformerConfig(vocab_size=bpe.vocab_size, d_model=32, n_heads=2, n_layers=2, max_len=1 + 48,
                                          position="learned"), device="cpu").eval()
    with pytest.raises(ValueError, match="max_len"):
        per_character.held_out_accuracy(model, bpe, limit=2)  # windows of 256 tokens run past its table
    accuracy = evaluate(model, Language(tokens="bpe", context=48))  # the task's own crops: 48 tokens
    assert 0 <= accuracy < 0.2  # random weights


# --- the language task on BPE, and the recipes that train it ------------------------------------------

def test_the_language_task_reads_bpe_tokens():
    from transformer.training.tasks import Language

    task = Language(tokens="bpe", context=48)
    assert len(task.vocab) == task.tokenizer.vocab_size == 2048 and task.vocab[:2] == ["<bos>", "<mask>"]
    assert task.encode("Hello there")[0] == 0 and task.tokenizer.decode(task.encode("Hello there")) == "Hello there"
    batch = task.sample(3, seed=0)
    assert batch.input_ids.shape == (3, 1 + 48) and int(batch.input_ids.max()) < 2048
    assert (batch.input_ids[:, 1:] >= 256).float().mean() > 0.3  # mostly learned pieces, not bare bytes
    assert task.at(0.0).tokens == task.for_arch("encoder").tokens == "bpe"
    with pytest.raises(ValueError, match="tokenizer='wordpiece'.*'characters', 'bpe'"):
        Language(tokens="wordpiece")


def test_a_bpe_model_trains_describes_itself_per_character_and_loads_with_its_tokenizer(tmp_path):
    from transformer.training.tasks import Language
    from transformer.training.train import config_for, describe, train

    task = Language(tokens="bpe", context=32)
    cfg = config_for("llama2", task).replace(d_model=32, n_heads=2, n_kv_heads=2, n_layers=2, d_ff=64)
    model, history = train(cfg, task, 3, batch_size=4, device="cpu")
    meta = describe(model, task, history, {"lr": 3e-3})
    assert meta["tokenizer"] == {"name": "bpe", "file": "bpe-english-2048.json", "vocab_size": 2048}
    figures = meta["figures"]
    assert 2.0 < figures["bits_per_char"] < 11 / 2  # about 11 bits per token spread over more than 2 characters
    assert {"previous_token_head", "induction_head", "random_init"} <= figures.keys()
    checkpoint.save(model, tmp_path / "tiny-bpe", meta)
    loaded, loaded_meta = checkpoint.load(tmp_path / "tiny-bpe")
    assert loaded.tokenizer.name == "bpe" and loaded_meta["figures"] == figures


def test_four_bpe_recipes_wait_to_be_trained_the_default_family_among_them():
    from scripts.train_checkpoints import RECIPES, recipe_task
    from transformer.training.train import config_for

    bpe = [r for r in RECIPES if AXES["tokens"].row(r.tokens).learned]
    assert len({r.preset for r in bpe}) >= 4 and "llama2" in {r.preset for r in bpe}
    for recipe in bpe:
        assert recipe.variant and recipe.corpus == "english"  # a variant: characters stay each preset's checkpoint
        task = recipe_task(recipe)
        assert task.tokenizer.row.learned and config_for(recipe.preset, task).vocab_size == 2048
