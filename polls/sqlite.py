"""The class poll in one SQLite file: the default, for one server or several processes on one machine.

A path, or `sqlite:///relative/path` / `sqlite:////absolute/path` (polls.settings.open_store), picks the file;
by default `data/attention_lab.sqlite3` in the repository. A file that is not a SQLite database, or one holding
another program's tables and none of the poll's, is refused with a ValueError that says so, and nothing is
written into it.

WAL journal, `synchronous=NORMAL` (a committed answer survives the app crashing or restarting; a power cut
may lose the last few), writers wait up to 10 s for one another (`BEGIN IMMEDIATE`). The file belongs on a
local disk: WAL needs shared memory, which network file systems do not give.
"""
from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable

from polls.rules import DEFAULT_TTL_HOURS, URL_ENV, Limits
from polls.schema import TABLES
from polls.store import BUSY_TIMEOUT_S, PollStore


class SQLiteStore(PollStore):
    """The poll in one SQLite file (see the module's doc)."""

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
        if others and not set(TABLES) & set(others):
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
