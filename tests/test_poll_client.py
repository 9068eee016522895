"""The Lessons page's poll client (ui/lessons/poll_client.py): each typed method reaches the store's own, on a real
SQLite file, and whatever the poll refuses, or a database that cannot be used, comes back as a message, not raised.
"""
import pytest

from ui.lessons.poll_client import ClassPoll, StudentPoll, TeacherPoll, start_class


@pytest.fixture(autouse=True)
def poll_database(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_DB", str(tmp_path / "poll.sqlite3"))


def test_a_class_through_the_client_from_start_to_end():
    teacher, error = start_class()
    assert error is None and teacher.key not in repr(teacher)  # the key stays out of any log
    assert teacher.set_step(1) == (None, None)
    student, error = ClassPoll(teacher.code).join()
    assert error is None and isinstance(student, StudentPoll) and student.token not in repr(student)
    assert student.rejoin() == (True, None)
    assert student.answer(1, "B") == (True, None)
    assert student.answer(1, "A") == (False, None)  # a changed answer replaces the first
    assert student.my_answer(1) == ("A", None)
    assert teacher.counts(1) == ({"A": 1}, None)
    hidden, message = ClassPoll(teacher.code).revealed_counts(1)
    assert hidden is None and message == "The class's answers to step 1 are shown once the teacher reveals them."
    assert teacher.reveal(1, "A", ["A", "B"]) == (None, None)
    assert ClassPoll(teacher.code).revealed_counts(1) == ({"A": 1}, None)
    info, _ = teacher.info()
    assert (info.step, info.students, info.answered, info.revealed) == (1, 1, 1, True)
    report, _ = teacher.report()
    assert (report.steps[0].right_answer, report.steps[0].share_right) == ("A", 1.0)
    assert teacher.end() == (None, None)
    refused, message = student.answer(1, "B")
    assert refused is None and message.startswith(f"Class {teacher.code} has ended")
    assert teacher.report()[0].steps == report.steps  # an ended class's key still reads its report


def test_a_refusal_is_the_stores_message():
    teacher, _ = start_class()
    assert TeacherPoll(teacher.code, "a guess").set_step(2) == (
        None, f"That teacher key does not open class {teacher.code} — resume with the private link or code you were "
              "given when the poll started.")
    assert StudentPoll(teacher.code, "never joined").answer(0, "A")[1] == (
        f"You have not joined class {teacher.code} yet — join with the code on the teacher's screen.")
    assert ClassPoll("ABCDE").join() == (None, "No class with code ABCDE — check the code on the teacher's screen.")


def test_a_database_that_cannot_be_used_is_a_message(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_DB", "mysql://nowhere/db")
    value, message = ClassPoll("K7QPM").info()
    assert value is None
    assert message.startswith("The class poll is unavailable: its database cannot be used (ATTENTION_LAB_DB=")
    assert message.endswith("The lesson goes on without it.")
