"""The Train page's link to "Trade-offs, measured": its warm-up and learning-rate checks, and a live run read
against the tournament's seeds of the same cell."""
from __future__ import annotations

import math
import os
from pathlib import Path

import streamlit as st

from transformer import AXES, TransformerConfig
from transformer.training import english, language
from transformer.training.tournament.document import TOURNAMENT_PATH, TournamentError, load
from transformer.training.tournament.statistics import entry_stats
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


# --- a live run against the tournament ------------------------------------------------------------------

MATCH_IGNORES = ("vocab_size", "max_len")  # the Train page sizes these to its task
# what makes a model the same cell: its axes and sizes, and the switches a comparison turns (the FFN's exact
# width and the details a sidebar cannot set, tied embeddings among them, are reported as differences, not refused)
MATCH_FIELDS = ("arch", "position", "norm", "norm_position", "ffn", "n_layers", "d_model", "n_heads", "n_kv_heads",
                "sliding_window", "qk_norm", "sinks", "attn_softcap", "logit_softcap", "kv_rank")
MOE_FIELDS = ("n_experts", "top_k")


def _match_fields(cfg: TransformerConfig) -> tuple[str, ...]:
    return MATCH_FIELDS + (MOE_FIELDS if cfg.row("ffn").routed else ())


def find_cells(data: dict, cfg: TransformerConfig) -> list[tuple[dict, dict]]:
    """Every (comparison, entry) of the tournament whose model has `cfg`'s axes, sizes and switches."""
    wanted = cfg.to_dict()
    fields = _match_fields(cfg)
    return [(comp, entry) for comp in data["comparisons"] for entry in comp["entries"]
            if all(entry["config"].get(f) == wanted.get(f) for f in fields)]


def pick_cell(cells: list[tuple[dict, dict]], lr: float, warmup: int) -> tuple[dict, dict] | None:
    """Of the matching cells, the one trained at this learning rate and with (or without) warm-up, else the
    first at any."""
    for comp, entry in cells:
        if math.isclose(entry["lr"], lr) and (entry["warmup_steps"] > 0) == (warmup > 0):
            return comp, entry
    for comp, entry in cells:
        if math.isclose(entry["lr"], lr):
            return comp, entry
    return cells[0] if cells else None


def config_differences(entry_config: dict, cfg: TransformerConfig) -> list[str]:
    """The fields where `cfg` differs from a cell's model (vocabulary and max_len aside), as 'name yours vs its'."""
    have = cfg.to_dict()
    return [f"{k} {have.get(k)!r} (the tournament's {v!r})" for k, v in entry_config.items()
            if k not in MATCH_IGNORES and have.get(k) != v]


def curve_at(points: list[list[float]], step: int) -> float | None:
    """A curve's value at the point nearest `step` (None past its end or where it is not finite)."""
    if not points or step > points[-1][0] + (points[1][0] - points[0][0] if len(points) > 1 else 0):
        return None
    nearest = min(points, key=lambda p: abs(p[0] - step))
    return nearest[1]


def compare_live(entry: dict, recipe: dict, *, steps: int, lr: float, warmup: int, batch_size: int,
                 context: int, corpus: str, training_bits: float | None, held_out: float | None,
                 differences: list[str] = ()) -> str:
    """One paragraph: how a live run of a tournament cell compares with the tournament's seeds of that cell."""
    stats = entry_stats(entry)
    seeds = ", ".join(f"{r['held_out_bits_per_char']:.3f}" if r["held_out_bits_per_char"] is not None else "diverged"
                      for r in entry["runs"])
    n = len(entry["runs"])
    said = [f"The tournament trained this model {'once' if n == 1 else f'{n} times'} (seed{'s' if n != 1 else ''} "
            f"{', '.join(str(r['seed']) for r in entry['runs'])}) "
            f"for {recipe['steps']} steps of batch {recipe['batch_size']} at lr {entry['lr']:g}, warm-up "
            f"{entry['warmup_steps']}: held-out {seeds} bits per character" +
            (f" (mean {stats.mean:.3f})." if stats.values else ".")]
    differs = []
    if steps != recipe["steps"]:
        differs.append(f"{steps} steps")
    if batch_size != recipe["batch_size"]:
        differs.append(f"batch {batch_size}")
    if not math.isclose(lr, entry["lr"]):
        differs.append(f"lr {lr:g}")
    if warmup != entry["warmup_steps"]:
        differs.append(f"warm-up {warmup}")
    if context != recipe["context"]:
        differs.append(f"crops of {context} characters")
    if corpus != recipe["corpus"]:
        differs.append(f"the text it read ({corpus}; the tournament's: {recipe['corpus']})")
    differs += list(differences)
    at_step = [curve_at(r["curve"], steps - 1) for r in entry["runs"]]
    at_step = [v for v in at_step if v is not None]
    if training_bits is not None and at_step:
        low, high = min(at_step), max(at_step)
        where = ("within" if low - 0.02 <= training_bits <= high + 0.02 else
                 "below" if training_bits < low else "above")
        said.append(f"At step {steps} their training loss read {low:.2f}–{high:.2f} bits per character; your run "
                    f"{training_bits:.2f}, {where} their range.")
    if held_out is not None and stats.values and not differs:
        where = ("within" if stats.low - 0.02 <= held_out <= stats.high + 0.02 else
                 "below" if held_out < stats.low else "above")
        said.append(f"Your run's held-out {held_out:.3f} lies {where} the seeds' range.")
    if differs:
        said.append("Your run differs in " + ", ".join(differs) + ", so the numbers are not the same measurement.")
    else:
        said.append("Same recipe: a live seed of the same cell.")
    return " ".join(said)


def tournament_data() -> dict | None:
    directory = Path(os.environ.get("ATTENTION_LAB_MEASUREMENTS", TOURNAMENT_PATH.parent))
    try:
        return load(directory / TOURNAMENT_PATH.name)
    except TournamentError:
        return None


def matching_cell(cfg, lr: float, warmup: int):
    """(data, comparison, entry, cells) of the tournament cell this model is, or None."""
    data = tournament_data()
    if data is None:
        return None
    cells = find_cells(data, cfg)
    picked = pick_cell(cells, lr, warmup)
    return None if picked is None else (data, *picked, cells)


def offer_tournament_task(cfg, task, lr: float, warmup: int):
    """When the sidebar's model is a cell of the tournament and the task is language: say so, and offer its text
    and crops (needs the WordNet corpus to train). Returns the task to train."""
    if task.name != "language" or not AXES["arch"].row(task.arch).next_token:
        return task
    found = matching_cell(cfg, lr, warmup)
    if found is None:
        return task
    data, comp, entry, cells = found
    recipe = comp.get("recipe", data["recipe"])  # the comparison's own recipe (its steps, its repeated spans)
    names = "; ".join(f"{c['axis']}: {e['choice']}" for c, e in cells)
    st.info(f"This model is a cell of **Trade-offs, measured** ({names}). Train it here and the page compares your "
            "run with the tournament's seeds.", icon=":material/flag:")
    if recipe["corpus"] == "english" and not english.WORDNET_DIR.exists():
        st.caption(f"The tournament trained on WordNet's English, which needs Debian's wordnet-base on this machine "
                   f"({english.INSTALL_HINT}); this run reads the task's own text, so only the shape compares.")
        return task
    repeats = recipe.get("repeat_rate", 0.0)
    if st.checkbox(f"Train as the tournament did: {'English' if recipe['corpus'] == 'english' else recipe['corpus']} "
                   f"text in crops of {recipe['context']} characters, "
                   + (f"{repeats:.0%} of the rows repeating a span" if repeats else "no repeated spans"), value=True,
                   key=TOURNAMENT_TASK):
        return Language(corpus=recipe["corpus"], context=recipe["context"], repeat_rate=repeats)
    return task


def show_live_comparison(model, history: list[dict], task, settings: dict) -> None:
    """After a language run: how it compares with the tournament's seeds of the same cell, if it is one."""
    if task.name != "language" or not model.cfg.row("arch").next_token or not history:
        return
    found = matching_cell(model.cfg, settings["lr"], settings["warmup"])
    if found is None:
        return
    data, comp, entry, _ = found
    recipe = comp.get("recipe", data["recipe"])
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
    differences = config_differences(entry["config"], model.cfg)
    if repeats != recipe.get("repeat_rate", 0.0):
        differences.append(f"{repeats:.0%} of rows repeating a span (the tournament's: "
                           f"{recipe.get('repeat_rate', 0.0):.0%})")
    text = compare_live(entry, recipe, steps=steps, lr=settings["lr"], warmup=settings["warmup"],
                        batch_size=settings["batch_size"], context=context, corpus=corpus,
                        training_bits=training_bits, held_out=held_out, differences=differences)
    st.markdown(f"**Against the tournament** ({comp['axis']}: {entry['choice']}). {text}")
