"""The class poll's store (polls/) and the teacher's report it reads (polls/report.py, written out by
ui/lessons/class_report.py):
one suite, run against SQLite and a real PostgreSQL server.

The PostgreSQL server is Debian's (`apt-get install postgresql`), started by the `postgres_server`
fixture in a temporary directory (unix socket there, a free port, trust authentication, fsync
off) and stopped at the end of the session; each test gets a database of its own. Without the
server programs the PostgreSQL tests fail, they do not skip: the store's PostgreSQL path must
be tested wherever the suite runs.
"""
from __future__ import annotations

import glob
import hashlib
import json
import math
import multiprocessing
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

import pytest

from polls import open_store, rules, settings
from polls import store as poll_store
from polls.rules import ALPHABET, CODE_LENGTH, PollError
from scripts import hall

pytestmark = pytest.mark.service

CODE = re.compile(f"^[{ALPHABET}]{{{CODE_LENGTH}}}$")
HOUR = 3600.0


# --- a real PostgreSQL server -------------------------------------------------------------------

def _server_programs() -> Path:
    """Debian's initdb and pg_ctl, found as the lecture hall's script finds them; missing, the suite fails."""
    try:
        return hall.postgres_programs()
    except hall.HallError as error:
        pytest.fail(f"{error} The poll store's PostgreSQL tests need a real server (.ci/run installs it).",
                    pytrace=False)


class PostgresServer:
    """A throwaway PostgreSQL cluster: initdb in a temporary directory, pg_ctl start / restart / stop."""

    def __init__(self):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            pytest.fail("psycopg is not installed: pip install -r requirements.txt", pytrace=False)
        self.bin = _server_programs()
        self.as_user: list[str] = []
        owner = None
        if os.geteuid() == 0:  # initdb refuses to run as root
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                pytest.fail("running as root and there is no `postgres` user to run the PostgreSQL server as: "
                            "Debian's postgresql package creates it", pytrace=False)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        # /tmp itself, not pytest's 0700 folder, which the postgres user could not enter; a short socket path
        self.dir = Path(tempfile.mkdtemp(prefix="attention-lab-pg-", dir="/tmp" if os.path.isdir("/tmp") else None))
        if owner:
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
        self.data = self.dir / "data"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._databases = 0
        self._pg("initdb", "-D", str(self.data), "-U", "lab", "-A", "trust", "-E", "UTF8", "--no-sync")
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"), "-w", "-t", "60", "-o",
                 f"-k {self.dir} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off "
                 "-c max_connections=200", "start")

    def _pg(self, program: str, *args: str) -> None:
        done = subprocess.run([*self.as_user, str(self.bin / program), *args], capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            log = self.dir / "server.log"
            pytest.fail(f"{program} {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n"
                        + (log.read_text() if log.exists() else ""), pytrace=False)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://lab@/{database}?host={self.dir}&port={self.port}"

    def new_database(self) -> str:
        import psycopg

        self._databases += 1
        name = f"poll_test_{self._databases}"
        with psycopg.connect(self.url(), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def restart(self) -> None:
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"), "-m", "fast", "-w", "-t", "60",
                 "restart")

    def stop(self) -> None:
        try:
            self._pg("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def test_without_postgresql_the_suite_fails_and_says_what_to_install(monkeypatch):
    monkeypatch.setattr(glob, "glob", lambda pattern: [])
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match=r"apt-get install -y postgresql"):
        _server_programs()


@pytest.fixture(scope="session")
def postgres_server():
    server = PostgresServer()
    yield server
    server.stop()


# --- the same suite on both databases --------------------------------------------------------------

@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    """Where a test's stores keep their data: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "data" / "poll.sqlite3")
    return request.getfixturevalue("postgres_server").new_database()


@pytest.fixture
def open_db(db_url):
    """open_db(**open_store_kwargs) -> a store on this test's database, closed after the test."""
    stores = []

    def make(**kwargs):
        store = open_store(db_url, **kwargs)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, t: float = 1_800_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def other_code(code: str) -> str:
    """A valid-looking code that is not `code`."""
    return "ABCDE" if code != "ABCDE" else "ABCDF"


def raw_rows(db_url: str) -> dict[str, list[tuple]]:
    """Every row of the poll's tables, read straight from the database, not through the store."""
    tables = ("poll_sessions", "poll_students", "poll_answers", "poll_reveals", "poll_openings")
    if db_url.startswith("postgresql://"):
        import psycopg
        with psycopg.connect(db_url) as conn:
            return {t: conn.execute(f"SELECT * FROM {t}").fetchall() for t in tables}
    import sqlite3
    conn = sqlite3.connect(db_url)
    try:
        return {t: conn.execute(f"SELECT * FROM {t}").fetchall() for t in tables}
    finally:
        conn.close()


def stored_codes(db_url: str) -> dict[str, set[str]]:
    """table -> the class codes it holds rows for."""
    return {table: {row[0] for row in rows} for table, rows in raw_rows(db_url).items()}


def test_a_class_creates_joins_answers_counts_and_reveals(open_db):
    store = open_db()
    new = store.create_session()
    code, key = new.code, new.teacher_key
    assert isinstance(new, poll_store.NewClass) and CODE.match(code), new
    info = store.session_info(code)
    assert (info.code, info.step, info.students, info.answered, info.revealed) == (code, 0, 0, 0, False)
    assert math.isclose(info.expires_at - info.created_at, 3 * HOUR)
    assert store.teacher_info(code, key) == info

    store.set_step(code, key, 1)
    students = [store.join(code) for _ in range(3)]
    assert len(set(students)) == 3 and all(re.fullmatch(r"[A-Za-z0-9_-]{22,}", s) for s in students)
    assert all(store.rejoin(code, s) for s in students)
    assert store.counts(code, 1, key) == {}
    assert [store.answer(code, s, 1, a) for s, a in zip(students, "ABA")] == [True, True, True]
    assert store.counts(code, 1, key) == {"A": 2, "B": 1}
    info = store.session_info(code)
    assert (info.step, info.students, info.answered, info.revealed) == (1, 3, 3, False)

    assert not store.is_revealed(code, 1)
    store.reveal(code, key, 1)
    store.reveal(code, key, 1)  # twice is harmless
    assert store.is_revealed(code, 1) and store.session_info(code).revealed
    assert not store.is_revealed(code, 2)
    with pytest.raises(PollError, match="revealed: it takes no more answers"):
        store.answer(code, students[1], 1, "A")
    assert store.counts(code, 1) == store.counts(code, 1, key) == {"A": 2, "B": 1}  # the class sees it too

    store.set_step(code, key, 2)  # the next question: nothing revealed, nothing answered yet
    info = store.session_info(code)
    assert (info.step, info.answered, info.revealed) == (2, 0, False)
    assert store.answer(code, students[1], 2, "C") and store.counts(code, 2, key) == {"C": 1}
    assert store.counts(code, 1, key) == {"A": 2, "B": 1}


def test_a_typed_code_is_forgiven_case_spaces_and_dashes(open_db):
    store = open_db()
    new = store.create_session()
    typed = f" {new.code[:2].lower()}-{new.code[2:]} "
    student = store.join(typed)
    store.answer(typed, student, 0, "yes")
    assert store.counts(typed, 0, new.teacher_key) == {"yes": 1} and store.session_info(typed).code == new.code


def test_a_wrong_code_says_so_in_words_a_student_can_read(open_db):
    store = open_db()
    new = store.create_session()
    key, student = new.teacher_key, store.join(new.code)
    wrong = other_code(new.code)
    message = f"No class with code {wrong} — check the code on the teacher's screen."
    for call in (lambda: store.join(wrong), lambda: store.answer(wrong, student, 0, "A"),
                 lambda: store.counts(wrong, 0), lambda: store.counts(wrong, 0, key),
                 lambda: store.set_step(wrong, key, 1), lambda: store.reveal(wrong, key, 0),
                 lambda: store.end_session(wrong, key), lambda: store.teacher_info(wrong, key),
                 lambda: store.rejoin(wrong, student), lambda: store.is_revealed(wrong, 0),
                 lambda: store.session_info(wrong)):
        with pytest.raises(PollError) as caught:
            call()
        assert str(caught.value) == message
        assert isinstance(caught.value, ValueError)
    for empty in ("", "  ", None):
        with pytest.raises(PollError, match="Type the class code shown on the teacher's screen"):
            store.join(empty)
    with pytest.raises(PollError, match=r"No class with code HELLOHELLO… —"):
        store.join("hello hello hello")  # a long entry is cut short in the message


# --- the teacher key --------------------------------------------------------------------------------

def test_the_teacher_key_and_student_tokens_are_never_stored_in_clear(open_db, db_url):
    store = open_db()
    new = store.create_session()
    store.set_step(new.code, new.teacher_key, 1)
    tokens = [store.join(new.code) for _ in range(3)]
    for token in tokens:
        store.answer(new.code, token, 1, "A")
    store.reveal(new.code, new.teacher_key, 1)
    secrets_given = [new.teacher_key, *tokens]
    assert all(len(s) >= 22 for s in secrets_given)  # token_urlsafe(16): 128 random bits in 22 characters

    stored = raw_rows(db_url)
    every_value = [str(value) for rows in stored.values() for row in rows for value in row]
    for secret in secrets_given:
        assert not any(secret in value for value in every_value), "a secret is stored in clear"
    assert [row[0] for row in stored["poll_sessions"]] == [new.code]
    session_values = stored["poll_sessions"][0]
    assert rules.digest(new.teacher_key) in session_values
    assert rules.digest(new.teacher_key) == hashlib.sha256(new.teacher_key.encode()).hexdigest()
    assert {row[1] for row in stored["poll_students"]} == {rules.digest(t) for t in tokens}
    assert {row[2] for row in stored["poll_answers"]} == {rules.digest(t) for t in tokens}


def test_every_teacher_action_needs_the_classes_own_key(open_db):
    store = open_db()
    mine, theirs = store.create_session(), store.create_session()
    code = mine.code
    store.set_step(code, mine.teacher_key, 1)
    student = store.join(code)
    store.answer(code, student, 1, "A")
    refused = f"That teacher key does not open class {code} — resume with the private link"
    forged = rules.new_secret()
    for key in (forged, theirs.teacher_key, "", rules.digest(mine.teacher_key), None, 42,
                mine.teacher_key.upper(), mine.teacher_key + "x"):
        calls = [lambda: store.set_step(code, key, 2), lambda: store.reveal(code, key, 1),
                 lambda: store.end_session(code, key), lambda: store.teacher_info(code, key)]
        if key is not None:  # counts without any key are the class's own view, below
            calls.append(lambda: store.counts(code, 1, key))
        for call in calls:
            with pytest.raises(PollError) as caught:
                call()
            assert str(caught.value).startswith(refused)
            if isinstance(key, str) and key:
                assert key not in str(caught.value)  # a message never repeats a key
    info = store.session_info(code)  # nothing changed
    assert (info.step, info.revealed, info.students, info.answered) == (1, False, 1, 1)
    assert store.answer(code, student, 1, "B") is False  # the class is still on, step 1 still open
    with pytest.raises(PollError, match="shown once the teacher reveals them"):
        store.counts(code, 1)  # no key: no live counts
    assert store.counts(code, 1, mine.teacher_key) == {"B": 1}


def test_the_key_is_compared_in_constant_time(open_db, monkeypatch):
    store = open_db()
    new = store.create_session()
    compared = []
    real = rules.hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(rules.hmac, "compare_digest", spy)
    store.teacher_info(new.code, new.teacher_key)
    with pytest.raises(PollError):
        store.set_step(new.code, "a guess", 1)
    stored = rules.digest(new.teacher_key)
    assert compared == [(stored, stored), (stored, rules.digest("a guess"))]


def test_an_ended_class_refuses_its_key_and_everyone_then_goes_an_hour_later(open_db, db_url):
    clock = Clock()
    store = open_db(clock=clock)
    new = store.create_session()
    code, key = new.code, new.teacher_key
    student = store.join(code)
    store.answer(code, student, 0, "A")
    store.reveal(code, key, 0)
    store.end_session(code, key)
    ended = f"Class {code} has ended: the teacher ended the poll — ask the teacher for a new code."
    for call in (lambda: store.set_step(code, key, 1), lambda: store.reveal(code, key, 0),  # the key, replayed
                 lambda: store.end_session(code, key), lambda: store.teacher_info(code, key),
                 lambda: store.counts(code, 0, key), lambda: store.counts(code, 0), lambda: store.join(code),
                 lambda: store.answer(code, student, 0, "B"), lambda: store.rejoin(code, student),
                 lambda: store.session_info(code)):
        with pytest.raises(PollError) as caught:
            call()
        assert str(caught.value) == ended
    clock.t += poll_store.PURGE_AFTER_S - 1
    store.create_session()
    assert code in stored_codes(db_url)["poll_sessions"]  # still says "ended" ...
    clock.t += poll_store.PURGE_EVERY_S  # the store looks again a minute after it last looked
    store.create_session()
    assert all(code not in codes for codes in stored_codes(db_url).values())  # ... then its rows are gone
    with pytest.raises(PollError, match=f"No class with code {code}"):
        store.session_info(code)


# --- students -------------------------------------------------------------------------------------

def test_a_student_token_of_another_class_or_none_is_refused(open_db):
    store = open_db()
    mine, elsewhere = store.create_session(), store.create_session()
    stranger = store.join(elsewhere.code)
    assert store.rejoin(elsewhere.code, stranger) and not store.rejoin(mine.code, stranger)
    with pytest.raises(PollError, match=f"a student of another class, not of class {mine.code} — join class"):
        store.answer(mine.code, stranger, 0, "A")
    for student in (rules.new_secret(), "0123456789abcdef"):
        assert not store.rejoin(mine.code, student)
        with pytest.raises(PollError, match=f"You have not joined class {mine.code} yet"):
            store.answer(mine.code, student, 0, "A")
    assert not store.rejoin(mine.code, None)
    with pytest.raises(PollError, match="Join the class"):
        store.answer(mine.code, None, 0, "A")
    assert store.counts(mine.code, 0, mine.teacher_key) == {}
    assert store.session_info(mine.code).students == 0


def test_an_expired_code_is_refused_and_its_rows_go_an_hour_later(open_db, db_url):
    clock = Clock()
    store = open_db(clock=clock)
    old = store.create_session(now=clock.t - 3 * HOUR - 1).code  # created more than three hours ago
    with pytest.raises(PollError, match=rf"^Class {old} has ended \(a class code lasts 3 hours\) — ask the teacher"):
        store.join(old)

    new = store.create_session()
    code, key = new.code, new.teacher_key
    student = store.join(code)
    store.answer(code, student, 0, "A")
    clock.t += 3 * HOUR - 1
    assert store.counts(code, 0, key) == {"A": 1}  # still on, a second before the end
    clock.t += 1
    for call in (lambda: store.join(code), lambda: store.answer(code, student, 0, "B"),
                 lambda: store.counts(code, 0, key), lambda: store.set_step(code, key, 1),
                 lambda: store.teacher_info(code, key), lambda: store.session_info(code)):
        with pytest.raises(PollError, match="has ended"):
            call()

    clock.t += HOUR + 1  # an hour after the end, the next write clears the old rows away
    store.create_session()
    with pytest.raises(PollError, match=f"No class with code {code}"):
        store.session_info(code)


def test_the_purge_runs_at_any_write_at_most_once_a_minute(open_db, db_url, monkeypatch):
    clock = Clock()
    store = open_db(clock=clock)
    old, current = store.create_session(), store.create_session()
    for new in (old, current):
        store.answer(new.code, store.join(new.code), 0, "A")
        store.reveal(new.code, new.teacher_key, 0)
    store.end_session(old.code, old.teacher_key)
    assert all(old.code in codes for codes in stored_codes(db_url).values())

    purges = []
    real_purge = store._purge
    monkeypatch.setattr(store, "_purge", lambda db, before: (purges.append(before), real_purge(db, before)))
    clock.t += poll_store.PURGE_AFTER_S + 1
    store.set_step(current.code, current.teacher_key, 1)  # a write to another class, not a new class
    assert all(old.code not in codes for codes in stored_codes(db_url).values())
    assert all(current.code in codes for codes in stored_codes(db_url).values())
    assert purges == [clock.t - poll_store.PURGE_AFTER_S]

    for _ in range(3):  # within the minute, writes do not look again ...
        store.answer(current.code, store.join(current.code), 1, "A")
    assert len(purges) == 1
    clock.t += poll_store.PURGE_EVERY_S
    store.join(current.code)  # ... a minute later, they do
    assert len(purges) == 2


# --- limits --------------------------------------------------------------------------------------

def test_a_server_holds_at_most_max_polls_classes(open_db, monkeypatch):
    clock = Clock()
    store = open_db(clock=clock, max_polls=2)
    first, _ = store.create_session(), store.create_session()
    with pytest.raises(PollError, match=r"^This server holds 2 of 2 class polls, the most it keeps at once "
                                        r"\(ATTENTION_LAB_MAX_POLLS\); a poll's place frees up an hour after it ends"):
        store.create_session()
    store.end_session(first.code, first.teacher_key)
    with pytest.raises(PollError, match="holds 2 of 2"):  # an ended class keeps its place for an hour ...
        store.create_session()
    clock.t += poll_store.PURGE_AFTER_S + 1
    assert CODE.match(store.create_session().code)  # ... then frees it
    monkeypatch.setenv(rules.MAX_POLLS_ENV, "7")
    assert open_db().limits.max_polls == 7


def test_a_class_takes_at_most_max_students(open_db, monkeypatch):
    monkeypatch.setenv(rules.MAX_STUDENTS_ENV, "2")
    store = open_db()
    assert store.limits.max_students == 2
    new = store.create_session()
    first, _ = store.join(new.code), store.join(new.code)
    with pytest.raises(PollError, match=rf"^Class {new.code} is full: 2 of 2 places are taken, the most one class "
                                        r"takes on this server \(ATTENTION_LAB_MAX_STUDENTS\) — tell the teacher"):
        store.join(new.code)
    assert store.session_info(new.code).students == 2
    assert store.rejoin(new.code, first) and store.answer(new.code, first, 0, "A")  # those in stay in


def test_answers_are_at_most_max_answer_chars(open_db, monkeypatch):
    store = open_db(max_answer_chars=5)
    new = store.create_session()
    student = store.join(new.code)
    assert store.answer(new.code, student, 0, "ALiBi")
    with pytest.raises(PollError, match="at most 5 characters"):
        store.answer(new.code, student, 0, "sinusoidal")
    monkeypatch.setenv(rules.MAX_ANSWER_CHARS_ENV, "9")
    assert open_db().limits == rules.Limits(max_polls=200, max_students=500, max_answer_chars=9)


@pytest.mark.parametrize("env, value, message", [
    ("ATTENTION_LAB_MAX_POLLS", "many", "ATTENTION_LAB_MAX_POLLS='many': expected a whole number, like 200"),
    ("ATTENTION_LAB_MAX_STUDENTS", "0", "max_students=0: a limit is a whole number, 1 or more"),
    ("ATTENTION_LAB_MAX_ANSWER_CHARS", "2.5", "ATTENTION_LAB_MAX_ANSWER_CHARS='2.5': expected a whole number"),
])
def test_a_bad_limit_setting_says_which_and_what_it_expects(tmp_path, monkeypatch, env, value, message):
    monkeypatch.setenv(env, value)
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        open_store(str(tmp_path / "poll.sqlite3"))
    assert not isinstance(caught.value, PollError)


def test_how_long_a_code_lasts_is_configurable(open_db, monkeypatch):
    clock = Clock()
    code = open_db(clock=clock, ttl_hours=0.5).create_session().code
    clock.t += 0.5 * HOUR
    with pytest.raises(PollError, match=r"has ended \(a class code lasts 0.5 hours\)"):
        open_db(clock=clock).join(code)  # the class keeps the lifetime it was created with
    monkeypatch.setenv(rules.TTL_ENV, "1")
    assert open_db().ttl_s == HOUR
    monkeypatch.setenv(rules.TTL_ENV, "soon")
    with pytest.raises(ValueError, match="ATTENTION_LAB_POLL_HOURS='soon': expected a number of hours"):
        open_db()
    with pytest.raises(ValueError, match="positive number of hours"):
        open_db(ttl_hours=0)


# --- answers ---------------------------------------------------------------------------------------

def test_a_second_answer_replaces_the_first_and_never_counts_twice(open_db):
    store = open_db()
    new = store.create_session()
    code = new.code
    me, other = store.join(code), store.join(code)
    assert store.answer(code, me, 0, "A") is True
    assert store.answer(code, other, 0, "A") is True
    assert store.answer(code, me, 0, "B") is False  # changed my mind
    assert store.answer(code, me, 0, "B") is False
    assert store.counts(code, 0, new.teacher_key) == {"A": 1, "B": 1}
    assert store.session_info(code).answered == 2


def test_a_student_reads_back_the_answer_the_class_counts_whoever_sent_it(open_db):
    """Two tabs of one browser hold one token: the answer a page shows is the store's, the last one sent."""
    store = open_db()
    new = store.create_session()
    code, key = new.code, new.teacher_key
    me, other = store.join(code), store.join(code)
    store.set_step(code, key, 1)
    assert store.student_answer(code, me, 1) is None  # nothing sent yet
    store.answer(code, me, 1, "B")  # the first tab
    store.answer(code, other, 1, "A")
    store.answer(code, me, 1, "C")  # the second tab, same token
    assert store.student_answer(code, me, 1) == "C" and store.student_answer(code, other, 1) == "A"
    store.reveal(code, key, 1)
    assert store.student_answer(code, me, 1) == "C" == max(store.counts(code, 1))  # what the class counted
    store.set_step(code, key, 2)
    assert store.student_answer(code, me, 2) is None and store.student_answer(code, me, 1) == "C"

    elsewhere = open_db().create_session()  # a token of another class, or none, has no answer here
    stranger = store.join(elsewhere.code)
    assert [store.student_answer(code, t, 1) for t in (stranger, "not-a-token", None, 42)] == [None] * 4
    with pytest.raises(PollError, match="No class with code"):
        store.student_answer(other_code(code), me, 1)
    store.end_session(code, key)
    with pytest.raises(PollError, match="has ended"):
        store.student_answer(code, me, 1)


def test_a_late_joiner_answers_the_current_step_and_only_that(open_db):
    store = open_db()
    new = store.create_session()
    code, key = new.code, new.teacher_key
    early = store.join(code)
    store.set_step(code, key, 1)
    store.answer(code, early, 1, "A")
    store.reveal(code, key, 1)
    store.set_step(code, key, 2)

    late = store.join(code)
    assert store.answer(code, late, 2, "B") is True
    assert store.counts(code, 2, key) == {"B": 1} and store.session_info(code).students == 2
    with pytest.raises(PollError, match=rf"^Class {code} is on step 2, not step 1 — reload the page"):
        store.answer(code, late, 1, "A")
    with pytest.raises(PollError, match="is on step 2, not step 3"):
        store.answer(code, late, 3, "A")
    store.set_step(code, key, 1)  # back to a revealed step: still closed
    with pytest.raises(PollError, match="revealed"):
        store.answer(code, late, 1, "A")


@pytest.mark.parametrize("step,answer,message", [
    (-1, "A", "A step is a whole number, 0 or more, not -1"),
    (True, "A", "not True"),
    ("1", "A", "not '1'"),
    (0, "", "An answer is some text"),
    (0, "   ", "An answer is some text"),
    (0, "x" * (rules.MAX_ANSWER_CHARS + 1), "at most 200 characters"),
    (0, 3, "An answer is some text"),
])
def test_a_bad_step_or_answer_is_refused(open_db, step, answer, message):
    store = open_db()
    code = store.create_session().code
    student = store.join(code)
    with pytest.raises(PollError, match=re.escape(message)):
        store.answer(code, student, step, answer)
    assert store.session_info(code).answered == 0


def test_answers_survive_reopening_the_store(open_db):
    first = open_db()
    new = first.create_session()
    code, key = new.code, new.teacher_key
    first.set_step(code, key, 4)
    student = first.join(code)
    first.answer(code, student, 4, "RoPE")
    first.reveal(code, key, 4)
    first.close()
    with pytest.raises(RuntimeError, match="is closed"):
        first.counts(code, 4, key)

    again = open_db()  # a restarted server: a new store, new connections, the same file or database
    info = again.teacher_info(code, key)  # the key still opens the class
    assert (info.step, info.students, info.answered, info.revealed) == (4, 1, 1, True)
    assert again.counts(code, 4) == {"RoPE": 1}
    again.set_step(code, key, 5)
    assert again.rejoin(code, student) and again.answer(code, student, 5, "ALiBi") is True  # so does the token


def test_forty_students_answering_at_once_lose_no_answer(open_db):
    store = open_db()
    new = store.create_session()
    code = new.code
    store.set_step(code, new.teacher_key, 3)
    students = [store.join(code) for _ in range(40)]
    choices = [ALPHABET[i % 4] for i in range(40)]
    start, errors = threading.Barrier(40), []

    def student(i: int) -> None:
        try:
            start.wait()
            assert store.answer(code, students[i], 3, choices[i]) is True
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=student, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    counts = store.counts(code, 3, new.teacher_key)
    assert sum(counts.values()) == 40 and counts == dict(sorted(Counter(choices).items()))
    assert store.session_info(code).answered == 40


def _students_in_a_process(url: str, code: str, first: int, n: int, start, results) -> None:
    """One app server: n students join and, once every process is ready, answer at the same moment."""
    store = open_store(url)
    tokens = [store.join(code) for _ in range(n)]
    errors = []

    def answer(k: int) -> None:
        try:
            start.wait(60)
            store.answer(code, tokens[k], 1, ALPHABET[(first + k) % 3])
        except BaseException as e:  # noqa: BLE001 - sent to the test
            errors.append(repr(e))

    threads = [threading.Thread(target=answer, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    store.close()
    results.put(errors)


def test_forty_students_on_four_servers_answering_at_once_lose_no_answer(open_db, db_url):
    store = open_db()
    new = store.create_session()
    code = new.code
    store.set_step(code, new.teacher_key, 1)
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter each, as a separate server would be
    start, results = ctx.Barrier(40), ctx.Queue()
    processes = [ctx.Process(target=_students_in_a_process, args=(db_url, code, 10 * p, 10, start, results))
                 for p in range(4)]
    for p in processes:
        p.start()
    errors = [results.get(timeout=120) for _ in processes]
    for p in processes:
        p.join(30)
    assert errors == [[]] * 4 and [p.exitcode for p in processes] == [0] * 4
    counts = store.counts(code, 1, new.teacher_key)
    assert sum(counts.values()) == 40 and counts == dict(sorted(Counter(ALPHABET[i % 3] for i in range(40)).items()))
    assert store.session_info(code).students == 40


def test_codes_are_unique_and_a_taken_code_is_drawn_again(open_db, monkeypatch):
    store = open_db(max_polls=400)
    news = [store.create_session() for _ in range(300)]
    codes = [new.code for new in news]
    assert len(set(codes)) == 300 and all(CODE.match(c) for c in codes)
    assert len({new.teacher_key for new in news}) == 300
    assert not set("0O1I") & set(ALPHABET)

    drawn = iter(["AAAAA", "AAAAA", "AAAAA", "BBBBB"])
    monkeypatch.setattr(poll_store, "new_code", lambda: next(drawn))
    assert store.create_session().code == "AAAAA"
    assert store.create_session().code == "BBBBB"  # AAAAA was taken twice, then a free one


def test_the_pool_keeps_what_a_burst_opened_and_closes_what_goes_unused(tmp_path, monkeypatch):
    with open_store(str(tmp_path / "poll.sqlite3")) as store:
        held = [store._acquire()[0] for _ in range(3)]  # three calls at once
        for conn in held:
            store._release(conn)
        assert len(store._idle) == 3
        store.create_session()
        assert len(store._idle) == 3  # reused, not a fourth
        monkeypatch.setattr(poll_store, "IDLE_TIMEOUT_S", 0.0)
        store.create_session()
        assert len(store._idle) == 1  # the three unused ones were closed


# --- where the answers live -----------------------------------------------------------------------

OLD_SCHEMA = (  # the tables as versions without teacher keys made them
    "CREATE TABLE poll_sessions (code TEXT PRIMARY KEY, created_at DOUBLE PRECISION NOT NULL, "
    "expires_at DOUBLE PRECISION NOT NULL, step INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE poll_students (code TEXT NOT NULL REFERENCES poll_sessions (code), student_id TEXT NOT NULL, "
    "joined_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (code, student_id))",
    "CREATE TABLE poll_answers (code TEXT NOT NULL, step INTEGER NOT NULL, student_id TEXT NOT NULL, "
    "answer TEXT NOT NULL, answered_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (code, step, student_id), "
    "FOREIGN KEY (code, student_id) REFERENCES poll_students (code, student_id))",
    "CREATE TABLE poll_reveals (code TEXT NOT NULL REFERENCES poll_sessions (code), step INTEGER NOT NULL, "
    "revealed_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (code, step))",
    "CREATE INDEX poll_sessions_expiry ON poll_sessions (expires_at)",
    "INSERT INTO poll_sessions VALUES ('OLDAA', 1800000000, 1800010800, 2)",
    "INSERT INTO poll_students VALUES ('OLDAA', '3f2a9c0d1e2b4a5f', 1800000001)",
    "INSERT INTO poll_answers VALUES ('OLDAA', 2, '3f2a9c0d1e2b4a5f', 'B', 1800000002)",
)


def test_a_database_from_an_older_version_gains_the_new_columns(db_url):
    if db_url.startswith("postgresql://"):
        import psycopg
        with psycopg.connect(db_url) as conn:
            for statement in OLD_SCHEMA:
                conn.execute(statement)
    else:
        import sqlite3
        Path(db_url).parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(db_url) as conn:
            for statement in OLD_SCHEMA:
                conn.execute(statement)
        conn.close()
    clock = Clock(1_800_000_100.0)
    with open_store(db_url, clock=clock) as store, open_store(db_url, clock=clock) as second:  # twice: no harm
        assert store.session_info("OLDAA").students == 1  # the old class reads as before ...
        with pytest.raises(PollError, match="That teacher key does not open class OLDAA"):
            store.set_step("OLDAA", "", 3)  # ... but no key opens it
        new = second.create_session()
        store.set_step(new.code, new.teacher_key, 1)
        store.answer(new.code, store.join(new.code), 1, "A")
        assert store.counts(new.code, 1, new.teacher_key) == {"A": 1}
        clock.t += 3 * HOUR + poll_store.PURGE_AFTER_S
        second.create_session()
    assert all("OLDAA" not in codes for codes in stored_codes(db_url).values())  # purged like any other


def test_open_store_reads_the_url_then_the_environment_then_the_default(tmp_path, monkeypatch):
    monkeypatch.delenv(rules.URL_ENV, raising=False)
    monkeypatch.setattr(settings, "DEFAULT_PATH", tmp_path / "data" / "attention_lab.sqlite3")
    with open_store() as store:
        assert store.kind == "sqlite" and store.location == str(tmp_path / "data" / "attention_lab.sqlite3")
        assert Path(store.location).exists()
    monkeypatch.setenv(rules.URL_ENV, str(tmp_path / "from-env.sqlite3"))
    with open_store() as store:
        assert store.location == str(tmp_path / "from-env.sqlite3")
    with open_store(f"sqlite:///{tmp_path}/absolute.sqlite3") as store:  # sqlite:////abs: the 4th slash is the path's
        assert store.location == str(tmp_path / "absolute.sqlite3")
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///relative/poll.sqlite3") as store:
        assert store.location == str(tmp_path / "relative" / "poll.sqlite3")
    for bad in ("mysql://lab@host/db", ":memory:", "sqlite://poll.db", "sqlite:///"):
        with pytest.raises(ValueError, match="sqlite:///") as caught:
            open_store(bad)
        assert not isinstance(caught.value, PollError)


def test_a_file_that_is_not_the_polls_database_is_refused_and_left_as_it_is(tmp_path):
    import sqlite3
    corrupt = tmp_path / "corrupt.sqlite3"
    corrupt.write_bytes(b"this is not a database " * 200)
    foreign = tmp_path / "gradebook.sqlite3"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE pupils (name TEXT)")
        conn.execute("INSERT INTO pupils VALUES ('Ada')")
    conn.close()
    for path, message in ((corrupt, "is not a SQLite database"),
                          (foreign, "holds another program's tables \\(pupils\\) and none of the class poll's")):
        before, files = path.read_bytes(), sorted(p.name for p in tmp_path.iterdir())
        with pytest.raises(ValueError, match=message) as caught:
            open_store(str(path))
        assert not isinstance(caught.value, PollError) and "ATTENTION_LAB_DB" in str(caught.value)
        assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == files  # nothing written


def test_sqlite_uses_wal_in_one_file(tmp_path):
    path = tmp_path / "poll.sqlite3"
    with open_store(str(path)) as store:
        store.create_session()
    import sqlite3
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"poll_sessions", "poll_students", "poll_answers", "poll_reveals", "poll_openings"}


def test_postgresql_without_its_driver_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails
    needs = r'points at PostgreSQL, which needs the psycopg driver: pip install "psycopg\[binary\]"'
    with pytest.raises(ImportError, match=needs):
        open_store("postgresql://lab@localhost/attention_lab")


def test_postgresql_from_the_environment_and_its_password_kept_out_of_messages(postgres_server, monkeypatch):
    url = postgres_server.new_database()
    monkeypatch.setenv(rules.URL_ENV, url)
    with open_store() as store:
        assert store.kind == "postgresql" and store.location == url
        code = store.create_session().code
    with_password = url.replace("postgresql://lab@", "postgresql://lab:secret@")  # trust: the password is ignored
    with open_store(with_password) as store:
        assert store.session_info(code).code == code
        assert "secret" not in repr(store) and "postgresql://lab:***@/" in repr(store)


def test_postgresql_store_survives_a_server_restart(postgres_server):
    with open_store(postgres_server.new_database()) as store:
        new = store.create_session()
        code, key = new.code, new.teacher_key
        students = [store.join(code) for _ in range(3)]
        store.answer(code, students[0], 0, "A")
        assert len(store._idle) >= 1  # a pooled connection the restart will break
        postgres_server.restart()
        assert store.counts(code, 0, key) == {"A": 1}  # the dead connection is replaced, the call retried
        assert store.answer(code, students[1], 0, "B") is True
        assert store.counts(code, 0, key) == {"A": 1, "B": 1}


# --- the benchmark's smoke mode ---------------------------------------------------------------------

def test_poll_benchmark_smoke_measures_sqlite_and_postgresql(postgres_server, tmp_path, capsys):
    from benchmarks import poll

    out = tmp_path / "poll.json"
    rows = poll.main(["--smoke", "--postgres", postgres_server.new_database(), "--out", str(out)])
    assert {(r["backend"], r["writers"]) for r in rows} == {
        (backend, writers) for backend in ("sqlite", "postgresql") for writers in ("threads", "processes")}
    for r in rows:
        assert r["lost_answers"] == 0, r
        for key in ("answers_per_s", "burst_p50_ms", "answer_p50_ms", "answer_p95_ms",
                    "visible_p50_ms", "visible_p95_ms", "counts_p50_ms"):
            assert math.isfinite(r[key]) and r[key] > 0, (key, r)
        assert isinstance(r["met"], bool)
    table = capsys.readouterr().out
    assert "| sqlite | threads |" in table and "| postgresql | processes |" in table
    saved = json.loads(out.read_text())
    assert saved["mode"] == "smoke" and len(saved["rows"]) == 4


def test_a_server_opening_its_store_mid_class_does_not_wait_on_the_answers_in_flight(postgres_server):
    """A replica that starts while the class answers must not queue behind (or deadlock with) their writes.

    CREATE TABLE/INDEX IF NOT EXISTS locks its table even when everything exists, so the store
    reads the catalogue first and, finding the schema whole, takes no lock at all.
    """
    import psycopg
    url = postgres_server.new_database()
    with open_store(url) as first:
        session = first.create_session()
        student = first.join(session.code)
        with psycopg.connect(url) as writer:  # an answer being written, its transaction still open
            writer.execute("UPDATE poll_sessions SET step = step WHERE code = %s", (session.code,))
            writer.execute("UPDATE poll_students SET joined_at = joined_at WHERE student_id IS NOT NULL")
            opened = []
            opener = threading.Thread(target=lambda: opened.append(open_store(url)), daemon=True)
            opener.start()
            opener.join(30)
            blocked = opener.is_alive()
            writer.rollback()
        opener.join(30)
        assert not blocked, "opening a store waited for another server's open transaction"
        (second,) = opened
        second.answer(session.code, student, 0, "B")  # the new server serves the class
        second.close()
        assert first.counts(session.code, 0, session.teacher_key) == {"B": 1}


# --- the teacher's report ------------------------------------------------------------------------------

def run_a_class(teacher, students_server, clock: Clock) -> tuple[str, str]:
    """A class on `teacher` (the teacher's server) whose students answer through `students_server` (another
    server, or the same): 5 students, step 1 revealed with answers changed, step 2 opened twice and revealed,
    step 3 answered but not revealed; one student never answers. Returns (code, teacher key)."""
    new = teacher.create_session()
    code, key = new.code, new.teacher_key
    tokens = []
    for _ in range(5):
        clock.t += 1
        tokens.append(students_server.join(code))
    clock.t += 10
    teacher.set_step(code, key, 1)
    for token, answer, wait in zip(tokens, "ABBC", (4, 6, 8, 30)):
        clock.t += wait
        students_server.answer(code, token, 1, answer)
    clock.t += 5
    students_server.answer(code, tokens[3], 1, "B")  # a changed answer: counted once, timed from its change
    teacher.reveal(code, key, 1, "B", ["A", "B", "C", "D"])
    clock.t += 20
    teacher.set_step(code, key, 2)
    clock.t += 3
    students_server.answer(code, tokens[0], 2, "A")
    clock.t += 50
    teacher.set_step(code, key, 1)  # back to step 1 (revealed: it takes no answers), then step 2 again
    clock.t += 50
    teacher.set_step(code, key, 2)
    clock.t += 7
    students_server.answer(code, tokens[1], 2, "C")
    clock.t += 2
    students_server.answer(code, tokens[2], 2, "C")
    teacher.reveal(code, key, 2, "A", ["A", "B", "C"])
    clock.t += 30
    teacher.set_step(code, key, 3)
    clock.t += 12
    students_server.answer(code, tokens[0], 3, "D")
    return code, key


def direct_report(db_url: str, code: str) -> dict:
    """The report's numbers counted straight from the database's rows, without the store or class_report."""
    rows = raw_rows(db_url)
    answers = [(r[1], r[2], r[3], r[4]) for r in rows["poll_answers"] if r[0] == code]  # step, student, answer, at
    openings = sorted((r[1], r[2]) for r in rows["poll_openings"] if r[0] == code)
    reveals = {r[1]: (r[3], json.loads(r[4])) for r in rows["poll_reveals"] if r[0] == code}
    steps = sorted({s for s, _ in openings if s >= 1} | {a[0] for a in answers} | set(reveals))
    out = {"students": sum(1 for r in rows["poll_students"] if r[0] == code), "steps": {}}
    for step in steps:
        mine = [a for a in answers if a[0] == step]
        counts = Counter(a[2] for a in mine)
        right, choices = reveals.get(step, (None, []))
        waits = []
        for _, _, _, at in mine:
            before = [t for s, t in openings if s == step and t <= at]
            if before:
                waits.append(at - max(before))
        waits.sort()
        median = None if not waits else (waits[len(waits) // 2] if len(waits) % 2 else
                                         (waits[len(waits) // 2 - 1] + waits[len(waits) // 2]) / 2)
        wrong = sorted(((-n, choices.index(a) if a in choices else 99, a) for a, n in counts.items() if a != right))
        out["steps"][step] = {"answered": len(mine), "counts": {**{c: 0 for c in choices}, **counts},
                              "right": None if right is None else counts.get(right, 0),
                              "wrong": None if right is None or not wrong else (wrong[0][2], -wrong[0][0]),
                              "median": median}
    per_student = Counter(a[1] for a in answers)
    out["steady"] = sum(1 for n in per_student.values() if 2 * n >= len(steps))
    return out


def as_numbers(report) -> dict:
    return {"students": report.students, "steady": report.steady,
            "steps": {s.step: {"answered": s.answered, "counts": s.counts, "right": s.right, "wrong": s.common_wrong,
                               "median": s.median_s} for s in report.steps}}


def test_the_report_equals_a_direct_count_over_the_stores_rows(open_db, db_url):
    clock = Clock()
    store = open_db(clock=clock)
    code, key = run_a_class(store, store, clock)
    report = store.report(code, key)
    assert as_numbers(report) == direct_report(db_url, code)
    # and by hand: step 1, A B B B (the fourth changed C to B), right B; its times 4, 10, 18, 53 s after opening
    one, two, three = report.steps
    assert (one.step, one.answered, one.counts, one.right, one.share_right) == (1, 4, {"A": 1, "B": 3, "C": 0, "D": 0},
                                                                              3, 0.75)
    assert one.common_wrong == ("A", 1) and one.median_s == pytest.approx(14.0) and one.timed == 4
    # step 2: A at 3 s after its first opening; C, C at 7 and 9 s after it opened again; right A
    assert (two.counts, two.share_right, two.common_wrong, two.median_s) == ({"A": 1, "B": 0, "C": 2}, 1 / 3,
                                                                            ("C", 2), 7.0)
    # step 3: answered, not revealed: no right answer, said in words
    assert (three.answered, three.right, three.share_right, three.common_wrong) == (1, None, None, None)
    assert three.status() == "not revealed yet: no right answer recorded" and not three.revealed
    assert (report.students, report.steady, report.running) == (5, 3, True)  # 3 students answered 2 of 3 steps
    assert [s.step for s in report.hardest] == [2, 1]


def test_two_servers_on_one_database_give_the_same_report_and_files(db_url):
    """Behind the hall's proxy the teacher's server and the students' are two: the report is the same on both."""
    from ui.lessons.class_report import report_csv, report_html

    clock = Clock()
    with open_store(db_url, clock=clock) as teachers, open_store(db_url, clock=clock) as students:
        code, key = run_a_class(teachers, students, clock)
        here, there = teachers.report(code, key), students.report(code, key)
        assert here == there and as_numbers(here) == direct_report(db_url, code)
        titles = {1: "one", 2: "two", 3: "three"}
        assert report_csv(here, titles) == report_csv(there, titles)
        assert report_html(here, titles) == report_html(there, titles)


def test_the_report_needs_the_key_and_outlives_the_class_until_its_rows_go(open_db):
    clock = Clock()
    store = open_db(clock=clock)
    code, key = run_a_class(store, store, clock)
    other = store.create_session()
    for wrong in ("a guess", other.teacher_key, None):
        with pytest.raises(PollError, match=f"That teacher key does not open class {code}"):
            store.report(code, wrong)
    before = store.report(code, key)
    store.end_session(code, key)
    with pytest.raises(PollError, match="has ended"):
        store.teacher_info(code, key)
    after = store.report(code, key)  # the key of an ended class still reads its report ...
    assert after.steps == before.steps and after.ended_at == clock.t and not after.running
    clock.t += poll_store.PURGE_AFTER_S + poll_store.PURGE_EVERY_S
    store.create_session()
    with pytest.raises(PollError, match=f"No class with code {code}: a class's answers are deleted an hour"):
        store.report(code, key)  # ... until its rows are purged


def test_an_empty_class_no_answers_and_a_step_without_a_right_answer_are_said_in_words(open_db):
    from ui.lessons.class_report import report_csv, report_html, summary_lines

    store = open_db()
    new = store.create_session()
    code, key = new.code, new.teacher_key
    empty = store.report(code, key)
    assert empty.students == 0 and empty.steps == ()
    assert "No student has joined this class yet" in summary_lines(empty, {})[-1]
    assert report_csv(empty, {}).count("\n") == 1  # the header alone
    assert "The class has not been shown a step yet" in report_html(empty, {})

    store.set_step(code, key, 1)
    store.join(code)
    quiet = store.report(code, key)
    assert summary_lines(quiet, {})[-1] == "No student has answered yet."
    assert quiet.steps[0].status() == "no answers" and quiet.steps[0].median_s is None

    store.answer(code, store.join(code), 1, "B")
    unrevealed = store.report(code, key)
    assert "No step with answers has been revealed yet" in summary_lines(unrevealed, {})[-1]
    rows = report_csv(unrevealed, {1: "one"}).splitlines()
    assert rows[1].startswith("1,one,2,1,,,,,,") and rows[1].endswith("not revealed yet: no right answer recorded")
    store.reveal(code, key, 1, "B", ["A", "B"])
    assert "Every revealed step that was answered, the class got right." in summary_lines(store.report(code, key), {})


def test_a_reveal_records_its_right_answer_once_and_refuses_bad_ones(open_db):
    store = open_db()
    new = store.create_session()
    code, key = new.code, new.teacher_key
    for right, choices in (("", None), ("x" * 201, None), (3, None), ("A", "ABC"), ("A", ["A", ""]),
                           ("A", [str(i) for i in range(27)])):
        with pytest.raises(PollError):
            store.reveal(code, key, 0, right, choices)
    assert not store.is_revealed(code, 0)  # nothing was written
    store.reveal(code, key, 0, "B", ["A", "B"])
    store.reveal(code, key, 0, "A", ["A", "B", "C"])  # twice: the first reveal's stand
    (step,) = store.report(code, key).steps
    assert (step.right_answer, step.offered) == ("B", ("A", "B"))


def test_a_class_logs_at_most_max_openings(open_db, db_url, monkeypatch):
    monkeypatch.setattr(poll_store, "MAX_OPENINGS", 4)
    clock = Clock()
    store = open_db(clock=clock)
    new = store.create_session()
    for step in (1, 1, 2, 1, 2, 1, 2):  # the same step again is no opening
        clock.t += 1
        store.set_step(new.code, new.teacher_key, step)
    opened = [(r[1], r[2]) for r in raw_rows(db_url)["poll_openings"] if r[0] == new.code]
    assert sorted(opened) == [(0, Clock().t), (1, Clock().t + 1), (1, Clock().t + 4), (2, Clock().t + 3)]
    assert store.session_info(new.code).step == 2  # the class still moves


def test_the_store_keeps_nothing_that_names_a_student(open_db, db_url):
    """Students are anonymous: no name, address or user agent, in any table."""
    store = open_db()
    new = store.create_session()
    store.answer(new.code, store.join(new.code), 0, "A")
    columns = {table: set() for table in raw_rows(db_url)}
    if db_url.startswith("postgresql://"):
        import psycopg
        with psycopg.connect(db_url) as conn:
            for table, column in conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                                              "WHERE table_schema = current_schema()"):
                columns.setdefault(table, set()).add(column)
    else:
        import sqlite3
        conn = sqlite3.connect(db_url)
        for table in columns:
            columns[table] = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        conn.close()
    assert columns == {
        "poll_sessions": {"code", "created_at", "expires_at", "step", "teacher_key_sha256", "ended_at"},
        "poll_students": {"code", "student_id", "joined_at"},  # student_id: the SHA-256 of a secret token
        "poll_answers": {"code", "step", "student_id", "answer", "answered_at"},
        "poll_reveals": {"code", "step", "revealed_at", "right_answer", "choices"},
        "poll_openings": {"code", "step", "opened_at"},
    }


TODAYS_SCHEMA = (  # the tables as the store made them before it kept step openings and right answers
    "CREATE TABLE poll_sessions (code TEXT PRIMARY KEY, created_at DOUBLE PRECISION NOT NULL, "
    "expires_at DOUBLE PRECISION NOT NULL, step INTEGER NOT NULL DEFAULT 0, teacher_key_sha256 TEXT, "
    "ended_at DOUBLE PRECISION)",
    "CREATE TABLE poll_students (code TEXT NOT NULL REFERENCES poll_sessions (code), student_id TEXT NOT NULL, "
    "joined_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (code, student_id))",
    "CREATE TABLE poll_answers (code TEXT NOT NULL, step INTEGER NOT NULL, student_id TEXT NOT NULL, "
    "answer TEXT NOT NULL, answered_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (code, step, student_id), "
    "FOREIGN KEY (code, student_id) REFERENCES poll_students (code, student_id))",
    "CREATE TABLE poll_reveals (code TEXT NOT NULL REFERENCES poll_sessions (code), step INTEGER NOT NULL, "
    "revealed_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (code, step))",
    "CREATE INDEX poll_sessions_expiry ON poll_sessions (expires_at)",
    "CREATE INDEX poll_students_by_id ON poll_students (student_id)",
)


def test_a_database_of_the_schema_before_the_report_opens_and_keeps_its_classes_and_answers(db_url):
    key, tokens = "kq3JH0aV8Zt2-abcdefghi", ["tok-one-abcdefghijklmn", "tok-two-abcdefghijklmn"]
    ids = [rules.digest(t) for t in tokens]
    rows = [f"INSERT INTO poll_sessions VALUES ('TODAY', 1800000000, 1800010800, 2, "
            f"'{rules.digest(key)}', NULL)",
            f"INSERT INTO poll_students VALUES ('TODAY', '{ids[0]}', 1800000001)",
            f"INSERT INTO poll_students VALUES ('TODAY', '{ids[1]}', 1800000002)",
            f"INSERT INTO poll_answers VALUES ('TODAY', 1, '{ids[0]}', 'A', 1800000010)",
            f"INSERT INTO poll_answers VALUES ('TODAY', 1, '{ids[1]}', 'B', 1800000011)",
            f"INSERT INTO poll_answers VALUES ('TODAY', 2, '{ids[0]}', 'C', 1800000020)",
            "INSERT INTO poll_reveals VALUES ('TODAY', 1, 1800000015)"]
    if db_url.startswith("postgresql://"):
        import psycopg
        with psycopg.connect(db_url) as conn:
            for statement in TODAYS_SCHEMA + tuple(rows):
                conn.execute(statement)
    else:
        import sqlite3
        Path(db_url).parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(db_url) as conn:
            for statement in TODAYS_SCHEMA + tuple(rows):
                conn.execute(statement)
        conn.close()
    clock = Clock(1_800_000_100.0)
    with open_store(db_url, clock=clock) as store, open_store(db_url, clock=clock) as second:  # twice: no harm
        after = raw_rows(db_url)
        # every row kept as it was; the reveal gains empty right-answer columns, the openings table is new and empty
        assert sorted(after["poll_sessions"]) == [("TODAY", 1800000000, 1800010800, 2, rules.digest(key), None)]
        assert len(after["poll_students"]) == 2 and len(after["poll_answers"]) == 3
        assert after["poll_reveals"] == [("TODAY", 1, 1800000015, None, None)] and after["poll_openings"] == []
        info = store.teacher_info("TODAY", key)  # the class goes on: its key, its step, its students ...
        assert (info.step, info.students, info.answered, info.revealed) == (2, 2, 1, False)
        assert store.counts("TODAY", 1, key) == {"A": 1, "B": 1} and store.counts("TODAY", 1) == {"A": 1, "B": 1}
        assert store.student_answer("TODAY", tokens[0], 2) == "C"  # ... their answers, read back by their tokens
        old = store.report("TODAY", key)  # the report of what came before: counts, no times, no right answer
        assert [(s.step, s.answered, s.timed, s.right_answer) for s in old.steps] == [(1, 2, 0, None), (2, 1, 0, None)]
        assert old.steps[0].status() == "revealed before the store recorded right answers"
        second.answer("TODAY", tokens[1], 2, "B")  # and what comes after is recorded in full
        clock.t += 5
        store.set_step("TODAY", key, 3)
        clock.t += 4
        second.answer("TODAY", tokens[1], 3, "A")
        store.reveal("TODAY", key, 3, "A", ["A", "B"])
        three = store.report("TODAY", key).steps[-1]
        assert (three.step, three.share_right, three.median_s) == (3, 1.0, 4.0)
