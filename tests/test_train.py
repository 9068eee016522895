"""The training loop: it learns, it is reproducible, it reports and stops when asked, and its CLI writes a checkpoint."""
import pytest
import torch

from transformer import PRESETS, TransformerConfig
from transformer.checkpoint import load
from transformer.training.tasks import TASKS, Language
from transformer.training.train import config_for, evaluate, learning_rate, main, task_for, train

pytestmark = pytest.mark.slow

# small enough for a few hundred steps in seconds on a CPU
TINY_DECODER = TransformerConfig(vocab_size=len(TASKS["mixed"].vocab), d_model=32, n_heads=4, n_layers=1, max_len=32,
                                 position="rope", ffn="gelu")


def test_a_few_hundred_steps_bring_the_loss_well_below_its_start():
    copier = TransformerConfig(arch="encoder-decoder", vocab_size=len(TASKS["copy"].vocab), d_model=64, n_heads=4,
                               n_layers=1, max_len=16, position="learned", ffn="gelu")
    model, history = train(copier, "copy", 200, batch_size=32, progress=False, device="cpu")
    start = sum(h["loss"] for h in history[:5]) / 5
    end = sum(h["loss"] for h in history[-5:]) / 5
    assert start > 3.0  # about ln(26): the model starts by guessing a letter
    assert end < 0.1 * start
    assert evaluate(model, "copy", n_batches=2, batch_size=64) > 0.95
    assert not model.training  # handed back ready for inference


def test_same_seed_same_weights_and_another_seed_differs():
    cfg = TINY_DECODER.replace(ffn="moe", n_experts=4, top_k=2)
    run = lambda seed: train(cfg, "mixed", 15, batch_size=8, seed=seed, progress=False, device="cpu")
    (first, history), (again, _), (other, _) = run(3), run(3), run(4)
    for (name, a), b, c in zip(first.state_dict().items(), again.state_dict().values(), other.state_dict().values()):
        assert torch.equal(a, b), name
    assert any(not torch.equal(a, c) for a, c in zip(first.state_dict().values(), other.state_dict().values()))
    assert all(h["aux_loss"] > 0 for h in history)  # the MoE balancing loss is part of training


def test_train_leaves_the_callers_random_state_and_threads_alone():
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    train(TINY_DECODER, "mixed", 3, batch_size=4, progress=False, device="cpu")
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


def test_callback_sees_progress_and_should_stop_ends_early():
    seen = []
    model, history = train(TINY_DECODER, "mixed", 40, batch_size=4, progress=False, device="cpu", callback_every=10,
                           callback=lambda step, metrics, m: seen.append((step, metrics["loss"], m is not None)))
    assert [step for step, _, _ in seen] == [0, 10, 20, 30, 39]
    assert all(loss == history[step]["loss"] and has_model for step, loss, has_model in seen)
    assert [h["step"] for h in history] == list(range(40))
    assert {"loss", "accuracy", "lr", "aux_loss", "seconds"} <= history[0].keys()

    calls = []

    def stop_after_seven_steps():
        calls.append(1)
        return len(calls) > 7

    _, history = train(TINY_DECODER, "mixed", 40, batch_size=4, progress=False, device="cpu",
                       should_stop=stop_after_seven_steps)
    assert len(history) == 7


def test_learning_rate_warms_up_linearly_then_decays_by_cosine():
    rates = [learning_rate(step, 100, 1.0, 10) for step in range(100)]
    assert rates[:10] == pytest.approx([(s + 1) / 10 for s in range(10)])
    assert all(a >= b for a, b in zip(rates[10:], rates[11:]))  # never rises after the warmup
    assert rates[10] == pytest.approx(1.0) and rates[-1] == pytest.approx(0.1)
    assert rates[55] == pytest.approx(0.1 + 0.9 * 0.5, abs=0.02)  # half way: the cosine's middle


def test_config_for_sizes_a_preset_and_rejects_mismatches():
    cfg = config_for("gpt2", "induction")
    assert cfg.vocab_size == len(TASKS["induction"].vocab)
    # a learned table exactly as long as the task's longest sequence: no row it never trains
    assert cfg.max_len == TASKS["induction"].max_tokens
    assert cfg.replace(vocab_size=128, max_len=PRESETS["gpt2"].max_len) == PRESETS["gpt2"]
    assert config_for("llama2", "induction").max_len == PRESETS["llama2"].max_len  # RoPE has no table to outgrow
    assert config_for("gpt2", "induction", max_len=64).max_len == 64  # asked for explicitly
    with pytest.raises(ValueError, match="needs arch='encoder-decoder'"):
        config_for("gpt2", "reverse")
    with pytest.raises(ValueError, match="vocab_size=10 is smaller than the induction task's 27 tokens"):
        config_for(PRESETS["gpt2"].replace(vocab_size=10), "induction")
    with pytest.raises(ValueError, match="max_len=8 is shorter"):
        config_for(PRESETS["gpt2"].replace(max_len=8), "induction")
    with pytest.raises(ValueError, match="unknown preset"):
        config_for("gpt5", "induction")
    with pytest.raises(ValueError, match="steps=0"):
        train("gpt2", "induction", 0)


def test_command_line_trains_and_writes_a_loadable_checkpoint(tmp_path, capsys):
    out = tmp_path / "bert-mirror"
    threads = torch.get_num_threads()
    try:
        main(["--preset", "bert", "--task", "mirror", "--steps", "3", "--batch-size", "4", "--out", str(out),
              "--device", "cpu", "--threads", "1"])
        assert torch.get_num_threads() == 1  # the command line sets its own process's threads
    finally:
        torch.set_num_threads(threads)  # this test runs inside pytest's process: give it back
    model, meta = load(out)
    assert meta["task"] == "mirror" and meta["preset"] == "bert" and meta["training"]["steps"] == 3
    assert 0.0 <= meta["accuracy"] <= 1.0
    assert model.cfg == config_for("bert", "mirror")
    assert "wrote" in capsys.readouterr().out


def test_command_line_refuses_language_settings_for_other_tasks(capsys):
    with pytest.raises(SystemExit):
        main(["--preset", "llama2", "--task", "induction", "--steps", "3", "--out", "unused", "--context", "512"])
    assert "--repeat-rate and --corpus are settings of the language task" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--preset", "llama2", "--task", "language", "--steps", "3", "--out", "unused", "--corpus", "klingon"])
    assert "invalid choice: 'klingon'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--preset", "llama2", "--task", "language", "--steps", "3", "--out", "unused", "--context", "0"])
    assert "--context 0: the crop length must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--preset", "llama2", "--task", "language", "--steps", "3", "--out", "unused", "--repeat-rate", "1.5"])
    assert "--repeat-rate 1.5: a share of rows, between 0 and 1" in capsys.readouterr().err


def test_a_sliding_window_model_trains_on_repeats_its_window_can_reach(tmp_path):
    task = task_for(config_for("mistral", "language", sliding_window=32), Language(induction_warmup=True, repeat_rate=0.25))
    assert task.repeat_lengths == (15, 31) and task.repeat_rate == 0.25  # window 32: a copy at most 31 back
    assert task.at(0.0).repeat_lengths == (15, 31) and task.at(0.0).context == 128
    for row in task.at(0.0).sample(16, seed=0).targets:  # the warm-up's every row repeats a span it can see
        assert any(torch.equal(row[L:], row[:-L]) for L in range(15, 32))
    assert task_for(config_for("llama2", "language"), "language").repeat_lengths == (20, 200)  # no window: as it was
    for global_layers in ("alternate", "5:1"):  # a global layer reaches every earlier copy: the spans stay long
        local_global = config_for("llama2", "language", sliding_window=32, n_layers=6, layer_pattern=global_layers)
        assert task_for(local_global, "language").repeat_lengths == (20, 200)
    main(["--preset", "mistral", "--task", "language", "--steps", "2", "--batch-size", "2", "--out", str(tmp_path / "m"),
          "--induction-warmup", "--context", "64", "--repeat-rate", "0.25"])
    corpus = load(tmp_path / "m")[1]["corpus"]
    assert config_for("mistral", "language").sliding_window == 256  # the preset's window reaches every span back
    assert corpus["repeat_lengths"] == [20, 200] and corpus["repeat_rate"] == 0.25 and corpus["context"] == 64
    assert corpus["curriculum"][0]["repeat_lengths"] == [20, 60]


def test_command_line_trains_on_english_and_resumes_a_stopped_run(tmp_path):
    out, state = tmp_path / "english", tmp_path / "english.state.pt"
    args = ["--preset", "llama2", "--task", "language", "--corpus", "english", "--context", "32", "--steps", "2",
            "--batch-size", "2", "--out", str(out), "--resume", str(state), "--device", "cpu", "--threads", "1"]
    threads = torch.get_num_threads()
    try:
        main(args)
        assert torch.load(state, weights_only=False)["history"][-1]["step"] == 1  # saved at the last step
        main([*args[:-4], "--steps", "3", "--device", "cpu", "--threads", "1"])  # the same state goes on to step 3
    finally:
        torch.set_num_threads(threads)
    _, meta = load(out)
    assert meta["corpus"]["name"] == "english" and meta["training"]["steps"] == 3
