"""What the class poll allows, checked in one place: the error that refuses, class codes, secrets, limits.

- **Codes**: `CODE_LENGTH` characters from `ALPHABET` (32 letters and digits, none of 0 O 1 I), unique
  among the stored classes. What a student types is forgiven case and spaces or dashes ("k7q-pm" finds
  K7QPM). A code is public: it is on the projector.
- **Secrets**: a teacher key and a student token are 128 random bits each (`new_secret`). The store keeps
  only their SHA-256 (`digest`), and a key offered later is hashed and compared in constant time
  (`check_key`): stolen rows give no one a key, and how long a refusal takes says nothing about the key.
- **Limits** (`Limits`): a database holds at most `max_polls` classes at once, a class takes at most
  `max_students` students, an answer is at most `max_answer_chars` characters; the environment variables
  beside each default change them (`polls.settings.open_store` reads them).
- **Errors**: a call the poll cannot honour raises `PollError`, a ValueError whose message is written for
  the person at the screen (it never repeats a key or a token).
"""
from __future__ import annotations

import hashlib
import hmac
import numbers
import re
import secrets
from dataclasses import dataclass

URL_ENV = "ATTENTION_LAB_DB"  # where the answers live (polls.settings.open_store)
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


class PollError(ValueError):
    """A call the poll cannot honour; the message is meant for the student or teacher at the screen."""


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


def shown_code(code: str) -> str:
    """A code as a message repeats it: whatever was typed, cut short past twice a code's length."""
    return code if len(code) <= 2 * CODE_LENGTH else code[:2 * CODE_LENGTH] + "…"


def check_key(code: str, stored: str | None, teacher_key: object) -> None:
    """A PollError unless `teacher_key` hashes to the class's stored key."""
    offered = digest(teacher_key) if isinstance(teacher_key, str) else ""
    # both sides hashed, then compared in constant time: how long a refusal takes says nothing about the key
    if stored is None or not hmac.compare_digest(stored, offered):
        raise PollError(f"That teacher key does not open class {code} — resume with the private link or "
                        "code you were given when the poll started.")


def check_step(step: object) -> int:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
        raise PollError(f"A step is a whole number, 0 or more, not {step!r}.")
    return int(step)
