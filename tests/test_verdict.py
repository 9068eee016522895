"""The tournament's verdict rule: one case of each verdict, the interval against its formula, the gate under the
bigram baseline, the claim's four readings, and the extra seeds an undecided entry gets."""
import math
import statistics

import pytest

from transformer.training.tournament.comparisons import COMPARISONS
from transformer.training.tournament.judgement import judge_comparison, seeds_wanted
from transformer.training.tournament.verdict import (LEARNED_BITS, MARGIN_SHARE, MAX_SEEDS, Expectation, claim_status,
                                                     did_not_learn, judge, margin_for, needs_more_seeds, paired,
                                                     t_quantile)

REFERENCE = {0: 2.80, 1: 2.90, 2: 3.00}  # margin: 1% of 2.90 = 0.029 bits/char


def shifted(by: list[float]) -> dict[int, float]:
    return {seed: bits + d for (seed, bits), d in zip(REFERENCE.items(), by)}


def test_each_verdict_from_a_case_of_its_own():
    margin = margin_for(REFERENCE)
    assert margin == pytest.approx(MARGIN_SHARE * 2.90)
    # differences -0.005, 0.000, +0.005: interval ±0.012 around 0, inside the margin
    assert judge(paired(REFERENCE, shifted([-0.005, 0.0, 0.005])), margin) == "equivalent"
    # about 0.1 bits/char fewer in every seed: the whole interval below 0
    assert judge(paired(REFERENCE, shifted([-0.10, -0.11, -0.09])), margin) == "better"
    # about 0.07 more in every seed (GQA's loss in the shipped runs): above 0, and past the margin
    assert judge(paired(REFERENCE, shifted([0.06, 0.07, 0.08])), margin) == "worse"
    # seeds that disagree in sign: the interval crosses 0 and the margin's edge
    assert judge(paired(REFERENCE, shifted([-0.10, 0.05, 0.15])), margin) == "undecided"
    # one seed pair has no interval at all
    assert judge(paired({0: 2.8}, {0: 2.0}), margin) == "undecided"


def test_a_small_consistent_loss_inside_the_margin_is_equivalent_not_worse():
    """A loss that is real (every seed) but smaller than the margin stated in advance reads equivalent."""
    difference = paired(REFERENCE, shifted([0.010, 0.011, 0.012]))
    low, high = difference.interval
    assert 0 < low and high < margin_for(REFERENCE)
    assert judge(difference, margin_for(REFERENCE)) == "equivalent"


def test_the_interval_is_the_t_interval_of_the_seed_pairs():
    entry = {0: 2.85, 1: 2.99, 2: 3.04, 3: 9.9}  # seed 3 has no reference run: left out of the pairs
    difference = paired(REFERENCE, entry)
    diffs = [0.05, 0.09, 0.04]
    assert difference.seeds == (0, 1, 2) and difference.differences == pytest.approx(diffs)
    half = 4.303 * statistics.stdev(diffs) / math.sqrt(3)  # t(0.975, 2 degrees of freedom)
    assert difference.interval == pytest.approx((statistics.fmean(diffs) - half, statistics.fmean(diffs) + half))
    assert t_quantile(4) == pytest.approx(2.776) and t_quantile(30) == pytest.approx(2.042)
    assert t_quantile(120) == pytest.approx(1.980, abs=1e-3)  # past the table, toward the normal's 1.96
    with pytest.raises(ValueError, match="at least 2 seed pairs"):
        t_quantile(0)
    with pytest.raises(ValueError, match="greater than 0"):
        judge(difference, 0.0)


def test_an_entry_that_did_not_clear_the_bigram_baseline_measured_nothing():
    bigram = 3.517
    assert did_not_learn({"RoPE": 2.83, "ALiBi": 3.01}, bigram) == []
    assert did_not_learn({"RoPE": 2.83, "none": 3.49, "stuck": None}, bigram) == \
        ["none (3.490)", "stuck (diverged in every seed)"]
    assert did_not_learn({"edge": bigram - LEARNED_BITS}, bigram) == []  # exactly 0.3 under counts


def test_the_claim_reads_agrees_disagrees_undecided_or_not_tested():
    no_loss = ("equivalent", "better")
    assert claim_status([Expectation("GQA", "equivalent", no_loss)], [], 3.5)[0] == "agrees"
    status, why = claim_status([Expectation("GQA", "worse", no_loss)], [], 3.5)
    assert status == "disagrees" and "GQA worse" in why
    assert claim_status([Expectation("GQA", "undecided", no_loss)], [], 3.5)[0] == "undecided"
    status, why = claim_status([Expectation("GQA", "equivalent", no_loss)], ["none (3.490)"], 3.517)
    assert status == "not tested at this size" and "none (3.490)" in why and "3.517" in why
    status, why = claim_status([Expectation("x", "better", ("better",))], [], 3.5, "the rate broke nothing")
    assert (status, why) == ("not tested at this size", "the rate broke nothing")
    # a decided contrary verdict outweighs an undecided one
    assert claim_status([Expectation("a", "undecided", no_loss), Expectation("b", "worse", no_loss)], [],
                        3.5)[0] == "disagrees"


def _run(seed: int, bits: float | None) -> dict:
    return {"seed": seed, "held_out_bits_per_char": bits, "diverged": bits is None, "curve": [[0, 5.0]]}


def _comparison(key: str, entries: list[tuple[str, str | None, dict, list]]) -> dict:
    return {"key": key, "lengths": [1], "entries": [
        {"choice": c, "against": a, "predicted": p, "runs": [_run(i, b) for i, b in enumerate(bits)]}
        for c, a, p, bits in entries]}


def test_a_comparison_is_judged_and_owes_seeds_where_undecided():
    no_loss = {"1x": ["equivalent", "better"]}
    comp = _comparison("sinks", [("off", None, {}, [2.80, 2.90, 3.00]),
                                 ("sinks", "off", no_loss, [2.80, 2.95, 2.95])])
    judge_comparison(comp, bigram=3.517)
    sinks = comp["entries"][1]
    assert sinks["verdict"] == "undecided" and sinks["difference"] == pytest.approx(0.0)
    assert comp["claim_status"] == "undecided" and comp["verdict"].startswith("Undecided")
    assert seeds_wanted(comp) == {"sinks": 4, "off": 4}  # the entry and its reference, one seed more
    assert comp["rule"]["margin_share"] == MARGIN_SHARE and comp["rule"]["max_seeds"] == MAX_SEEDS

    comp = _comparison("sinks", [("off", None, {}, [2.80, 2.90, 3.00]),
                                 ("sinks", "off", no_loss, [2.80, 2.90, 3.01])])
    judge_comparison(comp, bigram=3.517)
    assert comp["entries"][1]["verdict"] == "equivalent" and comp["claim_status"] == "agrees"
    assert seeds_wanted(comp) == {}

    comp = _comparison("sinks", [("off", None, {}, [2.80, 2.90, 3.00]),
                                 ("sinks", "off", no_loss, [3.40, 3.50, 3.60])])  # not 0.3 under the bigram
    judge_comparison(comp, bigram=3.517)
    assert comp["entries"][1]["verdict"] is None and comp["entries"][1]["difference"] == pytest.approx(0.6)
    assert comp["claim_status"] == "not tested at this size" and "measured nothing" in comp["claim_why"]
    assert seeds_wanted(comp) == {}  # no verdict to decide: more seeds would not help


def test_more_seeds_stop_at_the_most_the_rule_allows():
    assert needs_more_seeds("undecided", 3) and needs_more_seeds("undecided", 4)
    assert not needs_more_seeds("undecided", MAX_SEEDS) and not needs_more_seeds("worse", 3)
    assert not needs_more_seeds("undecided", 2)  # the first seeds come first


def test_every_declared_comparison_predicts_something_of_a_measured_entry():
    from transformer.training.tournament.run import Recipe

    for key, spec in COMPARISONS.items():
        entries = spec.entries(Recipe())
        names = [e.choice for e in entries]
        assert any(e.predicted for e in entries), key
        for entry in entries:
            assert entry.against in ("", None) or entry.against in names, (key, entry.choice)
            for length in entry.predicted:
                assert length == "1x" or int(length[:-1]) in spec.lengths, (key, entry.choice, length)


def test_a_rate_chosen_to_break_training_may_fail_to_learn_and_the_qk_claim_reads_it():
    better = {"1x": ["better"]}

    def qk(high_baseline: list) -> dict:
        comp = _comparison("qk-norm", [("off", None, {}, [2.70, 2.72, 2.74]), ("QK-norm", "off", {}, [2.62, 2.63, 2.64]),
                                       ("off, 10x lr", "off", {}, high_baseline),
                                       ("QK-norm, 10x lr", "off, 10x lr", better, [2.82, 2.84, 2.86])])
        comp["entries"][2]["stress"] = True
        comp["baselines_bits"] = {"unigram": 4.49, "bigram": 3.517}
        return judge_comparison(comp, bigram=3.517)

    broken = qk([3.60, 3.55, None])  # stalled near the bigram, and one seed diverged: the rate broke it
    assert broken["measured_nothing"] == [] and broken["entries"][3]["verdict"] == "better"
    assert broken["claim_status"] == "agrees"
    hurt = qk([3.10, 3.20, 3.15])  # it learned, but decidedly worse than at the recipe's rate: the rate hurt it
    assert hurt["entries"][2]["verdict"] == "worse" and hurt["claim_status"] == "agrees"
    unhurt = qk([2.71, 2.73, 2.74])  # the high rate cost the baseline nothing: no failure to prevent
    assert unhurt["entries"][2]["verdict"] != "worse"
    assert unhurt["claim_status"] == "not tested at this size" and "did not hurt the baseline" in unhurt["claim_why"]
    unmarked = qk([3.60, 3.55, 3.58])
    unmarked["entries"][2]["stress"] = False  # the same numbers in an entry that was meant to learn
    assert judge_comparison(unmarked, bigram=3.517)["measured_nothing"] == ["off, 10x lr (3.577)"]


def test_a_length_an_entry_cannot_read_has_no_verdict_and_wants_no_seeds():
    runs = lambda bits, longer: [{**_run(i, b), "held_out_bits_per_char_by_length": {"1x": b, "2x": l}}
                                 for i, (b, l) in enumerate(zip(bits, longer))]
    comp = {"key": "positions", "lengths": [1, 2], "entries": [
        {"choice": "RoPE", "against": None, "predicted": {"2x": ["equivalent", "better"]},
         "runs": runs([2.2, 2.21, 2.22], [2.6, 2.7, 2.65])},
        {"choice": "learned", "against": "RoPE", "predicted": {}, "runs": runs([2.45, 2.46, 2.47], [None] * 3)}]}
    judge_comparison(comp, bigram=3.517)
    learned = comp["entries"][1]
    assert learned["verdict"] == "worse" and learned["longer"]["2x"]["verdict"] is None
    assert learned["longer"]["2x"]["pairs"] == 0 and "learned" not in seeds_wanted(comp)
