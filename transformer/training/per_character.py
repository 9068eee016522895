"""The language measures for any tokenizer, on one scale: bits per character, not per token.

A BPE token holds about three characters, so its loss per token is not comparable with a character
model's. Both are comparable per character: the total bits a model spends on a text divided by the
characters of that text. Each character is counted once, in the token that holds its first UTF-8 byte.

    bits_per_char(model, tokenizer, text)          # total bits / characters, windows of 256 tokens after <bos>
    measure(model, tokenizer, corpus="english")    # what a BPE language checkpoint records about itself

The head figures follow the character models' (``language.head_figures``) in tokens: the previous-token head
on held-out windows, the induction head on held-out sentences written twice, each beside random-init weights.
"""
from __future__ import annotations

import functools
import math

import torch

from ..tokens import get_tokenizer
from . import english, language

CONTEXT = 256  # tokens per window after <bos>, unless the model trained on shorter crops (``measure``'s context)


@functools.lru_cache(maxsize=2)
def train_ids(tokens: str, corpus: str = "english") -> torch.Tensor:
    """(N,) the corpus's training text in a learned tokenizer's tokens (the English documents one per line)."""
    text = english.training_text() if corpus == "english" else language.decode_text(language.train_ids(corpus=corpus))
    return torch.tensor(get_tokenizer(tokens).encode(text), dtype=torch.long)


def characters_per_token(tokenizer, ids) -> torch.Tensor:
    """(N,) how many characters each token starts: the UTF-8 bytes it stands for that are not a continuation
    byte (0b10xxxxxx). Over a whole encoded text they add up to len(text)."""
    return torch.tensor([sum(1 for b in tokenizer.piece_bytes(i) if b & 0xC0 != 0x80) for i in ids],
                        dtype=torch.long)


def token_windows(ids: torch.Tensor, context: int, limit: int | None = None) -> torch.Tensor:
    """(N, 1 + context + 1) windows of ids (N,), each after <bos> (id 0) with one more token to predict:
    every window, or `limit` of them spread evenly over the text."""
    n_all = (len(ids) - 1) // context
    if n_all < 1:
        raise ValueError(f"a text of {len(ids)} tokens is shorter than one window of {context} + 1 tokens")
    n = n_all if limit is None else min(n_all, limit)
    starts = torch.linspace(0, n_all - 1, n).round().long() * context  # (N,)
    windows = ids[starts[:, None] + torch.arange(context + 1)]  # (N, context + 1)
    return torch.cat((torch.zeros(n, 1, dtype=torch.long), windows), dim=1)  # (N, 1 + context + 1)


@torch.no_grad()
def bits_per_char(model, tokenizer, text: str, context: int = CONTEXT, limit: int | None = None,
                  batch_size: int = 16) -> float:
    """A decoder's bits per character on `text`: -log2 p of every predicted token, summed, divided by the
    characters those tokens hold (not by the number of tokens)."""
    if not model.cfg.row("arch").next_token:
        raise ValueError(f"bits per character needs a decoder (next-token model), got arch={model.cfg.arch!r}")
    ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)  # (N,)
    windows = token_windows(ids, context, limit)  # (W, 1 + context + 1)
    chars = characters_per_token(tokenizer, range(tokenizer.vocab_size))  # (vocab,) characters each id starts
    bits = characters = 0.0
    for batch in windows.split(batch_size):
        batch = batch.to(model.device)
        logits = model(batch[:, :-1]).float()  # (B, 1 + context, vocab)
        bits += torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten(),
                                                  reduction="sum").item() / math.log(2)
        characters += int(chars[batch[:, 1:].cpu()].sum())
    return bits / characters


@torch.no_grad()
def held_out_accuracy(model, tokenizer, corpus: str = "english", limit: int = 64, context: int = CONTEXT) -> float:
    """A decoder's top-1 next-token accuracy on held-out windows of CONTEXT tokens, or of the `context` it trained
    on where that is shorter (a learned position table has no row past it)."""
    context = min(context, CONTEXT)
    windows = token_windows(torch.tensor(tokenizer.encode(language.held_out_text(corpus))), context, limit)
    hits = total = 0
    for batch in windows.to(model.device).split(16):
        predicted = model(batch[:, :-1]).argmax(-1)  # (B, 1 + context)
        hits, total = hits + int((predicted == batch[:, 1:]).sum()), total + predicted.numel()
    return hits / total


def repeated_ids(tokenizer, sentence: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """ids (1, T) of <bos>, the sentence's tokens and the same tokens again; for every token of the second copy
    (queries) the position after its first occurrence (keys): where an induction head looks."""
    first = tokenizer.encode(sentence)
    ids = torch.tensor([[0, *first, *first]])  # (1, T)
    n = len(first)
    queries = torch.arange(n) + 1 + n  # token i of the second copy, after <bos> and the first copy
    keys = torch.arange(n) + 2  # token i + 1 of the first copy: the one after token i's first occurrence
    return ids, queries, keys


@torch.no_grad()
def head_scores(model, tokenizer, corpus: str = "english", context: int = CONTEXT, limit: int = 16,
                sentences: int = language.INDUCTION_SAMPLE) -> dict[str, torch.Tensor]:
    """(L, H) per figure: the mean weight on the token just before (held-out windows of `context` tokens) and
    the induction score on held-out sentences written twice (the same tokens twice)."""
    windows = token_windows(torch.tensor(tokenizer.encode(language.held_out_text(corpus))), context, limit)
    patterns = language._patterns(model, windows[:, :-1])  # (L, B, H, T, T)
    previous = patterns.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(1, 3))  # (L, H)
    chosen = language.induction_sentences(model.cfg, corpus, sentences)
    induction = torch.zeros_like(previous)
    for sentence in chosen:
        ids, queries, keys = repeated_ids(tokenizer, sentence)
        induction += language._patterns(model, ids)[:, 0][:, :, queries, keys].mean(-1)  # (L, H)
    return {"previous_token_head": previous, "induction_head": induction / max(1, len(chosen))}


def measure(model, tokenizer, corpus: str = "english", context: int | None = None) -> dict:
    """The figures a BPE language checkpoint ships with, JSON-ready: bits per character on the held-out text and
    the outside prose, the best previous-token and induction heads, and the same heads on random-init weights.
    Windows hold CONTEXT tokens, or the `context` the model trained on where that is shorter (a learned position
    table has no trained row past it)."""
    context = min(context or CONTEXT, CONTEXT)
    figures = {"bits_per_char": round(bits_per_char(model, tokenizer, language.held_out_text(corpus), context), 3)}
    if corpus == "english":  # the outside prose is about 700 tokens: windows of 128 read most of it
        figures["bits_per_char_outside_prose"] = round(
            bits_per_char(model, tokenizer, english.outside_prose(), context=min(context, 128)), 3)
    figures.update({name: language._best(scores)
                    for name, scores in head_scores(model, tokenizer, corpus, context).items()})
    controls: dict[str, list[float]] = {}
    for seed in language.RANDOM_SEEDS:
        for name, scores in head_scores(language.untrained(model.cfg, seed), tokenizer, corpus, context).items():
            controls.setdefault(name, []).append(language._best(scores)["score"])
    figures["random_init"] = {"seeds": list(language.RANDOM_SEEDS),
                              **{name: [min(v), max(v)] for name, v in controls.items()}}
    return figures
