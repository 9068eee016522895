"""The Train page's link to "Trade-offs, measured": its warm-up and learning-rate checks, and a live run read
against the tournament's seeds of the same cell."""
from __future__ import annotations

import math
import os
from pathlib import Path

import streamlit as st

from transformer.training import english, language, tournament
from transformer.training.tasks import Language

TOURNAMENT_TASK = "tournament_task"  # session key: train on the tournament's text and crops


STEPS_BEFORE = "_train_steps_before"  # session key: the run length the warm-up last followed


def warmup_follows_steps(steps_key: str = "train_steps", warmup_key: str = "train_warmup",
                         default_steps: int = 400) -> None:
    """When the run's length changes, a warm-up still at a tenth of the old length moves to a tenth of the new
    one (as train() does by default); a warm-up someone typed stays, and is checked against the run."""
    steps, before = int(st.session_state[steps_key]), int(st.session_state.get(STEPS_BEFORE, default_steps))
    if st.session_state.get(warmup_key) in (None, before // 10):
        st.session_state[warmup_key] = steps // 10
    st.session_state[STEPS_BEFORE] = steps


def settings_problem(steps: int, warmup: int, lr: float) -> str | None:
    """Why these settings cannot train, in words, or None."""
    if lr is None or not lr > 0 or not math.isfinite(lr):
        return (f"Learning rate {lr:g}: it must be greater than 0 (AdamW takes steps of about the learning rate; at 0 "
                "nothing moves and below it the weights climb the loss). Try 3e-3, the tournament's rate.")
    if warmup > steps:
        return (f"Warm-up of {warmup} steps is longer than the run of {steps} steps: the learning rate would still be "
                f"climbing when training stops and never reach its peak. Use at most {steps} warm-up steps (the "
                f"tournament warms up for a tenth of its run: {max(1, steps // 10)} here), or train for longer.")
    return None


def tournament_data() -> dict | None:
    directory = Path(os.environ.get("ATTENTION_LAB_MEASUREMENTS", tournament.TOURNAMENT_PATH.parent))
    try:
        return tournament.load(directory / tournament.TOURNAMENT_PATH.name)
    except tournament.TournamentError:
        return None


def matching_cell(cfg, lr: float, warmup: int):
    """(data, comparison, entry, cells) of the tournament cell this model is, or None."""
    data = tournament_data()
    if data is None:
        return None
    cells = tournament.find_cells(data, cfg)
    picked = tournament.pick_cell(cells, lr, warmup)
    return None if picked is None else (data, *picked, cells)


def offer_tournament_task(cfg, task, lr: float, warmup: int):
    """When the sidebar's model is a cell of the tournament and the task is language: say so, and offer its text
    and crops (needs the WordNet corpus to train). Returns the task to train."""
    if task.name != "language" or task.arch != "decoder":
        return task
    found = matching_cell(cfg, lr, warmup)
    if found is None:
        return task
    data, comp, entry, cells = found
    recipe = data["recipe"]
    names = "; ".join(f"{c['axis']}: {e['choice']}" for c, e in cells)
    st.info(f"This model is a cell of **Trade-offs, measured** ({names}). Train it here and the page compares your "
            "run with the tournament's seeds.", icon="🏁")
    if recipe["corpus"] == "english" and not english.WORDNET_DIR.exists():
        st.caption(f"The tournament trained on WordNet's English, which needs Debian's wordnet-base on this machine "
                   f"({english.INSTALL_HINT}); this run reads the task's own text, so only the shape compares.")
        return task
    if st.checkbox(f"Train as the tournament did: {'English' if recipe['corpus'] == 'english' else recipe['corpus']} "
                   f"text in crops of {recipe['context']} characters, no repeated spans", value=True,
                   key=TOURNAMENT_TASK):
        return Language(corpus=recipe["corpus"], context=recipe["context"], repeat_rate=0.0)
    return task


def show_live_comparison(model, history: list[dict], task, settings: dict) -> None:
    """After a language run: how it compares with the tournament's seeds of the same cell, if it is one."""
    if task.name != "language" or model.cfg.arch != "decoder" or not history:
        return
    found = matching_cell(model.cfg, settings["lr"], settings["warmup"])
    if found is None:
        return
    data, comp, entry, _ = found
    recipe = data["recipe"]
    steps = history[-1]["step"] + 1  # a run stopped by a click ends early
    last = [h["loss"] / math.log(2) for h in history if h["step"] > steps - 11]  # the last ten steps recorded
    training_bits = sum(last) / len(last) if all(map(math.isfinite, last)) else None
    held_out = None
    if model.cfg.max_len >= recipe["context"] + 1:
        held_out = language.bits_per_char(model, context=recipe["context"], limit=recipe["eval_windows"],
                                          corpus=recipe["corpus"])
        held_out = held_out if math.isfinite(held_out) else None
    corpus = getattr(task, "corpus", "python-docs")
    context = getattr(task, "context", recipe["context"])
    repeats = getattr(task, "repeat_rate", 0.0)
    differences = tournament.config_differences(entry["config"], model.cfg)
    if repeats:
        differences.append(f"{repeats:.0%} of rows repeating a span (the tournament's: none)")
    text = tournament.compare_live(entry, recipe, steps=steps, lr=settings["lr"], warmup=settings["warmup"],
                                   batch_size=settings["batch_size"], context=context, corpus=corpus,
                                   training_bits=training_bits, held_out=held_out, differences=differences)
    st.markdown(f"**Against the tournament** ({comp['axis']}: {entry['choice']}). {text}")
