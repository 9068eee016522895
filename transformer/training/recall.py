"""Recall at distance: does a trained model copy a phrase it read d characters earlier?

Each row reads ``<bos> phrase ␣ filler ␣ phrase``: a held-out phrase, held-out text that does not contain it, and
the phrase again, its second copy starting d characters after the first. A model that recalls the first copy
predicts the second copy's characters (all but the first, which nothing announces) better than it predicts the
same characters in a control row, whose first phrase is a different one. Full attention reaches back to any
character it was trained to read; a state of fixed size has to have kept the phrase through everything written
after it, which is where pure linear attention is expected to lose.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .language import encode_chars, held_out_sentences, held_out_text

DISTANCES = (32, 64, 128, 256, 448)  # the second copy's start, in characters after the first's (within 512)
PHRASE = 24  # characters copied: long enough to be told apart, short enough to fit the nearest distance


@dataclass(frozen=True)
class Recall:
    """Per distance: the second copy's characters predicted exactly (argmax), with and without the first copy,
    and the bits per character each costs."""
    distances: tuple[int, ...]
    accuracy: tuple[float, ...]  # repeated rows
    control_accuracy: tuple[float, ...]  # rows whose first phrase differs
    bits: tuple[float, ...]
    control_bits: tuple[float, ...]

    def as_json(self) -> dict:
        return {name: list(getattr(self, name)) for name in self.__dataclass_fields__}


def phrases(limit: int, corpus: str = "english") -> list[str]:
    """`limit` held-out phrases of PHRASE characters (each a sentence's opening), spread over the split."""
    openings = [s[:PHRASE] for s in held_out_sentences(min_chars=PHRASE + 1, corpus=corpus)]
    if len(openings) < limit + 1:
        raise ValueError(f"the held-out text has {len(openings)} sentences of more than {PHRASE} characters; "
                         f"ask for at most {len(openings) - 1}")
    step = len(openings) / (limit + 1)
    return [openings[int(i * step)] for i in range(limit + 1)]  # one more: the last row's control phrase


def rows(distance: int, limit: int, corpus: str = "english") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(repeated (N, T), control (N, T), second-copy targets' positions (PHRASE - 1,)) for one distance.
    Filler is held-out text taken from evenly spread places, skipping any stretch that holds the phrase."""
    if distance < PHRASE + 2:
        raise ValueError(f"distance={distance} leaves no room for a {PHRASE}-character phrase and its two spaces; "
                         f"use a distance of at least {PHRASE + 2}")
    chosen = phrases(limit, corpus)
    text = " ".join(held_out_text(corpus).split())
    gap = distance - PHRASE - 2
    repeated, control = [], []
    for i, phrase in enumerate(chosen[:-1]):
        start = (i * len(text)) // limit
        filler = text[start:start + gap]
        while phrase in filler or len(filler) < gap:  # the phrase must come only from its first copy
            start = (start + gap + 1) % max(1, len(text) - gap)
            filler = text[start:start + gap]
        tail = f" {filler} {phrase}"
        repeated.append([0, *encode_chars(phrase + tail)])
        control.append([0, *encode_chars(chosen[i + 1] + tail)])
    second = 1 + distance  # index of the second copy's first character
    targets = torch.arange(second + 1, second + PHRASE)  # (PHRASE - 1,) all but the unannounced first
    return torch.tensor(repeated), torch.tensor(control), targets


@torch.no_grad()
def _scores(model, ids: torch.Tensor, targets: torch.Tensor, batch_size: int) -> tuple[float, float]:
    """Exact-match rate and bits per character on the target positions of every row."""
    hits, nats, count = 0, 0.0, 0
    for batch in ids.split(batch_size):
        batch = batch.to(model.device)
        logits = model(batch[:, :-1]).float()[:, targets - 1]  # (B, PHRASE - 1, vocab): each predicts its target
        truth = batch[:, targets]  # (B, PHRASE - 1)
        hits += int((logits.argmax(-1) == truth).sum())
        nats += torch.nn.functional.cross_entropy(logits.flatten(0, 1), truth.flatten(), reduction="sum").item()
        count += truth.numel()
    return hits / count, nats / count / math.log(2)


def recall_at_distance(model, distances: tuple[int, ...] = DISTANCES, limit: int = 40, corpus: str = "english",
                       batch_size: int = 8) -> Recall:
    """The model's recall of a phrase at each distance, beside the same characters without an earlier copy."""
    longest = 1 + max(distances) + PHRASE
    if longest > model.cfg.max_len:
        raise ValueError(f"the farthest distance {max(distances)} makes rows of {longest} tokens, past "
                         f"max_len={model.cfg.max_len}; use distances up to {model.cfg.max_len - PHRASE - 1}")
    was_training = model.training
    model.eval()
    found = {name: [] for name in ("accuracy", "control_accuracy", "bits", "control_bits")}
    for distance in distances:
        repeated, control, targets = rows(distance, limit, corpus)
        accuracy, bits = _scores(model, repeated, targets, batch_size)
        control_accuracy, control_bits = _scores(model, control, targets, batch_size)
        for name, value in zip(found, (accuracy, control_accuracy, bits, control_bits)):
            found[name].append(round(value, 4))
    model.train(was_training)
    return Recall(tuple(distances), *(tuple(found[name]) for name in found))
