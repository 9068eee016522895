"""The class poll's store: every operation once, on any DB-API connection; SQLite and PostgreSQL supply them.

A teacher starts a class and shows its public code; students join with that code and answer the current
step's question; the teacher's screen reads the distribution of answers, then reveals the answer. This
module stores and checks, and never imports Streamlit. What a person may do is decided here, by secrets,
not by the page: a public code identifies a class, only a secret authorises (polls/rules.py).

`PollStore` holds the operations and their rules; a database is a subclass that opens connections and
says how its SQL differs (polls/sqlite.py, polls/postgres.py): `_connect`, `_begin`, `_sql`, and the hooks
`_serialize_creation`, `_snapshot`, `_purge`, `_create_schema`. The tables and their migration are in
polls/schema.py.

- **The teacher key**: `create_session` returns, once, the class's key. Every teacher action takes the
  key and checks it here: `set_step`, `reveal`, `end_session`, `teacher_info`, `report`, and `counts` of
  a step not yet revealed. A wrong key raises PollError and changes nothing; so does any key once the
  class has ended (but its `report`, until its rows are purged).
- **Students**: `join` returns a student token, which is the student's only identity; the store keeps its
  SHA-256 (the `student_id` column), nothing else about the student but the time of joining. Whoever holds
  a token answers as that student, so it must never travel in a URL. `rejoin` says whether a token still
  belongs to a class.
- **One answer per student per step.** A second answer to the same step *replaces* the first (a student
  may change their mind until the reveal): the count moves, it never doubles, and `answer` returns False.
  `student_answer` gives a student back the answer the class counts for them (None if none): a student's
  page shows that one, never what it remembers sending, so a second tab or a reload cannot make it claim
  another. Only the class's current step takes answers, and not once it is revealed; a student who joins
  late answers the current step like everyone else. A token of another class, or one that never joined,
  is refused.
- **Counts**: with the teacher key, any step's counts at any time; without it, only a step already
  revealed (the class sees how it did once the teacher reveals).
- **The teacher's report** (`report`, polls/report.py): with the teacher key, while the class runs and
  after it ended or expired, until its rows are purged. It is computed from the rows alone, so every
  server sharing the database gives the same report. For it the store keeps times: each step's openings
  (`poll_openings`: a row each time `set_step` moves the class, at most `MAX_OPENINGS` a class, and step 0
  when the class is created), when each student joined and when each answer came (`answered_at`: the
  answer counted, a changed one from its change), and, at the reveal, the answer shown as right and the
  choices offered (`reveal(..., right_answer, choices)`: the page passes its step's).
- **Expiry**: a class takes joins, answers and reads for `ttl_hours` after it was created, or until the
  teacher's `end_session`; then every call with its code raises PollError ("... has ended"). Its rows --
  the class, its students, answers and reveals -- are deleted `PURGE_AFTER_S` (an hour) after it ended:
  until then its code says "ended", afterwards "no class". The purge runs at the start of any write, at
  most once a minute per store (one indexed DELETE per table). Times are seconds since the epoch from the
  store's clock (`open_store(clock=...)`, time.time by default); `create_session(now=...)` starts a class
  at another time, for tests.
- **Limits** (polls/rules.py, `Limits`): reaching one raises PollError naming it.

One store per server process; it is thread-safe, keeps the connections a burst of answers opened for
reuse (up to 40, each closed after 2 minutes unused), and several processes or servers may share one
database.
"""
from __future__ import annotations

import json
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from polls.report import ClassReport, summarize
from polls.rules import (MAX_POLLS_ENV, MAX_STUDENTS_ENV, Limits, PollError, check_key, check_step, digest,
                         new_code, new_secret, normalize_code, shown_code)
from polls.schema import Transaction, create_or_migrate

PURGE_AFTER_S = 3600.0  # an ended class's rows are kept this long, so its code says "ended", not "no class"
PURGE_EVERY_S = 60.0  # a store looks for rows to purge at most this often (by its clock), at the start of a write
BUSY_TIMEOUT_S = 10.0  # how long a call waits for the database (another writer, a connection) before it fails
MAX_IDLE_CONNECTIONS = 40  # kept for reuse: a class answering at once needs about one each (see _acquire)
IDLE_TIMEOUT_S = 120.0  # an idle connection unused this long is closed
MAX_OPENINGS = 2000  # step openings logged per class (the report's times): 23 steps, each opened 80 times over
MAX_CHOICES = 26  # answers a reveal records as the choices offered


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


class PollStore:
    """The poll's operations on a DB-API connection; SQLiteStore and PostgresStore supply the connections."""

    kind: str  # "sqlite" | "postgresql"
    location: str  # the file, or the URL without its password
    _lock_share = _lock_update = ""  # row-lock clauses, where the database has them
    _retry_errors: tuple[type[BaseException], ...] = ()  # a pooled connection that fails so is replaced once
    _writer: threading.Lock | None = None  # held around write transactions, where the database takes one at a time

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

        def work(db: Transaction) -> str | None:
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
        def work(db: Transaction) -> SessionInfo:
            return self._info(db, self._teacher(db, code, teacher_key))

        return self._run(work)

    def set_step(self, code: str, teacher_key: str, step: int) -> None:
        """Move the class to `step` (any whole number >= 0, forwards or back); only it takes answers."""
        step = check_step(step)
        self._purge_if_due()

        def work(db: Transaction) -> None:
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
        step = check_step(step)
        right_answer = self._check_answer(right_answer, "A right answer") if right_answer is not None else None
        if choices is not None:
            if isinstance(choices, str) or not isinstance(choices, Sequence) or len(choices) > MAX_CHOICES:
                raise PollError(f"The choices are a list of at most {MAX_CHOICES} answers.")
            choices = [self._check_answer(choice, "A choice") for choice in choices]
        self._purge_if_due()

        def work(db: Transaction) -> None:
            c = self._teacher(db, code, teacher_key, self._lock_update)[0]  # waits for answers in flight
            db.exec("INSERT INTO poll_reveals (code, step, revealed_at, right_answer, choices) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (code, step) DO NOTHING", c, step, self.clock(), right_answer,
                    None if choices is None else json.dumps(choices))

        self._run(work, write=True)

    def end_session(self, code: str, teacher_key: str) -> None:
        """End the class now: every later call with its code (the teacher's too) says it has ended."""
        self._purge_if_due()

        def work(db: Transaction) -> None:
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

        def work(db: Transaction) -> None:
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
        def work(db: Transaction) -> bool:
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
        step = check_step(step)

        def work(db: Transaction) -> str | None:
            c = self._session_row(db, code)[0]
            if not isinstance(student_token, str):
                return None
            row = db.one("SELECT answer FROM poll_answers WHERE code = ? AND step = ? AND student_id = ?",
                         c, step, digest(student_token))
            return None if row is None else row[0]

        return self._run(work)

    def answer(self, code: str, student_token: str, step: int, answer: str) -> bool:
        """Record a student's answer to the current step: True if it is their first, False if it replaced one."""
        step = check_step(step)
        answer = self._check_answer(answer)
        if not isinstance(student_token, str):
            raise PollError("Join the class with the code on the teacher's screen first.")
        student_id = digest(student_token)
        self._purge_if_due()

        def work(db: Transaction) -> bool:
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
        """The teacher's report of the class (polls/report.py), read from its rows in one snapshot.

        Only with the class's teacher key, while the class runs and after it ended or expired, until its rows
        are purged (PURGE_AFTER_S later): then "no class". The report names no student.
        """
        def work(db: Transaction) -> ClassReport:
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
        step = check_step(step)

        def work(db: Transaction) -> dict[str, int]:
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
        step = check_step(step)

        def work(db: Transaction) -> bool:
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

    def _session_row(self, db: Transaction, code: str, lock: str = "") -> tuple[str, int, float, float, str | None]:
        """(code, step, created_at, expires_at, teacher_key_sha256) of a live class, or a PollError for the screen."""
        c = normalize_code(code)
        row = db.one("SELECT step, created_at, expires_at, ended_at, teacher_key_sha256 "
                     f"FROM poll_sessions WHERE code = ?{lock}", c)
        if row is None:
            raise PollError(f"No class with code {shown_code(c)} — check the code on the teacher's screen.")
        step, created, expires, ended, key_sha256 = int(row[0]), float(row[1]), float(row[2]), row[3], row[4]
        if ended is not None:
            raise PollError(f"Class {c} has ended: the teacher ended the poll — ask the teacher for a new code.")
        if self.clock() >= expires:
            raise PollError(f"Class {c} has ended (a class code lasts {(expires - created) / 3600:g} hours) — "
                            "ask the teacher for a new code.")
        return c, step, created, expires, key_sha256

    def _teacher(self, db: Transaction, code: str, teacher_key: object, lock: str = "") -> tuple:
        """The live class's row, once `teacher_key` is found to be its key; else a PollError, and nothing changes."""
        row = self._session_row(db, code, lock)
        check_key(row[0], row[4], teacher_key)
        return row

    def _owned(self, db: Transaction, code: str, teacher_key: object) -> tuple[str, int, float, float, float | None]:
        """(code, step, created_at, expires_at, ended_at) of a class running, ended or expired but not yet purged,
        once `teacher_key` is found to be its key: its teacher may read its report until the purge."""
        c = normalize_code(code)
        row = db.one("SELECT step, created_at, expires_at, ended_at, teacher_key_sha256 FROM poll_sessions "
                     "WHERE code = ?", c)
        if row is None:
            raise PollError(f"No class with code {shown_code(c)}: a class's answers are deleted an hour after it ends, "
                            "and its report with them.")
        check_key(c, row[4], teacher_key)
        return c, int(row[0]), float(row[1]), float(row[2]), None if row[3] is None else float(row[3])

    def _info(self, db: Transaction, row: tuple) -> SessionInfo:
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

    def _purge(self, db: Transaction, ended_before: float) -> None:
        ended = "SELECT code FROM poll_sessions WHERE expires_at < ?"  # the expiry index finds them
        for table in ("poll_answers", "poll_reveals", "poll_openings", "poll_students"):  # what refers to a class
            db.exec(f"DELETE FROM {table} WHERE code IN ({ended})", ended_before)
        db.exec("DELETE FROM poll_sessions WHERE expires_at < ?", ended_before)

    def _serialize_creation(self, db: Transaction) -> None:
        """Hold off other servers' create_session until this one commits, so the count of classes stays true."""

    def _snapshot(self, db: Transaction) -> None:
        """Make the transaction's reads one snapshot (SQLite's are already, from the first read in WAL)."""

    # --- connections and transactions -------------------------------------------------------

    def _create_schema(self, db: Transaction) -> None:
        create_or_migrate(db)

    def _sql(self, sql: str) -> str:
        return sql

    def _connect(self) -> Any:
        raise NotImplementedError

    def _begin(self, conn: Any, write: bool) -> None:
        pass

    def _run(self, work: Callable[[Transaction], Any], write: bool = False) -> Any:
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
                    result = work(Transaction(self, conn))
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
