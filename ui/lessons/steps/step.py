"""What a lesson step is, and how a chapter declares one.

A ``Step`` holds the words (title, text, question, a "try this", the page that shows the idea in
full with the query that opens it in the step's state); its ``build`` function asks the library
and the cached measurements of ui/ for everything live -- the choices, the true answer (from the
trained model's trace, or from the library's arithmetic; never typed in here), one sentence why,
and one figure from the existing figure builders with its axes set for the step.

A chapter declares each step with ``@lesson_step(...)`` right above its ``build`` function, so a
step's words and the code that draws its figure are read together.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

import numpy as np

from ui.lessons.live import Live
from ui.lessons.steps.lesson_model import LessonModel

ROOT = Path(__file__).resolve().parents[3]
GIB, MIB = 2 ** 30, 2 ** 20


@dataclass(frozen=True)
class Step:
    slug: str
    title: str
    text: str  # markdown: the idea in a few sentences
    question: str  # the question in general terms (the live one is Live.question)
    kind: str  # what the learner picks: "token", "choice" or "number"
    build: Callable[[], Live]
    try_this: str
    page: str | None  # url path of the page that shows the idea in full ("" = Home); None = no page yet
    query: dict[str, str] = field(default_factory=dict)
    uses_model: bool = False  # the link carries the lessons' model and text

    def link(self, live: Live | None = None, model: LessonModel | None = None) -> str | None:
        """A relative link that opens the full page in this step's state (a fresh session reads it)."""
        if self.page is None or not page_exists(self.page):
            return None
        query = {**(model.link_query() if self.uses_model and model else {}), **self.query,
                 **(live.query if live else {})}
        return (self.page or "./") + ("?" + urlencode(query) if query else "")


def lesson_step(slug: str, title: str, *, text: str, question: str, kind: str, try_this: str, page: str | None,
                query: Mapping[str, str] | None = None,
                uses_model: bool = False) -> Callable[[Callable[[], Live]], Step]:
    """Declare a step above the function that builds it: the decorated name becomes the ``Step``.

    The lecture's order is not here but in the package's ``STEPS`` list, which names each declared step once.
    """
    def declare(build: Callable[[], Live]) -> Step:
        return Step(slug, title, text, question, kind, build, try_this, page, dict(query or {}), uses_model)
    return declare


def page_exists(page: str) -> bool:
    return page == "" or (ROOT / "pages" / f"{page}.py").exists()


# --- helpers the builders share: choice letters, the nearest choice, bytes in words -----------------------


def letter(index: int) -> str:
    return chr(ord("A") + index)


def nearest(options: list[float], value: float) -> int:
    return int(np.argmin([abs(math.log(o) - math.log(value)) for o in options]))


def binary_size(n_bytes: float) -> str:
    for unit, size in (("TiB", 2 ** 40), ("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if n_bytes >= size:
            value = n_bytes / size
            return f"{value:,.0f} {unit}" if value >= 100 or value == int(value) else f"{value:,.2f} {unit}"
    return f"{n_bytes:,.0f} bytes"
