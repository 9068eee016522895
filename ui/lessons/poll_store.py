"""The class poll's storage: sessions, anonymous students and their answers, in a real database.

A teacher starts a session and shows its class code; students join with that code and answer
the current step's question; the teacher's screen reads the distribution of answers, then
reveals the answer. This module only stores and checks; it never imports Streamlit, and the
page on top of it decides who may call what (the code is the only key: keep `set_step` and
`reveal` on the teacher's screen).

    from ui.lessons.poll_store import open_store, PollError

    store = open_store()                # $ATTENTION_LAB_DB, else data/attention_lab.sqlite3
    code = store.create_session()       # "K7QPM": 5 characters, no 0/O/1/I; the session starts at step 0
    store.set_step(code, 1)             # the question the class answers now
    sid = store.join(code)              # an anonymous random id: keep it in the student's browser session
    store.answer(code, sid, 1, "B")     # True: a first answer; False: it replaced this student's earlier one
    store.counts(code, 1)               # {"B": 1}
    store.reveal(code, 1)               # step 1 takes no more answers
    store.is_revealed(code, 1)          # True
    store.session_info(code)            # SessionInfo(code, step=1, students=1, answered=1, revealed=True, ...)

    try:
        store.join("ABCDE")
    except PollError as e:              # a ValueError whose message a student can read:
        st.error(str(e))                # "No class with code ABCDE — check the code on the teacher's screen."

One store per server process (`st.cache_resource`); it is thread-safe, keeps the connections
a burst of answers opened for reuse (up to 40, each closed after 2 minutes unused), and
several processes or servers may share one database.

The rules:

- **Codes**: `CODE_LENGTH` characters from `ALPHABET` (32 letters and digits, none of
  0 O 1 I), unique among the stored sessions. What a student types is forgiven case and
  spaces or dashes ("k7q-pm" finds K7QPM).
- **One answer per student per step.** A second answer to the same step *replaces* the first
  (a student may change their mind until the reveal): the count moves, it never doubles, and
  `answer` returns False. Only the session's current step takes answers, and not once it is
  revealed; a student who joins late answers the current step like everyone else.
- **Expiry**: a session takes joins, answers and reads for `ttl_hours` after it was created
  (3 by default; `open_store(ttl_hours=...)` or `$ATTENTION_LAB_POLL_HOURS`), then every call
  with its code raises PollError ("... has ended"). Its rows are deleted a day after that,
  the next time any session is created. Times are seconds since the epoch from the store's
  clock (`open_store(clock=...)`, time.time by default); `create_session(now=...)` starts a
  session at another time, for tests.
- **No personal data**: a student is a random id (`secrets.token_hex(8)`) and the time of
  joining; an answer is the step, the answer text (at most `MAX_ANSWER_CHARS`) and its time.
- **Errors**: a wrong or expired code, an id that never joined this class, a step that is not
  the current one or already revealed, an empty or too long answer: `PollError`, a
  ValueError whose message is written for the person at the screen. A database URL the
  store cannot use raises a plain ValueError; PostgreSQL without its driver, an ImportError
  that says what to install.

Where the answers live: `open_store(url=None, *, ttl_hours=None, clock=time.time) -> PollStore`
reads `url`, else `$ATTENTION_LAB_DB`, else takes the default:

- SQLite, by default: one file, `data/attention_lab.sqlite3` in the repository (`DEFAULT_PATH`);
  a path, or `sqlite:///relative/path` / `sqlite:////absolute/path`, picks another file. WAL
  journal, `synchronous=NORMAL` (a committed answer survives the app crashing or restarting;
  a power cut may lose the last few), writers wait up to 10 s for one another (`BEGIN
  IMMEDIATE`). Right for one server, or several processes on one machine (the file on a
  local disk: WAL needs shared memory, which network file systems do not give).
- PostgreSQL: `postgresql://user:password@host:port/dbname` (or `postgres://`), for a class
  spread over several app servers. Needs `psycopg` 3 (`pip install "psycopg[binary]"`),
  imported only then. The tables (`poll_sessions`, `poll_students`, `poll_answers`,
  `poll_reveals`) are created on first use. A connection the server dropped (a restart) is
  replaced and the call retried once.
"""
from __future__ import annotations

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
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PATH = ROOT / "data" / "attention_lab.sqlite3"
URL_ENV = "ATTENTION_LAB_DB"
TTL_ENV = "ATTENTION_LAB_POLL_HOURS"

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0 O 1 I: read off a projector, typed on a laptop
CODE_LENGTH = 5
DEFAULT_TTL_HOURS = 3.0
PURGE_AFTER_S = 24 * 3600.0  # an ended session's rows are kept this long, so its code says "ended", not "no class"
MAX_ANSWER_CHARS = 200
BUSY_TIMEOUT_S = 10.0
MAX_IDLE_CONNECTIONS = 40  # kept for reuse: a class answering at once needs about one each (see _acquire)
IDLE_TIMEOUT_S = 120.0  # an idle connection unused this long is closed


class PollError(ValueError):
    """A call the poll cannot honour; the message is meant for the student or teacher at the screen."""


@dataclass(frozen=True)
class SessionInfo:
    code: str
    step: int  # the step the class answers now
    students: int  # joined so far
    answered: int  # answers to the current step
    revealed: bool  # the current step's answer is revealed
    created_at: float  # seconds since the epoch
    expires_at: float


def new_code() -> str:
    """A random class code (not checked against the stored ones: `create_session` does that)."""
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(code: object) -> str:
    """What the student typed, as a stored code would read: upper case, without spaces or dashes."""
    if not isinstance(code, str):
        raise PollError("Type the class code shown on the teacher's screen.")
    code = re.sub(r"[\s\-]+", "", code).upper()
    if not code:
        raise PollError("Type the class code shown on the teacher's screen.")
    return code


def open_store(url: str | None = None, *, ttl_hours: float | None = None,
               clock: Callable[[], float] = time.time) -> PollStore:
    """The store for `url`, else $ATTENTION_LAB_DB, else the SQLite file DEFAULT_PATH (see the module's doc)."""
    url = url if url is not None else (os.environ.get(URL_ENV) or None)
    if ttl_hours is None:
        text = os.environ.get(TTL_ENV)
        try:
            ttl_hours = float(text) if text else DEFAULT_TTL_HOURS
        except ValueError:
            raise ValueError(f"{TTL_ENV}={text!r}: expected a number of hours, like 3") from None
    if not ttl_hours > 0:
        raise ValueError(f"ttl_hours={ttl_hours}: a class code must last a positive number of hours")
    if url is None:
        return SQLiteStore(DEFAULT_PATH, ttl_hours, clock)
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresStore(url, ttl_hours, clock)
    if url.startswith("sqlite:"):
        if not url.startswith("sqlite:///") or len(url) == len("sqlite:///"):
            raise ValueError(f"{url!r}: a SQLite URL reads sqlite:///relative/path or sqlite:////absolute/path")
        return SQLiteStore(Path(url[len("sqlite:///"):]), ttl_hours, clock)
    if "://" in url or url == ":memory:":
        raise ValueError(f"{URL_ENV}={url!r}: expected postgresql://user:password@host:port/dbname, "
                         "sqlite:///path/to/file.sqlite3 or a plain file path")
    return SQLiteStore(Path(url), ttl_hours, clock)


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
               step INTEGER NOT NULL DEFAULT 0)""",
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
               PRIMARY KEY (code, step))""",
        "CREATE INDEX IF NOT EXISTS poll_sessions_expiry ON poll_sessions (expires_at)",
    )

    def __init__(self, ttl_hours: float, clock: Callable[[], float]):
        self.ttl_s = float(ttl_hours) * 3600.0
        self.clock = clock
        self._idle: list[tuple[Any, float]] = []  # (connection, when it was released), oldest first
        self._pool_lock = threading.Lock()
        self._closed = False
        self._run(self._create_schema, write=True)

    # --- the interface ----------------------------------------------------------------------

    def create_session(self, now: float | None = None) -> str:
        """A new session at step 0; returns its class code. Also deletes sessions ended over a day ago."""
        created = self.clock() if now is None else float(now)

        def work(db: _Db) -> str | None:
            old = (created - PURGE_AFTER_S,)  # ended over a day before this one starts
            for table in ("poll_answers", "poll_students", "poll_reveals"):
                db.exec(f"DELETE FROM {table} WHERE code IN (SELECT code FROM poll_sessions WHERE expires_at < ?)",
                        *old)
            db.exec("DELETE FROM poll_sessions WHERE expires_at < ?", *old)
            for _ in range(20):  # 32**5 codes: a clash is rare, twenty in a row never happens
                code = new_code()
                if db.exec("INSERT INTO poll_sessions (code, created_at, expires_at, step) VALUES (?, ?, ?, 0) "
                           "ON CONFLICT (code) DO NOTHING", code, created, created + self.ttl_s):
                    return code
            return None

        code = self._run(work, write=True)
        if code is None:
            raise RuntimeError("20 random class codes in a row were taken: is new_code random?")
        return code

    def join(self, code: str) -> str:
        """A new anonymous student of the class; returns the student's id (pass it to `answer`)."""
        student_id = secrets.token_hex(8)

        def work(db: _Db) -> None:
            c, _step = self._live(db, code, self._lock_share)
            db.exec("INSERT INTO poll_students (code, student_id, joined_at) VALUES (?, ?, ?)",
                    c, student_id, self.clock())

        self._run(work, write=True)
        return student_id

    def set_step(self, code: str, step: int) -> None:
        """Move the class to `step` (any whole number >= 0, forwards or back); only it takes answers."""
        step = _check_step(step)

        def work(db: _Db) -> None:
            c, _ = self._live(db, code, self._lock_update)
            db.exec("UPDATE poll_sessions SET step = ? WHERE code = ?", step, c)

        self._run(work, write=True)

    def answer(self, code: str, student_id: str, step: int, answer: str) -> bool:
        """Record a student's answer to the current step: True if it is their first, False if it replaced one."""
        step = _check_step(step)
        if not isinstance(answer, str) or not answer.strip() or len(answer) > MAX_ANSWER_CHARS:
            raise PollError(f"An answer is some text, at most {MAX_ANSWER_CHARS} characters long.")
        if not isinstance(student_id, str):
            raise PollError("Join the class with the code on the teacher's screen first.")

        def work(db: _Db) -> bool:
            c, current = self._live(db, code, self._lock_share)  # a step change or reveal waits for this answer
            if db.one("SELECT 1 FROM poll_students WHERE code = ? AND student_id = ?", c, student_id) is None:
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

    def counts(self, code: str, step: int) -> dict[str, int]:
        """How many students gave each answer to `step`, by answer (sorted); {} before the first answer."""
        step = _check_step(step)

        def work(db: _Db) -> dict[str, int]:
            c, _ = self._live(db, code)
            rows = db.all("SELECT answer, COUNT(*) FROM poll_answers WHERE code = ? AND step = ? "
                          "GROUP BY answer ORDER BY answer", c, step)
            return {answer: int(n) for answer, n in rows}

        return self._run(work)

    def reveal(self, code: str, step: int) -> None:
        """Reveal `step`'s answer: from now on it takes no more answers. Revealing twice is harmless."""
        step = _check_step(step)

        def work(db: _Db) -> None:
            c, _ = self._live(db, code, self._lock_update)  # waits for answers in flight to this session
            db.exec("INSERT INTO poll_reveals (code, step, revealed_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (code, step) DO NOTHING", c, step, self.clock())

        self._run(work, write=True)

    def is_revealed(self, code: str, step: int) -> bool:
        step = _check_step(step)

        def work(db: _Db) -> bool:
            c, _ = self._live(db, code)
            return db.one("SELECT 1 FROM poll_reveals WHERE code = ? AND step = ?", c, step) is not None

        return self._run(work)

    def session_info(self, code: str) -> SessionInfo:
        """The session as the teacher's screen shows it (what a reloaded page reads back by its code)."""
        def work(db: _Db) -> SessionInfo:
            c, step, created, expires = self._session_row(db, code)
            students = db.one("SELECT COUNT(*) FROM poll_students WHERE code = ?", c)[0]
            answered = db.one("SELECT COUNT(*) FROM poll_answers WHERE code = ? AND step = ?", c, step)[0]
            revealed = db.one("SELECT 1 FROM poll_reveals WHERE code = ? AND step = ?", c, step) is not None
            return SessionInfo(c, step, int(students), int(answered), revealed, created, expires)

        return self._run(work)

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

    def _session_row(self, db: _Db, code: str, lock: str = "") -> tuple[str, int, float, float]:
        """(code, step, created_at, expires_at) of a live session, or a PollError for the student."""
        c = normalize_code(code)
        row = db.one(f"SELECT step, created_at, expires_at FROM poll_sessions WHERE code = ?{lock}", c)
        if row is None:
            shown = c if len(c) <= 2 * CODE_LENGTH else c[:2 * CODE_LENGTH] + "…"
            raise PollError(f"No class with code {shown} — check the code on the teacher's screen.")
        step, created, expires = int(row[0]), float(row[1]), float(row[2])
        if self.clock() >= expires:
            raise PollError(f"Class {c} has ended (a class code lasts {(expires - created) / 3600:g} hours) — "
                            "ask the teacher for a new code.")
        return c, step, created, expires

    def _live(self, db: _Db, code: str, lock: str = "") -> tuple[str, int]:
        c, step, _, _ = self._session_row(db, code, lock)
        return c, step

    # --- connections and transactions -------------------------------------------------------

    def _create_schema(self, db: _Db) -> None:
        for statement in self.SCHEMA:
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
        the way back at worst leaves an unused session code or student id.
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
                 clock: Callable[[], float] = time.time):
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
            conn.execute("PRAGMA journal_mode=WAL")  # kept in the file: readers never wait for the writer
        finally:
            conn.close()
        super().__init__(ttl_hours, clock)

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


class PostgresStore(PollStore):
    kind = "postgresql"
    _lock_share, _lock_update = " FOR SHARE", " FOR UPDATE"

    def __init__(self, url: str, ttl_hours: float = DEFAULT_TTL_HOURS, clock: Callable[[], float] = time.time):
        try:
            import psycopg
        except ImportError as e:
            raise ImportError(f"{URL_ENV} points at PostgreSQL, which needs the psycopg driver: "
                              "pip install \"psycopg[binary]\"") from e
        self._psycopg = psycopg
        self._retry_errors = (psycopg.OperationalError, psycopg.InterfaceError)
        self.url = url
        self.location = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)  # no password in messages
        super().__init__(ttl_hours, clock)

    def _connect(self) -> Any:
        extra = {} if "connect_timeout" in self.url else {"connect_timeout": int(BUSY_TIMEOUT_S)}
        return self._psycopg.connect(self.url, autocommit=False, application_name="attention-lab", **extra)

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def _create_schema(self, db: _Db) -> None:
        db.one("SELECT pg_advisory_xact_lock(7316)")  # servers starting together create the tables once
        super()._create_schema(db)


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
