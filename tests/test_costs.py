"""What a model costs and how models grow: every parameter term held against the built model, real-size
totals against published figures (within 2%), FLOPs and memory against their formulas written out by hand,
the compute-optimal calculator against Chinchilla, and the messages for impossible budgets."""
import fnmatch
import itertools
import json
import math

import numpy as np
import pytest

from transformer import MODEL_CARDS, PRESETS, Transformer, TransformerConfig, choices, param_counts
from transformer import scaling
from transformer.costs import (forward_flops_per_token, generation_bytes, kv_cache_bytes_per_token, memory_bytes,
                               param_terms, training_bytes, training_flops, training_flops_per_token)

MIXES = [dict(arch=a, position=p, ffn=f, norm=n, bias=b, n_kv_heads=g)
         for a, p, f, n, b, g in itertools.product(choices("arch"), ("learned", "rope"), choices("ffn"),
                                                   choices("norm"), (False, True), (1, 2))]
CONFIGS = {**{f"preset {k}": cfg for k, cfg in PRESETS.items()},
           **{"-".join(str(v) for v in mix.values()): TransformerConfig(vocab_size=40, d_model=16, n_heads=4,
                                                                         n_layers=2, max_len=24, **mix)
              for mix in MIXES[::5]},
           "bert head": PRESETS["bert"].replace(tie_embeddings=False)}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_term_is_exactly_the_parameters_it_names(name):
    cfg = CONFIGS[name]
    model = Transformer(cfg, device="cpu")
    named = dict(model.named_parameters())  # tied weights once
    owners = {n: [] for n in named}
    for term in param_terms(cfg):
        held = [n for n in named if any(fnmatch.fnmatch(n, pattern) for pattern in term.where)]
        assert sum(named[n].numel() for n in held) == term.count, f"{term.name}: {term.formula}"
        for n in held:
            owners[n].append(term.name)
    assert all(len(terms) == 1 for terms in owners.values()), {n: t for n, t in owners.items() if len(t) != 1}
    assert param_counts(cfg)["total"] == sum(p.numel() for p in named.values())


def test_the_block_rule_of_thumb_is_twelve_d_squared():
    """4·D² for attention and 8·D² for a 4·D FFN; SwiGLU's 8D/3 width keeps its three matrices at 8·D²."""
    d = 768
    gpt = {t.name: t.per_copy for t in param_terms(TransformerConfig(d_model=d, n_heads=12, ffn="gelu"))}
    assert gpt["W_q"] + gpt["W_k and W_v"] + gpt["W_o"] == 4 * d * d
    assert gpt["W_up"] + gpt["W_down"] == 8 * d * d
    llama = TransformerConfig(d_model=d, n_heads=12, ffn="swiglu")
    swiglu = next(t for t in param_terms(llama) if t.part == "ffn")
    assert llama.d_ff == 2048 and abs(swiglu.per_copy - 8 * d * d) / (8 * d * d) < 0.001


PUBLISHED = [("gpt2", "small", "total", 124e6), ("llama2", "7B", "total", 6.74e9), ("llama2", "70B", "total", 70e9),
             ("gpt2", "175B (GPT-3)", "total", 175e9), ("mixtral", "8x7B", "total", 46.7e9),
             ("mixtral", "8x7B", "active", 12.9e9)]


@pytest.mark.parametrize("key,size,kind,published", PUBLISHED, ids=[f"{k} {s} {w}" for k, s, w, _ in PUBLISHED])
def test_real_totals_are_within_two_percent_of_the_published(key, size, kind, published):
    counted = param_counts(MODEL_CARDS[key].real[size])[kind]
    assert abs(counted - published) / published < 0.02, f"{counted:,} vs {published:,.0f}"


def test_gpt3_is_a_real_size_with_its_published_compute():
    gpt3 = MODEL_CARDS["gpt2"].real["175B (GPT-3)"]
    assert (gpt3.n_layers, gpt3.d_model, gpt3.n_heads, gpt3.d_head, gpt3.max_len) == (96, 12288, 96, 128, 2048)
    n = param_counts(gpt3)["total"]
    assert abs(training_flops(n, 300e9) - 3.14e23) / 3.14e23 < 0.02  # Brown et al. 2020, Table D.1


def test_training_a_token_costs_three_forward_passes():
    cfg = MODEL_CARDS["llama2"].real["7B"]
    forward = forward_flops_per_token(cfg, 4096)
    assert training_flops_per_token(cfg, 4096) == 3 * forward
    n = param_counts(cfg)["total"] - param_counts(cfg)["embedding"]  # the weights a token multiplies by
    attention = 32 * 2 * 2 * 4096 * 4096  # per layer q·K^T and weights·V, over 4096 keys of 32 x 128 dimensions
    assert forward == 2 * n + attention and attention / forward < 0.15
    with pytest.raises(ValueError, match="positive"):
        training_flops(0, 1e9)


def test_memory_by_hand_for_gpt2_small():
    cfg = MODEL_CARDS["gpt2"].real["small"]
    n, s, b, d, heads, layers = param_counts(cfg)["total"], 1024, 8, 768, 12, 12
    memory = memory_bytes(cfg, context=s, batch=b, fused_attention=False)
    assert (memory["weights"], memory["gradients"], memory["optimizer"]) == (2 * n, 2 * n, 12 * n)  # ZeRO's 16 bytes
    assert memory["activations"] == layers * s * b * d * (34 + 5 * heads * s / d)  # Korthikanti et al. 2022
    assert memory_bytes(cfg, s, b)["activations"] == layers * s * b * d * 34  # fused: no s x s matrices kept
    assert memory["kv_cache"] == kv_cache_bytes_per_token(cfg) * s * b == 2 * layers * d * 2 * s * b
    assert training_bytes(memory) == 16 * n + memory["activations"]
    assert generation_bytes(memory) == 2 * n + memory["kv_cache"]
    with pytest.raises(ValueError, match="context=0"):
        memory_bytes(cfg, 0)


# --- how models grow ---------------------------------------------------------------------------------


def test_the_rule_of_thumb_gives_chinchilla_for_chinchillas_budget():
    best = scaling.compute_optimal(5.76e23)  # Chinchilla's budget: 70B parameters on 1.4T tokens
    assert abs(best.params - 70e9) / 70e9 < 0.02 and abs(best.tokens - 1.4e12) / 1.4e12 < 0.02
    assert best.tokens_per_param == 20
    ten_times = scaling.compute_optimal(5.76e24)
    assert math.isclose(ten_times.params / best.params, math.sqrt(10))


def test_the_fitted_optimum_is_the_lowest_loss_on_its_budget():
    budget = 1e22
    best = scaling.fitted_optimal(budget)
    assert math.isclose(training_flops(best.params, best.tokens), budget)
    sizes = best.params * np.logspace(-1, 1, 201)
    losses = scaling.chinchilla_loss(sizes, budget / (6 * sizes))
    assert abs(sizes[np.argmin(losses)] / best.params - 1) < 0.03
    assert 1.9 < scaling.chinchilla_loss(70e9, 1.4e12) < 2.0  # the fit at Chinchilla: 1.94 nats per token


@pytest.mark.parametrize("budget,words", [(0, ["positive", "got 0"]), (-5e20, ["positive", "-5e+20"]),
                                          (1e40, ["1e+40", "at most 1e+30"]), (float("nan"), ["finite"]),
                                          (float("inf"), ["finite"]), ("a lot", ["'a lot'", "1e21"]),
                                          (10, ["at least 1e+06"])])
def test_impossible_budgets_are_refused_with_the_range(budget, words):
    for calculator in (scaling.compute_optimal, scaling.fitted_optimal):
        with pytest.raises(ValueError) as error:
            calculator(budget)
        assert all(word in str(error.value) for word in words), str(error.value)


def test_the_shipped_sweep_spent_one_budget_on_each_size():
    sweep = json.loads(scaling.SWEEP_PATH.read_text())
    runs, budget = sweep["runs"], sweep["settings"]["budget"]
    assert 3 <= len(runs) <= 4
    assert [r["params"] for r in runs] == sorted(r["params"] for r in runs)
    for run in runs:
        cfg = scaling.sweep_config(run["d_model"], run["vocab_size"], sweep["settings"]["context"])
        assert run["params"] == param_counts(cfg)["total"]
        assert abs(run["flops"] - budget) / budget < 0.05  # whole steps: within 5% of the budget
        assert 0 < run["bits_per_char"] < math.log2(run["vocab_size"])
    assert sum(r["cpu_seconds"] for r in runs) < 600  # a few minutes of one thread in all
