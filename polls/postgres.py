"""The class poll in PostgreSQL: for a class spread over several app servers, which all share one database.

`postgresql://user:password@host:port/dbname` (or `postgres://`). Needs `psycopg` 3
(`pip install "psycopg[binary]"`), imported only then; without it, an ImportError that says what to install.
A connection the server dropped (a restart) is replaced and the call retried once. The password never
appears in a message (`location`).

Servers starting together create the tables once, and a server that starts while a class answers takes no
table lock when the tables are already there (it reads the catalogue first). Advisory locks keep the count
of classes true when several servers create classes at once, and let one server purge at a time.
"""
from __future__ import annotations

import re
import time
from typing import Any, Callable

from polls.rules import DEFAULT_TTL_HOURS, URL_ENV, Limits
from polls.schema import ADDED_COLUMNS, INDEXES, TABLES
from polls.store import BUSY_TIMEOUT_S, PollStore, Transaction

# PostgreSQL advisory locks (any numbers this database's other users do not take)
SCHEMA_LOCK, CREATION_LOCK, PURGE_LOCK = 7316, 7317, 7318


class PostgresStore(PollStore):
    """The poll in a PostgreSQL database that several app servers share (see the module's doc)."""

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

    def _create_schema(self, db: Transaction) -> None:
        # CREATE ... IF NOT EXISTS locks its table even when there is nothing to create, and a
        # server opening its store while others answer would deadlock with them: look first.
        if self._schema_complete(db):
            return
        db.one("SELECT pg_advisory_xact_lock(?)", SCHEMA_LOCK)  # servers starting together create the tables once
        if not self._schema_complete(db):  # look again: the server we waited for may have made them
            super()._create_schema(db)

    def _schema_complete(self, db: Transaction) -> bool:
        """Whether every table, added column and index exists, read from the catalogue (no table locks)."""
        if any(db.one("SELECT to_regclass(?)", name)[0] is None for name in TABLES + INDEXES):
            return False
        return all(db.one("SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                          "AND table_name = ? AND column_name = ?", table, column)
                   for table, column, _ in ADDED_COLUMNS)

    def _serialize_creation(self, db: Transaction) -> None:
        db.one("SELECT pg_advisory_xact_lock(?)", CREATION_LOCK)

    def _snapshot(self, db: Transaction) -> None:
        db.exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # the transaction's first statement

    def _purge(self, db: Transaction, ended_before: float) -> None:
        # one server purges at a time; the others skip this round rather than wait for the same rows
        if db.one("SELECT pg_try_advisory_xact_lock(?)", PURGE_LOCK)[0]:
            super()._purge(db, ended_before)
