"""The poll's tables, and the migration that brings a database written by an older version up to them.

The same SQL on SQLite and PostgreSQL. A store creates the tables on first use (`create_or_migrate`); on a
database of an older version it creates the tables that are missing and adds the missing columns
(`ADDED_COLUMNS`), and rewrites nothing, so its classes and answers stay. What the old rows lack the store
reads as "not recorded": a class without a key no one can act as its teacher; a class from before the
report has no step openings (its answers are untimed) and its earlier reveals no right answer (the report
says so). All are purged when they end like any other.

The students' rows hold a hash of a secret token and a time of joining: no name, address or browser of
anyone.
"""
from __future__ import annotations

import re
from typing import Any

class Transaction:
    """One transaction's queries, written with ? placeholders whatever the database.

    `store` is the PollStore whose database the queries run on: its `_sql` turns the placeholders into its own.
    """

    def __init__(self, store: Any, conn: Any):
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



TABLES_SQL = (
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
INDEXES_SQL = (
    "CREATE INDEX IF NOT EXISTS poll_sessions_expiry ON poll_sessions (expires_at)",  # the purge
    "CREATE INDEX IF NOT EXISTS poll_students_by_id ON poll_students (student_id)",  # a token's class
)


def _created_name(sql: str) -> str:
    return re.search(r"IF NOT EXISTS (\w+)", sql).group(1)


TABLES = tuple(_created_name(sql) for sql in TABLES_SQL)
INDEXES = tuple(_created_name(sql) for sql in INDEXES_SQL)


def create_or_migrate(db: Transaction) -> None:
    """Create what is missing, tables, columns and indexes, in one transaction; rewrite nothing."""
    for statement in TABLES_SQL:
        db.exec(statement)
    for table, column, sql_type in ADDED_COLUMNS:
        if column not in db.columns(table):
            db.exec(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}")
    for statement in INDEXES_SQL:
        db.exec(statement)
