"""The benchmarks keep working: their smoke modes run, and every row comes back with finite numbers.

No time is asserted anywhere: speed is measured by ``python -m benchmarks.run`` and read by people.
The measuring helpers (FLOP count, held bytes, allocator peak, row selection) are checked
against independent counts.
"""
import argparse
import json
import math
import time

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks import app_latency, load_test, run
from transformer import Transformer, TransformerConfig
from transformer.costs import forward_flops
from transformer.hooks import recording

pytestmark = pytest.mark.slow


def test_library_benchmark_smoke_reports_every_row_with_finite_ratios(tmp_path, capsys):
    out = tmp_path / "results.json"
    rows = run.main(["--smoke", "--out", str(out)])
    expected = run.row_ids(run.SMOKE)
    assert [r.row for r in rows] == expected
    for r in rows:
        assert all(math.isfinite(v) and v > 0 for v in (r.ours, r.reference, r.ratio)), r
        assert r.met is None if not r.target else isinstance(r.met, bool)
    table = capsys.readouterr().out
    for row in expected:
        assert f"| {row} |" in table
    saved = json.loads(out.read_text())
    assert saved["mode"] == "smoke" and [r["row"] for r in saved["rows"]] == expected
    assert all(r["details"]["cache_bytes"] > 0 for r in saved["rows"] if r["row"].startswith("5."))


def test_only_picks_rows_and_groups_and_refuses_unknown_ones():
    ids = run.row_ids(run.FULL)
    assert run.select(ids, "1,4.4") == {"1", "4.4"}
    assert run.select(ids, "4") == {"4.1", "4.2", "4.2.1", "4.3", "4.4"}
    assert run.select(ids, "2") == {"2", "2.1"}  # a row and the one that details it
    assert run.select(ids, "5.GQA") == {"5.GQA.64", "5.GQA.256", "5.GQA.512"}
    assert run.select(ids, None) == set(ids)
    assert run.select(ids, "8") == {"8.1", "8.2", "8.3"}  # multi-head latent attention against DeepSeek-V3
    with pytest.raises(ValueError, match="'10' matches no row"):
        run.select(ids, "10")


def test_past_the_time_limit_loops_take_one_round_and_long_generation_runs_are_skipped():
    calls = []
    samples = run.interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=5, budget_s=-1)
    assert {k: len(v) for k, v in samples.items()} == {"a": 1, "b": 1} and calls == ["a", "b", "a", "b"]  # warm-up + 1

    wanted = {f"5.MHA.{n}" for n in run.SMOKE.gen_lengths}
    rows = run.generation_rows(run.SMOKE, wanted, deadline=time.perf_counter(), device=torch.device("cpu"))  # past
    first, *later = rows
    assert [r.row for r in rows] == [f"5.MHA.{n}" for n in run.SMOKE.gen_lengths]
    assert math.isfinite(first.ratio) and "skipped" not in first.details  # the first length sets the estimate
    for r in later:
        assert math.isnan(r.ratio) and r.met is None and "time limit" in r.details["skipped"]
    assert "time limit" in run.markdown(rows)


def test_asking_for_a_gpu_where_there_is_none_says_so(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        run.main(["--smoke", "--device", "cuda", "--only", "1"])
    assert "torch sees no CUDA device here" in capsys.readouterr().err


@pytest.mark.parametrize("ffn,n_kv_heads", [("gelu", 4), ("swiglu", 2)])
def test_forward_flops_match_torch_flop_counter(ffn, n_kv_heads):
    """The analytic count equals torch's own count of every matmul in the explicit path."""
    cfg = TransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_kv_heads=n_kv_heads, n_layers=3, max_len=16,
                            ffn=ffn, d_ff=48, bias=True, position="learned")
    model = Transformer(cfg, device="cpu").eval().set_fused(False)
    ids = torch.randint(0, 50, (2, 11))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(ids)
    assert forward_flops(cfg, batch=2, seq=11) == counter.get_total_flops()


def test_held_bytes_counts_shared_storage_once():
    base = torch.zeros(4, 8)  # 128 bytes
    view = base.view(2, 16)
    other = torch.zeros(3, dtype=torch.float64)  # 24 bytes
    assert run.held_bytes([base, view, base.detach(), other]) == 128 + 24
    assert run.held_bytes([base[:1], base]) == 128  # a slice and its whole: the largest counts


def test_allocator_peak_sees_a_freed_temporary():
    def work():
        temporary = torch.ones(1 << 18)  # 1 MiB, freed before returning
        total = float(temporary.sum())
        del temporary
        return torch.full((1 << 16,), total)  # 256 KiB, returned

    kept, peak = run.allocator_peak(work)
    assert kept.numel() == 1 << 16
    assert 1 << 20 <= peak < (1 << 20) + (1 << 19)


def test_recorder_keeps_a_running_total_equal_to_the_trace_size_and_enforces_the_cap():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=32, d_model=16, n_heads=4, n_layers=2, max_len=16), device="cpu")
    ids = torch.randint(0, 32, (1, 6))
    with torch.no_grad(), recording() as recorder:
        model(ids)
    assert recorder.kept_bytes == recorder.trace.nbytes > 0
    cap = recorder.trace.nbytes - 1  # one byte short of the full trace
    with pytest.raises(MemoryError, match="over the cap"):
        model.run_with_trace(ids, max_bytes=cap)
    _, trace = model.run_with_trace(ids, max_bytes=cap + 1)
    assert trace.nbytes == cap + 1


def test_app_latency_smoke_times_every_existing_page(tmp_path):
    out = tmp_path / "app.json"
    results = app_latency.main(["--smoke", "--out", str(out)])
    pages = [script for script, _title in app_latency.app_pages()]
    assert pages and "pages/home.py" in pages
    assert [r["page"] for r in results] == pages
    for r in results:
        assert len(r["times_ms"]) == app_latency.SMOKE_CHANGES
        assert all(math.isfinite(t) and t > 0 for t in r["times_ms"])
        assert r["exceptions"] == 0, r["page"]
    assert json.loads(out.read_text())["pages"] == results


def test_load_test_smoke_drives_a_real_server_from_a_browser(tmp_path):
    out = tmp_path / "load.json"
    summary = load_test.main(["--smoke", "--out", str(out)])
    assert summary["changes_done"] == 2 * 2, summary["error_messages"]
    assert all(math.isfinite(summary[k]) and summary[k] > 0 for k in ("change_p50_s", "change_p95_s"))
    assert summary["errors"] == dict(exceptions=0, console_errors=0, page_errors=0, timeouts=0, failures=0), \
        summary["error_messages"]
    memory = summary["memory"]
    assert all(memory[k] > 0 for k in ("start_mb", "peak_mb", "after_close_mb", "after_ttl_mb"))
    assert memory["peak_mb"] >= memory["start_mb"]
    assert json.loads(out.read_text())["summary"]["changes_done"] == 4


def test_load_test_pause_takes_a_range_or_one_number_and_refuses_the_rest():
    assert load_test.think_range("1,3") == (1.0, 3.0)
    assert load_test.think_range("0") == (0.0, 0.0)
    for bad in ("3,1", "-1", "a,b", "1,2,3"):
        with pytest.raises(argparse.ArgumentTypeError, match="--think"):
            load_test.think_range(bad)


def test_checkpoint_forward_smoke_times_a_language_checkpoint(capsys):
    from benchmarks import checkpoint_forward

    threads = torch.get_num_threads()
    try:
        checkpoint_forward.main(["--smoke", "--threads", "1"])
    finally:
        torch.set_num_threads(threads)
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| checkpoint |") and len(table) == 3
    forward_ms = float(table[2].split("|")[5].split()[0])
    assert 0 < forward_ms < float("inf")


def test_checkpoint_forward_reads_every_language_checkpoint_within_its_trained_context():
    from benchmarks import checkpoint_forward

    threads = torch.get_num_threads()
    try:
        rows = checkpoint_forward.measure([1], repeats=1)
    finally:
        torch.set_num_threads(threads)
    by_name = {row["checkpoint"]: row for row in rows}
    assert by_name["bert-language"]["characters"] == 64  # BERT's table ends at the 64 characters it trained on
    assert by_name["llama2-language"]["characters"] == checkpoint_forward.TEXT_CHARS
    assert all(row["forward_ms"] > 0 for row in rows)


def test_the_training_step_benchmark_names_a_misspelt_preset_before_training(capsys):
    from benchmarks import train_step

    with pytest.raises(SystemExit):
        train_step.main(["--presets", "llama2", "lama2", "--steps", "1"])
    assert "unknown preset 'lama2'" in capsys.readouterr().err


def test_linear_attention_smoke_compares_with_hugging_face_generates_and_traces_states(capsys):
    pytest.importorskip("transformers")
    from benchmarks import linear_attention

    threads = torch.get_num_threads()
    try:
        results = linear_attention.main(["--smoke", "--threads", "1"])
    finally:
        torch.set_num_threads(threads)
    s = linear_attention.SMOKE
    forward = results["forward"]
    assert len(forward) == 3 * len(s.forward_lengths)
    assert all(math.isfinite(r["ratio"]) and r["ratio"] > 0 for r in forward)
    assert all(r["diff"] < 1e-4 for r in forward if r["diff"] is not None)  # the same weights give the same numbers
    generation = results["generation"]
    assert [(r["model"], r["context"]) for r in generation] == [
        (m, n) for n in s.contexts for m in linear_attention.KINDS]
    assert all(math.isfinite(r["ms"]) and r["ms"] > 0 for r in generation)
    cache = {(r["model"], r["context"]): r["cache_bytes"] for r in generation}
    short, long = s.contexts[0], s.contexts[-1]
    assert cache["Gated DeltaNet", long] == cache["Gated DeltaNet", short]  # a state does not grow with the text
    assert cache["full attention", long] > cache["full attention", short]
    for r in results["trace"]:
        assert r["names"] == ["blocks.0.attn.hook_state"] and r["held"] == r["formula"]
    assert "max_bytes=" in results["refused"] and "fewer layers" in results["refused"]
    table = capsys.readouterr().out
    assert "| Gated DeltaNet |" in table and "MemoryError" in table


def test_tokens_benchmark_smoke_times_both_tokenizers_and_both_trained_checkpoints(tmp_path, capsys):
    from benchmarks import tokens

    report = tokens.main(["--smoke", "--out", str(tmp_path / "tokens.json")])
    encoding = report["encoding"]
    assert encoding["text"]["tokens"]["characters"] == 10_000 > 2 * encoding["text"]["tokens"]["bpe"]
    assert all(math.isfinite(r["ratio"]) and r["ratio"] > 0 for r in (encoding["text"], encoding["sentence"]))
    for page in report["pages"]:
        shown = page["shown"]
        assert all(not s["exceptions"] and not s["errors"] for s in shown.values()), page["page"]
        assert "llama2-language" in shown["characters"]["weights"] and "llama2-bpe-language" in shown["bpe"]["weights"]
        assert len(page["seconds"]["bpe"]) == len(page["seconds"]["characters"]) == 2  # two sentences, one round
    assert "| pages/playground.py |" in capsys.readouterr().out
    assert json.loads((tmp_path / "tokens.json").read_text())["mode"] == "smoke"


def test_long_inputs_benchmark_runs_both_tables_in_fresh_processes_and_the_two_forwards_agree(capsys):
    from benchmarks import long_inputs

    rows = long_inputs.main(["--lengths", "96", "--threads", "1"])
    assert [row["table"] for row in rows] == ["forward", "summary"]
    forward, summary = rows
    assert forward["max_diff"] < 1e-4  # this library's logits are Hugging Face's, in another process
    for row in rows:
        assert all(math.isfinite(row[key]) and row[key] > 0 for key in ("time_ratio", "peak_ratio"))
    printed = capsys.readouterr().out
    assert "plain forward" in printed and "summarize(window=64" in printed and printed.count("    96 |") == 2
