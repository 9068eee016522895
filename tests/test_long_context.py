"""summarize() gives, for every softmax attention layer, the same per-head figures as the full pattern does, while
working through blocks of query rows (made small here, so every case runs through several blocks)."""
import math

import pytest
import torch

from transformer import Transformer, attention
from transformer.long_context import ROLES, distance_edges, head_roles, head_scores, row_weights, summarize
from tiny_models import build

T, WINDOW, TOP_K = 24, 4, 3

CASES = {
    "causal, GQA": dict(),
    "sliding window": dict(sliding_window=5),
    "chunks with NoPE layers and q's temperature": dict(attention_chunk=8, nope_layers="1", attn_temperature_scale=0.5,
                                                       attn_temperature_floor=4.0),
    "ALiBi": dict(position="alibi"),
    "sinks": dict(sinks=True),
    "soft-capping": dict(attn_softcap=1.5),
    "MLA": dict(kv_rank=8, rope_dim=2, head_dim=6, v_head_dim=4, n_kv_heads=None),
    "indexer top-k": dict(index_top_k=5, index_heads=2, index_head_dim=8),
    "a sparse pattern": dict(attention_pattern="strided", pattern_size=4),
    "encoder": dict(arch="encoder", position="learned"),
    "encoder-decoder with T5 buckets": dict(arch="encoder-decoder", position="t5"),
}



def from_pattern(pattern: torch.Tensor, window: int, top_k: int, first_query: int) -> dict[str, torch.Tensor]:
    """The same figures, read off a whole (B, H, T_q, T_kv) pattern."""
    B, H, T_q, T_kv = pattern.shape
    query = first_query + torch.arange(T_q)[:, None]
    key = torch.arange(T_kv)[None]
    distance = (query - key).abs()
    near = (distance < window) & (key != 0)
    edges = distance_edges(T_kv)
    mass = torch.stack([(pattern * ((distance >= lo) & (distance < hi))).sum(-1).mean(-1)
                        for lo, hi in zip(edges[:-1], edges[1:])], dim=-1)
    return {"entropy": -torch.special.xlogy(pattern, pattern).sum(-1) / math.log(2), "max": pattern.amax(-1),
            "sink": pattern[..., 0], "local": (pattern * near).sum(-1), "distant": (pattern * (~near & (key != 0))).sum(-1),
            "top_weights": pattern.topk(top_k, dim=-1).values, "distance_mass": mass}


@pytest.mark.parametrize("name", CASES)
def test_every_layers_figures_equal_those_of_its_whole_pattern(name, monkeypatch):
    model = build(CASES[name])
    ids = torch.randint(1, 32, (2, T), generator=torch.Generator().manual_seed(1))
    inputs = (ids, ids[:, :T - 5]) if model.cfg.arch == "encoder-decoder" else (ids,)
    _, trace = model.run_with_trace(*inputs, names="*hook_pattern")
    monkeypatch.setattr(attention, "TILE_ENTRIES", 2 * 4 * T * 5)  # blocks of 5 query rows
    summaries = summarize(model, *inputs, window=WINDOW, top_k=TOP_K)
    patterns = {name.removesuffix(".hook_pattern"): trace[name] for name in trace.names()}
    assert set(summaries) == set(patterns)
    for layer, pattern in patterns.items():
        first_query = 0 if "cross" in layer else pattern.shape[-1] - pattern.shape[-2]
        expected = from_pattern(pattern, WINDOW, TOP_K, first_query)
        got = summaries[layer]
        for figure, value in expected.items():
            torch.testing.assert_close(got[figure], value, atol=1e-4, rtol=0, msg=f"{layer} {figure}")
        total = got["sink"] + got["local"] + got["distant"]
        torch.testing.assert_close(total, pattern.sum(-1), atol=1e-5, rtol=0)
        chosen = pattern.gather(-1, got["top_keys"])  # the keys named carry the weights named
        torch.testing.assert_close(chosen, got["top_weights"], atol=1e-5, rtol=0)


def test_a_gpt_oss_sink_takes_its_share_out_of_the_rows_total():
    model = build(CASES["sinks"])
    summary = summarize(model, torch.randint(1, 32, (1, T)))["blocks.0.attn"]
    total = summary["sink"] + summary["local"] + summary["distant"]
    assert (total < 1 - 1e-5).all() and (total > 0).all()  # every row gives the sink some share


def test_state_layers_have_no_weights_to_summarise():
    model = build(dict(attention_layers="3:1", n_layers=4, linear_kind="gated-deltanet"))
    summaries = summarize(model, torch.randint(1, 32, (1, T)))
    full = [spec.index for spec in model.cfg.layer_plan() if not spec.row.keeps_state]
    assert sorted(summaries) == [f"blocks.{i}.attn" for i in full] and len(full) < 4


def test_bad_settings_name_the_numbers():
    with pytest.raises(ValueError, match="window=0"):
        summarize(build({}), torch.randint(1, 32, (1, T)), window=0)


def test_recording_the_weights_of_a_long_text_is_refused_before_it_starts_and_names_the_summary():
    model = build({"max_len": 4096})
    ids = torch.randint(1, 32, (1, 4096))
    with pytest.raises(MemoryError, match=r"T=4096.*long_context\.summarize"):
        model.run_with_trace(ids, max_bytes=64 * 2**20)
    _, trace = model.run_with_trace(ids, names="*hook_resid_post", max_bytes=64 * 2**20)  # no weights: recorded
    assert trace["blocks.1.hook_resid_post"].shape == (1, 4096, 16)


def test_the_rows_of_one_layer_are_its_whole_patterns_rows():
    model = build(CASES["sliding window"])
    ids = torch.randint(1, 32, (1, T))
    _, trace = model.run_with_trace(ids, names="blocks.1.attn.hook_pattern")
    rows = row_weights(model, ids, layer="blocks.1.attn", start=6, stop=15)
    torch.testing.assert_close(rows, trace["blocks.1.attn.hook_pattern"][:, :, 6:15], atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="rows 20:30 are outside the 24 queries"):
        row_weights(model, ids, layer="blocks.1.attn", start=20, stop=30)
    with pytest.raises(ValueError, match="'blocks.9.attn' is no softmax attention layer"):
        row_weights(model, ids, layer="blocks.9.attn", start=0, stop=2)


def test_progress_names_each_layer_as_it_is_done():
    done = []
    summarize(build({}), torch.randint(1, 32, (1, T)), progress=done.append)
    assert done == ["blocks.0.attn", "blocks.1.attn"]


def test_a_trained_models_previous_token_head_is_found_and_random_weights_show_none():
    from transformer.checkpoint import SHIPPED_DIR, load
    from transformer.training.tasks import get_task

    trained, _ = load(SHIPPED_DIR / "llama2-language")
    text = (SHIPPED_DIR.parent / "text" / "english-held-out.txt").read_text(encoding="utf-8")[:1500]
    ids = torch.tensor([get_task("language").encode(text)])
    torch.manual_seed(0)
    random_init = Transformer(trained.cfg).eval()
    roles = {name: [role for layer in summarize(model, ids, window=64).values() for role in head_roles(layer, 64)]
             for name, model in (("trained", trained), ("random", random_init))}
    assert "previous-token" in roles["trained"] and "local" in roles["trained"]
    assert set(roles["random"]) == {"broad"} and set(roles["trained"]) <= set(ROLES)  # near-uniform rows, every one


def test_head_scores_read_the_queries_asked_for_and_refuse_an_empty_range():
    summary = summarize(build({}), torch.randint(1, 32, (1, T)), window=4)["blocks.0.attn"]
    whole, late = head_scores(summary, 4), head_scores(summary, 4, start=12)
    torch.testing.assert_close(late["sink"], summary["sink"][0, :, 12:].mean(-1))
    torch.testing.assert_close(whole["sink"], summary["sink"][0, :, 4:].mean(-1))
    with pytest.raises(ValueError, match="queries 30:40 hold none of the text's 24 tokens"):
        head_scores(summary, 4, start=30, stop=40)
