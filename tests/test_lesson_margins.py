"""A step graded from a measurement must separate its choices by more than the measurement's noise: across seeds
where it has them, else by a stated tolerance. Each test here recomputes one graded measurement from its source
(the checkpoints' traces, the measurement files, the seeds) and the margin between the right choice and the
nearest wrong one."""
import json
from pathlib import Path

import numpy as np
import torch

from transformer.training.tasks import previous_token_targets
from ui.compute.interpret_measure import PAIRS, answer_token, lens_view, patching
from ui.compute.tokens import encode_text
from ui.lessons.steps import STEPS, attention, before_attention, fixed_state, interpret, modern, speculative
from ui.lessons.steps.lesson_model import LESSON_SEED, head_shares, lesson_model
from ui.compute import state_measure

MEASURED = Path(__file__).resolve().parent.parent / "assets" / "measurements" / "modern-variants.json"
WEIGHT_MARGIN = 0.1  # a share of a row's weight: one head on one text, so a wrong choice must trail by this much
PROBABILITY_MARGIN = 0.05  # the logit lens: the top token must lead the next by this much at every depth it names
EFFECT_MARGIN = 0.1  # head patching: the best head must lead the next by this share of the clean-corrupt gap
ACCURACY_MARGIN = 0.1  # the copy models' accuracy over 256 strings: about 2 standard errors of a share
LIFT_MARGIN = 0.04  # recall's lift over 40 phrases of 23 graded characters: about 2 standard errors of a difference


def measured() -> dict:
    return json.loads(MEASURED.read_text())


def test_every_step_graded_from_a_measurement_has_its_margin_checked_here():
    graded = {step.slug for step in STEPS if any(word in step.build().source for word in ("trained", "measured"))}
    assert graded == set(MARGIN_CHECKED), graded ^ set(MARGIN_CHECKED)


def test_the_copy_models_fall_or_hold_by_more_than_the_sampling_noise():
    curves = before_attention.accuracy_curves()
    for accuracy in curves.values():
        drop = accuracy[min(accuracy)] - accuracy[max(accuracy)]
        assert abs(drop - before_attention.FALLS) > ACCURACY_MARGIN, drop


def test_the_soft_lookup_heads_choice_leads_every_other_offered_token():
    live, m = attention.soft_lookup.build(), lesson_model()
    layer, head, query = (int(live.query[k]) for k in ("layer", "head", "query"))
    weights = m.trace.pattern(layer)[head, query]  # (T,)
    offered = [int(choice.split()[1]) for choice in live.choices]
    right = weights[offered[live.answer]]
    assert right - max(weights[j] for j in offered if j != offered[live.answer]) > WEIGHT_MARGIN


def test_every_head_of_the_multi_head_layer_is_clear_of_the_half_line():
    live, m = attention.multi_head.build(), lesson_model()
    shares = head_shares(m, previous_token_targets(1, len(m.tokens.ids))[0])[int(live.query["layer"])]  # (H,)
    assert float((shares - attention.HALF).abs().min()) > WEIGHT_MARGIN, shares


def test_the_logit_lens_answer_leads_from_its_block_on_and_trails_before_it():
    live, m = interpret.logit_lens.build(), lesson_model()
    query = int(live.query["lens_end"])
    lens = lens_view(m.config_json, LESSON_SEED, tuple(m.tokens.ids))
    row = live.answer
    leads = lens.top_probs[row:, query, 0] - lens.top_probs[row:, query, 1]  # (rows from the answer on,)
    assert leads.min() > PROBABILITY_MARGIN, leads
    if row > 0:  # the row before: another token led, clearly
        assert lens.top_probs[row - 1, query, 0] - lens.answer_probs[row - 1, query] > PROBABILITY_MARGIN


def test_the_copying_head_leads_the_next_head_by_a_share_of_the_gap():
    m = lesson_model()
    pair = PAIRS[interpret.COPY_PAIR]
    clean, corrupt = (encode_text(text, m.config_json) for text in (pair.clean, pair.corrupt))
    right, wrong = (answer_token(text, answer, m.config_json) for text, answer in
                    ((pair.clean, pair.right), (pair.corrupt, pair.wrong)))
    result = patching(m.config_json, LESSON_SEED, tuple(clean.ids), tuple(corrupt.ids), right, wrong)
    best, runner_up = torch.from_numpy(result.heads).flatten().topk(2).values.tolist()
    assert best - runner_up > EFFECT_MARGIN * abs(result.gap), (best, runner_up, result.gap)


def test_the_state_capacity_answer_holds_for_every_seed():
    result = state_measure.capacity(fixed_state.CAPACITY_D)
    row = int(np.searchsorted(result.n, fixed_state.CAPACITY_D))
    for rule in state_measure.RULES:
        seeds = np.asarray(result.recall[rule]["reproduced"][row])  # (seeds,)
        assert len(seeds) >= 3 and len(set(seeds >= fixed_state.HALF)) == 1, (rule, seeds)


def test_gemma3s_copying_layer_leads_the_next_layer_by_more_than_the_tie():
    row = next(r for r in measured()["layer_roles"] if r["preset"] == "gemma3")
    first, second = sorted(row["induction"], reverse=True)[:2]
    assert first - second > modern.SHARE_TIE


def test_the_qk_norm_ratio_keeps_its_answer_without_any_one_checkpoint():
    rows = measured()["score_sizes"]
    answer = modern.qk_norm.build().answer
    options = [1.0, 2.0, 4.0, 10.0]
    for left_out in range(len(rows)):
        kept = [r for i, r in enumerate(rows) if i != left_out]
        plain = max(max(r["score_max"]) for r in kept if r["qk_norm"] == "none")
        normed = max(max(r["score_max"]) for r in kept if r["qk_norm"] != "none")
        assert modern._nearest(options, plain / normed) == answer, rows[left_out]["model"]


def test_the_sink_pattern_holds_with_its_lines_at_half_and_double():
    shares = np.array(measured()["sinks"][0]["sink_share"]).ravel()
    answer = modern.sinks.build().answer
    for factor in (0.5, 2.0):  # "almost nothing" below 2.5% or 10%; "nearly everything" leaving 5% or 20% to tokens
        none_line, all_line = modern.SINK_NONE * factor, 1 - (1 - modern.SINK_ALL) * factor
        assert modern.sink_pattern(shares, all_line, none_line)[0] == answer, factor


def test_the_worst_rope_scaling_trails_the_next_by_more_than_a_tie():
    model = next(m for m in measured()["rope_scaling"] if m["model"].startswith("llama2"))
    bits = sorted((r["bits_per_char"]["4x"] for r in model["rows"] if r["scaling"] == "none" or r["factor"] == 4.0),
                  reverse=True)
    assert bits[0] - bits[1] > modern.BITS_TIE



def test_the_acceptance_rate_keeps_its_band_with_one_guess_more_or_fewer_accepted():
    run = next(r for r in speculative.runs() if r.k == speculative.K)
    proposed = sum(len(guesses) for guesses, _, _ in run.rounds)
    accepted = sum(kept for _, kept, _ in run.rounds)
    assert run.acceptance_rate == accepted / proposed
    band = speculative.band_of(run.acceptance_rate)
    assert speculative.band_of((accepted - 1) / proposed) == band == speculative.band_of((accepted + 1) / proposed)


def test_the_model_that_gains_least_from_the_first_copy_trails_the_next_by_more_than_the_noise():
    measured_recall = state_measure.recall_measured()
    at = measured_recall["distances"].index(fixed_state.RECALL_DISTANCE)
    lifts = sorted(state_measure.recall_lift(m)[at] for m in measured_recall["models"] if m["steps"])
    assert len(lifts) == 3 and lifts[1] - lifts[0] > LIFT_MARGIN, lifts


def test_the_indexers_band_holds_on_every_window_read_alone():
    """The mass kept at a quarter of the keys, measured on each held-out window by itself, falls in the same band."""
    from scripts.measure_modern import INDEX_CONTEXT, INDEX_WINDOWS, indexer_mass, windows_of_text
    from transformer.checkpoint import SHIPPED_DIR, load

    row = next(r for r in measured()["indexer_mass"] if r["preset"] == "deepseek-v3.2")
    model, _ = load(SHIPPED_DIR / row["model"], device="cpu")
    quarter = INDEX_CONTEXT // 4
    answer = modern.indexer_keeps.build().answer
    for window in windows_of_text(INDEX_CONTEXT, INDEX_WINDOWS):
        layers = indexer_mass(model, window[None], [quarter])
        kept = float(np.mean([layer["indexer"][0] for layer in layers]))
        assert int(np.searchsorted(modern.MASS_BANDS, kept)) == answer, kept


def test_the_nope_layers_role_clears_its_line_and_the_other_role_by_a_margin():
    row = next(r for r in measured()["layer_roles"] if r["preset"] == "llama4")
    nope = next(i for i, kind in enumerate(row["layer_kinds"]) if kind.endswith("NoPE"))
    induction, previous = row["induction"][nope], row["previous_token"][nope]
    assert modern.nope_layer.build().answer == 1  # copying, as measured
    assert induction - modern.ROLE_LINE > WEIGHT_MARGIN and induction - previous > WEIGHT_MARGIN
    assert induction > 10 * row["random_init"]["induction"][nope]


MARGIN_CHECKED = {
    "before-attention": test_the_copy_models_fall_or_hold_by_more_than_the_sampling_noise,
    "soft-lookup": test_the_soft_lookup_heads_choice_leads_every_other_offered_token,
    "multi-head": test_every_head_of_the_multi_head_layer_is_clear_of_the_half_line,
    "logit-lens": test_the_logit_lens_answer_leads_from_its_block_on_and_trails_before_it,
    "copying-head": test_the_copying_head_leads_the_next_head_by_a_share_of_the_gap,
    "state-capacity": test_the_state_capacity_answer_holds_for_every_seed,
    "hybrid-recall": test_the_model_that_gains_least_from_the_first_copy_trails_the_next_by_more_than_the_noise,
    "local-global": test_gemma3s_copying_layer_leads_the_next_layer_by_more_than_the_tie,
    "qk-norm": test_the_qk_norm_ratio_keeps_its_answer_without_any_one_checkpoint,
    "sinks": test_the_sink_pattern_holds_with_its_lines_at_half_and_double,
    "rope-scaling": test_the_worst_rope_scaling_trails_the_next_by_more_than_a_tie,
    "speculative": test_the_acceptance_rate_keeps_its_band_with_one_guess_more_or_fewer_accepted,
    "indexer-keeps": test_the_indexers_band_holds_on_every_window_read_alone,
    "nope-layer": test_the_nope_layers_role_clears_its_line_and_the_other_role_by_a_margin,
}
