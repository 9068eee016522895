"""What a comparison reads of each trained model besides its held-out bits: the registry a Comparison names.

    MEASURES["recall"](model, recipe)       # a phrase copied from d characters back, at and past the trained length
    MEASURES["kept_mass"](model, recipe)    # the dense weight an indexer's top-k keys hold, beside its controls

Each returns plain JSON, stored under the run's "measured"; the Trade-offs page draws it.
"""
from __future__ import annotations

from typing import Callable

from ...indexer import indexer_mass
from ...model import Transformer
from .. import language
from ..recall import PHRASE, recall_at_distance
from .run import Recipe

RECALL_ROWS = 40  # phrases per distance
MASS_WINDOWS = 8  # held-out windows of the trained length the kept mass is read on


def recall_distances(context: int, max_len: int) -> list[int]:
    """Where the second copy starts, in characters after the first: a quarter and a half of the trained length, the
    farthest that still fits in it, and the same near 2x and 4x of it (those that fit the phrase and max_len)."""
    wanted = [context // 4, context // 2, context - PHRASE - 4, 2 * context - PHRASE - 4, 4 * context - PHRASE - 8]
    fits = [d for d in wanted if d >= PHRASE + 2 and 1 + d + PHRASE <= max_len]
    return sorted(set(fits))


def recall(model: Transformer, recipe: Recipe) -> dict:
    """Recall at distance (transformer.training.recall): per distance, the second copy's bits per character with
    the first copy and without it (a control row), and the exact-match rates."""
    distances = recall_distances(recipe.context, model.cfg.max_len)
    found = recall_at_distance(model, tuple(distances), limit=RECALL_ROWS, corpus=recipe.corpus)
    return {"recall": found.as_json(), "trained_length": recipe.context}


def kept_mass(model: Transformer, recipe: Recipe) -> dict:
    """For a model with a lightning indexer: the dense weight its top-k keys hold, per layer, at k = its own top-k,
    half and twice it, beside a random-init indexer, the k most recent keys and the best any k keys hold. A model
    without one reads {}."""
    top_k = model.cfg.index_top_k
    if not top_k:
        return {}
    ids = language.held_out_windows(recipe.context, MASS_WINDOWS, recipe.corpus)[:, :-1]  # (N, 1 + context)
    ks = sorted({k for k in (max(1, top_k // 2), top_k, 2 * top_k) if k < ids.shape[1]})
    return {"kept_mass": {"ks": ks, "top_k": top_k, "tokens": ids.shape[1],
                          "layers": indexer_mass(model, ids, ks)}}


MEASURES: dict[str, Callable[[Transformer, Recipe], dict]] = {"recall": recall, "kept_mass": kept_mass}
