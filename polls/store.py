"""The class poll's storage: classes, anonymous students and their answers, in a real database.

A teacher starts a class and shows its public code; students join with that code and answer
the current step's question; the teacher's screen reads the distribution of answers, then
reveals the answer. This module only stores and checks, and never imports Streamlit. What a
person may do is decided here, by secrets, not by the page: a public code identifies a
class, only a secret authorises.

    from polls.store import open_store, PollError

    store = open_store()                   # $ATTENTION_LAB_DB, else data/attention_lab.sqlite3
    new = store.create_session()           # NewClass(code="K7QPM", teacher_key="kq3…"): step 0
    code, key = new.code, new.teacher_key  # the code goes on the projector; the key stays private
    store.set_step(code, key, 1)           # the question the class answers now
    token = store.join(code)               # a student's secret: keep it in that student's browser only
    store.answer(code, token, 1, "B")      # True: a first answer; False: it replaced this student's earlier one
    store.counts(code, 1, key)             # {"B": 1}: live counts need the teacher key
    store.reveal(code, key, 1, "B", ["A", "B", "C"])  # step 1 takes no more answers; B was right, of A, B, C ...
    store.counts(code, 1)                  # ... and anyone in the class may now see {"B": 1}
    store.report(code, key)                # ClassReport: per step and for the lesson (ui/lessons/class_report.py)
    store.rejoin(code, token)              # True: a reloaded student page is the same student
    store.student_answer(code, token, 1)   # "B": what the class counted for this student, whatever tab sent it
    store.session_info(code)               # SessionInfo(code, step=1, students=1, answered=1, revealed=True, ...)
    store.teacher_info(code, key)          # the same, once the key is checked (a reloaded teacher page)
    store.end_session(code, key)           # the class ends now

    try:
        store.join("ABCDE")
    except PollError as e:                 # a ValueError whose message a student can read:
        st.error(str(e))                   # "No class with code ABCDE — check the code on the teacher's screen."

One store per server process (`st.cache_resource`); it is thread-safe, keeps the connections
a burst of answers opened for reuse (up to 40, each closed after 2 minutes unused), and
several processes or servers may share one database.

The rules:

- **Codes**: `CODE_LENGTH` characters from `ALPHABET` (32 letters and digits, none of
  0 O 1 I), unique among the stored classes. What a student types is forgiven case and
  spaces or dashes ("k7q-pm" finds K7QPM). A code is public: it is on the projector.
- **The teacher key**: `create_session` returns, once, a key of 128 random bits
  (`secrets.token_urlsafe(16)`). Only its SHA-256 is stored, and a key offered later is hashed
  and compared with `hmac.compare_digest` (constant time). Every teacher action takes the key
  and checks it here: `set_step`, `reveal`, `end_session`, `teacher_info`, and `counts` of a
  step not yet revealed. A wrong key raises PollError and changes nothing; so does any key
  once the class has ended.
- **Students**: `join` returns a student token, 128 random bits, which is the student's only
  identity; the store keeps its SHA-256 (the `student_id` column), nothing else about the
  student but the time of joining. Whoever holds a token answers as that student, so it must
  never travel in a URL. `rejoin` says whether a token still belongs to a class.
- **One answer per student per step.** A second answer to the same step *replaces* the first
  (a student may change their mind until the reveal): the count moves, it never doubles, and
  `answer` returns False. `student_answer` gives a student back the answer the class counts
  for them (None if none): a student's page shows that one, never what it remembers sending,
  so a second tab or a reload cannot make it claim another. Only the class's current step
  takes answers, and not once it is revealed; a student who joins late answers the current
  step like everyone else. A token of another class, or one that never joined, is refused.
- **Counts**: with the teacher key, any step's counts at any time; without it, only a step
  already revealed (the class sees how it did once the teacher reveals).
- **The teacher's report** (`report`, ui/lessons/class_report.py): with the teacher key, while
  the class runs and after it ended or expired, until its rows are purged. It is computed from
  the rows alone, so every server sharing the database gives the same report. For it the store
  keeps times: each step's openings (`poll_openings`: a row each time `set_step` moves the class,
  at most `MAX_OPENINGS` a class, and step 0 when the class is created), when each student joined
  and when each answer came (`answered_at`: the answer counted, a changed one from its change),
  and, at the reveal, the answer shown as right and the choices offered (`reveal(...,
  right_answer, choices)`: the page passes its step's, computed from the step's live answer).
- **Expiry**: a class takes joins, answers and reads for `ttl_hours` after it was created
  (3 by default; `open_store(ttl_hours=...)` or `$ATTENTION_LAB_POLL_HOURS`), or until the
  teacher's `end_session`; then every call with its code raises PollError ("... has ended").
  Its rows -- the class, its students, answers and reveals -- are deleted `PURGE_AFTER_S`
  (an hour) after it ended: until then its code says "ended", afterwards "no class". The
  purge runs at the start of any write, at most once a minute per store (one indexed
  DELETE per table). Times are seconds since the epoch from the store's clock
  (`open_store(clock=...)`, time.time by default); `create_session(now=...)` starts a class
  at another time, for tests.
- **Limits** (`Limits`; `open_store(max_polls=..., max_students=..., max_answer_chars=...)` or
  the environment variables beside each): a database holds at most `max_polls` classes at
  once, 200 by default (`$ATTENTION_LAB_MAX_POLLS`), a class counting from its start until
  its rows are purged; a class takes at most `max_students` students, 500 by default
  (`$ATTENTION_LAB_MAX_STUDENTS`); an answer is at most `max_answer_chars` characters, 200
  by default (`$ATTENTION_LAB_MAX_ANSWER_CHARS`). Reaching one raises PollError naming it.
- **Errors**: a wrong or ended code, a wrong teacher key, a token of another class, a step
  that is not the current one or already revealed, an empty or too long answer, a limit
  reached: `PollError`, a ValueError whose message is written for the person at the screen
  (it never repeats a key or a token). A database URL or setting the store cannot use raises
  a plain ValueError; PostgreSQL without its driver, an ImportError that says what to install.

Where the answers live: `open_store(url=None, *, ttl_hours=None, max_polls=None,
max_students=None, max_answer_chars=None, clock=time.time) -> PollStore` reads `url`, else
`$ATTENTION_LAB_DB`, else takes the default:

- SQLite, by default: one file, `data/attention_lab.sqlite3` in the repository (`DEFAULT_PATH`);
  a path, or `sqlite:///relative/path` / `sqlite:////absolute/path`, picks another file. A file
  that is not a SQLite database, or one holding another program's tables and none of the poll's,
  is refused with a ValueError that says so, and nothing is written into it. WAL
  journal, `synchronous=NORMAL` (a committed answer survives the app crashing or restarting;
  a power cut may lose the last few), writers wait up to 10 s for one another (`BEGIN
  IMMEDIATE`). Right for one server, or several processes on one machine (the file on a
  local disk: WAL needs shared memory, which network file systems do not give).
- PostgreSQL: `postgresql://user:password@host:port/dbname` (or `postgres://`), for a class
  spread over several app servers. Needs `psycopg` 3 (`pip install "psycopg[binary]"`),
  imported only then. A connection the server dropped (a restart) is replaced and the call
  retried once.

On either, the tables (`poll_sessions`, `poll_students`, `poll_answers`, `poll_reveals`,
`poll_openings`) are created on first use. A database written by an older version is migrated in
place when a store opens it: missing tables are created and missing columns added
(`ADDED_COLUMNS`), and nothing is rewritten, so its classes and answers stay. Its old classes
without a key no one can act as their teacher; a class from before the report has no step openings
(its answers are untimed) and its earlier reveals no right answer (the report says so); all are
purged when they end like any other. The students' rows hold a hash of a secret token and a time
of joining: no name, address or browser of anyone.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import numbers
import os
import re
import secrets
import sqlite3
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ui.lessons.class_report import ClassReport, summarize

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATH = ROOT / "data" / "attention_lab.sqlite3"
URL_ENV = "ATTENTION_LAB_DB"
TTL_ENV = "ATTENTION_LAB_POLL_HOURS"
MAX_POLLS_ENV = "ATTENTION_LAB_MAX_POLLS"
MAX_STUDENTS_ENV = "ATTENTION_LAB_MAX_STUDENTS"
MAX_ANSWER_CHARS_ENV = "ATTENTION_LAB_MAX_ANSWER_CHARS"

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0 O 1 I: read off a projector, typed on a laptop
CODE_LENGTH = 5
SECRET_BYTES = 16  # teacher keys and student tokens: 128 random bits each
DEFAULT_TTL_HOURS = 3.0
DEFAULT_MAX_POLLS = 200
DEFAULT_MAX_STUDENTS = 500
MAX_ANSWER_CHARS = 200
PURGE_AFTER_S = 3600.0  # an ended class's rows are kept this long, so its code says "ended", not "no class"
PURGE_EVERY_S = 60.0  # a store looks for rows to purge at most this often (by its clock), at the start of a write
BUSY_TIMEOUT_S = 10.0
MAX_IDLE_CONNECTIONS = 40  # kept for reuse: a class answering at once needs about one each (see _acquire)
IDLE_TIMEOUT_S = 120.0  # an idle connection unused this long is closed
MAX_OPENINGS = 2000  # step openings logged per class (the report's times): 23 steps, each opened 80 times over
MAX_CHOICES = 26  # answers a reveal records as the choices offered


class PollError(ValueError):
    """A call the poll cannot honour; the message is meant for the student or teacher at the screen."""


@dataclass(frozen=True)
class NewClass:
    code: str  # public: on the projector, in the students' link and QR code
    teacher_key: str  # secret: shown once to the teacher, stored only as its SHA-256


@dataclass(frozen=True)
class SessionInfo:
    code: str
    step: int  # the step the class answers now
    students: int  # joined so far
    answered: int  # answers to the current step
    revealed: bool  # the current step's answer is revealed
    created_at: float  # seconds since the epoch
    expires_at: float  # when the class ends unless the teacher ends it sooner


@dataclass(frozen=True)
class Limits:
    """How much one database holds; reaching a limit raises a PollError that names it."""

    max_polls: int = DEFAULT_MAX_POLLS  # classes held at once, from their start until their rows are purged
    max_students: int = DEFAULT_MAX_STUDENTS  # students of one class
    max_answer_chars: int = MAX_ANSWER_CHARS  # characters of one answer

    def __post_init__(self):
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name}={value!r}: a limit is a whole number, 1 or more")


def new_code() -> str:
    """A random class code (not checked against the stored ones: `create_session` does that)."""
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def new_secret() -> str:
    """A teacher key or student token: SECRET_BYTES random bytes, URL-safe base64 (22 characters)."""
    return secrets.token_urlsafe(SECRET_BYTES)


def digest(secret: str) -> str:
    """What the store keeps of a secret: its SHA-256, in hex. Stolen rows give no one a key."""
    return hashlib.sha256(secret.encode()).hexdigest()


def normalize_code(code: object) -> str:
    """What the student typed, as a stored code would read: upper case, without spaces or dashes."""
    if not isinstance(code, str):
        raise PollError("Type the class code shown on the teacher's screen.")
    code = re.sub(r"[\s\-]+", "", code).upper()
    if not code:
        raise PollError("Type the class code shown on the teacher's screen.")
    return code


def open_store(url: str | None = None, *, ttl_hours: float | None = None, max_polls: int | None = None,
               max_students: int | None = None, max_answer_chars: int | None = None,
               clock: Callable[[], float] = time.time) -> PollStore:
    """The store for `url`, else $ATTENTION_LAB_DB, else the SQLite file DEFAULT_PATH (see the module's doc).

    A setting left None is read from its environment variable, else takes its default.
    """
    url = url if url is not None else (os.environ.get(URL_ENV) or None)
    ttl_hours = _setting(ttl_hours, TTL_ENV, DEFAULT_TTL_HOURS, float, "a number of hours, like 3")
    if not ttl_hours > 0:
        raise ValueError(f"ttl_hours={ttl_hours}: a class code must last a positive number of hours")
    limits = Limits(_setting(max_polls, MAX_POLLS_ENV, DEFAULT_MAX_POLLS, int, "a whole number, like 200"),
                    _setting(max_students, MAX_STUDENTS_ENV, DEFAULT_MAX_STUDENTS, int, "a whole number, like 500"),
                    _setting(max_answer_chars, MAX_ANSWER_CHARS_ENV, MAX_ANSWER_CHARS, int,
                             "a whole number, like 200"))
    if url is None:
        return SQLiteStore(DEFAULT_PATH, ttl_hours, clock, limits)
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresStore(url, ttl_hours, clock, limits)
    if url.startswith("sqlite:"):
        if not url.startswith("sqlite:///") or len(url) == len("sqlite:///"):
            raise ValueError(f"{url!r}: a SQLite URL reads sqlite:///relative/path or sqlite:////absolute/path")
        return SQLiteStore(Path(url[len("sqlite:///"):]), ttl_hours, clock, limits)
    if "://" in url or url == ":memory:":
        raise ValueError(f"{URL_ENV}={url!r}: expected postgresql://user:password@host:port/dbname, "
                         "sqlite:///path/to/file.sqlite3 or a plain file path")
    return SQLiteStore(Path(url), ttl_hours, clock, limits)


def _setting(given: Any, env: str, default: Any, parse: Callable[[str], Any], expected: str) -> Any:
    """`given`, else the environment variable `env` parsed, else `default`."""
    if given is not None:
        return given
    text = os.environ.get(env)
    if not text:
        return default
    try:
        return parse(text)
    except ValueError:
        raise ValueError(f"{env}={text!r}: expected {expected}") from None


class _Db:
    """One transaction's queries, written with ? placeholders whatever the database."""

    def __init__(self, store: PollStore, conn: Any):
        self.store, self.conn = store, conn

    def exec(self, sql: str, *params) -> int:
        cur = self.conn.execute(self.store._sql(sql), params)
        return cur.rowcount

    def one(self, sql: str, *params) -> tuple | None:
        return self.conn.execute(self.store._sql(sql), params).fetchone()

    def all(self, sql: str, *params) -> list[tuple]:
        return self.conn.execute(self.store._sql(sql), params).fetchall()

    def columns(self, table: str) -> set[str]:
        """The column names `table` has now (an empty query's description, the same on both databases)."""
        return {column[0].lower() for column in self.conn.execute(f"SELECT * FROM {table} WHERE 1 = 0").description}


class PollStore:
    """The poll's operations on a DB-API connection; SQLiteStore and PostgresStore supply the connections."""

    kind: str  # "sqlite" | "postgresql"
    location: str  # the file, or the URL without its password
    _lock_share = _lock_update = ""  # row-lock clauses, where the database has them
    _retry_errors: tuple[type[BaseException], ...] = ()  # a pooled connection that fails so is replaced once
    _writer: threading.Lock | None = None  # held around write transactions, where the database takes one at a time

    SCHEMA = (
        """CREATE TABLE IF NOT EXISTS poll_sessions (
               code TEXT PRIMARY KEY,
               created_at DOUBLE PRECISION NOT NULL,
               expires_at DOUBLE PRECISION NOT NULL,
               step INTEGER NOT NULL DEFAULT 0,
               teacher_key_sha256 TEXT,
               ended_at DOUBLE PRECISION)""",
        """CREATE TABLE IF NOT EXISTS poll_students (
               code TEXT NOT NULL REFERENCES poll_sessions (code),
               student_id TEXT NOT NULL,
               joined_at DOUBLE PRECISION NOT NULL,
               PRIMARY KEY (code, student_id))""",
        """CREATE TABLE IF NOT EXISTS poll_answers (
               code TEXT NOT NULL,
               step INTEGER NOT NULL,
               student_id TEXT NOT NULL,
               answer TEXT NOT NULL,
               answered_at DOUBLE PRECISION NOT NULL,
               PRIMARY KEY (code, step, student_id),
               FOREIGN KEY (code, student_id) REFERENCES poll_students (code, student_id))""",
        """CREATE TABLE IF NOT EXISTS poll_reveals (
               code TEXT NOT NULL REFERENCES poll_sessions (code),
               step INTEGER NOT NULL,
               revealed_at DOUBLE PRECISION NOT NULL,
               right_answer TEXT,
               choices TEXT,
               PRIMARY KEY (code, step))""",
        """CREATE TABLE IF NOT EXISTS poll_openings (
               code TEXT NOT NULL REFERENCES poll_sessions (code),
               step INTEGER NOT NULL,
               opened_at DOUBLE PRECISION NOT NULL,
               PRIMARY KEY (code, step, opened_at))""",
    )
    # columns a database made by an older version lacks: (table, column, its SQL type)
    ADDED_COLUMNS = (
        ("poll_sessions", "teacher_key_sha256", "TEXT"),  # NULL: a class no key opens
        ("poll_sessions", "ended_at", "DOUBLE PRECISION"),  # set when the teacher ends the class
        ("poll_reveals", "right_answer", "TEXT"),  # NULL: revealed before the store recorded right answers
        ("poll_reveals", "choices", "TEXT"),  # the choices offered, a JSON list; NULL likewise
    )
    INDEXES = (
        "CREATE INDEX IF NOT EXISTS poll_sessions_expiry ON poll_sessions (expires_at)",  # the purge
        "CREATE INDEX IF NOT EXISTS poll_students_by_id ON poll_students (student_id)",  # a token's class
    )

    def __init__(self, ttl_hours: float, clock: Callable[[], float], limits: Limits = Limits()):
        self.ttl_s = float(ttl_hours) * 3600.0
        self.clock = clock
        self.limits = limits
        self._idle: list[tuple[Any, float]] = []  # (connection, when it was released), oldest first
        self._pool_lock = threading.Lock()
        self._closed = False
        self._next_purge = float("-inf")  # by self.clock: the first write purges
        self._purge_lock = threading.Lock()
        self._run(self._create_schema, write=True)

    # --- the teacher ------------------------------------------------------------------------

    def create_session(self, now: float | None = None) -> NewClass:
        """A new class at step 0: its public code and its teacher key (the only time the key is given)."""
        self._purge_if_due()
        created = self.clock() if now is None else float(now)
        key = new_secret()

        def work(db: _Db) -> str | None:
            self._serialize_creation(db)
            held = db.one("SELECT COUNT(*) FROM poll_sessions WHERE expires_at >= ?", created - PURGE_AFTER_S)[0]
            if held >= self.limits.max_polls:
                raise PollError(f"This server holds {held} of {self.limits.max_polls} class polls, the most it "
                                f"keeps at once ({MAX_POLLS_ENV}); a poll's place frees up an hour after it ends "
                                "— end polls no longer in use, or try again later.")
            for _ in range(20):  # 32**5 codes: a clash is rare, twenty in a row never happens
                code = new_code()
                if db.exec("INSERT INTO poll_sessions (code, created_at, expires_at, step, teacher_key_sha256) "
                           "VALUES (?, ?, ?, 0, ?) ON CONFLICT (code) DO NOTHING",
                           code, created, created + self.ttl_s, digest(key)):
                    db.exec("INSERT INTO poll_openings (code, step, opened_at) VALUES (?, 0, ?)", code, created)
                    return code
            return None

        code = self._run(work, write=True)
        if code is None:
            raise RuntimeError("20 random class codes in a row were taken: is new_code random?")
        return NewClass(code, key)

    def teacher_info(self, code: str, teacher_key: str) -> SessionInfo:
        """The class as its teacher's screen shows it, once the key is checked (a reloaded teacher page resumes so)."""
        def work(db: _Db) -> SessionInfo:
            return self._info(db, self._teacher(db, code, teacher_key))

        return self._run(work)

    def set_step(self, code: str, teacher_key: str, step: int) -> None:
        """Move the class to `step` (any whole number >= 0, forwards or back); only it takes answers."""
        step = _check_step(step)
        self._purge_if_due()

        def work(db: _Db) -> None:
            c, current = self._teacher(db, code, teacher_key, self._lock_update)[:2]
            if step == current:
                return
            db.exec("UPDATE poll_sessions SET step = ? WHERE code = ?", step, c)
            # the opening, for the report's times; a class that moved MAX_OPENINGS times logs no more
            if db.one("SELECT COUNT(*) FROM poll_openings WHERE code = ?", c)[0] < MAX_OPENINGS:
                db.exec("INSERT INTO poll_openings (code, step, opened_at) VALUES (?, ?, ?) "
                        "ON CONFLICT (code, step, opened_at) DO NOTHING", c, step, self.clock())

        self._run(work, write=True)

    def reveal(self, code: str, teacher_key: str, step: int, right_answer: str | None = None,
               choices: Sequence[str] | None = None) -> None:
        """Reveal `step`'s answer: from now on it takes no more answers. Revealing twice is harmless.

        `right_answer`, the answer the class is shown as right, and `choices`, the answers it could pick, are
        kept for the teacher's report (its share right and each choice's count); the first reveal's stand.
        """
        step = _check_step(step)
        right_answer = self._check_answer(right_answer, "A right answer") if right_answer is not None else None
        if choices is not None:
            if isinstance(choices, str) or not isinstance(choices, Sequence) or len(choices) > MAX_CHOICES:
                raise PollError(f"The choices are a list of at most {MAX_CHOICES} answers.")
            choices = [self._check_answer(choice, "A choice") for choice in choices]
        self._purge_if_due()

        def work(db: _Db) -> None:
            c = self._teacher(db, code, teacher_key, self._lock_update)[0]  # waits for answers in flight
            db.exec("INSERT INTO poll_reveals (code, step, revealed_at, right_answer, choices) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (code, step) DO NOTHING", c, step, self.clock(), right_answer,
                    None if choices is None else json.dumps(choices))

        self._run(work, write=True)

    def end_session(self, code: str, teacher_key: str) -> None:
        """End the class now: every later call with its code (the teacher's too) says it has ended."""
        self._purge_if_due()

        def work(db: _Db) -> None:
            c = self._teacher(db, code, teacher_key, self._lock_update)[0]
            now = self.clock()
            # expires_at moves too: the purge and the limit on classes read only that indexed column
            db.exec("UPDATE poll_sessions SET ended_at = ?, expires_at = ? WHERE code = ?", now, now, c)

        self._run(work, write=True)

    # --- the students -------------------------------------------------------------------------

    def join(self, code: str) -> str:
        """A new anonymous student of the class; returns the student's secret token (pass it to `answer`)."""
        self._purge_if_due()
        token = new_secret()

        def work(db: _Db) -> None:
            c = self._session_row(db, code, self._lock_update)[0]  # joins one at a time: the limit holds
            students = db.one("SELECT COUNT(*) FROM poll_students WHERE code = ?", c)[0]
            if students >= self.limits.max_students:
                raise PollError(f"Class {c} is full: {students} of {self.limits.max_students} places are taken, "
                                f"the most one class takes on this server ({MAX_STUDENTS_ENV}) — tell the teacher.")
            db.exec("INSERT INTO poll_students (code, student_id, joined_at) VALUES (?, ?, ?)",
                    c, digest(token), self.clock())

        self._run(work, write=True)
        return token

    def rejoin(self, code: str, student_token: str) -> bool:
        """True if `student_token` is a student of this class (a reloaded page answers as that student again).

        False for a token of another class, one that never joined, or not a string; a wrong or
        ended code raises PollError.
        """
        def work(db: _Db) -> bool:
            c = self._session_row(db, code)[0]
            return isinstance(student_token, str) and db.one(
                "SELECT 1 FROM poll_students WHERE code = ? AND student_id = ?", c, digest(student_token)) is not None

        return self._run(work)

    def student_answer(self, code: str, student_token: str, step: int) -> str | None:
        """The answer the class counts for this student at `step`, or None if they gave none.

        Only the token's holder can ask, so it is theirs to see before the reveal. A token of
        another class, one that never joined, or not a string has no answer (None); a wrong or
        ended code raises PollError.
        """
        step = _check_step(step)

        def work(db: _Db) -> str | None:
            c = self._session_row(db, code)[0]
            if not isinstance(student_token, str):
                return None
            row = db.one("SELECT answer FROM poll_answers WHERE code = ? AND step = ? AND student_id = ?",
                         c, step, digest(student_token))
            return None if row is None else row[0]

        return self._run(work)

    def answer(self, code: str, student_token: str, step: int, answer: str) -> bool:
        """Record a student's answer to the current step: True if it is their first, False if it replaced one."""
        step = _check_step(step)
        answer = self._check_answer(answer)
        if not isinstance(student_token, str):
            raise PollError("Join the class with the code on the teacher's screen first.")
        student_id = digest(student_token)
        self._purge_if_due()

        def work(db: _Db) -> bool:
            c, current = self._session_row(db, code, self._lock_share)[:2]  # a step change or reveal waits
            if db.one("SELECT 1 FROM poll_students WHERE code = ? AND student_id = ?", c, student_id) is None:
                if db.one("SELECT 1 FROM poll_students WHERE student_id = ?", student_id) is not None:
                    raise PollError(f"This answer was sent with the identity of a student of another class, "
                                    f"not of class {c} — join class {c} with the code on the teacher's screen.")
                raise PollError(f"You have not joined class {c} yet — join with the code on the teacher's screen.")
            if step != current:
                raise PollError(f"Class {c} is on step {current}, not step {step} — "
                                "reload the page to see the current question.")
            if db.one("SELECT 1 FROM poll_reveals WHERE code = ? AND step = ?", c, step) is not None:
                raise PollError(f"The answer to step {step} has been revealed: it takes no more answers.")
            now = self.clock()
            if db.exec("INSERT INTO poll_answers (code, step, student_id, answer, answered_at) "
                       "VALUES (?, ?, ?, ?, ?) ON CONFLICT (code, step, student_id) DO NOTHING",
                       c, step, student_id, answer, now):
                return True
            db.exec("UPDATE poll_answers SET answer = ?, answered_at = ? "
                    "WHERE code = ? AND step = ? AND student_id = ?", answer, now, c, step, student_id)
            return False

        return self._run(work, write=True)

    def _check_answer(self, answer: object, what: str = "An answer") -> str:
        most = self.limits.max_answer_chars
        if not isinstance(answer, str) or not answer.strip() or len(answer) > most:
            raise PollError(f"{what} is some text, at most {most} characters long.")
        return answer

    # --- the teacher's report -------------------------------------------------------------------

    def report(self, code: str, teacher_key: str) -> ClassReport:
        """The teacher's report of the class (ui/lessons/class_report.py), read from its rows in one snapshot.

        Only with the class's teacher key, while the class runs and after it ended or expired, until its rows
        are purged (PURGE_AFTER_S later): then "no class". The report names no student.
        """
        def work(db: _Db) -> ClassReport:
            self._snapshot(db)
            c, step, created, expires, ended = self._owned(db, code, teacher_key)
            students = [row[0] for row in db.all("SELECT student_id FROM poll_students WHERE code = ?", c)]
            answers = db.all("SELECT step, student_id, answer, answered_at FROM poll_answers WHERE code = ?", c)
            openings = db.all("SELECT step, opened_at FROM poll_openings WHERE code = ?", c)
            reveals = [(s, right, None if choices is None else json.loads(choices)) for s, right, choices in
                       db.all("SELECT step, right_answer, choices FROM poll_reveals WHERE code = ?", c)]
            return summarize(code=c, created_at=created, expires_at=expires, ended_at=ended, read_at=self.clock(),
                             step=step, students=students, answers=answers, openings=openings, reveals=reveals)

        return self._run(work)

    # --- what anyone in the class may read ------------------------------------------------------

    def counts(self, code: str, step: int, teacher_key: str | None = None) -> dict[str, int]:
        """How many students gave each answer to `step`, by answer (sorted); {} before the first answer.

        With the teacher key, at any time; without it, only once `step` is revealed.
        """
        step = _check_step(step)

        def work(db: _Db) -> dict[str, int]:
            if teacher_key is not None:
                c = self._teacher(db, code, teacher_key)[0]
            else:
                c = self._session_row(db, code)[0]
                if db.one("SELECT 1 FROM poll_reveals WHERE code = ? AND step = ?", c, step) is None:
                    raise PollError(f"The class's answers to step {step} are shown once the teacher reveals them.")
            rows = db.all("SELECT answer, COUNT(*) FROM poll_answers WHERE code = ? AND step = ? "
                          "GROUP BY answer ORDER BY answer", c, step)
            return {answer: int(n) for answer, n in rows}

        return self._run(work)

    def is_revealed(self, code: str, step: int) -> bool:
        step = _check_step(step)

        def work(db: _Db) -> bool:
            c = self._session_row(db, code)[0]
            return db.one("SELECT 1 FROM poll_reveals WHERE code = ? AND step = ?", c, step) is not None

        return self._run(work)

    def session_info(self, code: str) -> SessionInfo:
        """The class as a student's screen follows it: its step, how many joined and answered, the reveal."""
        return self._run(lambda db: self._info(db, self._session_row(db, code)))

    def close(self) -> None:
        """Close the idle connections; the store takes no more calls."""
        with self._pool_lock:
            self._closed = True
        self._drop_idle()

    def __enter__(self) -> PollStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r}, ttl_hours={self.ttl_s / 3600:g})"

    # --- checks -----------------------------------------------------------------------------

    def _session_row(self, db: _Db, code: str, lock: str = "") -> tuple[str, int, float, float, str | None]:
        """(code, step, created_at, expires_at, teacher_key_sha256) of a live class, or a PollError for the screen."""
        c = normalize_code(code)
        row = db.one("SELECT step, created_at, expires_at, ended_at, teacher_key_sha256 "
                     f"FROM poll_sessions WHERE code = ?{lock}", c)
        if row is None:
            shown = c if len(c) <= 2 * CODE_LENGTH else c[:2 * CODE_LENGTH] + "…"
            raise PollError(f"No class with code {shown} — check the code on the teacher's screen.")
        step, created, expires, ended, key_sha256 = int(row[0]), float(row[1]), float(row[2]), row[3], row[4]
        if ended is not None:
            raise PollError(f"Class {c} has ended: the teacher ended the poll — ask the teacher for a new code.")
        if self.clock() >= expires:
            raise PollError(f"Class {c} has ended (a class code lasts {(expires - created) / 3600:g} hours) — "
                            "ask the teacher for a new code.")
        return c, step, created, expires, key_sha256

    def _teacher(self, db: _Db, code: str, teacher_key: object, lock: str = "") -> tuple:
        """The live class's row, once `teacher_key` is found to be its key; else a PollError, and nothing changes."""
        row = self._session_row(db, code, lock)
        _check_key(row[0], row[4], teacher_key)
        return row

    def _owned(self, db: _Db, code: str, teacher_key: object) -> tuple[str, int, float, float, float | None]:
        """(code, step, created_at, expires_at, ended_at) of a class running, ended or expired but not yet purged,
        once `teacher_key` is found to be its key: its teacher may read its report until the purge."""
        c = normalize_code(code)
        row = db.one("SELECT step, created_at, expires_at, ended_at, teacher_key_sha256 FROM poll_sessions "
                     "WHERE code = ?", c)
        if row is None:
            shown = c if len(c) <= 2 * CODE_LENGTH else c[:2 * CODE_LENGTH] + "…"
            raise PollError(f"No class with code {shown}: a class's answers are deleted an hour after it ends, "
                            "and its report with them.")
        _check_key(c, row[4], teacher_key)
        return c, int(row[0]), float(row[1]), float(row[2]), None if row[3] is None else float(row[3])

    def _info(self, db: _Db, row: tuple) -> SessionInfo:
        c, step, created, expires, _ = row
        students = db.one("SELECT COUNT(*) FROM poll_students WHERE code = ?", c)[0]
        answered = db.one("SELECT COUNT(*) FROM poll_answers WHERE code = ? AND step = ?", c, step)[0]
        revealed = db.one("SELECT 1 FROM poll_reveals WHERE code = ? AND step = ?", c, step) is not None
        return SessionInfo(c, step, int(students), int(answered), revealed, created, expires)

    # --- purging ended classes ----------------------------------------------------------------

    def _purge_if_due(self) -> None:
        """Delete the classes ended over PURGE_AFTER_S ago, with their rows; at most once per PURGE_EVERY_S."""
        now = self.clock()
        with self._purge_lock:
            if now < self._next_purge:
                return
            self._next_purge = now + PURGE_EVERY_S
        self._run(lambda db: self._purge(db, now - PURGE_AFTER_S), write=True)

    def _purge(self, db: _Db, ended_before: float) -> None:
        ended = "SELECT code FROM poll_sessions WHERE expires_at < ?"  # the expiry index finds them
        for table in ("poll_answers", "poll_reveals", "poll_openings", "poll_students"):  # what refers to a class
            db.exec(f"DELETE FROM {table} WHERE code IN ({ended})", ended_before)
        db.exec("DELETE FROM poll_sessions WHERE expires_at < ?", ended_before)

    def _serialize_creation(self, db: _Db) -> None:
        """Hold off other servers' create_session until this one commits, so the count of classes stays true."""

    def _snapshot(self, db: _Db) -> None:
        """Make the transaction's reads one snapshot (SQLite's are already, from the first read in WAL)."""

    # --- connections and transactions -------------------------------------------------------

    def _create_schema(self, db: _Db) -> None:
        for statement in self.SCHEMA:
            db.exec(statement)
        for table, column, sql_type in self.ADDED_COLUMNS:
            if column not in db.columns(table):
                db.exec(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}")
        for statement in self.INDEXES:
            db.exec(statement)

    def _sql(self, sql: str) -> str:
        return sql

    def _connect(self) -> Any:
        raise NotImplementedError

    def _begin(self, conn: Any, write: bool) -> None:
        pass

    def _run(self, work: Callable[[_Db], Any], write: bool = False) -> Any:
        """work(db) in one transaction, committed if it returns, rolled back if it raises.

        A pooled connection that fails with one of `_retry_errors` (the server restarted and
        dropped it) is thrown away with every idle one, and the work retried once on a new
        connection. Repeating a write is harmless: an answer is an upsert, and a commit lost on
        the way back at worst leaves an unused class or student row.
        """
        for attempt in range(2):
            conn, pooled = self._acquire()
            try:
                with self._writer if write and self._writer else nullcontext():
                    self._begin(conn, write)
                    result = work(_Db(self, conn))
                    conn.commit()
            except self._retry_errors:
                _close_quietly(conn)
                if pooled and attempt == 0:
                    self._drop_idle()  # they went down with this one: retry on a new connection
                    continue
                raise
            except BaseException:
                try:
                    conn.rollback()
                except Exception:
                    _close_quietly(conn)
                else:
                    self._release(conn)
                raise
            self._release(conn)
            return result

    def _acquire(self) -> tuple[Any, bool]:
        """The most recently used idle connection, else a new one; True if it was pooled.

        A class answering at once needs as many connections as answers in flight: opening
        them anew for every burst made PostgreSQL's 40-student burst 5 times slower
        (benchmarks/poll.py), so up to MAX_IDLE_CONNECTIONS are kept, each only while it
        is used at least every IDLE_TIMEOUT_S. A server keeps no more than it once needed
        at the same time.
        """
        with self._pool_lock:
            if self._closed:
                raise RuntimeError(f"{self!r} is closed")
            stale, self._idle = _split_stale(self._idle)
            conn = self._idle.pop()[0] if self._idle else None
        for old in stale:
            _close_quietly(old)
        return (conn, True) if conn is not None else (self._connect(), False)

    def _drop_idle(self) -> None:
        with self._pool_lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            _close_quietly(conn)

    def _release(self, conn: Any) -> None:
        with self._pool_lock:
            if not self._closed and len(self._idle) < MAX_IDLE_CONNECTIONS:
                self._idle.append((conn, time.monotonic()))
                return
        _close_quietly(conn)


class SQLiteStore(PollStore):
    kind = "sqlite"

    def __init__(self, path: Path | str, ttl_hours: float = DEFAULT_TTL_HOURS,
                 clock: Callable[[], float] = time.time, limits: Limits = Limits()):
        self.path = Path(path).expanduser().resolve()
        self.location = str(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # SQLite writes one transaction at a time. This process's threads queue for it on a lock, in
        # order; left to SQLite's busy handler they would poll, sleeping up to 100 ms between tries
        # (a burst of 40 threads took 3 times longer, p95 57-89 ms against 16-20; benchmarks/poll.py).
        # Other processes still wait through the busy handler.
        self._writer = threading.Lock()
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            self._check_ours(conn)
            conn.execute("PRAGMA journal_mode=WAL")  # kept in the file: readers never wait for the writer
        finally:
            conn.close()
        super().__init__(ttl_hours, clock, limits)

    def _check_ours(self, conn: sqlite3.Connection) -> None:
        """A ValueError, before anything is written, if the file is not a SQLite database or holds another
        program's tables and none of the poll's: the poll keeps a file of its own."""
        try:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{self.path} is not a SQLite database ({exc}): the class poll left it as it is; "
                             f"point {URL_ENV} at a file of the poll's own") from None
        others = sorted(t for t in tables if not t.startswith("sqlite_"))
        ours = {re.search(r"IF NOT EXISTS (\w+)", sql).group(1) for sql in self.SCHEMA}
        if others and not ours & set(others):
            shown = ", ".join(others[:5]) + (", …" if len(others) > 5 else "")
            raise ValueError(f"{self.path} holds another program's tables ({shown}) and none of the class poll's: "
                             f"the poll left it as it is; point {URL_ENV} at a file of the poll's own")

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are begun here (BEGIN IMMEDIATE for writes), not by the module;
        # check_same_thread=False: a pooled connection serves one thread at a time, not always the same one.
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _begin(self, conn: sqlite3.Connection, write: bool) -> None:
        # A write takes the lock up front: a read that later wants to write could not wait for it (SQLITE_BUSY).
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")


# PostgreSQL advisory locks (any numbers this database's other users do not take)
SCHEMA_LOCK, CREATION_LOCK, PURGE_LOCK = 7316, 7317, 7318


class PostgresStore(PollStore):
    kind = "postgresql"
    _lock_share, _lock_update = " FOR SHARE", " FOR UPDATE"

    def __init__(self, url: str, ttl_hours: float = DEFAULT_TTL_HOURS, clock: Callable[[], float] = time.time,
                 limits: Limits = Limits()):
        try:
            import psycopg
        except ImportError as e:
            raise ImportError(f"{URL_ENV} points at PostgreSQL, which needs the psycopg driver: "
                              "pip install \"psycopg[binary]\"") from e
        self._psycopg = psycopg
        self._retry_errors = (psycopg.OperationalError, psycopg.InterfaceError)
        self.url = url
        self.location = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)  # no password in messages
        super().__init__(ttl_hours, clock, limits)

    def _connect(self) -> Any:
        extra = {} if "connect_timeout" in self.url else {"connect_timeout": int(BUSY_TIMEOUT_S)}
        return self._psycopg.connect(self.url, autocommit=False, application_name="attention-lab", **extra)

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def _create_schema(self, db: _Db) -> None:
        # CREATE ... IF NOT EXISTS locks its table even when there is nothing to create, and a
        # server opening its store while others answer would deadlock with them: look first.
        if self._schema_complete(db):
            return
        db.one("SELECT pg_advisory_xact_lock(?)", SCHEMA_LOCK)  # servers starting together create the tables once
        if not self._schema_complete(db):  # look again: the server we waited for may have made them
            super()._create_schema(db)

    def _schema_complete(self, db: _Db) -> bool:
        """Whether every table, added column and index exists, read from the catalogue (no table locks)."""
        names = [re.search(r"IF NOT EXISTS (\w+)", sql).group(1) for sql in self.SCHEMA + self.INDEXES]
        if any(db.one("SELECT to_regclass(?)", name)[0] is None for name in names):
            return False
        return all(db.one("SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                          "AND table_name = ? AND column_name = ?", table, column)
                   for table, column, _ in self.ADDED_COLUMNS)

    def _serialize_creation(self, db: _Db) -> None:
        db.one("SELECT pg_advisory_xact_lock(?)", CREATION_LOCK)

    def _snapshot(self, db: _Db) -> None:
        db.exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # the transaction's first statement

    def _purge(self, db: _Db, ended_before: float) -> None:
        # one server purges at a time; the others skip this round rather than wait for the same rows
        if db.one("SELECT pg_try_advisory_xact_lock(?)", PURGE_LOCK)[0]:
            super()._purge(db, ended_before)


def _check_key(code: str, stored: str | None, teacher_key: object) -> None:
    """A PollError unless `teacher_key` hashes to the class's stored key."""
    offered = digest(teacher_key) if isinstance(teacher_key, str) else ""
    # both sides hashed, then compared in constant time: how long a refusal takes says nothing about the key
    if stored is None or not hmac.compare_digest(stored, offered):
        raise PollError(f"That teacher key does not open class {code} — resume with the private link or "
                        "code you were given when the poll started.")


def _check_step(step: object) -> int:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
        raise PollError(f"A step is a whole number, 0 or more, not {step!r}.")
    return int(step)


def _split_stale(idle: list[tuple[Any, float]]) -> tuple[list[Any], list[tuple[Any, float]]]:
    """(connections idle past IDLE_TIMEOUT_S, the rest): the list is oldest first."""
    cutoff = time.monotonic() - IDLE_TIMEOUT_S
    n = next((i for i, (_, released) in enumerate(idle) if released >= cutoff), len(idle))
    return [conn for conn, _ in idle[:n]], idle[n:]


def _close_quietly(conn: Any) -> None:
    try:
        conn.close()
    except Exception:
        pass
