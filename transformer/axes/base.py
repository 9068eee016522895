"""A choice is a row of data: its words, its flags, its formulas and its config check.

``Choice`` holds what every row has; each axis subclasses it with the flags its callers ask
(``PositionChoice.rotates_qk``, ``FFNChoice.routed`` ...). Nothing here imports torch: the config
validates against these rows, and the modules build from them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping


@dataclass(frozen=True)
class Choice:
    label: str  # how the pages name it, e.g. "RoPE"
    does: str  # one line, lower case: what it does
    solves: str  # one sentence: the problem it solves
    examples: str = ""  # models (or the year) that made this choice
    # hook site -> LaTeX, where this choice makes a recorded step its own way (the stepper shows it)
    formulas: Mapping[str, str] = field(default_factory=dict, compare=False, kw_only=True)
    # hook site -> the operation in words, where this choice words it its own way (``HookPoint.op``)
    ops: Mapping[str, str] = field(default_factory=dict, compare=False, kw_only=True)
    # raises ValueError when the rest of the config does not fit this choice
    check: Callable[..., None] | None = field(default=None, compare=False, kw_only=True)


@dataclass(frozen=True)
class Axis:
    title: str
    choices: Mapping[str, Choice]
    problem: str = ""  # why the axis exists; written for the axes of the Home page
    field: str | None = None  # the config field holding the choice; None = derived (``TransformerConfig.choice_key``)

    def keys(self) -> tuple[str, ...]:
        return tuple(self.choices)

    def row(self, key: str, what: str | None = None) -> Choice:
        """The row of `key`; an unknown key is a ValueError listing the valid ones."""
        if key not in self.choices:
            name = what or self.field or self.title
            raise ValueError(f"{name}={key!r} is not a valid choice; choose one of {', '.join(map(repr, self.choices))}")
        return self.choices[key]


def divisors(n: int) -> list[int]:
    """The numbers that divide n, for messages that suggest a size that fits."""
    return [d for d in range(1, n + 1) if n % d == 0]
