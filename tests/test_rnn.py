"""Before attention: the GRU encoder-decoders load through the library's one loader, stay small, and show
the crossing their JSON claims (re-measured here: the one-vector model's accuracy falls with length, the
attention model's does not); additive attention is its formula; bad text and bad files get clear messages."""
import json
import shutil

import pytest
import torch

from transformer import checkpoint, rnn
from transformer.checkpoint import CheckpointError
from transformer.checkpoint_format import checkpoint_paths


@pytest.fixture(scope="module")
def shipped():
    return {context: rnn.load(rnn.shipped_path(context)) for context in ("bottleneck", "attention")}


@pytest.mark.parametrize("context", ["bottleneck", "attention"])
def test_the_shipped_models_load_through_the_one_loader_and_are_small(context):
    path = rnn.shipped_path(context)
    model, meta = checkpoint.load(path)
    assert isinstance(model, rnn.GRUSeq2Seq) and not model.training
    assert meta["config"] == model.cfg.to_dict() and model.cfg.context == context and meta["task"] == "copy"
    assert isinstance(model.encoder, torch.nn.GRU) and isinstance(model.decoder, torch.nn.GRU)  # torch's own GRU
    weights, _ = checkpoint_paths(path)
    assert weights.stat().st_size < 100 * 1024  # KiB, not MiB
    assert meta["train_cpu_seconds"] < 60 and meta["parameters"] == sum(p.numel() for p in model.parameters())


def test_the_crossing_they_claim_is_measured_again(shipped):
    fresh = {context: rnn.accuracy_by_length(model, n_samples=128, seed=7) for context, (model, _) in shipped.items()}
    for context, (_, meta) in shipped.items():
        claimed = meta["accuracy_by_length"]
        assert claimed.keys() == fresh[context].keys()
        assert all(abs(claimed[n] - fresh[context][n]) < 0.08 for n in claimed), context  # fresh strings, same curve
    longest = str(shipped["attention"][0].cfg.max_letters)
    bottleneck, attention = fresh["bottleneck"], fresh["attention"]
    assert bottleneck["1"] > 0.95 and bottleneck[longest] < 0.4  # one fixed vector: the line that falls
    assert min(attention.values()) > 0.9  # attention: every length
    assert all(attention[n] >= bottleneck[n] - 0.02 for n in attention)


def test_the_attention_model_reads_the_diagonal(shipped):
    model, _ = shipped["attention"]
    answer, weights = model.translate("attention")
    assert answer == "attention"
    assert weights.shape == (9, 10)  # 9 output letters over 9 letters and <eos>
    torch.testing.assert_close(weights.sum(-1), torch.ones(9))
    assert (weights.argmax(-1) == torch.arange(9)).float().mean() >= 0.8  # output letter i reads source letter i
    _, none = shipped["bottleneck"][0].translate("attention")
    assert none is None


def test_additive_attention_is_its_formula():
    torch.manual_seed(0)
    attention = rnn.AdditiveAttention(6)
    queries, states = torch.randn(2, 3, 6), torch.randn(2, 5, 6)
    context, weights = attention(queries, states)
    b, t, i = 1, 2, 4
    score = lambda j: attention.v.weight[0] @ torch.tanh(attention.W.weight @ queries[b, t]  # noqa: E731
                                                         + attention.U.weight @ states[b, j] + attention.U.bias)
    scores = torch.stack([score(j) for j in range(5)])
    torch.testing.assert_close(weights[b, t], scores.softmax(0))
    torch.testing.assert_close(context[b, t], weights[b, t] @ states[b])
    assert weights[b, t, i] > 0


@pytest.mark.parametrize("text,words", [("a" * 25, ["25 letters", "at most 24", "24 letters or fewer"]),
                                        ("Hello!", ["'!'", "'H'", "abcdefghijklmnopqrstuvwxyz"]),
                                        ("", ["needs some text"])])
def test_bad_text_gets_a_clear_message(shipped, text, words):
    with pytest.raises(ValueError) as error:
        shipped["attention"][0].translate(text)
    assert all(word in str(error.value) for word in words), str(error.value)


def test_a_short_training_run_and_its_report():
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    cfg = rnn.Seq2SeqConfig(task="reverse", context="attention", d_hidden=8, max_letters=4)
    model, report = rnn.train_seq2seq(cfg, rnn.TrainSettings(steps=5, batch_size=4))
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's random state is left alone
    assert report["accuracy_by_length"].keys() == {"1", "2", "3", "4"} and not model.training
    again, _ = rnn.train_seq2seq(cfg, rnn.TrainSettings(steps=5, batch_size=4))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    with pytest.raises(ValueError, match="context='fixed'"):
        rnn.Seq2SeqConfig(context="fixed")


def test_a_damaged_gru_checkpoint_names_the_file(tmp_path):
    for suffix in (".json", ".safetensors"):
        shutil.copy(rnn.shipped_path("attention").with_suffix(suffix), tmp_path / f"gru{suffix}")
    document = json.loads((tmp_path / "gru.json").read_text())
    (tmp_path / "gru.json").write_text(json.dumps({**document, "config": {**document["config"], "d_hidden": -1}}))
    with pytest.raises(CheckpointError, match="gru.json: its config is not a valid Seq2SeqConfig"):
        checkpoint.load(tmp_path / "gru")
    (tmp_path / "gru.json").write_text(json.dumps({**document, "config": {**document["config"], "d_hidden": 16}}))
    with pytest.raises(CheckpointError, match="do not fit the config"):
        checkpoint.load(tmp_path / "gru")
