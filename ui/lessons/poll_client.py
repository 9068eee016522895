"""The class poll as the Lessons page calls it: one typed method per action, its failures put into words once.

    teacher, error = start_class()            # (TeacherPoll(code, key), None), or (None, a message)
    info, error = teacher.info()              # SessionInfo: the class's step, students, answers, reveal
    _, error = teacher.set_step(3)            # the class answers step 3 now
    student, error = ClassPoll("K7QPM").join()
    first, error = student.answer(3, "B")     # True: a first answer; False: it replaced this student's earlier one
    _, error = teacher.reveal(3, "B", ["A", "B", "C"])
    counts, error = teacher.counts(3)         # {"B": 1}

Every method calls the store's own method (polls/, `PollStore`) and returns (its result, None), or (None, a
message for the screen) when the poll cannot honour the call: a wrong or ended code, a refused key or token,
an answer to a closed step, a limit reached, or a database that cannot be used (a bad URL, a missing driver,
a server stopped), which says the poll is unavailable. The lesson goes on either way: no poll call raises.

A teacher's key and a student's token are secrets: they stay out of these objects' repr, so no log or error
page prints them. One store per server process (`st.cache_resource`), for the database `$ATTENTION_LAB_DB`
names.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import streamlit as st

from polls import URL_ENV, ClassReport, PollError, PollStore, SessionInfo, open_store

T = TypeVar("T")
Reply = tuple[T | None, str | None]  # (the store's result, None), or (None, a message for the screen)


@st.cache_resource(show_spinner=False)
def _open_store(url: str | None) -> PollStore:
    return open_store(url)


def _call(action: Callable[[PollStore], T]) -> Reply[T]:
    """`action` on this server's store, its failure as a message: the one place poll errors become words."""
    try:
        return action(_open_store(os.environ.get(URL_ENV) or None)), None
    except PollError as exc:
        return None, str(exc)
    except Exception as exc:  # an unusable database URL, a missing driver, a database stopped or gone away
        # the first line, whole up to 600 characters: a long database path must not cut off the fix it ends with
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:600]
        return None, (f"The class poll is unavailable: its database cannot be used ({reason}). "
                      "The lesson goes on without it.")


@dataclass(frozen=True)
class TeacherPoll:
    """What the teacher of class `code` does; the store checks `key` at every call."""

    code: str
    key: str = field(repr=False)

    def info(self) -> Reply[SessionInfo]:
        return _call(lambda store: store.teacher_info(self.code, self.key))

    def set_step(self, step: int) -> Reply[None]:
        return _call(lambda store: store.set_step(self.code, self.key, step))

    def reveal(self, step: int, right_answer: str, choices: Sequence[str]) -> Reply[None]:
        """Reveal `step`; the store keeps the answer shown as right, and the choices, for the report."""
        return _call(lambda store: store.reveal(self.code, self.key, step, right_answer, choices))

    def counts(self, step: int) -> Reply[dict[str, int]]:
        """Each answer's count at `step`, revealed or not (the key opens them)."""
        return _call(lambda store: store.counts(self.code, step, self.key))

    def report(self) -> Reply[ClassReport]:
        """The class's report, while it runs and after it ended, until its rows are deleted."""
        return _call(lambda store: store.report(self.code, self.key))

    def end(self) -> Reply[None]:
        return _call(lambda store: store.end_session(self.code, self.key))


@dataclass(frozen=True)
class StudentPoll:
    """What one student of class `code` does; `token` is that student, and only this browser holds it."""

    code: str
    token: str = field(repr=False)

    def rejoin(self) -> Reply[bool]:
        """True while `token` is a student of the class: a reloaded page answers as the same student."""
        return _call(lambda store: store.rejoin(self.code, self.token))

    def answer(self, step: int, answer: str) -> Reply[bool]:
        """True for a first answer to `step`, False when it replaced this student's earlier one."""
        return _call(lambda store: store.answer(self.code, self.token, step, answer))

    def my_answer(self, step: int) -> Reply[str | None]:
        """The answer the class counts for this student at `step`, whichever tab sent it; None if none."""
        return _call(lambda store: store.student_answer(self.code, self.token, step))


@dataclass(frozen=True)
class ClassPoll:
    """What anyone with class `code`, a public code, may do."""

    code: str

    def info(self) -> Reply[SessionInfo]:
        return _call(lambda store: store.session_info(self.code))

    def revealed_counts(self, step: int) -> Reply[dict[str, int]]:
        """Each answer's count at `step`, once the teacher revealed it (a message before)."""
        return _call(lambda store: store.counts(self.code, step))

    def join(self) -> Reply[StudentPoll]:
        """A new student of the class."""
        token, error = _call(lambda store: store.join(self.code))
        return (None, error) if error else (StudentPoll(self.code, token), None)


def start_class() -> Reply[TeacherPoll]:
    """A new class at step 0, and its teacher: the key is given this once."""
    new, error = _call(lambda store: store.create_session())
    return (None, error) if error else (TeacherPoll(new.code, new.teacher_key), None)
