"""The chapter "Back to a fixed state": each step's true answer recomputed here by hand (numpy, not the step's code
nor the library's recurrent form), its place in the lecture, and the link from Before attention."""
import math

import numpy as np

from apptest_helpers import assert_clean, open_page

from ui.lessons.steps import STEPS, fixed_state
from ui.lessons.steps.step import binary_size

SLUGS = ["linear-attention", "delta-rule", "state-capacity", "hybrid-recall", "state-memory"]


def step(slug):
    return next(s for s in STEPS if s.slug == slug)


def test_the_chapter_follows_the_attention_chapters_memory_costs():
    slugs = [s.slug for s in STEPS]
    start = slugs.index(SLUGS[0])
    assert slugs[start:start + len(SLUGS)] == SLUGS
    assert slugs.index("kv-cache") < slugs.index("flash") < start  # after the KV cache whose growth it answers
    assert slugs.index("before-attention") == 0


def linear_attention_by_hand(q, k, v):
    """Token by token, S += k vᵀ and read q S: every read, and the state's size after each token."""
    state = np.zeros((k.shape[1], v.shape[1]))
    reads, sizes = [], []
    for q_t, k_t, v_t in zip(q, k, v):
        state = state + np.outer(k_t, v_t)
        reads.append(q_t @ state)
        sizes.append(state.size)
    return np.array(reads), sizes


def test_linear_attention_carries_one_matrix_whatever_the_length():
    rng = np.random.default_rng(1)
    d, T = fixed_state.RNN_D, max(fixed_state.RNN_T)
    q, k, v = (rng.standard_normal((T, d)) / math.sqrt(d) for _ in range(3))
    reads, sizes = linear_attention_by_hand(q, k, v)
    assert np.allclose(reads, np.tril(q @ k.T) @ v)  # the RNN and attention without softmax: the same reads
    truth = {t: sizes[t - 1] for t in fixed_state.RNN_T}
    assert set(truth.values()) == {d * d}
    live = step("linear-attention").build()
    assert live.choices[live.answer].startswith(f"No: d_k · d_v = {d * d:,} numbers")
    assert "largest difference" in live.why and len(live.figure.data) == 3


def delta_by_hand(keys, values, correct):
    state = np.zeros((keys.shape[1], values.shape[1]))
    for k, v in zip(keys, values):
        state = state + np.outer(k, v - state.T @ k if correct else v)
    return state


def test_the_delta_rule_returns_the_new_value_and_plain_addition_a_mix():
    c = fixed_state.OVERWRITE_SIMILARITY
    keys = np.array([[1, 0, 0, 0], [0, 0, 0, 1], [c, math.sqrt(1 - c * c), 0, 0]])
    values = np.eye(4)[:3]
    plain, delta = (keys[2] @ delta_by_hand(keys, values, correct) for correct in (False, True))
    assert np.allclose(plain, values[2] + c * values[0]) and np.allclose(delta, values[2])
    assert np.allclose(keys[0] @ delta_by_hand(keys, values, True), (1 - c * c) * values[0] + c * values[2])
    live = step("delta-rule").build()
    assert live.choices[live.answer] == "The delta rule returns v₃; plain linear attention returns v₃ mixed with v₁"
    assert "[0.19, 0.00, 0.90, 0.00]" in live.why  # the old key now reads mostly v₃


def test_a_state_gives_back_under_half_of_d_k_random_pairs_with_either_rule():
    d = fixed_state.CAPACITY_D
    rng = np.random.default_rng(7)  # other draws than the page's: the answer must not hang on one sample
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)
    shares = {False: [], True: []}
    for _ in range(8):
        keys, values = unit(rng.standard_normal((d, d))), unit(rng.standard_normal((d, d)))
        for correct in shares:
            reads = keys @ delta_by_hand(keys, values, correct)
            shares[correct].append(np.mean(np.linalg.norm(reads - values, axis=-1) < 0.5))
    assert max(shares[False]) < 0.1 and max(shares[True]) < 0.4  # far under half on every seed: a fair margin
    assert np.mean(shares[True]) > np.mean(shares[False]) + 0.05  # the delta rule reproduces more of them
    live = step("state-capacity").build()
    assert live.choices[live.answer] == "Neither rule gives back even half"
    assert "names" in live.why and "not made here" in live.why  # the generous reading, and no claim at distance


def test_qwen3_next_holds_three_gib_at_128k_by_hand():
    T, two_bytes = 131072, 2
    full_layers, linear_layers = 48 // 4, 48 - 48 // 4
    kv = full_layers * 2 * 2 * 256 * T * two_bytes  # K and V, 2 kv heads of 256, per token per layer
    states = linear_layers * 32 * 128 * 128 * two_bytes  # 32 heads of 128 × 128
    conv = linear_layers * 3 * (2 * 16 * 128 + 32 * 128) * two_bytes  # the convolution's last 3 inputs of q, k, v
    hybrid = kv + states + conv
    assert binary_size(hybrid) == "3.04 GiB" and binary_size(48 * 2 * 2 * 256 * T * two_bytes) == "12 GiB"
    live = step("state-memory").build()
    assert live.choices[live.answer] == binary_size(hybrid)
    totals = sorted(float(c.split()[0]) * (2 ** 30 if c.endswith("GiB") else 2 ** 20) for c in live.choices)
    assert all(b / a > 3 for a, b in zip(totals, totals[1:]))  # choices a factor of 3 or more apart


def test_before_attention_links_the_chapter():
    at = open_page("pages/before_attention.py")
    assert_clean(at)
    number = [s.slug for s in STEPS].index("linear-attention") + 1
    assert any(f"](lessons?step={number})" in m.value for m in at.markdown)
