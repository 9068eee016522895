"""The model every lesson step reads.

The lessons run on one model of their own, not the sidebar's, so that a teacher and thirty
students answering the same question see the same choices: LLaMA 2's recipe at classroom size
with the shipped checkpoint of its axes (the language model when there is one) on that
checkpoint's example text.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from transformer import AXES, PRESETS, TransformerConfig
from transformer.training.task_measures import attention_mass
from transformer.training.tasks import get_task
from ui.app.state import DEFAULT_TASK, DEFAULT_TEXT
from ui.compute.model_cache import TraceData, get_trace
from ui.compute.shipped import trained_config
from ui.compute.tokens import Tokens, encode_text
from ui.compute.weights import WeightsSource, weights_info

LESSON_PRESET = "llama2"
LESSON_SEED = 0
MAX_SHOWN = 16  # tokens in the matrices and the shuffles: every cell readable on a projector
PIECES = next(name for name, row in AXES["tokens"].choices.items() if row.learned)  # the lab's BPE


@dataclass(frozen=True)
class LessonModel:
    config: TransformerConfig
    config_json: str
    task: str | None  # the checkpoint's task; None for random weights
    weights: str  # what the banner says about them
    trained: bool
    text: str
    tokens: Tokens
    trace: TraceData

    @property
    def labels(self) -> list[str]:
        return self.tokens.labels

    def link_query(self) -> dict[str, str]:
        """The sidebar's URL keys that open this model on this text on any page."""
        return {"preset": LESSON_PRESET, "task": self.task or DEFAULT_TASK, "text": self.text}

    def patterns(self) -> torch.Tensor:
        """(L, 1, H, T, T) every layer's softmax weights from the recorded trace."""
        return torch.stack([torch.from_numpy(self.trace.pattern(layer))[None] for layer in range(self.config.n_layers)])


def lesson_model() -> LessonModel:
    """LLaMA 2 at classroom size with its shipped checkpoint and that checkpoint's example text (all cached)."""
    config = trained_config(PRESETS[LESSON_PRESET], DEFAULT_TASK) or PRESETS[LESSON_PRESET]
    key = config.to_json()
    info = weights_info(key)
    text = DEFAULT_TEXT if info.task in (None, DEFAULT_TASK) else get_task(info.task).example_text
    tokens = encode_text(text, key)
    trace = get_trace(key, LESSON_SEED, tuple(tokens.ids), tuple(tokens.labels))
    return LessonModel(config, key, info.task, info.label, info.kind == "trained", text, tokens, trace)


def head_shares(model: LessonModel, targets: torch.Tensor) -> torch.Tensor:
    """(L, H) the weight each head puts on `targets` (T, T), averaged over the queries that have one."""
    patterns = model.patterns()
    return torch.stack([attention_mass(patterns[layer], targets[None]) for layer in range(len(patterns))])


def token_name(model: LessonModel, position: int) -> str:
    return f"token {position} '{model.labels[position]}'"


def lesson_pieces() -> tuple[str, Tokens] | None:
    """The lessons' text read by the same family's BPE checkpoint (its config as JSON, and the pieces): where
    the lecture moves whole words ("I ate rice" / "rice ate I"), a step shuffles these. None where no BPE
    checkpoint of the lessons' family ships."""
    config = trained_config(PRESETS[LESSON_PRESET], DEFAULT_TASK, PIECES)
    if config is None:
        return None
    key = config.to_json()
    return key, encode_text(lesson_model().text, key, WeightsSource.read_in(PIECES))
