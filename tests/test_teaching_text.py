"""What the pages, lessons and choices say as fact, checked against the number that decides it: the library's own
arithmetic, its modules run on chosen inputs, or the model cards' published dimensions."""
from pathlib import Path

import numpy as np
import torch

from transformer import AXES, MODEL_CARDS, Transformer, TransformerConfig, scaling
from transformer.costs import full_attention_bytes, kv_cache_bytes_per_token
from transformer.ffn import ClampedSwiGLU
from ui.lessons.steps import attention, memory
from ui.lessons.steps.step import GIB

ROOT = Path(__file__).resolve().parent.parent
TINY = dict(vocab_size=32, d_model=32, n_heads=2, n_layers=1, max_len=16)


def source(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def cached_per_layer(cfg: TransformerConfig) -> float:
    return kv_cache_bytes_per_token(cfg, 1) / cfg.n_layers


def test_mla_caches_far_less_than_mha_but_more_than_mqa_of_its_width():
    for cfg in (MODEL_CARDS["deepseek-v3"].real["671B"], MODEL_CARDS["deepseek-v3"].config):
        plain = cfg.replace(kv_rank=None, q_rank=None)
        mla, mqa, mha = (cached_per_layer(c) for c in (cfg, plain.replace(n_kv_heads=1), plain))
        assert mqa < mla < mha / 3, (mla, mqa, mha)  # 72 against 64 in the classroom, 576 against 320 at 671B
    real = MODEL_CARDS["deepseek-v3"].real["671B"]
    plain = real.replace(kv_rank=None, q_rank=None)
    assert round(cached_per_layer(real) / cached_per_layer(plain.replace(n_kv_heads=1))) == 2
    words = AXES["kv_heads"].row("MLA").solves + AXES["kv_heads"].problem
    assert "as small as MQA" not in words and "2× MQA" in words


def test_the_compute_optimal_frontier_drops_less_with_each_decade_by_the_same_factor():
    decades = np.logspace(18, 26, 9)
    loss = np.array(scaling.frontier_loss(decades))
    drops = -np.diff(loss)
    assert np.all(drops > 0) and np.all(np.diff(drops) < 0)  # 0.55, 0.39, 0.27 ... nats: not the same drop
    reducible = loss - scaling.CHINCHILLA["E"]
    ratios = reducible[1:] / reducible[:-1]
    assert np.allclose(ratios, ratios[0], rtol=1e-6) and ratios[0] < 1  # the same factor per decade
    page = source("pages/growth.py")
    assert "same drop" not in page.replace("\n", " ") and "same *factor*" in page


def test_additive_attention_came_two_years_before_the_transformer():
    bahdanau = 2015
    gap = MODEL_CARDS["original"].year - bahdanau
    assert gap == 2
    assert "two years before it became" in source("pages/before_attention.py")


def test_a_soft_capped_score_still_takes_the_whole_row():
    cfg = TransformerConfig(**TINY, attn_softcap=50.0)
    attn = next(m for m in Transformer(cfg).modules() if hasattr(m, "soft_cap"))
    scores = torch.tensor([[[[1000.0, 0.0]]]])  # (B, H, T_q, T_kv): one query, two keys
    capped = attn.soft_cap(scores.clone())  # (B, H, T_q, T_kv)
    assert capped.abs().max() <= 50  # (float32 rounds tanh(20) to 1)
    weights = capped.softmax(-1)  # (B, H, T_q, T_kv)
    assert weights[0, 0, 0, 1] < 1e-20 and weights[0, 0, 0, 0] == 1  # the cap bounds the size, not the saturation
    words = AXES["scores"].row("softcap").solves
    assert "No score can grow large enough" not in words and "whole row" in words


def test_gpt_oss_clamps_the_gate_from_above_only():
    cfg = TransformerConfig(**TINY)
    expert = ClampedSwiGLU(cfg, 2)
    with torch.no_grad():
        for linear in (expert.gate, expert.up):
            linear.weight.zero_()
            linear.weight[0, 0], linear.weight[1, 0] = 1.0, -1.0  # hidden unit 0 gets x, unit 1 gets -x
        seen = {}
        expert.down.register_forward_hook(lambda module, args, out: seen.update(hidden=args[0]))
        x = torch.zeros(1, cfg.d_model)  # (N, d_model)
        x[0, 0] = 20.0
        expert(x)
    gate_high = torch.tensor(cfg.expert_limit)  # +20 clamped to 7; -20 passes as it is
    up = torch.tensor(cfg.expert_limit)
    expected_high = (up + 1) * gate_high * torch.sigmoid(gate_high * ClampedSwiGLU.alpha)
    gate_low = torch.tensor(-20.0)
    expected_low = (-up + 1) * gate_low * torch.sigmoid(gate_low * ClampedSwiGLU.alpha)
    assert torch.allclose(seen["hidden"][0], torch.stack([expected_high, expected_low]))
    words = AXES["expert_activation"].row("clamped-swiglu").does
    assert "gate clamped from above" in words and "gate and up clamped" not in words


def test_the_flash_step_counts_two_matrices_and_keeps_a_running_output():
    real = MODEL_CARDS["llama2"].real["7B"]
    full = full_attention_bytes(1, real.n_heads, 32_768, 2)
    assert full == 2 * real.n_heads * 32_768 ** 2 * 2 == 128 * GIB  # scores and weights, 64 GiB each
    live = memory.flash.build()
    assert "two T × T matrices" in live.why and "128 GiB per layer (64 GiB each)" in live.why
    assert "running max, sum and output" in memory.flash.text


def test_the_multi_head_step_names_the_lesson_models_shared_k_and_v():
    live = attention.multi_head.build()
    cfg = attention.lesson_model().config
    assert cfg.n_kv_heads < cfg.n_heads  # the lessons' LLaMA 2 is GQA
    assert f"share {cfg.n_kv_heads} K and V heads" in live.question and "own Q, K and V" not in live.question
    titles = [a["text"] for a in live.figure.to_dict()["layout"]["annotations"] if "kv" in a["text"]]
    assert len(titles) == cfg.n_heads and len({t.split("kv")[1] for t in titles}) == cfg.n_kv_heads


def test_the_models_named_as_exceptions_are_exceptions():
    for key in ("llama3", "qwen3", "deepseek-v3"):  # "others keep every layer global"
        real = list(MODEL_CARDS[key].real.values())[-1]
        assert all(w is None for w in real.layer_windows()), key
    for key in ("llama3", "deepseek-v3"):  # "add none of these three": QK-norm, soft-capping, sinks
        real = list(MODEL_CARDS[key].real.values())[-1]
        assert not real.row("qk_norm").normalises and real.attn_softcap is None and not real.sinks, key
    overclaims = ("most long-context models", "Every long-context model", "most models add")
    for path in ("pages/masks.py", "pages/positions.py", "pages/scores.py", "ui/lessons/steps/modern.py"):
        assert not any(claim in source(path) for claim in overclaims), path


def test_the_model_cards_pair_their_dates_and_windows_as_published():
    mistral = MODEL_CARDS["mistral"].real["7B"]
    assert (mistral.max_len, mistral.sliding_window) == (8192, 4096)  # v0.1: trained at 8k with a 4k window
    assert MODEL_CARDS["mixtral"].year == 2023  # released in December 2023
    gpt2 = MODEL_CARDS["gpt2"]
    assert gpt2.label("175B (GPT-3)") == "GPT-3 175B" and gpt2.label("xl") == "GPT-2 xl"
    assert "Code LLaMA" not in AXES["rope_scaling"].row("linear").examples  # it raised the base instead
