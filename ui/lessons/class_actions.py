"""What the Lessons page's buttons and links do to the class poll: start, resume and end a poll, move the class,
reveal; join and leave a class, send an answer. Each changes this session's role (ui/lessons/url_state.py) and
calls the poll through ui/lessons/poll_client.py; what it has to say is shown once, at the top of the next run
(`notify`).

Who may do what is decided by secrets the store checks (polls/), never by what a URL or a text box says:

- The class code is public: on the projector, in the students' link and QR code.
- The teacher key exists only in the teacher's `st.session_state` and goes with every teacher action. The
  teacher's URL holds only the step. To pick the poll up after a reload, the teacher's own screen offers a
  private resume link and code (``CODE.KEY``, ui/lessons/share.py); the page also takes a pasted resume code.
- A student is a secret token, in `st.session_state` and in a cookie of this browser for that class
  (``attention_lab_student_<CODE>``, set by a small script on the page, read back through
  `st.context.cookies`): a reloaded page, or the class link opened again in the same browser, answers as the
  same student. The token never goes into a URL, so a copied link joins as a new student and cannot touch
  anyone else's answer. Leaving and joining again in the same session is the same student too. Clearing
  cookies or a private window makes a new student: without logins, nothing can tell them apart.
"""
from __future__ import annotations

import inspect
import json
import time

import streamlit as st
import streamlit.components.v1 as components

from polls import PollError, normalize_code
from ui.lessons.poll_client import ClassPoll, StudentPoll, TeacherPoll, start_class
from ui.lessons.steps import letter
from ui.lessons.url_state import (CLASS, N_STEPS, NOTICES, PRESENT, REPORT, STEP, TEACH, TEACHER_KEY, TOKENS, clamp,
                                  parse_resume, role)

STUDENT_COOKIE = "attention_lab_student_"  # + the class code: that class's student token in this browser
HTML_RUNS_SCRIPTS = "unsafe_allow_javascript" in inspect.signature(st.html).parameters  # newer Streamlit versions


def notify(kind: str, message: str) -> None:
    st.session_state.setdefault(NOTICES, []).append((kind, message))


def show_notices() -> None:
    for kind, message in st.session_state.pop(NOTICES, []):
        {"error": st.error, "success": st.success, "info": st.info, "warning": st.warning}[kind](message)


def teacher_poll() -> TeacherPoll:
    """The class this screen teaches (role() == "teacher")."""
    s = st.session_state
    return TeacherPoll(s[TEACH], s[TEACHER_KEY])


def student_poll() -> StudentPoll:
    """This screen's student in its class (role() == "student")."""
    s = st.session_state
    return StudentPoll(s[CLASS], s[TOKENS][s[CLASS]])


def _follow_class_step(step: int) -> None:
    """This screen shows the class's step, when the class is on a lesson step (not step 0, before the first)."""
    if 1 <= step <= N_STEPS:
        st.session_state[STEP] = step


# --- the teacher ------------------------------------------------------------------------------------


def go_to(step: int) -> None:
    """Show `step`; a teacher's class moves with the screen."""
    s = st.session_state
    s[STEP] = clamp(step)
    if role() == "teacher":
        _, error = teacher_poll().set_step(s[STEP])
        if error:
            notify("error", error)


def start_poll() -> None:
    s = st.session_state
    teacher, error = start_class()
    if error:
        notify("error", error)
        return
    _, error = teacher.set_step(s[STEP])
    if error:
        notify("error", error)
        return
    s.pop(CLASS, None)
    s[TEACH], s[TEACHER_KEY] = teacher.code, teacher.key
    where = ("leave presenter mode on your own screen to see it" if s[PRESENT] else
             "under *Private: resume this poll after a reload*")
    notify("success", f"Class poll {teacher.code} started: students open the link or type the code. Your private "
                      f"resume link brings the poll back after a reload — {where}.")


def resume(text: str) -> None:
    """Take a class poll back with its resume code: the store checks the key; the class's step is kept."""
    s = st.session_state
    parsed = parse_resume(text)
    if parsed is None:
        notify("error", "That is not a resume code: it reads like K7QPM.kq3…, the private code shown when the "
                        "poll started.")
        return
    teacher = TeacherPoll(*parsed)
    info, error = teacher.info()
    if error:
        notify("error", f"The class poll cannot be resumed: {error}")
        report, unread = teacher.report()  # an ended class: its key still opens its report
        if not unread:
            s[REPORT] = (report.code, teacher.key)
            notify("info", f"The report of class {report.code} stays on this screen until its answers are "
                           "deleted, an hour after the class ended.")
        return
    s.pop(CLASS, None)
    s[TEACH], s[TEACHER_KEY] = info.code, teacher.key
    _follow_class_step(info.step)
    notify("info", f"Class poll {info.code} resumed: {info.students} students have joined.")


def resume_typed() -> None:
    s = st.session_state
    text, s["lesson_resume_code"] = s.get("lesson_resume_code", ""), ""  # the key does not stay in the box
    resume(text)


def refuse_teach_link(_code: str) -> None:
    """``teach=CODE``, a link of older versions: a public code opens no teacher controls."""
    notify("info", "A class poll's teacher controls open only with the private resume link or code given when the "
                   "poll started; this page opens without them.")


def reveal_class(code: str, step: int, right: str, choices: list[str]) -> None:
    """Reveal the step to the class; the store keeps the answer shown as right, and the choices, for the report."""
    _, error = TeacherPoll(code, st.session_state[TEACHER_KEY]).reveal(step, right, choices)
    if error:
        notify("error", error)


def end_poll() -> None:
    s = st.session_state
    teacher = TeacherPoll(s.pop(TEACH, None), s.pop(TEACHER_KEY, None))
    _, error = teacher.end()
    if error:
        notify("warning", f"Class poll {teacher.code} closed on this screen. {error}")
    else:
        s[REPORT] = (teacher.code, teacher.key)  # the key of an ended class opens nothing but its report
        notify("success", f"Class poll {teacher.code} has ended: students' pages say so, and its answers are "
                          "deleted an hour from now. Its report stays on this screen until then: download it before.")


def close_report() -> None:
    st.session_state.pop(REPORT, None)


# --- a student --------------------------------------------------------------------------------------


def browser_token(code: str) -> str | None:
    """The token this browser keeps for class `code` (a reloaded page), if any."""
    return st.context.cookies.get(STUDENT_COOKIE + code)


def join(raw_code: str) -> None:
    """Join a class and follow its step: as the student this session or browser already is, else a new one."""
    s = st.session_state
    try:
        code = normalize_code(raw_code)
    except PollError as exc:
        notify("error", str(exc))
        return
    info, error = ClassPoll(code).info()
    if error:
        notify("error", error)
        return
    student = None
    token = s[TOKENS].get(info.code) or browser_token(info.code)
    if token is not None:
        held, error = StudentPoll(info.code, token).rejoin()
        if error:
            notify("error", error)
            return
        student = StudentPoll(info.code, token) if held else None
    if student is None:
        student, error = ClassPoll(info.code).join()
        if error:
            notify("error", error)
            return
        notify("success", f"You joined class {info.code}. Answer the question on your screen; the teacher "
                          "reveals the answer.")
    else:
        notify("success", f"You are back in class {info.code}: your answers still count, once each.")
    for key in (TEACH, TEACHER_KEY):
        s.pop(key, None)
    s[TOKENS][info.code], s[CLASS] = student.token, info.code
    _follow_class_step(info.step)


def join_typed() -> None:
    join(st.session_state.get("lesson_join_code", ""))


def leave() -> None:
    st.session_state.pop(CLASS, None)  # the token stays: joining again is the same student


def send(code: str, step: int, slug: str) -> None:
    """Send the student's pick for `step` (a radio keyed by the step's slug) to class `code`."""
    s = st.session_state
    pick = s.get(f"lesson_class_pick_{slug}")
    if pick is None:
        notify("warning", "Pick an answer first.")
        return
    first, error = StudentPoll(code, s[TOKENS].get(code)).answer(step, letter(pick))
    if error:
        notify("error", error)
        return
    notify("success", f"Answer {letter(pick)} sent." if first else
           f"Answer changed to {letter(pick)}: only your latest answer counts.")


def remember_in_browser(student: StudentPoll, expires_at: float) -> None:
    """Keep the student's token in a cookie of this browser, so a reload answers as the same student.

    A script on the page's own document sets it (Streamlit reads cookies, it does not set them);
    it lives until the class code expires, goes only to this server, and never into a URL.
    """
    if browser_token(student.code) == student.token:
        return
    cookie = (f"{STUDENT_COOKIE}{student.code}={student.token}; path=/; "
              f"max-age={max(int(expires_at - time.time()), 0)}; SameSite=Strict")
    # window.parent: the page itself, whether the script runs in it (st.html) or in an iframe (components.html)
    script = f"""<script>
window.parent.document.cookie = {json.dumps(cookie)} + (window.parent.location.protocol === "https:" ? "; Secure" : "");
</script>"""
    if HTML_RUNS_SCRIPTS:
        st.html(script, unsafe_allow_javascript=True)
    else:
        components.html(script, height=0)


# what a URL may ask this screen to be (url_state.read_url), on the page's first run
FROM_URL = {"resume": resume, "class": join, "teach": refuse_teach_link}
