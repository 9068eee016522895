"""The shipped BPE checkpoints against their families' character checkpoints, on one scale: bits per character of
the same held-out text, the outside prose, a previous-token head and an induction head on repeated held-out
sentences, each beside random-init weights. (Their figures on the whole held-out split are in README.md.)"""
import json

import pytest
import torch

from transformer import checkpoint
from transformer.checkpoint_format import checkpoint_paths
from transformer.training import language, per_character

BPE = [entry for entry in checkpoint.variants() if entry.task == "language"
       and json.loads(checkpoint_paths(entry.path)[1].read_text()).get("tokenizer", {}).get("name") == "bpe"]
IDS = [entry.name for entry in BPE]
SAMPLE = 12_000  # held-out characters both models read here


def characters_of(entry) -> checkpoint.ShippedCheckpoint:
    """The same family's character checkpoint (the preset's own)."""
    return next(e for e in checkpoint.shipped() if e.preset == entry.preset and e.task == "language")


def test_four_families_ship_bpe_checkpoints_the_default_among_them():
    assert len({entry.preset for entry in BPE}) >= 4 and "llama2" in {entry.preset for entry in BPE}


@pytest.mark.parametrize("entry", BPE, ids=IDS)
def test_bpe_spends_no_more_bits_per_character_than_characters_on_the_same_text(entry):
    bpe, meta = checkpoint.load(entry.path, device="cpu")
    characters, character_meta = checkpoint.load(characters_of(entry).path, device="cpu")
    assert bpe.tokenizer.row.learned and not characters.tokenizer.row.learned
    text = language.held_out_text("english")[:SAMPLE]
    context = meta["corpus"]["context"]
    measured = {name: per_character.bits_per_char(model, model.tokenizer, text, context=context)
                for name, model in (("bpe", bpe), ("characters", characters))}
    assert measured["bpe"] <= measured["characters"], measured
    figures, theirs = meta["figures"], character_meta["figures"]  # the whole split and the outside prose
    assert figures["bits_per_char"] <= theirs["bits_per_char"]
    assert figures["bits_per_char_outside_prose"] <= theirs["bits_per_char_outside_prose"]


@pytest.mark.parametrize("entry", BPE, ids=IDS)
def test_a_previous_token_head_and_an_induction_head_above_random_init(entry):
    model, meta = checkpoint.load(entry.path, device="cpu")
    with torch.no_grad():
        scores = per_character.head_scores(model, model.tokenizer, context=meta["corpus"]["context"], limit=2,
                                           sentences=16)
    controls = meta["figures"]["random_init"]
    for figure in ("previous_token_head", "induction_head"):
        recorded = meta["figures"][figure]
        assert recorded["score"] > 3 * controls[figure][1], figure  # the whole split's figure, and its controls
        assert abs(scores[figure][recorded["layer"], recorded["head"]] - recorded["score"]) < 0.2, figure
        assert scores[figure].max() > 3 * controls[figure][1], figure  # this sample's
