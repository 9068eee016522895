"""The everyday-English corpus: WordNet's documents, a held-out split that shares no text with training,
the held-out text the project ships, and training runs that survive being stopped."""
import re

import pytest
import torch

from transformer.training import language
from transformer.training.tasks import Language
from transformer.training.train import config_for, train
from transformer.training import english


def test_no_held_out_chunk_occurs_in_the_training_text():
    share = english.leaked_share(english.held_out_text(), english.training_text())
    assert share == 0.0
    # the measure itself finds a copied chunk: one held-out line pasted into training is found
    line = next(line for line in english.held_out_text().splitlines() if len(line) >= 100)
    assert english.leaked_share(english.held_out_text(), english.training_text() + "\n" + line) > 0


def test_the_shipped_held_out_text_is_what_the_source_gives():
    assert english.held_out_text().rstrip("\n") == english.held_out_text_from_source()


def test_the_split_is_by_whole_documents_and_stable_by_id():
    train_docs, held_docs = english.split()
    assert not {d.id for d in train_docs} & {d.id for d in held_docs}
    assert len(train_docs) + len(held_docs) == len(english.documents())
    assert 0.03 < len(held_docs) / len(english.documents()) < 0.06
    assert all(english.hashed_held_out(d.id) for d in held_docs)  # only ever moved out of held-out, never in
    moved = [d for d in train_docs if english.hashed_held_out(d.id)]
    assert moved, "near-copies of training documents are moved to training"
    held_sentences = set().union(*(english._sentences(d.text) for d in held_docs))
    assert not held_sentences & set().union(*(english._sentences(d.text) for d in moved))


def test_the_corpus_leaves_out_what_wordnet_files_as_obscene_or_slurs():
    ids = {d.id for d in english.documents()}
    filed = set()
    for name in english.WORDNET_FILES:
        for line in open(english.WORDNET_DIR / name, encoding="latin-1"):
            parsed = english._parse(line)
            if parsed and set(parsed[3]) & english.BLOCKED_DOMAINS.keys():
                filed.add(f"wordnet-3.0:{parsed[1]}:{parsed[0]}")
    assert len(filed) > 100 and not ids & filed
    assert not any(english.BLOCKED_GLOSS.search(d.text) for d in english.documents())


def test_documents_read_as_sentences():
    docs = english.documents()
    assert len(docs) > 100_000 and sum(len(d.text) for d in docs) > 8_000_000
    for d in docs[:2000]:
        assert d.text[0].isupper() or not d.text[0].isalpha(), d
        assert d.text[-1] in ".!?", d
        assert '"' not in d.text and "_" not in d.text, d


def test_source_description_names_package_version_and_licence():
    described = english.source_description()
    assert described["package"].startswith("wordnet-base") and re.match(r"\d", described["version"])
    assert "WordNet" in described["licence"] and described["characters"] > 8_000_000


def test_a_missing_source_says_what_to_install(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install wordnet-base"):
        english.documents.__wrapped__(tmp_path)


def test_held_out_samples_are_spread_over_the_whole_text():
    windows = language.held_out_windows(64, limit=5, corpus="english")  # (5, 1 + 64 + 1)
    text = language.held_out_ids("english")
    starts = [int(torch.nonzero((text.unfold(0, 65, 1) == w[1:]).all(1))[0]) for w in windows]
    assert starts[0] == 0 and starts[-1] > 0.9 * len(text) and starts == sorted(starts)
    sentences = language.induction_sentences(config_for("llama2", Language(corpus="english")), "english", limit=10)
    assert len(sentences) == 10 and all(20 <= len(s) <= 200 for s in sentences)
    windowed = config_for("llama2", Language(corpus="english"), sliding_window=64, n_layers=6)
    reachable = language.induction_sentences(windowed, "english", limit=10)  # every layer local: copies within 63
    assert reachable == [s for s in sentences if len(s) < 64] and 0 < len(reachable) < len(sentences)
    for pattern in ("5:1", "alternate"):  # a global layer reaches every first copy: no sentence is left out
        assert language.induction_sentences(windowed.replace(layer_pattern=pattern), "english", limit=10) == sentences


def test_an_unknown_corpus_is_refused():
    with pytest.raises(ValueError, match="corpus='klingon' is not a corpus; choose one of python-docs, english"):
        Language(corpus="klingon")


def test_a_stopped_run_goes_on_to_the_same_weights(tmp_path):
    task = Language(corpus="english", context=32)
    cfg = config_for("llama2", task, d_model=32, n_layers=1)
    whole, history = train(cfg, task, 6, batch_size=2, progress=False, device="cpu")
    state = tmp_path / "run.state.pt"
    train(cfg, task, 6, batch_size=2, progress=False, device="cpu", state_path=state, should_stop=iter(
        [False] * 3 + [True]).__next__, save_every_s=0)
    assert len(torch.load(state, weights_only=False)["history"]) == 3
    resumed, resumed_history = train(cfg, task, 6, batch_size=2, progress=False, device="cpu", state_path=state)
    assert [h["loss"] for h in resumed_history] == pytest.approx([h["loss"] for h in history])
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-6), name
