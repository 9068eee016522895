"""The language task: a tokenizer that places any text, the corpus split, batches, and the measures."""
import pytest
import torch

from transformer import PRESETS, Transformer
from transformer.training import language
from transformer.training.tasks import TASKS, Language
from transformer.training.train import config_for, train

pytestmark = pytest.mark.slow

# every kind of text a person may type or paste
BAD_TEXTS = {
    "one character": "a",
    "ten thousand characters": "The cat sat on the mat. " * 417,
    "emoji with joiners": "family 👨‍👩‍👧‍👦, flag 🏳️‍🌈, skin tone 👍🏽",
    "arabic": "القط جلس على الحصيرة",
    "hebrew": "החתול ישב על השטיח",
    "control characters": "tab\tbell\x07nul\x00escape\x1b[0m\r\nend",
    "script tag": "<script>alert('hi')</script> & \"quotes\"",
    "accents and typography": "Café naïve — “quoted” … ‘single’",
}
TASK = TASKS["language"]


@pytest.mark.parametrize("text", BAD_TEXTS.values(), ids=BAD_TEXTS.keys())
def test_any_text_round_trips_exactly(text):
    ids = TASK.encode(text)
    assert ids[0] == TASK.token_id("<bos>")
    assert all(0 <= i < len(TASK.vocab) for i in ids)
    assert language.decode_text(ids) == text


@pytest.mark.parametrize("text", BAD_TEXTS.values(), ids=BAD_TEXTS.keys())
def test_labels_say_what_each_token_is(text):
    labels = TASK.decode(TASK.encode(text))
    assert len(labels) == len(TASK.encode(text)) and labels[0] == "<bos>"
    for label in labels[1:]:
        assert len(label) == 1 or (label.startswith("<0x") and label.endswith(">"))


def test_characters_of_the_table_are_one_token_and_others_their_bytes():
    assert len(language.encode_chars("The cat sat.\n")) == 13
    assert TASK.decode(TASK.encode(" \n\t"))[1:] == [" ", "\n", "\t"]
    assert TASK.decode(TASK.encode("é")) == ["<bos>", "<0xC3>", "<0xA9>"]
    assert len(language.encode_chars("👍")) == 4  # U+1F44D is four UTF-8 bytes
    with pytest.raises(ValueError, match="needs some text"):
        TASK.encode("")


def test_the_split_holds_out_whole_topics_and_is_fixed():
    train_names, held_out = language.split_names("train"), language.split_names("held-out")
    assert not set(train_names) & set(held_out)
    assert set(train_names) | set(held_out) == set(language.topics())
    assert len(held_out) == len(language.topics()) // language.HELD_OUT_EVERY
    assert 0.05 < len(language.corpus_ids("held-out")) / len(language.corpus_ids("train")) < 0.2
    with pytest.raises(ValueError, match="'train' or 'held-out'"):
        language.split_names("test")


def test_decoder_batches_predict_the_next_character_and_repeat_spans():
    batch = TASK.sample(64, seed=1)
    ids, targets = batch.input_ids, batch.targets
    assert ids.shape == targets.shape == (64, TASK.context + 1)
    assert torch.equal(ids[:, 1:], targets[:, :-1])  # targets are the input shifted by one
    assert (ids[:, 0] == TASK.token_id("<bos>")).all() and batch.loss_mask.all()
    # about a quarter of the rows are one span of 20-200 characters written again and again
    periods = []
    for row in targets.tolist():
        period = next((L for L in range(20, 201) if row[L:] == row[:-L]), None)
        periods.append(period)
    repeated = [p for p in periods if p is not None]
    assert 8 <= len(repeated) <= 26 and len(set(repeated)) > 5


def test_encoder_batches_mask_characters_to_recover():
    task = TASK.for_arch("encoder")
    assert task.arch == "encoder" and task.name == "language"
    batch = task.sample(32, seed=2)
    masked = batch.loss_mask
    assert (batch.input_ids[masked] == task.token_id("<mask>")).all()
    assert (batch.input_ids[~masked] == batch.targets[~masked]).all()
    assert 0.1 < masked.float().mean() < 0.2
    with pytest.raises(ValueError, match="decoders .* and encoders"):
        TASK.for_arch("encoder-decoder")


def test_repeated_sentence_points_each_second_copy_token_at_the_token_after_its_first():
    ids, queries, keys = language.repeated_sentence("Abc de.")
    text = language.decode_text(ids[0])
    assert text == "Abc de. Abc de."
    for q, k in zip(queries.tolist(), keys.tolist()):
        assert ids[0, q] == ids[0, k - 1]  # the query's token is the one before the key


def test_a_head_matching_one_character_cannot_reach_half_on_english_but_two_can():
    assert language.matching_head_score(["Abcd."], 1) == 1.0  # distinct characters: one is enough
    assert language.matching_head_score(["abab."], 1) < language.matching_head_score(["abab."], 3)
    sentences = language.held_out_sentences()
    one, two = (language.matching_head_score(sentences, k) for k in (1, 2))
    assert one < 0.3 < 0.6 < two  # the induction target (0.5) needs more than the last character


def test_measures_of_an_untrained_model_are_near_chance():
    torch.manual_seed(0)
    model = Transformer(config_for("llama2", "language"), device="cpu").eval()
    assert language.bits_per_char(model, limit=4) > 7  # log2 of 362 tokens is 8.5
    previous = language.previous_token_scores(model, limit=2)
    assert previous.shape == (model.cfg.n_layers, model.cfg.n_heads) and previous.max() < 0.2
    induction = language.induction_scores(model, language.held_out_sentences()[:3])
    assert induction.max() < 0.2


def test_training_lowers_held_out_bits_per_character_within_a_few_hundred_steps():
    torch.manual_seed(0)
    cfg = config_for("llama2", "language")
    before = language.bits_per_char(Transformer(cfg, device="cpu").eval(), limit=8)
    model, history = train(cfg, "language", steps=150, batch_size=8, lr=3e-3, device="cpu", progress=False)
    after = language.bits_per_char(model, limit=8)
    assert after < before - 3 and after < 4.5, (before, after)  # below a unigram model's 4.7


def test_the_induction_warm_up_starts_on_short_repeated_spans_then_mixes_in_plain_text():
    task = Language(induction_warmup=True)
    early, middle = task.at(0.0), task.at(0.5)
    assert task.at(0.29).context == 128 and middle is task  # the warm-up is the first 30% of training
    assert task.context == 512 and task.max_len == 1 + 4 * 512  # then 512 characters; text 4x that is measured
    with pytest.raises(ValueError, match="context=-5 is the crop length"):
        Language(induction_warmup=True, context=-5)
    with pytest.raises(ValueError, match="repeat_rate=2 is the share of rows"):
        Language(repeat_rate=2)
    batch = early.sample(16, seed=0)
    assert batch.input_ids.shape == (16, 1 + 128)
    for row in batch.targets:
        period = next(L for L in range(20, 61) if torch.equal(row[L:], row[:-L]))  # every row repeats a span
        assert 20 <= period <= 60
    mixed = task.sample(64, seed=0).targets  # (64, 513)
    repeats = sum(any(torch.equal(row[L:], row[:-L]) for L in range(20, 201)) for row in mixed)
    assert 16 <= repeats <= 48  # about half the rows
    assert TASKS["language"].at(0.0) is TASKS["language"]  # the default task has no curriculum
    assert task.for_arch("encoder").at(0.0).context == 8  # BERT keeps its own curriculum, not the repeats


def test_the_encoder_reads_short_crops_first_and_longer_ones_later():
    task = Language(masked=True)
    stages = [task.at(progress) for progress in (0.0, 0.15, 0.3, 0.5)]
    assert [stage.context for stage in stages] == [8, 16, 32, 64]
    assert stages[-1] is task and task.at(0.35) is task and all(stage.masked for stage in stages)
    for stage in stages:
        batch = stage.sample(8, seed=0)
        assert batch.input_ids.shape == (8, 1 + stage.context)
        masked = batch.loss_mask[:, 1:]
        assert masked.any(dim=1).all()  # every row has a character to recover
        assert torch.equal(batch.input_ids[:, 1:][masked], torch.full((int(masked.sum()),), language.VOCAB.index("<mask>")))
        assert torch.equal(batch.input_ids[:, 1:][~masked], batch.targets[:, 1:][~masked])  # the rest reads as written
    assert [stage["until"] for stage in task.describe_curriculum()] == [0.1, 0.2, 0.35]


def test_the_standard_library_docstrings_add_training_text_and_none_of_the_held_out_sentences():
    extra = "\n\n".join(language.docstrings().values())
    assert len(language.train_ids(True)) > 2 * len(language.train_ids(False))
    assert torch.equal(language.train_ids(True)[:len(language.corpus_ids("train"))], language.corpus_ids("train"))
    sentences = language.held_out_sentences()
    assert sentences and not any(sentence[:-1] in extra for sentence in sentences)  # no held-out sentence leaks in
    assert "builtins" not in language.docstrings() and "str" not in language.docstrings()
    task = Language(docstrings=True)
    assert task.at(0.0).docstrings and task.for_arch("encoder").docstrings
