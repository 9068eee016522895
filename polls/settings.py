"""Where a class poll's answers live, and how long and how much: `open_store` reads its settings.

    open_store(url=None, *, ttl_hours=None, max_polls=None, max_students=None, max_answer_chars=None,
               clock=time.time) -> PollStore

reads `url`, else `$ATTENTION_LAB_DB`, else takes the default:

- SQLite, by default: one file, `data/attention_lab.sqlite3` in the repository (`DEFAULT_PATH`); a path, or
  `sqlite:///relative/path` / `sqlite:////absolute/path`, picks another file (polls/sqlite.py). Right for one
  server, or several processes on one machine.
- PostgreSQL: `postgresql://user:password@host:port/dbname` (or `postgres://`), for a class spread over
  several app servers (polls/postgres.py).

A setting left None is read from its environment variable, else takes its default: how long a class code
lasts (`ttl_hours`, 3 hours, `$ATTENTION_LAB_POLL_HOURS`) and the limits (polls/rules.py, `Limits`):
`$ATTENTION_LAB_MAX_POLLS` (200 classes a database holds at once, a class counting from its start until its
rows are purged), `$ATTENTION_LAB_MAX_STUDENTS` (500 students a class), `$ATTENTION_LAB_MAX_ANSWER_CHARS`
(200 characters an answer). A database URL or setting the store cannot use raises a plain ValueError that
names it and what it expects.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from polls.postgres import PostgresStore
from polls.rules import (DEFAULT_MAX_POLLS, DEFAULT_MAX_STUDENTS, DEFAULT_TTL_HOURS, MAX_ANSWER_CHARS,
                         MAX_ANSWER_CHARS_ENV, MAX_POLLS_ENV, MAX_STUDENTS_ENV, TTL_ENV, URL_ENV, Limits)
from polls.sqlite import SQLiteStore
from polls.store import PollStore

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATH = ROOT / "data" / "attention_lab.sqlite3"


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
