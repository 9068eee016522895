"""Recall at distance (transformer/training/recall.py): the rows it builds and what it scores."""
from types import SimpleNamespace

import pytest
import torch

from transformer import Transformer, TransformerConfig
from transformer.training.language import decode_text
from transformer.training.recall import PHRASE, recall_at_distance, rows


@pytest.mark.parametrize("distance", [PHRASE + 2, 64, 200])
def test_the_second_copy_starts_exactly_distance_characters_after_the_first(distance):
    repeated, control, targets = rows(distance, limit=4)
    assert repeated.shape == control.shape == (4, 1 + distance + PHRASE)
    for row, other in zip(repeated, control):
        first, second = row[1:1 + PHRASE], row[1 + distance:1 + distance + PHRASE]
        assert torch.equal(first, second)
        assert not torch.equal(other[1:1 + PHRASE], first)  # the control's first phrase is another one
        assert torch.equal(other[PHRASE + 1:], row[PHRASE + 1:])  # ... and all that follows is the same
        assert decode_text(first.tolist()) not in decode_text(row[1 + PHRASE:1 + distance].tolist())
    assert targets[0] == 1 + distance + 1 and len(targets) == PHRASE - 1  # the copy's unannounced first is left out


class CopyFromBack(torch.nn.Module):
    """Predicts after each character the one that followed `distance` characters earlier: a perfect copier at
    that distance, and nothing else."""

    def __init__(self, vocab: int, distance: int):
        super().__init__()
        self.cfg = SimpleNamespace(max_len=1024)
        self.device = torch.device("cpu")
        self.vocab, self.distance = vocab, distance

    def forward(self, ids):  # (B, T) -> (B, T, vocab)
        source = torch.roll(ids, self.distance - 1, dims=1)  # (B, T): ids[t + 1 - distance] at t
        return torch.nn.functional.one_hot(source, self.vocab).float() * 10.0  # (B, T, vocab)


@pytest.mark.parametrize("distance", [40, 120])
def test_a_model_that_copies_recalls_every_repeated_character_and_gains_bits_over_the_control(distance):
    recall = recall_at_distance(CopyFromBack(vocab=400, distance=distance), distances=(distance,), limit=6)
    assert recall.accuracy == (1.0,)
    assert recall.control_accuracy[0] < 0.5
    assert recall.bits[0] < 0.1 < 1.0 < recall.control_bits[0]  # logits of 10 give the truth 0.98


def test_distances_past_the_models_length_are_refused_with_the_limit():
    model = Transformer(TransformerConfig(vocab_size=400, d_model=32, n_heads=2, n_layers=1, max_len=128))
    with pytest.raises(ValueError, match="max_len=128.*up to 103"):
        recall_at_distance(model, distances=(64, 256))
    with pytest.raises(ValueError, match="at least 26"):
        rows(10, limit=2)


def test_the_shipped_measurement_is_what_the_hybrid_checkpoint_measures_again():
    """assets/measurements/recall.json against the shipped hybrid, at the nearest distance: one character in
    the 40 · 23 graded ones may round the other way on another processor."""
    from scripts.measure_recall import MODELS, ROWS
    from transformer.checkpoint import SHIPPED_DIR, load
    from ui.compute.state_measure import recall_measured

    measured = recall_measured()
    assert [m["name"] for m in measured["models"]] == [name for name, _ in MODELS] + ["random-init"]
    stored = next(m for m in measured["models"] if m["name"] == "qwen3.5-language")
    model = load(SHIPPED_DIR / "qwen3.5-language")[0].float()
    again = recall_at_distance(model, distances=(measured["distances"][0],), limit=ROWS)
    graded = ROWS * (PHRASE - 1)
    assert again.accuracy[0] == pytest.approx(stored["recall"]["accuracy"][0], abs=1.5 / graded)
    assert again.control_accuracy[0] == pytest.approx(stored["recall"]["control_accuracy"][0], abs=1.5 / graded)
    assert stored["layers"] == [spec.kind for spec in model.cfg.layer_plan()]
