"""The Lessons page's state: what the session keeps, what the URL carries in and out, and who this screen is.

URL keys (a link reproduces the view):

    step=3           the lesson step, 1 … len(STEPS)
    present=1        presenter mode: no sidebar, projector-size text and figures, a QR code to the step;
                     a poll's reveal and count at the top of the side column, no chart of the answers
                     before the reveal
    class=K7QPM      join class K7QPM as a student (the QR code's link carries it)
    resume=K7QPM.…   the teacher's private resume link: take class K7QPM's poll back after a reload.
                     Read once and removed from the address bar at once.

The URL never holds a secret for long: `resume` is read on the page's first run and removed, and a
student's token never goes into it (ui/lessons/class_actions.py keeps it in a cookie). ``teach=CODE``, a
link of older versions, opens no teacher controls.

Who this screen is (`role`): "teacher" while the session holds a class and its teacher key, "student"
while it is in a class, else "solo".
"""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import streamlit as st

from ui.lessons.steps import STEPS

N_STEPS = len(STEPS)

# session keys
STEP, PRESENT = "lesson_step", "lesson_present"
TEACH, TEACHER_KEY = "lesson_teach", "lesson_teacher_key"  # the class this screen teaches, and its secret key
CLASS, TOKENS = "lesson_class", "lesson_student_tokens"  # the class this screen is in; class code -> token
DONE = "lesson_done"  # slug -> the index the learner picked, or None when revealed without answering
REPORT = "lesson_report"  # (class code, teacher key) of an ended class whose report this screen still offers
NOTICES = "lesson_notices"  # (kind, message) shown once, at the top of the next run
BASE = "lesson_base"  # the address students open
URL_READ = "_lessons_url_read"

URL_KEYS = ("step", "present", "class")  # what write_url keeps in the address bar
URL_DROPPED = ("resume", "teach", "me")  # read once at most, then removed: never left in an address bar
ROLE_KEYS = ("resume", "class", "teach")  # what a URL may ask this screen to be, the first one given wins


def clamp(step: object) -> int:
    """A step number from a link, made valid: 1 … N_STEPS (1 for anything that is not a number)."""
    try:
        return min(max(int(step), 1), N_STEPS)
    except (TypeError, ValueError):
        return 1


def read_url() -> tuple[str, str] | None:
    """On the page's first run in a session: the step and presenter mode from the URL, and the role it asks
    for, as (key, value) of the first of ROLE_KEYS it holds; None on every later run, or when it asks none."""
    s = st.session_state
    s.setdefault(STEP, 1)
    s.setdefault(PRESENT, False)
    s.setdefault(DONE, {})
    s.setdefault(TOKENS, {})
    if s.get(URL_READ):
        return None
    s[URL_READ] = True
    params = st.query_params
    if "step" in params:
        s[STEP] = clamp(params["step"])
    s[PRESENT] = params.get("present", "") in ("1", "true", "yes")
    return next(((key, params[key]) for key in ROLE_KEYS if params.get(key)), None)


def write_url() -> None:
    """The view's state in the URL, only the keys that changed; never a key or token."""
    s = st.session_state
    wanted = {"step": str(s[STEP])}
    if s[PRESENT]:
        wanted["present"] = "1"
    if role() == "student":
        wanted["class"] = s[CLASS]
    for key in URL_KEYS + URL_DROPPED:
        if key in wanted:
            if st.query_params.get(key) != wanted[key]:
                st.query_params[key] = wanted[key]
        elif key in st.query_params:
            del st.query_params[key]


def role() -> str:
    s = st.session_state
    return "teacher" if s.get(TEACH) and s.get(TEACHER_KEY) else "student" if s.get(CLASS) else "solo"


def resume_code(code: str, teacher_key: str) -> str:
    """What the teacher keeps to resume the poll: the class code and its key (which never holds a dot)."""
    return f"{code}.{teacher_key}"


def parse_resume(text: str) -> tuple[str, str] | None:
    """(class code, teacher key) from a resume code or a pasted resume link; None if it is neither."""
    text = (text or "").strip()
    if "resume=" in text:
        text = (parse_qs(urlsplit(text).query).get("resume") or [""])[0]
    code, dot, key = text.partition(".")
    return (code, key) if dot and code and key else None
