"""What a lesson step computes when it is shown: its live question, choices, answer and figure."""
from __future__ import annotations

from dataclasses import dataclass, field

import plotly.graph_objects as go


@dataclass
class Live:
    """What a step computes when it is shown."""

    question: str  # the step's question with the live specifics (which token, which head)
    choices: list[str]
    answer: int  # index into choices: what the model did or what the library computes
    why: str  # one sentence
    figure: go.Figure
    source: str = "the true answer"  # whose answer it is: "the trained model's answer", ...
    query: dict[str, str] = field(default_factory=dict)  # live values for the full page's link
    caption: str = ""  # under the figure
