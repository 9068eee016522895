"""The checkpoints trained on everyday English: each one's figures on held-out samples spread over the whole
split, the same tests failing on random-init weights of the same shape, and the published figures read from
their JSON."""
import sys
from pathlib import Path

import pytest
import torch

from transformer import Transformer
from transformer.training import language
from transformer.checkpoint import SHIPPED_DIR, load, trained_tokens
from transformer.training import english, per_character

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import measure_checkpoints  # noqa: E402

pytestmark = pytest.mark.slow

ENGLISH = measure_checkpoints.english_entries()
NAMES = [name for name, _ in ENGLISH]
TARGETS = {"bits_per_char": 2.2, "outside_prose": 2.5, "previous_token": 0.5, "induction": 0.5, "masked_accuracy": 0.6}


def passes(model, routing_above: float | None = None, context: int | None = None, tokenizer=None) -> dict[str, bool]:
    """The issue's targets on held-out samples: each True where this model meets it. An MoE model's experts
    specialise where its routing separates kinds of character more than `routing_above`, the most that
    random-init routers of its shape reach (its JSON's control). A model that reads learned `tokenizer` pieces
    (BPE) is measured per character of the same texts, its heads in its own tokens."""
    if tokenizer is not None and tokenizer.row.learned:
        scores = per_character.head_scores(model, tokenizer, context=context, limit=8, sentences=40)
        return {
            "bits_per_char": per_character.bits_per_char(model, tokenizer, language.held_out_text("english"),
                                                         context, limit=8) <= TARGETS["bits_per_char"],
            "outside_prose": per_character.bits_per_char(model, tokenizer, english.outside_prose(),
                                                         min(context, 128)) <= TARGETS["outside_prose"],
            "previous_token": float(scores["previous_token_head"].max()) >= TARGETS["previous_token"],
            "induction": float(scores["induction_head"].max()) >= TARGETS["induction"]}
    if model.cfg.arch == "encoder":
        return {"masked_accuracy": language.masked_accuracy(model, limit=64, corpus="english") >= TARGETS["masked_accuracy"],
                "previous_token": float(language.neighbour_scores(model, -1, language.ENCODER_CONTEXT, limit=8,
                                                                  corpus="english").max()) >= TARGETS["previous_token"]}
    sentences = language.induction_sentences(model.cfg, "english", limit=40)
    routing = ({"routing": language.routing_separation(model, context, corpus="english") > routing_above}
               if model.cfg.ffn == "moe" else {})
    held = held_to(model)
    return {
        **routing,
        "bits_per_char": language.bits_per_char(model, limit=8, corpus="english") <= TARGETS["bits_per_char"],
        "outside_prose": language.text_bits_per_char(model, english.outside_prose()) <= TARGETS["outside_prose"],
        **({"previous_token": float(language.previous_token_scores(model, limit=8, corpus="english").max())
            >= TARGETS["previous_token"]} if "previous_token_head" in held else {}),
        **({"induction": float(language.induction_scores_within_reach(model, sentences).max()) >= TARGETS["induction"]}
           if "induction_head" in held else {}),
    }


def held_to(model) -> set[str]:
    """The head figures a decoder is held to. A short convolution hands each layer the characters just before
    (test_language_checkpoints measures what zeroing it costs), so no head need look one back; a model with no
    softmax layer has implied weights, not attention, and its copying is measured as recall at distance
    (test_recall, the State page)."""
    plan = model.cfg.layer_plan()
    held = {"previous_token_head", "induction_head"}
    if any(spec.row.short_conv for spec in plan):
        held.discard("previous_token_head")
    if all(spec.row.keeps_state for spec in plan):
        held.discard("induction_head")
    return held


# a target a shipped checkpoint is known to miss, as measured: the test holds it to the others and to this miss, so it
# fails (take the entry out) the day a retrained checkpoint meets it. Llama 4's ran 3,000 steps, not 4,000, on the CPU
# budget; its heads are bounded by the RMS-normed q and k of its RoPE layers (every score within ±√32)
SHORT_OF = {"llama4-language": {"previous_token": "0.43 (L2H2; random init 0.06-0.07), under 0.5"}}


def test_the_default_model_reads_english():
    assert "llama2-language" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_each_checkpoint_meets_its_targets_and_random_weights_do_not(name):
    meta = dict(ENGLISH)[name]
    model, _ = load(SHIPPED_DIR / name, device="cpu")
    figures = meta["figures"]
    routing_above = figures["random_init"].get("routing_separation", [None, None])[1]
    context = meta["corpus"]["context"]
    trained = passes(model, routing_above, context, model.tokenizer)
    assert ("routing" in trained) == (model.cfg.ffn == "moe")
    if "routing" in trained:  # not a target: a claim the docs make only where it holds, as measured here
        routing_holds = figures["routing_separation"] > routing_above
        assert trained.pop("routing") == routing_holds
    missed = SHORT_OF.get(name, {})
    assert all(met for target, met in trained.items() if target not in missed), trained
    assert not any(trained[target] for target in missed), f"{name} now meets {missed}: take it out of SHORT_OF"
    torch.manual_seed(0)
    control = passes(Transformer(model.cfg, device="cpu").eval(), routing_above, context, model.tokenizer)
    assert not any(control.values()), control
    # and what the JSON publishes says the same
    controls = {key: span for key, span in figures["random_init"].items() if key != "seeds"}
    assert controls and len(figures["random_init"]["seeds"]) >= 3
    for key, (low, high) in controls.items():
        if key in held_to(model):  # every head the JSON names lies above its control
            assert figures[key]["score"] > high >= low, key


@pytest.mark.parametrize("name", NAMES)
def test_each_checkpoint_records_its_corpus_and_trained_context(name):
    meta = dict(ENGLISH)[name]
    corpus = meta["corpus"]
    assert corpus["held_out_chunks_in_training"] == 0
    assert {"package", "version", "licence", "characters"} <= corpus["sources"][0].keys()
    assert corpus["unigram_bits"] > corpus["bigram_bits"] > meta["figures"].get("bits_per_char", 0)
    assert trained_tokens(meta) == corpus["context"] + 1
    if meta["config"]["position"] == "learned":  # a table no longer than what it trained on
        assert meta["config"]["max_len"] == trained_tokens(meta)
    # the budget: what two cores give in 45 minutes, counted as processor time; Gated DeltaNet's chunked form, plain
    # PyTorch on a CPU, costs about twice a softmax layer's step, and its two models took 1.9 and 2.3 hours
    training = meta["training"]
    keeps_state = meta["config"].get("attention_layers", "softmax") != "softmax"
    assert 0 < training["cpu_seconds"] <= (2.5 * 3600 if keeps_state else 45 * 60 * 2)


def test_the_published_figures_are_the_measured_json():
    """README.md and docs/checkpoints.md hold the tables measure_checkpoints.py makes from the JSON, unchanged."""
    blocks = measure_checkpoints.english_blocks()
    for path, names in measure_checkpoints.DOCS.items():
        text = path.read_text(encoding="utf-8")
        for block in names:
            assert f"<!-- figures:{block} -->" in text, (path.name, block)
        assert measure_checkpoints.regenerated(text, blocks) == text, f"run scripts/measure_checkpoints.py --write-docs ({path.name})"


def test_the_published_synthetic_figures_are_measured_afresh():
    """The synthetic checkpoints' tables (README.md, docs/checkpoints.md) are what measuring the weights gives now."""
    blocks = measure_checkpoints.synthetic_blocks()
    for path in measure_checkpoints.DOCS:
        text = path.read_text(encoding="utf-8")
        assert measure_checkpoints.regenerated(text, blocks) == text, f"run scripts/measure_checkpoints.py --write-docs ({path.name})"
