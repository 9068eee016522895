"""The Lessons page: its state in the URL, the question before the figure, presenter mode and the class poll.

URL keys (a link reproduces the view):

    step=3        the lesson step, 1 … len(STEPS)
    present=1     presenter mode: no sidebar, projector-size text and figures, a QR code to the step
    teach=K7QPM   this screen runs class poll K7QPM (a reloaded teacher page picks its poll up again)
    class=K7QPM   this screen is a student of class K7QPM (the QR code's link carries it) ...
    me=3f2a…      ... with this anonymous id, so a reloaded student page does not count twice

Three roles share the page. Alone, a learner picks an answer and checks it. A teacher starts a
class poll: the class follows the teacher's step, the teacher's screen shows the distribution of
answers as they come in, then reveals. A student answers the class's current step and sees the
reveal when the teacher makes it. Every poll call goes through ``_poll``: a wrong or expired code,
an answer to a closed step or an unreachable database becomes a message on the page.
"""
from __future__ import annotations

import inspect
import io
import os
from urllib.parse import urlencode, urlsplit

import streamlit as st
import streamlit.components.v1 as components

from ui.figures import lesson as lesson_figures
from ui.lessons.steps import STEPS, Live, Step, letter, lesson_model
from ui.lessons.poll_store import URL_ENV, PollError, normalize_code, open_store
from ui.app.state import sidebar

N_STEPS = len(STEPS)
POLL_EVERY_S = 2.0  # the teacher's counts and the students' "has the teacher moved on?" refresh this often
DEFAULT_BASE = "http://localhost:8501"
PAGE = "lessons"

# session keys
STEP, PRESENT, TEACH, CLASS, ME = "lesson_step", "lesson_present", "lesson_teach", "lesson_class", "lesson_me"
DONE = "lesson_done"  # slug -> the index the learner picked, or None when revealed without answering
SENT = "lesson_sent"  # (class code, step) -> the letter this student sent
NOTICES = "lesson_notices"  # (kind, message) shown once, at the top of the next run
BASE = "lesson_base"
URL_READ = "_lessons_url_read"

PRESENTER_CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"],
[data-testid="stSidebarNav"] { display: none !important; }
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
    except Exception as exc:  # an unusable database URL, a missing driver, a database gone away
        return None, f"The class poll is not available on this server: {exc}"


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
    s.setdefault(SENT, {})
    if s.get(URL_READ):
        return
    s[URL_READ] = True
    params = st.query_params
    if "step" in params:
        s[STEP] = _clamp(params["step"])
    s[PRESENT] = params.get("present", "") in ("1", "true", "yes")
    if params.get("teach"):
        _resume_teaching(params["teach"])
    elif params.get("class"):
        _join(params["class"], params.get("me") or None)


def _resume_teaching(code: str) -> None:
    """A teacher's page reloaded (or opened from its own link): take the poll back, keep its answers."""
    info, error = _poll("session_info", code)
    if error:
        _notify("error", f"Your class poll cannot be picked up again: {error}")
        return
    st.session_state[TEACH] = info.code
    _, error = _poll("set_step", info.code, st.session_state[STEP])
    if error:
        _notify("error", error)
    else:
        _notify("info", f"Class poll {info.code} picked up again: {info.students} students have joined.")


def _join(raw_code: str, student_id: str | None = None) -> None:
    """Join a class (or, with the id a reloaded page kept, rejoin it) and follow its step."""
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
    if student_id is None:
        student_id, error = _poll("join", info.code)
        if error:
            _notify("error", error)
            return
        _notify("success", f"You joined class {info.code}. Answer the question on your screen; the teacher "
                           "reveals the answer.")
    s.pop(TEACH, None)
    s[CLASS], s[ME] = info.code, student_id
    if 1 <= info.step <= N_STEPS:
        s[STEP] = info.step


def write_url() -> None:
    """The view's state in the URL, only the keys that changed."""
    s = st.session_state
    wanted = {"step": str(s[STEP])}
    if s[PRESENT]:
        wanted["present"] = "1"
    if s.get(TEACH):
        wanted["teach"] = s[TEACH]
    elif s.get(CLASS):
        wanted["class"], wanted["me"] = s[CLASS], s[ME]
    for key in ("step", "present", "teach", "class", "me"):
        if key in wanted:
            if st.query_params.get(key) != wanted[key]:
                st.query_params[key] = wanted[key]
        elif key in st.query_params:
            del st.query_params[key]


def role() -> str:
    s = st.session_state
    return "teacher" if s.get(TEACH) else "student" if s.get(CLASS) else "solo"


# --- callbacks ----------------------------------------------------------------------------------


def go_to(step: int) -> None:
    s = st.session_state
    s[STEP] = _clamp(step)
    if s.get(TEACH):
        _, error = _poll("set_step", s[TEACH], s[STEP])
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
    code, error = _poll("create_session")
    if error:
        _notify("error", error)
        return
    _, error = _poll("set_step", code, s[STEP])
    if error:
        _notify("error", error)
        return
    s[TEACH] = code
    s.pop(CLASS, None)
    _notify("success", f"Class poll {code} started: students open the link or type the code.")


def _end_poll() -> None:
    st.session_state.pop(TEACH, None)


def _join_typed() -> None:
    _join(st.session_state.get("lesson_join_code", ""))


def _leave() -> None:
    for key in (CLASS, ME):
        st.session_state.pop(key, None)


def _reveal_class(code: str, step: int) -> None:
    _, error = _poll("reveal", code, step)
    if error:
        _notify("error", error)


def _send(code: str, step: int, slug: str) -> None:
    s = st.session_state
    pick = s.get(f"lesson_class_pick_{slug}")
    if pick is None:
        _notify("warning", "Pick an answer first.")
        return
    first, error = _poll("answer", code, s[ME], step, letter(pick))
    if error:
        _notify("error", error)
        return
    s[SENT][(code, step)] = letter(pick)
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


def share_link(step: int, code: str | None = None) -> str:
    base = (st.session_state.get(BASE) or DEFAULT_BASE).strip().rstrip("/")
    query = {"step": step, **({"class": code} if code else {})}
    return f"{base}/{PAGE}?{urlencode(query)}"


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
    png = qr_png(link)
    if png is None:
        st.caption("Install `segno` for a QR code.")
    else:
        st.image(png, width=240)
    st.markdown(f"**[{link.split('://', 1)[-1]}]({link})**")
    with st.popover("Address students open"):
        st.text_input("Base address of this app", key=BASE,
                      help="What students type to reach this server, e.g. http://192.168.1.20:8501. A server started "
                           "with --server.address 0.0.0.0 is reachable from the class's laptops; localhost is not.")


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
    full page."""
    truth = _label(live, live.answer)
    if chosen is None:
        st.info(f"**{live.source.capitalize()}: {truth}**" + (f" — {note}" if note else ""))
    elif chosen == live.answer:
        st.success(f"**{chosen_by}: {_label(live, chosen)}** ✓ — {live.source}, too.")
    else:
        st.warning(f"**{chosen_by}: {_label(live, chosen)}** ✗ — **{live.source}: {truth}**")
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
    col2.button("Reveal without answering", key="lesson_reveal", on_click=_check, args=(step.slug, True))
    st.caption("The figure that answers the question appears once you answer.")


def teacher(step: Step, live: Live, index: int) -> None:
    code = st.session_state[TEACH]
    info, error = _poll("session_info", code)
    if error:
        st.error(error)
        st.button("Close the poll", key="lesson_end", on_click=_end_poll)
        return
    if info.step != index:  # the class follows this screen (another tab of the teacher may have moved it)
        _, error = _poll("set_step", code, index)
        info, error = (None, error) if error else _poll("session_info", code)
        if error:
            st.error(error)
            return
    _intro(step, info.revealed)
    _question(live)
    if not info.revealed:
        _live_counts(code, index, tuple(live.choices))
        st.button("Reveal the answer", key="lesson_class_reveal", type="primary", on_click=_reveal_class,
                  args=(code, index))
        return
    counts, _ = _poll("counts", code, index)
    counts = counts or {}
    total = sum(counts.values())
    summary = " · ".join(f"{letter(i)} {counts.get(letter(i), 0)}" for i in range(len(live.choices)))
    right = counts.get(letter(live.answer), 0)
    revealed(step, live, None, note=f"the class: {summary}, {right} of {total} right")


@st.fragment(run_every=POLL_EVERY_S)
def _live_counts(code: str, step: int, choices: tuple[str, ...]) -> None:
    """The teacher's live distribution of answers, refreshed every POLL_EVERY_S seconds."""
    info, error = _poll("session_info", code)
    counts, error = (None, error) if error else _poll("counts", code, step)
    if error:
        st.error(error)
        return
    values = [counts.get(letter(i), 0) for i in range(len(choices))]
    st.markdown(f"**{info.answered} of {info.students} students answered** (class {code})")
    figure = lesson_figures.answer_bars(list(choices), values, title="the class's answers so far")
    if st.session_state[PRESENT]:
        figure = lesson_figures.for_projector(figure, height=120 + 90 * len(choices))
    st.plotly_chart(figure, key="lesson_counts")


def student(step: Step, live: Live, index: int) -> None:
    s = st.session_state
    code = s[CLASS]
    info, error = _poll("session_info", code)
    if error:
        st.error(error)
        st.button("Leave the class", key="lesson_leave", on_click=_leave)
        return
    st.caption(f"Class {code}: the teacher chooses the step.")
    if not 1 <= info.step <= N_STEPS:
        st.info("Waiting for the teacher to open a step…")
        _follow_class(code, info.step, info.revealed)
        return
    _intro(step, info.revealed)
    _question(live)
    sent = s[SENT].get((code, index))
    mine = ord(sent) - ord("A") if sent else None
    if info.revealed:
        revealed(step, live, mine, "Your answer" if sent else "You did not answer")
    else:
        key = f"lesson_class_pick_{step.slug}"
        if mine is not None and s.get(key) is None:
            s[key] = mine
        st.radio("Your answer", range(len(live.choices)), index=None, key=key, format_func=lambda i: _label(live, i))
        st.button("Send my answer", key="lesson_send", type="primary", on_click=_send, args=(code, index, step.slug))
        st.caption(f"Sent: {sent} — you may change it until the teacher reveals." if sent else
                   "The teacher's screen counts the answers; the figure appears when the teacher reveals.")
    _follow_class(code, info.step, info.revealed)


@st.fragment(run_every=POLL_EVERY_S)
def _follow_class(code: str, step: int, revealed_: bool) -> None:
    """A student's page reruns when the teacher moves to another step or reveals this one."""
    info, error = _poll("session_info", code)
    if info is not None and (info.step, info.revealed) != (step, revealed_):
        if 1 <= info.step <= N_STEPS:
            st.session_state[STEP] = info.step
        st.rerun()


def class_panel(index: int) -> None:
    """Share the step, start or end a poll, join or leave a class."""
    s = st.session_state
    who = role()
    if who == "teacher":
        st.markdown(f"### Class code: **{s[TEACH]}**")
        share_panel(index, s[TEACH])
        st.button("End the poll", key="lesson_end", on_click=_end_poll,
                  help="Students keep their page; their answers stay stored until the code expires.")
    elif who == "student":
        st.markdown(f"You are in class **{s[CLASS]}**.")
        st.button("Leave the class", key="lesson_leave", on_click=_leave)
    else:
        share_panel(index, None)
        st.button("Start a class poll", key="lesson_start", on_click=_start_poll,
                  help="A short code for the class; every laptop that joins answers the step on your screen.")
        st.text_input("Class code", key="lesson_join_code", max_chars=12, placeholder="e.g. K7QPM")
        st.button("Join the class", key="lesson_join", on_click=_join_typed)


BUTTON_SHORTCUTS = "shortcut" in inspect.signature(st.button).parameters  # Streamlit 1.52 and later
ARROW_KEYS_SCRIPT = """<script>
const doc = window.parent.document;
if (!doc.lessonArrows) {
  doc.lessonArrows = true;
  doc.addEventListener("keydown", (event) => {
    const target = event.target;
    if (event.altKey || event.ctrlKey || event.metaKey || (target && target.closest("input, textarea, select"))) return;
    const label = {ArrowLeft: "◀ Previous", ArrowRight: "Next ▶"}[event.key];
    const button = label && Array.from(doc.querySelectorAll("button")).find(b => b.innerText.trim() === label);
    if (button && !button.disabled) { event.preventDefault(); button.click(); }
  });
}
</script>"""


def _arrow(key: str) -> dict:
    """The button's keyboard shortcut where Streamlit has them (older versions: ARROW_KEYS_SCRIPT)."""
    return {"shortcut": key} if BUTTON_SHORTCUTS else {}


def navigation(index: int) -> None:
    """Previous / next (← and → on the keyboard), a jump to any step, and the presenter switch."""
    s = st.session_state
    s["lesson_jump"] = index
    s["lesson_present_toggle"] = s[PRESENT]
    col1, col2, col3, col4 = st.columns([1, 3, 1, 2], vertical_alignment="bottom")
    col1.button("◀ Previous", key="lesson_prev", on_click=go_to, args=(index - 1,), disabled=index == 1,
                **_arrow("Left"))
    col2.selectbox("Step", range(1, N_STEPS + 1), key="lesson_jump", on_change=_jumped, label_visibility="collapsed",
                   format_func=lambda i: f"{i}. {STEPS[i - 1].title}")
    col3.button("Next ▶", key="lesson_next", on_click=go_to, args=(index + 1,), disabled=index == N_STEPS,
                **_arrow("Right"))
    col4.toggle("Presenter mode", key="lesson_present_toggle", on_change=_toggled,
                help="For a projector: no sidebar, large text and figures, a QR code to this step. ← → step.")
    if not BUTTON_SHORTCUTS:
        components.html(ARROW_KEYS_SCRIPT, height=0)


def show() -> None:
    """The whole page, after run_inside_app."""
    note = st.sidebar.container()  # above the shared sidebar
    sidebar()  # the app's shared state stays in the URL and the sidebar, as on every page
    with note:
        st.caption("The lessons use a model of their own (LLaMA 2 at classroom size, shipped weights), so a whole "
                   "class sees the same question; the settings below are for the other pages.")
    read_url()
    s = st.session_state
    who = role()
    if s[PRESENT]:
        st.markdown(PRESENTER_CSS, unsafe_allow_html=True)
    if who == "student":  # the class's step, not the one the URL was opened with
        info, error = _poll("session_info", s[CLASS])
        if error:
            _notify("error", error)
            _leave()
            who = "solo"
        elif 1 <= info.step <= N_STEPS:
            s[STEP] = info.step
    index = s[STEP]
    step = STEPS[index - 1]
    write_url()

    main, side = st.columns([3, 1], gap="large") if s[PRESENT] else (st.container(), None)
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
        {"solo": solo, "teacher": teacher, "student": student}[who](
            step, live, *([] if who == "solo" else [index]))
    if side is not None:
        with side:
            class_panel(index)
    else:
        st.divider()
        st.subheader("Class")
        if who == "solo":
            st.caption("Share this step with a link or QR code, or run a class poll: students answer on their "
                       "laptops and your screen shows the answers as they come in.")
        class_panel(index)
