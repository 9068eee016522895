"""The Lessons page's views: the question before the figure, the reveal, presenter mode and the class poll.

Three roles share the page (ui/lessons/url_state.py says which this screen is). Alone, a learner picks an
answer and checks it. A teacher starts a class poll: the class follows the teacher's step, the teacher's
screen shows the distribution of answers as they come in, then reveals. A student answers the class's
current step and sees the reveal, and how the class did, when the teacher makes it; a student's page shows
the lesson alone, without the app's model settings.

Keys: ← and → step through the lesson, ↓ reveals the answer (the teacher's "Reveal the answer", a
learner's "Reveal without answering").

The page's other parts, one concept each:

    url_state.py      the session's keys, the URL in and out, who this screen is (solo, teacher, student)
    poll_client.py    the class poll, one typed method per action; a failure is a message, never a traceback
    class_actions.py  what the buttons and links do: start, resume, end a poll; join, leave, answer
    share.py          the students' link, its QR code, the teacher's private resume link
    report_panel.py   the teacher's report of the class, with its CSV and printable HTML
    styles.py         the CSS of presenter mode and of a screen without the sidebar

Homework: outside a class and presenter mode, *Download this lesson for homework* writes the whole
lesson as one HTML file (ui/lessons/homework.py), built when pressed; a step that cannot be computed
says why in the file, and the rest exports.

Every poll call returns a message instead of raising: a wrong or ended code, a refused key or token, an
answer to a closed step, a limit reached or an unreachable database is said on the page, and the lesson
goes on.
"""
from __future__ import annotations

import inspect

import streamlit as st
import streamlit.components.v1 as components
from streamlit.delta_generator import DeltaGenerator

import plotly.graph_objects as go

from ui.app.charts import show_chart
from ui.app.state import sidebar
from ui.figures import lesson as lesson_figures
from ui.lessons.class_actions import (FROM_URL, end_poll, go_to, join_typed, leave, notify, remember_in_browser,
                                      resume_typed, reveal_class, send, show_notices, start_poll, student_poll,
                                      teacher_poll)
from ui.lessons.homework import homework_html
from ui.lessons.poll_client import ClassPoll, TeacherPoll
from ui.lessons.report_panel import report_panel
from ui.lessons.share import resume_panel, share_panel
from ui.lessons.steps import STEPS, Live, Step, letter, lesson_model
from ui.lessons.styles import NO_SIDEBAR_CSS, PRESENTER_CSS
from ui.lessons.url_state import (CLASS, DONE, N_STEPS, PRESENT, REPORT, STEP, TEACH, TEACHER_KEY, read_url, role,
                                  write_url)

POLL_EVERY_S = 2.0  # the teacher's counts and the students' "has the teacher moved on?" refresh this often


# --- callbacks ----------------------------------------------------------------------------------


def _jumped() -> None:
    go_to(st.session_state["lesson_jump"])


def _toggled() -> None:
    st.session_state[PRESENT] = st.session_state["lesson_present_toggle"]


def _check(slug: str, reveal_only: bool = False) -> None:
    st.session_state[DONE][slug] = None if reveal_only else st.session_state.get(f"lesson_pick_{slug}")


def _ask_again(slug: str) -> None:
    st.session_state[DONE].pop(slug, None)
    st.session_state.pop(f"lesson_pick_{slug}", None)


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
    show_chart(figure, key=f"lesson_figure_{step.slug}")
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
    poll = teacher_poll()
    info, error = poll.info()
    if not error and info.step != index:  # the class follows this screen (another tab of the teacher may have moved it)
        _, error = poll.set_step(index)
        info, error = (None, error) if error else poll.info()
    if error:
        st.error(f"{error} *End the poll* closes it on this screen.")
        solo(step, live)  # the lesson goes on without the poll
        return
    _intro(step, info.revealed)
    _question(live)
    if not info.revealed:
        with projected_controls or st.container():  # the button above the counts and their chart
            st.button("Reveal the answer", key="lesson_class_reveal", type="primary", on_click=reveal_class,
                      args=(poll.code, index, letter(live.answer), [letter(i) for i in range(len(live.choices))]),
                      **_key(REVEAL_KEY))
            _live_counts(poll.code, index, tuple(live.choices))
        return
    counts, _ = poll.counts(index)
    revealed(step, live, None, note=class_summary(counts or {}, live))


@st.fragment(run_every=POLL_EVERY_S)
def _live_counts(code: str, step: int, choices: tuple[str, ...]) -> None:
    """The teacher's live distribution of answers, refreshed every POLL_EVERY_S seconds (the key stays in the
    session: a fragment's arguments are not the place for it). Projected, only how many answered: a class that
    saw how the others vote would not predict on its own."""
    poll = TeacherPoll(code, st.session_state.get(TEACHER_KEY))
    info, error = poll.info()
    if error:
        st.error(error)
        return
    st.markdown(f"**{info.answered} of {info.students} students answered** (class {code})")
    if st.session_state[PRESENT]:
        st.caption("How the class answered appears at the reveal.")
        return
    counts, error = poll.counts(step)
    if error:
        st.error(error)
        return
    values = [counts.get(letter(i), 0) for i in range(len(choices))]
    show_chart(lesson_figures.answer_bars(list(choices), values, title="the class's answers so far"),
               key="lesson_counts")


def student(step: Step, live: Live, index: int) -> None:
    s = st.session_state
    me = student_poll()
    code = me.code
    info, error = ClassPoll(code).info()
    if error:
        st.error(error)
        st.button("Leave the class", key="lesson_leave", on_click=leave)
        return
    remember_in_browser(me, info.expires_at)
    st.caption(f"Class {code}: the teacher chooses the step.")
    if not 1 <= info.step <= N_STEPS:
        st.info("Waiting for the teacher to open a step…")
        _follow_class(code, info.step, info.revealed)
        return
    _intro(step, info.revealed)
    _question(live)
    # the answer the class counts for this student: another tab of this browser may have sent it
    sent, error = me.my_answer(index)
    if error:
        st.error(error)
    mine = choice_index(live, sent)
    if info.revealed:
        counts, _ = ClassPoll(code).revealed_counts(index)  # the class's answers, public once revealed
        revealed(step, live, mine, "Your answer" if mine is not None else "You did not answer",
                 note=class_summary(counts, live) if counts is not None else "")
    else:
        key, shown = f"lesson_class_pick_{step.slug}", f"lesson_class_shown_{step.slug}"
        if s.get(shown) != mine:  # the stored answer changed (sent here, in another tab, or before a reload) ...
            s[key] = s[shown] = mine  # ... the radio shows it; a pick not yet sent stays otherwise
        st.radio("Your answer", range(len(live.choices)), index=None, key=key, format_func=lambda i: _label(live, i))
        st.button("Send my answer", key="lesson_send", type="primary", on_click=send, args=(code, index, step.slug))
        st.caption(f"Sent: {sent} — you may change it until the teacher reveals." if mine is not None else
                   "The teacher's screen counts the answers; the figure appears when the teacher reveals.")
    _follow_class(code, info.step, info.revealed)


@st.fragment(run_every=POLL_EVERY_S)
def _follow_class(code: str, step: int, revealed_: bool) -> None:
    """A student's page reruns when the teacher moves to another step or reveals this one, and when the
    class can no longer be followed (it ended, or its database stopped): the page then says why and goes on
    alone."""
    info, error = ClassPoll(code).info()
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
        st.button("End the poll", key="lesson_end", on_click=end_poll,
                  help="The class ends now: students' pages say so. Its answers are deleted an hour later.")
    elif who == "student":
        st.markdown(f"You are in class **{s[CLASS]}**.")
        st.button("Leave the class", key="lesson_leave", on_click=leave)
    else:
        if s.get(REPORT):  # the class this screen taught has ended: its report, until its rows are deleted
            report_panel(*s[REPORT], ended=True)
        share_panel(index, None)
        st.button("Start a class poll", key="lesson_start", on_click=start_poll,
                  help="A short code for the class; every laptop that joins answers the step on your screen.")
        st.text_input("Class code", key="lesson_join_code", max_chars=12, placeholder="e.g. K7QPM")
        st.button("Join the class", key="lesson_join", on_click=join_typed)
        st.text_input("Resume a class poll", key="lesson_resume_code", type="password",
                      placeholder="your private resume code",
                      help="The teacher's private code (or link) shown when the poll started: it brings the "
                           "poll's controls back to this screen.")
        st.button("Resume the poll", key="lesson_resume", on_click=resume_typed)


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
    asked = read_url()
    if asked:
        key, value = asked
        FROM_URL[key](value)
    s = st.session_state
    who = role()
    if who == "student":  # the class's step, not the one the URL was opened with
        info, error = ClassPoll(s[CLASS]).info()
        if error:
            notify("error", error)
            leave()
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
        show_notices()
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
