"""The teacher's report of a class poll, computed from the store's rows alone: per step and for the lesson.

`summarize` turns the rows a store read (`PollStore.report`) into a `ClassReport`. The same rows give the same
report, whichever server read them, so every replica behind a proxy gives the teacher the same numbers.
ui/lessons/class_report.py says it in words and writes it as CSV and HTML.

Per step: how many students answered, each choice's count, the right answer (the one the teacher's reveal
showed the class, recorded by the store at the reveal), the share that chose it and the most common wrong
answer, and the median time from the step opening to an answer. For the lesson: how many students joined,
how many answered at least half the class's steps, and the hardest steps (the lowest shares right). A number
that does not exist (no answers, no right answer recorded) is None, and `StepReport.status` says why in words.

What the times mean: a step "opens" each time the teacher moves the class to it (the store logs every
opening); an answer's time runs from the latest opening of its step at or before the answer, to the answer
the class counts for that student (a changed answer counts from when it was changed). Answers stored before
the store kept openings have no time; the report says how many of a step's answers were timed.

Students are anonymous: a student is a hash of a secret token and a time of joining, and the report names no
student at all.
"""
from __future__ import annotations

import statistics
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

HARDEST = 3  # the steps the class found hardest: at most this many, the lowest shares right


@dataclass(frozen=True)
class StepReport:
    step: int
    answered: int  # students who gave an answer the class counts
    counts: dict[str, int]  # answer -> students: the offered choices in order (0 included) once known, then others
    offered: tuple[str, ...]  # the choices the reveal recorded; () before the reveal or from an older store
    right_answer: str | None  # the answer the reveal showed; None before the reveal
    revealed: bool
    opened_at: float | None  # the step's first opening, seconds since the epoch; None if none was recorded
    timed: int  # answers with a recorded opening before them
    median_s: float | None  # median seconds from the opening to the answer, over the timed answers

    @property
    def right(self) -> int | None:
        """How many chose the right answer; None without a right answer."""
        return None if self.right_answer is None else self.counts.get(self.right_answer, 0)

    @property
    def share_right(self) -> float | None:
        """The share of this step's answers that were right; None without a right answer or without answers."""
        return None if self.right is None or not self.answered else self.right / self.answered

    @property
    def common_wrong(self) -> tuple[str, int] | None:
        """(answer, students) of the most common wrong answer (the earlier choice on a tie); None if there is none."""
        if self.right_answer is None:
            return None
        wrong = [(n, answer) for answer, n in self.counts.items() if answer != self.right_answer and n > 0]
        if not wrong:
            return None
        most = max(n for n, _ in wrong)
        return next((answer, n) for n, answer in wrong if n == most)

    def status(self) -> str:
        """In words, why a number is missing: '' when the step has them all."""
        if not self.answered:
            return "no answers"
        if self.right_answer is None:
            return ("revealed before the store recorded right answers" if self.revealed else
                    "not revealed yet: no right answer recorded")
        return ""


@dataclass(frozen=True)
class ClassReport:
    code: str
    created_at: float
    ended_at: float | None  # when the teacher ended it; None while it runs or once it expired on its own
    expires_at: float
    read_at: float  # the store's clock when the rows were read
    step: int  # the class's step when read
    students: int  # joined
    steady: int  # students who answered at least half the class's steps
    steps: tuple[StepReport, ...] = field(default_factory=tuple)  # the steps the class was shown, in order

    @property
    def running(self) -> bool:
        return self.ended_at is None and self.read_at < self.expires_at

    @property
    def answers(self) -> int:
        return sum(s.answered for s in self.steps)

    @property
    def hardest(self) -> tuple[StepReport, ...]:
        """Up to HARDEST revealed steps with answers and a share right below 1, the lowest first."""
        graded = [s for s in self.steps if s.share_right is not None and s.share_right < 1]
        return tuple(sorted(graded, key=lambda s: (s.share_right, -s.answered, s.step))[:HARDEST])


def summarize(*, code: str, created_at: float, expires_at: float, ended_at: float | None, read_at: float,
              step: int, students: Iterable[str], answers: Iterable[tuple[int, str, str, float]],
              openings: Iterable[tuple[int, float]], reveals: Iterable[tuple[int, str | None, list[str] | None]]
              ) -> ClassReport:
    """The report from a class's rows: its students' ids, answers (step, student id, answer, answered_at),
    step openings (step, opened_at) and reveals (step, right answer, offered choices).

    The steps reported are those the class was shown: opened, answered or revealed. Step 0, the class before
    its first step, is opened when the class is created; it is reported only if answered or revealed.
    """
    students = set(students)
    answers = sorted(answers, key=lambda a: (a[0], a[1]))
    opened: dict[int, list[float]] = defaultdict(list)
    for s, at in openings:
        opened[int(s)].append(float(at))
    for times in opened.values():
        times.sort()
    revealed = {int(s): (right, list(offered or ())) for s, right, offered in reveals}
    by_step: dict[int, list[tuple[str, str, float]]] = defaultdict(list)
    for s, student, answer, at in answers:
        by_step[int(s)].append((student, answer, float(at)))
    shown = sorted({*(s for s in opened if s >= 1), *revealed, *by_step})  # step 0's automatic opening is no step

    reports = []
    for s in shown:
        rows = by_step.get(s, [])
        right, offered = revealed.get(s, (None, []))
        tally = Counter(answer for _, answer, _ in rows)
        counts = {choice: tally.get(choice, 0) for choice in offered}
        counts.update({answer: n for answer, n in sorted(tally.items()) if answer not in counts})
        times = opened.get(s, [])
        waits = []
        for _, _, at in rows:
            i = bisect_right(times, at)  # the latest opening at or before the answer
            if i:
                waits.append(at - times[i - 1])
        reports.append(StepReport(
            step=s, answered=len(rows), counts=counts, offered=tuple(offered), right_answer=right,
            revealed=s in revealed, opened_at=times[0] if times else None, timed=len(waits),
            median_s=statistics.median(waits) if waits else None))

    per_student = Counter(student for _, student, _, _ in answers if student in students)
    steady = sum(1 for n in per_student.values() if 2 * n >= len(reports)) if reports else 0
    return ClassReport(code=code, created_at=float(created_at), ended_at=None if ended_at is None else float(ended_at),
                       expires_at=float(expires_at), read_at=float(read_at), step=int(step), students=len(students),
                       steady=steady, steps=tuple(reports))
