"""The Lessons page: its state in the URL, the question before the figure, presenter mode and the class poll.

URL keys (a link reproduces the view):

    step=3           the lesson step, 1 … len(STEPS)
    present=1        presenter mode: no sidebar, projector-size text and figures, a QR code to the step;
                     a poll's reveal and count at the top of the side column, no chart of the answers
                     before the reveal
    class=K7QPM      join class K7QPM as a student (the QR code's link carries it)
    resume=K7QPM.…   the teacher's private resume link: take class K7QPM's poll back after a reload.
                     Read once and removed from the address bar at once.

Three roles share the page. Alone, a learner picks an answer and checks it. A teacher starts a
class poll: the class follows the teacher's step, the teacher's screen shows the distribution of
answers as they come in, then reveals. A student answers the class's current step and sees the
reveal, and how the class did, when the teacher makes it; a student's page shows the lesson alone,
without the app's model settings.

Keys: ← and → step through the lesson, ↓ reveals the answer (the teacher's "Reveal the answer", a
learner's "Reveal without answering").

The teacher's report: on the teacher's own screen (never in presenter mode), *Report of class K7QPM*
reads the class's report from the store (ui/lessons/class_report.py) on every run: per step the answers,
each choice's count, the share right and the most common wrong answer, the median time to answer; for
the lesson who joined, who answered at least half the steps, the hardest steps; a CSV and a printable
HTML summary to download. The reveal records the answer shown as right and the choices offered. When
the teacher ends the poll, the report stays on that screen until the class's rows are deleted (an hour
later); the private resume link of an ended class brings back its report, and nothing else.

Homework: outside a class and presenter mode, *Download this lesson for homework* writes the whole
lesson as one HTML file (ui/lessons/homework.py), built when pressed; a step that cannot be computed
says why in the file, and the rest exports.

Who may do what is decided by secrets the store checks (ui/lessons/poll_store.py), never by
what a URL or a text box says:

- The class code is public: on the projector, in the students' link and QR code.
- The teacher key exists only in the teacher's `st.session_state` and is passed to the store
  with every teacher action (step, reveal, live counts, end). The teacher's URL holds only the
  step. To pick the poll up after a reload, the teacher's own screen offers a private resume
  link and code (``CODE.KEY``), in a collapsed expander that presenter mode never draws; the
  page also takes a pasted resume code. ``teach=CODE``, a link of older versions, opens no
  teacher controls.
- A student is a secret token, in `st.session_state` and in a cookie of this browser for that
  class (``attention_lab_student_<CODE>``, set by a small script on the page, read back through
  `st.context.cookies`): a reloaded page, or the class link opened again in the same browser,
  answers as the same student. The token never goes into a URL, so a copied link joins as a new
  student and cannot touch anyone else's answer. Leaving and joining again in the same session
  is the same student too. Clearing cookies or a private window makes a new student: without
  logins, nothing can tell them apart.
- A student's own answer is read from the store by the token, on every run: the page shows the
  answer the class counts, even when another tab of the same browser changed it or the page was
  reloaded, never one the session remembers sending.

Every poll call goes through ``_poll``: a wrong or ended code, a refused key or token, an answer
to a closed step, a limit reached or an unreachable database becomes a message on the page, and
the lesson goes on.
"""
from __future__ import annotations

import inspect
import io
import json
import os
import time
from datetime import datetime, timezone
from functools import partial
from urllib.parse import parse_qs, urlencode, urlsplit

import streamlit as st
import streamlit.components.v1 as components
from streamlit.delta_generator import DeltaGenerator

import plotly.graph_objects as go

from ui.figures import lesson as lesson_figures
from ui.lessons.class_report import ClassReport, report_csv, report_html, summary_lines, table_rows
from ui.lessons.homework import homework_html
from ui.lessons.steps import STEPS, Live, Step, letter, lesson_model
from polls import URL_ENV, PollError, normalize_code, open_store
from ui.app.state import sidebar

N_STEPS = len(STEPS)
POLL_EVERY_S = 2.0  # the teacher's counts and the students' "has the teacher moved on?" refresh this often
DEFAULT_BASE = "http://localhost:8501"
MAX_BASE_CHARS = 200  # the address students open: a QR code of a longer link is too dense to scan anyway
PAGE = "lessons"
STUDENT_COOKIE = "attention_lab_student_"  # + the class code: that class's student token in this browser

# session keys
STEP, PRESENT = "lesson_step", "lesson_present"
TEACH, TEACHER_KEY = "lesson_teach", "lesson_teacher_key"  # the class this screen teaches, and its secret key
CLASS, TOKENS = "lesson_class", "lesson_student_tokens"  # the class this screen is in; class code -> token
DONE = "lesson_done"  # slug -> the index the learner picked, or None when revealed without answering
REPORT = "lesson_report"  # (class code, teacher key) of an ended class whose report this screen still offers
NOTICES = "lesson_notices"  # (kind, message) shown once, at the top of the next run
BASE = "lesson_base"
URL_READ = "_lessons_url_read"
URL_KEYS = ("step", "present", "class")  # what write_url keeps in the address bar
URL_DROPPED = ("resume", "teach", "me")  # read once at most, then removed: never left in an address bar

NO_SIDEBAR_CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"],
[data-testid="stSidebarNav"] { display: none !important; }
</style>
"""
PRESENTER_CSS = """
<style>
[data-testid="stMainBlockContainer"] { max-width: 100%; padding: 1.5rem 2.5rem 1rem 2.5rem; }
[data-testid="stMain"] h1 { font-size: 3.2rem !important; }
[data-testid="stMain"] h4 { font-size: 1.9rem !important; }
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li { font-size: 1.55rem; line-height: 1.45; }
[data-testid="stMain"] [data-testid="stCaptionContainer"] p { font-size: 1.2rem; }
[data-testid="stMain"] [data-testid="stRadio"] label p { font-size: 1.5rem; }
[data-testid="stMain"] [data-testid="stCode"] code { font-size: 1.3rem; }
[data-testid="stMain"] button p { font-size: 1.3rem; }
</style>
"""


# --- the poll store ----------------------------------------------------------------------------


@st.cache_resource(show_spinner=False)
def _open_store(url: str | None):
    return open_store(url)


def _poll(method: str, *args):
    """(result, None), or (None, a message for the screen) when the poll cannot honour the call."""
    try:
        return getattr(_open_store(os.environ.get(URL_ENV) or None), method)(*args), None
    except PollError as exc:
        return None, str(exc)
    except Exception as exc:  # an unusable database URL, a missing driver, a database stopped or gone away
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return None, (f"The class poll is unavailable: its database cannot be used ({reason}). "
                      "The lesson goes on without it.")


def _notify(kind: str, message: str) -> None:
    st.session_state.setdefault(NOTICES, []).append((kind, message))


def _show_notices() -> None:
    for kind, message in st.session_state.pop(NOTICES, []):
        {"error": st.error, "success": st.success, "info": st.info, "warning": st.warning}[kind](message)


# --- state from and to the URL --------------------------------------------------------------------


def _clamp(step: object) -> int:
    try:
        return min(max(int(step), 1), N_STEPS)
    except (TypeError, ValueError):
        return 1


def read_url() -> None:
    """On the page's first run in a session: the step, presenter mode and the poll role from the URL."""
    s = st.session_state
    s.setdefault(STEP, 1)
    s.setdefault(PRESENT, False)
    s.setdefault(DONE, {})
    s.setdefault(TOKENS, {})
    if s.get(URL_READ):
        return
    s[URL_READ] = True
    params = st.query_params
    if "step" in params:
        s[STEP] = _clamp(params["step"])
    s[PRESENT] = params.get("present", "") in ("1", "true", "yes")
    if params.get("resume"):
        _resume(params["resume"])
    elif params.get("class"):
        _join(params["class"])
    elif params.get("teach"):
        _notify("info", "A class poll's teacher controls open only with the private resume link or code given "
                        "when the poll started; this page opens without them.")


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


# --- the teacher's key ------------------------------------------------------------------------------


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


def _resume(text: str) -> None:
    """Take a class poll back with its resume code: the store checks the key; the class's step is kept."""
    s = st.session_state
    parsed = parse_resume(text)
    if parsed is None:
        _notify("error", "That is not a resume code: it reads like K7QPM.kq3…, the private code shown when the "
                         "poll started.")
        return
    code, key = parsed
    info, error = _poll("teacher_info", code, key)
    if error:
        _notify("error", f"The class poll cannot be resumed: {error}")
        report, unread = _poll("report", code, key)  # an ended class: its key still opens its report
        if not unread:
            s[REPORT] = (report.code, key)
            _notify("info", f"The report of class {report.code} stays on this screen until its answers are "
                            "deleted, an hour after the class ended.")
        return
    s.pop(CLASS, None)
    s[TEACH], s[TEACHER_KEY] = info.code, key
    if 1 <= info.step <= N_STEPS:
        s[STEP] = info.step
    _notify("info", f"Class poll {info.code} resumed: {info.students} students have joined.")


def _resume_typed() -> None:
    s = st.session_state
    text, s["lesson_resume_code"] = s.get("lesson_resume_code", ""), ""  # the key does not stay in the box
    _resume(text)


# --- a student's token --------------------------------------------------------------------------------


def _browser_token(code: str) -> str | None:
    """The token this browser keeps for class `code` (a reloaded page), if any."""
    return st.context.cookies.get(STUDENT_COOKIE + code)


def _join(raw_code: str) -> None:
    """Join a class and follow its step: as the student this session or browser already is, else a new one."""
    s = st.session_state
    try:
        code = normalize_code(raw_code)
    except PollError as exc:
        _notify("error", str(exc))
        return
    info, error = _poll("session_info", code)
    if error:
        _notify("error", error)
        return
    token = s[TOKENS].get(info.code) or _browser_token(info.code)
    if token is not None:
        held, error = _poll("rejoin", info.code, token)
        if error:
            _notify("error", error)
            return
        token = token if held else None
    if token is None:
        token, error = _poll("join", info.code)
        if error:
            _notify("error", error)
            return
        _notify("success", f"You joined class {info.code}. Answer the question on your screen; the teacher "
                           "reveals the answer.")
    else:
        _notify("success", f"You are back in class {info.code}: your answers still count, once each.")
    for key in (TEACH, TEACHER_KEY):
        s.pop(key, None)
    s[TOKENS][info.code], s[CLASS] = token, info.code
    if 1 <= info.step <= N_STEPS:
        s[STEP] = info.step


HTML_RUNS_SCRIPTS = "unsafe_allow_javascript" in inspect.signature(st.html).parameters  # newer Streamlit versions


def _remember_in_browser(code: str, token: str, expires_at: float) -> None:
    """Keep the student's token in a cookie of this browser, so a reload answers as the same student.

    A script on the page's own document sets it (Streamlit reads cookies, it does not set them);
    it lives until the class code expires, goes only to this server, and never into a URL.
    """
    if _browser_token(code) == token:
        return
    cookie = (f"{STUDENT_COOKIE}{code}={token}; path=/; max-age={max(int(expires_at - time.time()), 0)}; "
              "SameSite=Strict")
    # window.parent: the page itself, whether the script runs in it (st.html) or in an iframe (components.html)
    script = f"""<script>
window.parent.document.cookie = {json.dumps(cookie)} + (window.parent.location.protocol === "https:" ? "; Secure" : "");
</script>"""
    if HTML_RUNS_SCRIPTS:
        st.html(script, unsafe_allow_javascript=True)
    else:
        components.html(script, height=0)


# --- callbacks ----------------------------------------------------------------------------------


def go_to(step: int) -> None:
    s = st.session_state
    s[STEP] = _clamp(step)
    if role() == "teacher":
        _, error = _poll("set_step", s[TEACH], s[TEACHER_KEY], s[STEP])
        if error:
            _notify("error", error)


def _jumped() -> None:
    go_to(st.session_state["lesson_jump"])


def _toggled() -> None:
    st.session_state[PRESENT] = st.session_state["lesson_present_toggle"]


def _check(slug: str, reveal_only: bool = False) -> None:
    st.session_state[DONE][slug] = None if reveal_only else st.session_state.get(f"lesson_pick_{slug}")


def _ask_again(slug: str) -> None:
    st.session_state[DONE].pop(slug, None)
    st.session_state.pop(f"lesson_pick_{slug}", None)


def _start_poll() -> None:
    s = st.session_state
    new, error = _poll("create_session")
    if error:
        _notify("error", error)
        return
    _, error = _poll("set_step", new.code, new.teacher_key, s[STEP])
    if error:
        _notify("error", error)
        return
    s.pop(CLASS, None)
    s[TEACH], s[TEACHER_KEY] = new.code, new.teacher_key
    where = ("leave presenter mode on your own screen to see it" if s[PRESENT] else
             "under *Private: resume this poll after a reload*")
    _notify("success", f"Class poll {new.code} started: students open the link or type the code. Your private "
                       f"resume link brings the poll back after a reload — {where}.")


def _end_poll() -> None:
    s = st.session_state
    code, key = s.pop(TEACH, None), s.pop(TEACHER_KEY, None)
    _, error = _poll("end_session", code, key)
    if error:
        _notify("warning", f"Class poll {code} closed on this screen. {error}")
    else:
        s[REPORT] = (code, key)  # the key of an ended class opens nothing but its report
        _notify("success", f"Class poll {code} has ended: students' pages say so, and its answers are deleted "
                           "an hour from now. Its report stays on this screen until then: download it before.")


def _close_report() -> None:
    st.session_state.pop(REPORT, None)


def _join_typed() -> None:
    _join(st.session_state.get("lesson_join_code", ""))


def _leave() -> None:
    st.session_state.pop(CLASS, None)  # the token stays: joining again is the same student


def _reveal_class(code: str, step: int, right: str, choices: list[str]) -> None:
    """Reveal the step to the class; the store keeps the answer shown as right, and the choices, for the report."""
    _, error = _poll("reveal", code, st.session_state[TEACHER_KEY], step, right, choices)
    if error:
        _notify("error", error)


def _send(code: str, step: int, slug: str) -> None:
    s = st.session_state
    pick = s.get(f"lesson_class_pick_{slug}")
    if pick is None:
        _notify("warning", "Pick an answer first.")
        return
    first, error = _poll("answer", code, s[TOKENS].get(code), step, letter(pick))
    if error:
        _notify("error", error)
        return
    _notify("success", f"Answer {letter(pick)} sent." if first else
            f"Answer changed to {letter(pick)}: only your latest answer counts.")


# --- the link and its QR code --------------------------------------------------------------------


def detected_base() -> str:
    """Where this app is served, as the browser sees it (st.context.url without this page's path)."""
    url = getattr(st.context, "url", None)
    if url:
        parts = urlsplit(url)
        path = parts.path.rstrip("/")
        if path.endswith("/" + PAGE) or path == PAGE:
            path = path[: -len(PAGE)].rstrip("/")
        return f"{parts.scheme}://{parts.netloc}{path}"
    host = st.context.headers.get("Host") if st.context.headers else None
    return f"http://{host}" if host else DEFAULT_BASE


def base_problem(base: str) -> str | None:
    """Why `base` cannot be the address students open (said on the page), or None if it can."""
    rule = (f"The address students open must be an http:// or https:// address with a host, at most "
            f"{MAX_BASE_CHARS} characters, like http://192.168.1.20:8501")
    if len(base) > MAX_BASE_CHARS:
        return f"{rule}; this one has {len(base):,} characters."
    if any(c.isspace() or not c.isprintable() for c in base):
        return f"{rule}, without spaces."
    try:
        parts = urlsplit(base)
        parts.port  # noqa: B018 - raises on a port that is not a number from 0 to 65535
    except ValueError as exc:
        return f"{rule}; this one does not read as an address ({exc})."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{rule}."
    if parts.query or parts.fragment:
        return f"{rule}, without ? or #."
    return None


def _base() -> str | None:
    """The address students open, once it passes base_problem; None until it does."""
    base = (st.session_state.get(BASE) or DEFAULT_BASE).strip().rstrip("/")
    return None if base_problem(base) else base


def share_link(step: int, code: str | None = None) -> str | None:
    base = _base()
    query = {"step": step, **({"class": code} if code else {})}
    return f"{base}/{PAGE}?{urlencode(query)}" if base else None


@st.cache_data(max_entries=64, show_spinner=False)
def qr_png(text: str) -> bytes | None:
    """A QR code of `text` as PNG bytes (segno, pure Python); None when segno is not installed."""
    try:
        import segno
    except ImportError:
        return None
    buffer = io.BytesIO()
    segno.make(text, error="m").save(buffer, kind="png", scale=8, border=2)
    return buffer.getvalue()


def share_panel(step: int, code: str | None) -> None:
    s = st.session_state
    if not s.get(BASE):
        s[BASE] = detected_base()
    link = share_link(step, code)
    if link is None:
        st.error(f"{base_problem(s[BASE].strip().rstrip('/'))} Correct it under *Address students open*; until "
                 "then there is no link or QR code.")
    else:
        png = qr_png(link)
        if png is None:
            st.caption("Install `segno` for a QR code.")
        else:
            st.image(png, width=240)
        st.markdown(f"**[{link.split('://', 1)[-1]}]({link})**")
    with st.popover("Address students open"):
        st.text_input("Base address of this app", key=BASE,
                      help="What students type to reach this server, e.g. http://192.168.1.20:8501 (at most "
                           f"{MAX_BASE_CHARS} characters). A server started with --server.address 0.0.0.0 is "
                           "reachable from the class's laptops; localhost is not.")


def resume_panel() -> None:
    """The teacher's private resume link and code: drawn on the teacher's own screen only, never when presenting."""
    s = st.session_state
    if s[PRESENT]:
        st.caption("Your private resume link is hidden in presenter mode.")
        return
    code = resume_code(s[TEACH], s[TEACHER_KEY])
    with st.expander("Private: resume this poll after a reload"):
        st.caption("Whoever has this link or code runs the poll: keep it off the projector and out of the "
                   "class chat. Open the link, or paste the code under *Resume a class poll*.")
        base = _base()
        if base:
            st.code(f"{base}/{PAGE}?{urlencode({'resume': code})}", language=None)
        st.code(code, language=None)


# --- the teacher's report ---------------------------------------------------------------------------


def step_titles() -> dict[int, str]:
    """Step number -> title, as the report names the steps."""
    return {number: step.title for number, step in enumerate(STEPS, start=1)}


def report_panel(code: str, key: str, ended: bool = False) -> None:
    """The class's report on the teacher's own screen, with its CSV and printable HTML; never projected.

    Read from the store on every run of the page (each click, or *Refresh the report*), so it is the same on
    every server sharing the database; the files hold what the screen shows.
    """
    if st.session_state[PRESENT]:
        st.caption("The class report is on your own screen: it is never drawn in presenter mode.")
        return
    with st.expander(f"Report of class {code}" + (" (ended)" if ended else ""), expanded=ended):
        report, error = _poll("report", code, key)
        if error:
            st.error(error)
        else:
            _report(report)
        if ended:
            st.button("Close the report", key="lesson_report_close", on_click=_close_report)
        else:
            st.button("Refresh the report", key="lesson_report_refresh")


def _report(report: ClassReport) -> None:
    titles = step_titles()
    for line in summary_lines(report, titles):
        st.markdown(line)
    if report.steps:
        st.dataframe(table_rows(report, titles), hide_index=True)
    name = f"attention-lab-class-{report.code}-report"
    col1, col2 = st.columns(2)
    col1.download_button("Download the report (CSV)", data=partial(report_csv, report, titles),
                         file_name=f"{name}.csv", mime="text/csv", key="lesson_report_csv", on_click="ignore",
                         help="One row per step: answers, each choice's count, the right answer and its share, the "
                              "most common wrong answer, the median time to answer.")
    col2.download_button("Download a printable summary (HTML)", data=partial(report_html, report, titles),
                         file_name=f"{name}.html", mime="text/html", key="lesson_report_html", on_click="ignore",
                         help="One page with the charts, to print or keep: it needs no server and no network.")
    read = datetime.fromtimestamp(report.read_at, timezone.utc).strftime("%H:%M:%S UTC")
    st.caption(f"As of {read}. Students are anonymous: the class poll keeps no name, address or browser. Times run "
               "from the step opening to the answer counted; the right answer is the one the reveal showed.")


# --- homework -----------------------------------------------------------------------------------------


def _not_computed(step: Step, exc: Exception) -> Live:
    """What the homework file says of a step whose figure could not be computed, so the rest still exports."""
    reason = f"{type(exc).__name__}: {exc}"[:300]
    figure = go.Figure()
    figure.add_annotation(text="This step's figure could not be computed.", showarrow=False, x=0.5, y=0.5,
                          xref="paper", yref="paper")
    figure.update_xaxes(visible=False)
    figure.update_yaxes(visible=False)
    return Live(question=step.question, choices=["(not computed in this file)"], answer=0,
                why=f"This step could not be computed when the file was written ({reason}). Open it in the app.",
                figure=figure, source="no answer in this file")


def homework_file() -> str:
    """The whole lesson as one HTML file (ui/lessons/homework.py); built when the button is pressed."""
    lives = []
    for step in STEPS:
        try:
            lives.append(step.build())
        except Exception as exc:  # one step that fails says why; the rest exports
            lives.append(_not_computed(step, exc))
    return homework_html(STEPS, lives)


def homework_button() -> None:
    st.download_button("Download this lesson for homework", data=homework_file, file_name="attention-lab-lesson.html",
                       mime="text/html", key="lesson_homework", on_click="ignore",
                       help="Every step, its question and, behind a reveal, the answer and figure, in one HTML file "
                            "that opens from disk with no server and no network.")


# --- drawing --------------------------------------------------------------------------------------


def _label(live: Live, index: int) -> str:
    return f"{letter(index)}: {live.choices[index]}"


def _figure(step: Step, live: Live) -> None:
    figure = live.figure
    if st.session_state[PRESENT]:
        figure = lesson_figures.for_projector(figure)
    st.plotly_chart(figure, key=f"lesson_figure_{step.slug}")
    if live.caption:
        st.caption(live.caption)


def revealed(step: Step, live: Live, chosen: int | None, chosen_by: str = "Your answer", note: str = "") -> None:
    """The true answer beside the learner's (or the class's), one sentence why, the figure, what to try and the
    full page. `note`, how the class answered, goes with the true answer."""
    truth = _label(live, live.answer)
    if chosen is None:
        st.info(f"**{live.source.capitalize()}: {truth}**" + (f" — {note}" if note else ""))
    else:
        below = f"\n\n{note[:1].upper()}{note[1:]}." if note else ""
        if chosen == live.answer:
            st.success(f"**{chosen_by}: {_label(live, chosen)}** ✓ — {live.source}, too.{below}")
        else:
            st.warning(f"**{chosen_by}: {_label(live, chosen)}** ✗ — **{live.source}: {truth}**{below}")
    st.markdown(f"**Why.** {live.why}")
    _figure(step, live)
    link = step.link(live, lesson_model() if step.uses_model else None)
    st.markdown(f"**Try this.** {step.try_this}" + (f" [Open the full page in this state →]({link})" if link else ""))


def _question(live: Live) -> None:
    st.markdown(f"#### {live.question}")


def _intro(step: Step, shown_figure: bool) -> None:
    """The step's idea in words; in presenter mode only until the figure takes the screen."""
    if not (st.session_state[PRESENT] and shown_figure):
        st.markdown(step.text)


def solo(step: Step, live: Live) -> None:
    done = st.session_state[DONE]
    _intro(step, step.slug in done)
    _question(live)
    if step.slug in done:
        revealed(step, live, done[step.slug])
        st.button("Ask me again", key="lesson_again", on_click=_ask_again, args=(step.slug,))
        return
    st.radio("Your prediction", range(len(live.choices)), index=None, key=f"lesson_pick_{step.slug}",
             format_func=lambda i: _label(live, i))
    col1, col2, _ = st.columns([1, 1, 2])
    col1.button("Check my answer", key="lesson_check", type="primary", on_click=_check, args=(step.slug,),
                disabled=st.session_state.get(f"lesson_pick_{step.slug}") is None)
    col2.button("Reveal without answering", key="lesson_reveal", on_click=_check, args=(step.slug, True),
                **_key(REVEAL_KEY))
    st.caption("The figure that answers the question appears once you answer.")


def choice_index(live: Live, sent: str | None) -> int | None:
    """The index of the choice whose letter is `sent`; None for no answer, or one that is not a choice here."""
    return next((i for i in range(len(live.choices)) if letter(i) == sent), None)


def class_summary(counts: dict[str, int], live: Live) -> str:
    """How the class answered: "the class: A 2 · B 1 · C 0, 2 of 3 right"."""
    by_letter = " · ".join(f"{letter(i)} {counts.get(letter(i), 0)}" for i in range(len(live.choices)))
    return f"the class: {by_letter}, {counts.get(letter(live.answer), 0)} of {sum(counts.values())} right"


def teacher(step: Step, live: Live, index: int, projected_controls: DeltaGenerator | None = None) -> None:
    """The lesson with the poll's controls: the reveal and how many answered, below the question on the teacher's
    own screen; projected, in `projected_controls` (the top of the side column), on the first screen however long
    the step."""
    s = st.session_state
    code, key = s[TEACH], s[TEACHER_KEY]
    info, error = _poll("teacher_info", code, key)
    if not error and info.step != index:  # the class follows this screen (another tab of the teacher may have moved it)
        _, error = _poll("set_step", code, key, index)
        info, error = (None, error) if error else _poll("teacher_info", code, key)
    if error:
        st.error(f"{error} *End the poll* closes it on this screen.")
        solo(step, live)  # the lesson goes on without the poll
        return
    _intro(step, info.revealed)
    _question(live)
    if not info.revealed:
        with projected_controls or st.container():  # the button above the counts and their chart
            st.button("Reveal the answer", key="lesson_class_reveal", type="primary", on_click=_reveal_class,
                      args=(code, index, letter(live.answer), [letter(i) for i in range(len(live.choices))]),
                      **_key(REVEAL_KEY))
            _live_counts(code, index, tuple(live.choices))
        return
    counts, _ = _poll("counts", code, index, key)
    revealed(step, live, None, note=class_summary(counts or {}, live))


@st.fragment(run_every=POLL_EVERY_S)
def _live_counts(code: str, step: int, choices: tuple[str, ...]) -> None:
    """The teacher's live distribution of answers, refreshed every POLL_EVERY_S seconds (the key stays in the
    session: a fragment's arguments are not the place for it). Projected, only how many answered: a class that
    saw how the others vote would not predict on its own."""
    key = st.session_state.get(TEACHER_KEY)
    info, error = _poll("teacher_info", code, key)
    if error:
        st.error(error)
        return
    st.markdown(f"**{info.answered} of {info.students} students answered** (class {code})")
    if st.session_state[PRESENT]:
        st.caption("How the class answered appears at the reveal.")
        return
    counts, error = _poll("counts", code, step, key)
    if error:
        st.error(error)
        return
    values = [counts.get(letter(i), 0) for i in range(len(choices))]
    st.plotly_chart(lesson_figures.answer_bars(list(choices), values, title="the class's answers so far"),
                    key="lesson_counts")


def student(step: Step, live: Live, index: int) -> None:
    s = st.session_state
    code = s[CLASS]
    info, error = _poll("session_info", code)
    if error:
        st.error(error)
        st.button("Leave the class", key="lesson_leave", on_click=_leave)
        return
    _remember_in_browser(code, s[TOKENS][code], info.expires_at)
    st.caption(f"Class {code}: the teacher chooses the step.")
    if not 1 <= info.step <= N_STEPS:
        st.info("Waiting for the teacher to open a step…")
        _follow_class(code, info.step, info.revealed)
        return
    _intro(step, info.revealed)
    _question(live)
    # the answer the class counts for this student: another tab of this browser may have sent it
    sent, error = _poll("student_answer", code, s[TOKENS][code], index)
    if error:
        st.error(error)
    mine = choice_index(live, sent)
    if info.revealed:
        counts, _ = _poll("counts", code, index)  # the class's answers, public once revealed
        revealed(step, live, mine, "Your answer" if mine is not None else "You did not answer",
                 note=class_summary(counts, live) if counts is not None else "")
    else:
        key, shown = f"lesson_class_pick_{step.slug}", f"lesson_class_shown_{step.slug}"
        if s.get(shown) != mine:  # the stored answer changed (sent here, in another tab, or before a reload) ...
            s[key] = s[shown] = mine  # ... the radio shows it; a pick not yet sent stays otherwise
        st.radio("Your answer", range(len(live.choices)), index=None, key=key, format_func=lambda i: _label(live, i))
        st.button("Send my answer", key="lesson_send", type="primary", on_click=_send, args=(code, index, step.slug))
        st.caption(f"Sent: {sent} — you may change it until the teacher reveals." if mine is not None else
                   "The teacher's screen counts the answers; the figure appears when the teacher reveals.")
    _follow_class(code, info.step, info.revealed)


@st.fragment(run_every=POLL_EVERY_S)
def _follow_class(code: str, step: int, revealed_: bool) -> None:
    """A student's page reruns when the teacher moves to another step or reveals this one, and when the
    class can no longer be followed (it ended, or its database stopped): the page then says why and goes on
    alone."""
    info, error = _poll("session_info", code)
    if error:
        st.rerun()
    if (info.step, info.revealed) != (step, revealed_):
        if 1 <= info.step <= N_STEPS:
            st.session_state[STEP] = info.step
        st.rerun()


def class_panel(index: int) -> None:
    """Share the step, start, resume or end a poll, join or leave a class."""
    s = st.session_state
    who = role()
    if who == "teacher":
        st.markdown(f"### Class code: **{s[TEACH]}**")
        share_panel(index, s[TEACH])
        resume_panel()
        report_panel(s[TEACH], s[TEACHER_KEY])
        st.button("End the poll", key="lesson_end", on_click=_end_poll,
                  help="The class ends now: students' pages say so. Its answers are deleted an hour later.")
    elif who == "student":
        st.markdown(f"You are in class **{s[CLASS]}**.")
        st.button("Leave the class", key="lesson_leave", on_click=_leave)
    else:
        if s.get(REPORT):  # the class this screen taught has ended: its report, until its rows are deleted
            report_panel(*s[REPORT], ended=True)
        share_panel(index, None)
        st.button("Start a class poll", key="lesson_start", on_click=_start_poll,
                  help="A short code for the class; every laptop that joins answers the step on your screen.")
        st.text_input("Class code", key="lesson_join_code", max_chars=12, placeholder="e.g. K7QPM")
        st.button("Join the class", key="lesson_join", on_click=_join_typed)
        st.text_input("Resume a class poll", key="lesson_resume_code", type="password",
                      placeholder="your private resume code",
                      help="The teacher's private code (or link) shown when the poll started: it brings the "
                           "poll's controls back to this screen.")
        st.button("Resume the poll", key="lesson_resume", on_click=_resume_typed)


BUTTON_SHORTCUTS = "shortcut" in inspect.signature(st.button).parameters  # Streamlit 1.52 and later
# Streamlit's names of the keys (R, which would read best for reveal, is Streamlit's own rerun key)
PREVIOUS_KEY, NEXT_KEY, REVEAL_KEY = "Left", "Right", "Down"
ARROW_KEYS_SCRIPT = """<script>
const doc = window.parent.document;
if (!doc.lessonArrows) {
  doc.lessonArrows = true;
  const labels = {ArrowLeft: ["◀ Previous"], ArrowRight: ["Next ▶"],
                  ArrowDown: ["Reveal the answer", "Reveal without answering"]};
  doc.addEventListener("keydown", (event) => {
    const target = event.target;
    if (event.altKey || event.ctrlKey || event.metaKey || (target && target.closest("input, textarea, select"))) return;
    const wanted = labels[event.key] || [];
    const button = Array.from(doc.querySelectorAll("button")).find(b => wanted.includes(b.innerText.trim()));
    if (button && !button.disabled) { event.preventDefault(); button.click(); }
  });
}
</script>"""


def _key(key: str) -> dict:
    """The button's keyboard shortcut where Streamlit has them (older versions: ARROW_KEYS_SCRIPT)."""
    return {"shortcut": key} if BUTTON_SHORTCUTS else {}


def navigation(index: int) -> None:
    """Previous / next (← and → on the keyboard), a jump to any step, and the presenter switch (the keys'
    script for older Streamlit versions also gives ↓ to the reveal buttons, which are drawn after it)."""
    s = st.session_state
    s["lesson_jump"] = index
    s["lesson_present_toggle"] = s[PRESENT]
    # one row that gives each button the width of its label (fixed columns cut "◀ Previous" short at projector
    # text size on a 1366-wide screen); the step list takes the rest, and the row wraps on a narrow screen
    with st.container(horizontal=True, vertical_alignment="center"):
        st.button("◀ Previous", key="lesson_prev", on_click=go_to, args=(index - 1,), disabled=index == 1,
                  **_key(PREVIOUS_KEY))
        st.selectbox("Step", range(1, N_STEPS + 1), key="lesson_jump", on_change=_jumped,
                     label_visibility="collapsed", format_func=lambda i: f"{i}. {STEPS[i - 1].title}")
        st.button("Next ▶", key="lesson_next", on_click=go_to, args=(index + 1,), disabled=index == N_STEPS,
                  **_key(NEXT_KEY))
        st.toggle("Presenter mode", key="lesson_present_toggle", on_change=_toggled,
                  help="For a projector: no sidebar, large text and figures, a QR code to this step. ← → step, "
                       "↓ reveals the answer.")
    if not BUTTON_SHORTCUTS:
        components.html(ARROW_KEYS_SCRIPT, height=0)


def show() -> None:
    """The whole page, after run_inside_app."""
    read_url()
    s = st.session_state
    who = role()
    if who == "student":  # the class's step, not the one the URL was opened with
        info, error = _poll("session_info", s[CLASS])
        if error:
            _notify("error", error)
            _leave()
            who = "solo"
        elif 1 <= info.step <= N_STEPS:
            s[STEP] = info.step
    if who == "student" or s[PRESENT]:  # a student's laptop and the projector show the lesson alone
        st.markdown(NO_SIDEBAR_CSS, unsafe_allow_html=True)
    if s[PRESENT]:
        st.markdown(PRESENTER_CSS, unsafe_allow_html=True)
    if who != "student":  # the model settings are for the other pages: a student in class has no use for them
        with st.sidebar:
            st.caption("The lessons use a model of their own (LLaMA 2 at classroom size, shipped weights), so a "
                       "whole class sees the same question; the settings below are for the other pages.")
        sidebar()  # the app's shared state stays in the URL and the sidebar, as on every page
    index = s[STEP]
    step = STEPS[index - 1]
    write_url()

    main, side = st.columns([3, 1], gap="large") if s[PRESENT] else (st.container(), None)
    side_top = side.container() if side is not None else None  # drawn into before the class panel below it
    with main:
        st.caption(f"Lessons · step {index} of {N_STEPS}")
        st.title(f"{index}. {step.title}")
        _show_notices()
        if who != "student":
            navigation(index)
        try:
            live = step.build()
        except (ValueError, MemoryError, OSError) as exc:
            st.error(f"This step could not be computed: {exc}")
            return
        if who == "teacher":
            teacher(step, live, index, side_top)
        elif who == "student":
            student(step, live, index)
        else:
            solo(step, live)
    if side is not None:
        with side:
            class_panel(index)
    else:
        st.divider()
        if who != "student":  # not on a student's laptop in class, nor projected
            homework_button()
        st.subheader("Class")
        if who == "solo":
            st.caption("Share this step with a link or QR code, or run a class poll: students answer on their "
                       "laptops and your screen shows the answers as they come in.")
        class_panel(index)
