"""The Lessons page under Streamlit's AppTest: every step asks before it shows, answering reveals the true
answer and the figure; the step and presenter mode live in the URL; the class poll's teacher and students
on the real SQLite store, with the attacks and bad input a classroom meets (a student with the class code
acting as teacher, a forged or replayed teacher key, a copied student link, a token of another class, an
answer to a closed step, a wrong or expired code, a 10,000-character address, a stopped database, a limit
reached) and a reloaded teacher page resumed with its private link.

The true answers themselves are checked against the library where a test can recompute them
independently (the trained head's choice, the KV-cache bytes, the skipped tiles, the parameter share).
"""
import csv
import dataclasses
import html
import io
import json
import socket
import sqlite3
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

from apptest_helpers import APP, assert_clean
from transformer import MODEL_CARDS, kv_cache_bytes_per_token, param_counts
from transformer.flash import tile_plan
from ui.figures import lesson as lesson_figures
from ui.lessons import steps as lessons
from ui.lessons.steps import images as images_chapter, step as step_module
from ui.lessons.steps.lesson_model import token_name
from ui.lessons.steps.step import binary_size
from ui.lessons import class_actions, classroom, report_panel
from ui.lessons.class_report import report_csv, report_html
from ui.lessons.url_state import N_STEPS
from polls import open_store

pytestmark = pytest.mark.slow

STEPS = lessons.STEPS


@pytest.fixture(autouse=True)
def poll_database(tmp_path, monkeypatch):
    """Every test gets a poll database of its own (the page opens the store $ATTENTION_LAB_DB names)."""
    path = tmp_path / "poll.sqlite3"
    monkeypatch.setenv("ATTENTION_LAB_DB", str(path))
    return path


def open_lessons(errors_allowed: bool = False, **query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.switch_page("pages/lessons.py").run()
    assert_clean(at, errors_allowed)
    return at


def markdown(at: AppTest) -> str:
    return "\n".join(str(m.value) for m in at.markdown)


def messages(at: AppTest) -> str:
    return "\n".join(str(m.value) for kind in ("success", "warning", "info", "error") for m in at.get(kind))


def charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def font_sizes(spec: dict) -> list[float]:
    """Every font size a figure's spec sets, the layout's and the traces'."""
    sizes = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "size" and isinstance(value, (int, float)):
                    sizes.append(value)
                elif key != "template":
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for trace in spec["data"]:
        walk({k: v for k, v in trace.items() if k in ("textfont", "colorbar", "header", "cells")})
    walk({k: v for k, v in spec["layout"].items() if k != "template"})
    return sizes


def step_of(slug: str):
    """The lecture's step with this slug, wherever the order puts it."""
    return next(step for step in STEPS if step.slug == slug)


def test_the_steps_are_data_and_the_lecture_in_order():
    assert len(STEPS) == N_STEPS == 34
    assert len({s.slug for s in STEPS}) == N_STEPS
    assert [s.slug for s in STEPS][:4] == ["before-attention", "how-many-tokens", "soft-lookup", "five-lines"]
    for step in STEPS:
        assert step.title and step.text and step.question and step.try_this
        assert step.kind in ("token", "choice", "number")
        assert step.page is None or step.page == "" or step.page.isidentifier()


@pytest.mark.parametrize("step", range(1, N_STEPS + 1), ids=[s.slug for s in STEPS])
def test_each_step_asks_first_and_reveals_the_answer_and_figure(step):
    live = STEPS[step - 1].build()
    assert 2 <= len(live.choices) <= 6 and len(set(live.choices)) == len(live.choices)
    assert 0 <= live.answer < len(live.choices)
    at = open_lessons(step=step)
    assert at.title[0].value == f"{step}. {STEPS[step - 1].title}"
    assert live.question in markdown(at)  # the question is shown ...
    assert not at.get("plotly_chart")  # ... and the figure is not, yet
    radio = at.radio(key=f"lesson_pick_{STEPS[step - 1].slug}")
    assert radio.value is None and len(radio.options) == len(live.choices)

    wrong = (live.answer + 1) % len(live.choices)
    radio.set_value(wrong).run()
    at.button(key="lesson_check").click().run()
    assert_clean(at)
    shown = messages(at)
    assert f"Your answer: {lessons.letter(wrong)}: {live.choices[wrong]}" in shown  # the learner's answer ...
    assert f"{lessons.letter(live.answer)}: {live.choices[live.answer]}" in shown  # ... beside the true one
    assert live.why in markdown(at)
    assert len(at.get("plotly_chart")) == 1
    link = STEPS[step - 1].link(live, lessons.lesson_model())
    if link:
        assert f"]({link})" in markdown(at)

    at.button(key="lesson_again").click().run()  # ask again: the figure goes away
    assert not at.get("plotly_chart")


def test_a_right_answer_and_reveal_without_answering():
    live = STEPS[0].build()
    at = open_lessons(step=1)
    at.radio(key="lesson_pick_before-attention").set_value(live.answer).run()
    at.button(key="lesson_check").click().run()
    assert "✓" in messages(at)
    at = open_lessons(step=2)
    at.button(key="lesson_reveal").click().run()
    assert f"{lessons.letter(STEPS[1].build().answer)}:" in messages(at) and len(at.get("plotly_chart")) == 1


# --- the true answers come from the model and the library ----------------------------------------


def test_the_soft_lookup_answer_is_the_trained_heads_argmax():
    model = lessons.lesson_model()
    live = step_of("soft-lookup").build()
    layer, head, query = (int(live.query[k]) for k in ("layer", "head", "query"))
    looked = int(np.argmax(model.trace.pattern(layer)[head, query]))
    assert live.choices[live.answer] == token_name(model, looked)
    assert model.trained and "Weights of trained checkpoint" in live.caption
    if "clearest induction head" in live.caption:  # it looks at the token after the earlier copy of the query's token
        earlier = max(j for j in range(query) if model.tokens.ids[j] == model.tokens.ids[query])
        assert looked == earlier + 1
    else:  # no head of the checkpoint follows copies: its clearest previous-token head, on its clearest query
        assert "clearest previous-token head" in live.caption and looked == query - 1


def test_the_kv_cache_answer_is_the_presets_arithmetic():
    real = MODEL_CARDS["llama2"].real["70B"]
    live = step_of("kv-cache").build()
    assert kv_cache_bytes_per_token(real) * 4096 == 2 * 80 * 8 * 128 * 2 * 4096
    assert live.choices[live.answer] == binary_size(kv_cache_bytes_per_token(real) * 4096) == "1.25 GiB"


def test_the_flash_and_moe_answers_are_computed():
    skipped = sum(t.skipped for t in tile_plan(32, 32, 8, 8, is_causal=True))
    live = step_of("flash").build()
    assert live.choices[live.answer].startswith(f"{skipped} of 16")
    counts = param_counts(MODEL_CARDS["mixtral"].real["8x7B"])
    assert 0.2 < counts["active"] / counts["total"] < 0.35
    moe = step_of("ffn").build()
    assert moe.choices[moe.answer] == "About 1/4"


def test_the_images_step_links_to_the_vision_page_only_when_it_exists(monkeypatch):
    step = next(s for s in STEPS if s.slug == images_chapter.patches_as_tokens.slug)
    monkeypatch.setattr(step_module, "page_exists", lambda page: False)
    assert step.link() is None
    monkeypatch.setattr(step_module, "page_exists", lambda page: True)
    assert step.link() == "vit"
    image = images_chapter.synthetic_image()
    patches = images_chapter.patches_of(image, 2)
    assert patches.shape == (16, 4)
    assert np.array_equal(patches[1], image[0:2, 2:4].reshape(-1))  # reading order, row by row


# --- the URL, the keyboard buttons and presenter mode -----------------------------------------------


def test_the_step_lives_in_the_url_and_the_buttons_move_it():
    at = open_lessons(step=3)
    assert at.query_params["step"] == "3"
    at.button(key="lesson_next").click().run()
    assert at.title[0].value.startswith("4.") and at.query_params["step"] == "4"
    at.button(key="lesson_prev").click().run()
    at.button(key="lesson_prev").click().run()
    assert at.title[0].value.startswith("2.") and at.query_params["step"] == "2"
    at.selectbox(key="lesson_jump").set_value(N_STEPS).run()  # the last step
    assert at.title[0].value.startswith(f"{N_STEPS}.") and at.button(key="lesson_next").disabled


@pytest.mark.parametrize("given, shown", [("abc", 1), ("0", 1), ("99", N_STEPS), ("-3", 1)])
def test_a_malformed_step_in_a_link_opens_a_valid_one(given, shown):
    at = open_lessons(step=given)
    assert at.title[0].value.startswith(f"{shown}.")


def test_presenter_mode_hides_the_sidebar_and_enlarges_figure_text():
    at = open_lessons(step=3, present=1)
    css = "\n".join(str(m.value) for m in at.markdown if "<style>" in str(m.value))
    assert '[data-testid="stSidebar"]' in css and "display: none" in css
    assert at.toggle(key="lesson_present_toggle").value is True
    at.button(key="lesson_reveal").click().run()
    (spec,) = charts(at)
    assert min(font_sizes(spec)) >= lesson_figures.PROJECTOR_MIN_FONT
    assert at.query_params["present"] == "1"
    at.toggle(key="lesson_present_toggle").set_value(False).run()
    assert "present" not in at.query_params
    assert not any("<style>" in str(m.value) for m in at.markdown)


def test_every_lesson_figure_is_readable_on_a_projector():
    for step in STEPS:
        spec = json.loads(lesson_figures.for_projector(step.build().figure).to_json())
        assert min(font_sizes(spec)) >= lesson_figures.PROJECTOR_MIN_FONT, step.slug


# --- the class poll -----------------------------------------------------------------------------------


def page_texts(at: AppTest) -> list[str]:
    """Every element the page drew, as text (its protobuf): what a screen or its screenshot could show."""
    def walk(node):
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            for child in children.values():
                yield from walk(child)
        else:
            yield str(getattr(node, "proto", ""))

    return list(walk(at._tree))


def url_text(at: AppTest) -> str:
    return "&".join(f"{k}={v}" for k, v in at.query_params.items())


@pytest.fixture
def store(poll_database):
    """The store the page uses (the same SQLite file), to read what the page did."""
    with open_store(str(poll_database)) as opened:
        yield opened


def start_class(step: int = 1, **query) -> tuple[AppTest, str]:
    teacher = open_lessons(step=step, **query)
    teacher.button(key="lesson_start").click().run()
    assert_clean(teacher)
    code, key = teacher.session_state["lesson_teach"], teacher.session_state["lesson_teacher_key"]
    assert f"Class code: **{code}**" in markdown(teacher)
    assert len(key) >= 22 and key not in url_text(teacher) and code not in url_text(teacher)  # the URL: the step
    assert set(teacher.query_params) & {"teach", "resume", "class", "me"} == set()
    return teacher, code


def teacher_key(teacher: AppTest) -> str:
    return teacher.session_state["lesson_teacher_key"]


def resume_link(teacher: AppTest) -> str:
    """The private resume link the teacher's screen shows (in its collapsed expander)."""
    (link,) = [c.value for c in teacher.get("code") if "resume=" in c.value]
    return link


def join(code: str, how: str = "link") -> AppTest:
    if how == "link":
        return open_lessons(**{"class": code})
    student = open_lessons()
    student.text_input(key="lesson_join_code").set_value(code.lower()).run()  # typed in lower case
    student.button(key="lesson_join").click().run()
    assert_clean(student)
    return student


def send(student: AppTest, slug: str, choice: int, errors_allowed: bool = False) -> None:
    student.radio(key=f"lesson_class_pick_{slug}").set_value(choice).run()
    student.button(key="lesson_send").click().run()
    assert_clean(student, errors_allowed)


def teacher_buttons(at: AppTest) -> set[str]:
    return {b.key for b in at.button} & {"lesson_class_reveal", "lesson_end"}


def test_a_class_poll_counts_answers_and_reveals():
    teacher, code = start_class()
    live = STEPS[0].build()
    students = [join(code, "link"), join(code, "typed"), join(code, "typed")]
    for student in students:
        assert student.session_state["lesson_class"] == code and not student.get("plotly_chart")
        assert dict(student.query_params).items() >= {"class": code, "step": "1"}.items()
    picks = [live.answer, live.answer, (live.answer + 1) % len(live.choices)]
    for student, pick in zip(students, picks):
        send(student, "before-attention", pick)
        assert f"Answer {lessons.letter(pick)} sent" in messages(student)
    teacher.run()
    assert "3 of 3 students answered" in markdown(teacher)
    counts = [c for c in charts(teacher)]
    assert len(counts) == 1 and sorted(counts[0]["data"][0]["x"]) == [0] * (len(live.choices) - 2) + [1, 2]

    teacher.button(key="lesson_class_reveal").click().run()
    assert_clean(teacher)
    assert "2 of 3 right" in messages(teacher) and len(charts(teacher)) == 1
    for student in students[:2]:
        student.run()
        assert "✓" in messages(student) and len(student.get("plotly_chart")) == 1
        assert "The class: " in messages(student) and "2 of 3 right" in messages(student)  # public once revealed
    students[2].run()
    assert "✗" in messages(students[2])


def test_a_copied_student_url_joins_as_a_new_student_and_cannot_change_the_first_answer(store):
    teacher, code = start_class()
    first = join(code)
    send(first, "before-attention", 0)
    token = first.session_state["lesson_student_tokens"][code]
    assert first.query_params["class"] == code
    assert token not in url_text(first) and "me" not in first.query_params  # the URL holds no identity

    copied = open_lessons(**dict(first.query_params))  # another laptop opens the same address
    assert copied.session_state["lesson_class"] == code
    assert copied.session_state["lesson_student_tokens"][code] != token  # a new student ...
    assert "You joined class" in messages(copied)
    send(copied, "before-attention", 1)  # ... whose answer is their own
    teacher.run()
    assert "2 of 2 students answered" in markdown(teacher)
    assert store.counts(code, 1, teacher_key(teacher)) == {"A": 1, "B": 1}


def test_a_double_answer_and_a_rejoin_in_the_same_session_count_once(store):
    teacher, code = start_class()
    student = join(code)
    token = student.session_state["lesson_student_tokens"][code]
    send(student, "before-attention", 0)
    send(student, "before-attention", 1)
    assert "only your latest answer counts" in messages(student)
    teacher.run()
    assert "1 of 1 students answered" in markdown(teacher)

    student.button(key="lesson_leave").click().run()  # leaves, then joins again from the same session
    assert "lesson_class" not in student.session_state and "class" not in student.query_params
    student.text_input(key="lesson_join_code").set_value(code).run()
    student.button(key="lesson_join").click().run()
    assert "You are back in class" in messages(student)
    assert student.session_state["lesson_student_tokens"][code] == token
    send(student, "before-attention", 2)
    assert "only your latest answer counts" in messages(student)
    teacher.run()
    assert "1 of 1 students answered" in markdown(teacher)
    info = store.session_info(code)
    assert (info.students, info.answered) == (1, 1)
    assert store.counts(code, 1, teacher_key(teacher)) == {"C": 1}


def test_students_follow_the_teachers_step_and_a_late_joiner_answers_it():
    teacher, code = start_class(step=1)
    early = join(code)
    teacher.button(key="lesson_next").click().run()
    teacher.button(key="lesson_next").click().run()
    early.run()
    assert early.title[0].value.startswith("3.") and early.query_params["step"] == "3"
    late = join(code, "typed")
    assert late.title[0].value.startswith("3.")
    send(late, STEPS[2].slug, 0)
    teacher.run()
    assert "1 of 2 students answered" in markdown(teacher)


def test_a_reloaded_teacher_page_resumes_with_its_private_link_and_keeps_its_counts():
    teacher, code = start_class(step=2)
    for _ in range(2):
        send(join(code), STEPS[1].slug, 1)
    link = resume_link(teacher)
    key = teacher_key(teacher)
    assert link.endswith(f"/lessons?resume={code}.{key}")
    assert [e.label for e in teacher.main.expander] == ["Private: resume this poll after a reload",
                                                         f"Report of class {code}"]

    reloaded = open_lessons(**{k: v[0] for k, v in parse_qs(urlsplit(link).query).items()})
    assert reloaded.session_state["lesson_teach"] == code and teacher_key(reloaded) == key
    assert "resume" not in reloaded.query_params and key not in url_text(reloaded)  # gone from the address bar
    assert reloaded.title[0].value.startswith("2.")  # the class's step
    assert "2 of 2 students answered" in markdown(reloaded)
    assert f"Class poll {code} resumed: 2 students have joined" in messages(reloaded)

    pasted = open_lessons()  # or the code pasted into the page
    pasted.text_input(key="lesson_resume_code").set_value(f"  {code}.{key} ").run()
    pasted.button(key="lesson_resume").click().run()
    assert_clean(pasted)
    assert pasted.session_state["lesson_teach"] == code and "2 of 2 students answered" in markdown(pasted)
    assert pasted.session_state["lesson_resume_code"] == ""  # the key does not stay in the box
    pasted.button(key="lesson_next").click().run()  # its buttons work: the class moves
    assert join(code).title[0].value.startswith("3.")


def test_presenter_mode_never_draws_the_teachers_key():
    teacher, code = start_class(present=1)
    key = teacher_key(teacher)
    assert teacher.query_params["present"] == "1"
    assert not teacher.main.expander and not [t for t in page_texts(teacher) if key in t]
    assert "hidden in presenter mode" in "\n".join(c.value for c in teacher.caption)
    assert "leave presenter mode on your own screen" in messages(teacher)
    teacher.toggle(key="lesson_present_toggle").set_value(False).run()  # on the teacher's own screen
    assert resume_link(teacher).endswith(f"resume={code}.{key}")


def test_a_student_with_the_class_code_gets_no_teacher_powers(store):
    teacher, code = start_class()
    student = join(code)
    assert not teacher_buttons(student)
    assert not [b for b in student.button if b.key in ("lesson_next", "lesson_prev")]  # the teacher chooses

    intruder = open_lessons(step=5, teach=code)  # the teacher's code, as older links carried it
    assert "teacher controls open only with the private resume link" in messages(intruder)
    assert "lesson_teach" not in intruder.session_state and not teacher_buttons(intruder)
    assert "teach" not in intruder.query_params
    intruder.button(key="lesson_next").click().run()  # moves this screen only
    assert intruder.title[0].value.startswith("6.")
    assert store.session_info(code).step == 1
    assert student.run().title[0].value.startswith("1.")

    # A page that believed itself the teacher, with a made-up key, gets nothing from the store.
    intruder.session_state["lesson_teach"] = code
    intruder.session_state["lesson_teacher_key"] = "kq3JH0aV8Zt2-abcdefghi"
    intruder.run()
    assert f"That teacher key does not open class {code}" in messages(intruder)
    assert "lesson_class_reveal" not in teacher_buttons(intruder)
    intruder.button(key="lesson_next").click().run()
    assert f"That teacher key does not open class {code}" in messages(intruder)
    intruder.button(key="lesson_end").click().run()
    assert "lesson_teach" not in intruder.session_state
    info = store.session_info(code)  # the class is still on, where the teacher left it
    assert (info.step, info.revealed) == (1, False)


@pytest.mark.parametrize("forged", ["{code}.{guess}", "{code}.{other_key}", "hello"])
def test_a_forged_teacher_key_is_refused_with_a_message(store, forged):
    teacher, code = start_class()
    _, other = start_class()
    text = forged.format(code=code, guess="kq3JH0aV8Zt2-abcdefghi", other_key=teacher_key(_))
    expected = "not a resume code" if forged == "hello" else f"That teacher key does not open class {code}"

    by_link = open_lessons(errors_allowed=True, resume=text)
    assert expected in messages(by_link) and "lesson_teach" not in by_link.session_state
    assert "resume" not in by_link.query_params and not teacher_buttons(by_link)
    by_box = open_lessons()
    by_box.text_input(key="lesson_resume_code").set_value(text).run()
    by_box.button(key="lesson_resume").click().run()
    assert expected in messages(by_box) and "lesson_teach" not in by_box.session_state
    assert store.session_info(code).step == 1


def test_a_teacher_key_replayed_after_the_poll_ended_is_refused():
    teacher, code = start_class()
    student = join(code)
    link = resume_link(teacher)
    teacher.button(key="lesson_end").click().run()
    assert f"Class poll {code} has ended" in messages(teacher) and "lesson_teach" not in teacher.session_state
    assert teacher.button(key="lesson_start")

    replayed = open_lessons(errors_allowed=True, resume=parse_qs(urlsplit(link).query)["resume"][0])
    assert f"Class {code} has ended: the teacher ended the poll" in messages(replayed)
    assert "lesson_teach" not in replayed.session_state and not teacher_buttons(replayed)
    student.run()  # the students' pages say so, and the lesson goes on alone
    assert "has ended" in messages(student) and "lesson_class" not in student.session_state
    assert student.button(key="lesson_reveal")


def test_a_student_token_of_another_class_is_refused(store):
    _, code = start_class()
    elsewhere, other_code = start_class()
    stranger = join(other_code)
    student = join(code)
    student.session_state["lesson_student_tokens"] = {code: stranger.session_state["lesson_student_tokens"][other_code]}
    send(student, "before-attention", 0, errors_allowed=True)
    assert f"a student of another class, not of class {code}" in messages(student)
    assert store.session_info(code).answered == 0
    assert store.session_info(other_code).answered == 0


def test_an_answer_for_a_step_that_is_not_open_is_refused(store):
    teacher, code = start_class(step=1)
    student = join(code)
    student.radio(key="lesson_class_pick_before-attention").set_value(0).run()
    teacher.button(key="lesson_next").click().run()  # the class moves on before the student sends
    student.button(key="lesson_send").click().run()
    assert_clean(student, errors_allowed=True)
    assert f"Class {code} is on step 2, not step 1" in messages(student)
    assert student.title[0].value.startswith("2.")  # and the student's page follows the class
    assert store.counts(code, 1, teacher_key(teacher)) == {} and store.session_info(code).answered == 0


def test_an_answer_after_the_reveal_is_refused_with_a_message():
    teacher, code = start_class()
    student = join(code)
    student.radio(key="lesson_class_pick_before-attention").set_value(0).run()
    teacher.button(key="lesson_class_reveal").click().run()
    student.button(key="lesson_send").click().run()  # the student's page has not refreshed yet
    assert not student.exception
    assert "revealed" in messages(student)


# --- a student's own answer is the one the class counted ------------------------------------------------


@pytest.fixture
def cookies(monkeypatch):
    """One browser's cookies: a page opened while the jar holds a class's token is another tab of that browser
    (or the same tab reloaded). AppTest has no browser, so the page's cookie reader reads this jar."""
    jar: dict[str, str] = {}
    monkeypatch.setattr(class_actions, "browser_token", lambda code: jar.get(class_actions.STUDENT_COOKIE + code))
    return jar


def same_browser(cookies: dict, student: AppTest, code: str) -> None:
    """What the student's page leaves in its browser: the class's cookie with its token."""
    cookies[class_actions.STUDENT_COOKIE + code] = student.session_state["lesson_student_tokens"][code]


def captions(at: AppTest) -> str:
    return "\n".join(str(c.value) for c in at.caption)


def your_answer(live, index: int) -> str:
    """How the reveal names a student's answer, with its mark: "**Your answer: B: …** ✗"."""
    return f"**Your answer: {lessons.letter(index)}: {live.choices[index]}** {'✓' if index == live.answer else '✗'}"


def test_a_second_tab_that_changes_the_answer_changes_what_the_first_tab_shows(store, cookies):
    teacher, code = start_class()
    step, live = STEPS[0], STEPS[0].build()
    right, wrong = live.answer, (live.answer + 1) % len(live.choices)
    first = join(code)
    send(first, step.slug, right)  # B, say, in the first tab ...
    same_browser(cookies, first, code)
    second = join(code)  # ... the class link opened again in a second tab of the same browser ...
    assert second.session_state["lesson_student_tokens"] == first.session_state["lesson_student_tokens"]
    assert second.radio(key=f"lesson_class_pick_{step.slug}").value == right  # (it shows what was sent)
    send(second, step.slug, wrong)  # ... which sends C: the class counts C, once
    assert store.counts(code, 1, teacher_key(teacher)) == {lessons.letter(wrong): 1}

    first.run()  # the first tab, before the reveal: the answer counted, in the radio and the caption
    assert first.radio(key=f"lesson_class_pick_{step.slug}").value == wrong
    assert f"Sent: {lessons.letter(wrong)}" in captions(first)
    teacher.button(key="lesson_class_reveal").click().run()
    for tab in (first, second):  # at the reveal, both tabs: C, marked from C
        tab.run()
        assert_clean(tab)
        assert your_answer(live, wrong) in messages(tab) and your_answer(live, right) not in messages(tab)


def test_a_reloaded_student_page_keeps_its_answer_before_and_after_the_reveal(store, cookies):
    teacher, code = start_class()
    step, live = STEPS[0], STEPS[0].build()
    wrong = (live.answer + 1) % len(live.choices)
    student = join(code)
    send(student, step.slug, wrong)
    same_browser(cookies, student, code)

    reloaded = join(code)  # a fresh session of the same browser
    assert "You are back in class" in messages(reloaded)
    assert reloaded.radio(key=f"lesson_class_pick_{step.slug}").value == wrong  # the radio holds it ...
    assert f"Sent: {lessons.letter(wrong)} — you may change it" in captions(reloaded)  # ... sent, says the caption
    teacher.button(key="lesson_class_reveal").click().run()
    reloaded.run()
    assert your_answer(live, wrong) in messages(reloaded)
    after = join(code)  # reloaded again, after the reveal
    assert_clean(after)
    assert your_answer(live, wrong) in messages(after) and "of 1 right" in messages(after)
    assert store.session_info(code).answered == 1


def test_a_student_who_did_not_answer_is_told_so_at_the_reveal(cookies):
    teacher, code = start_class()
    student = join(code)
    teacher.button(key="lesson_class_reveal").click().run()
    student.run()
    assert "Your answer" not in messages(student) and "0 of 0 right" in messages(student)
    assert "✓" not in messages(student) and "✗" not in messages(student)


# --- the projector and a student's laptop ----------------------------------------------------------------


def test_the_projected_screen_shows_how_many_answered_but_not_how_until_the_reveal():
    teacher, code = start_class(present=1)
    live = STEPS[0].build()
    send(join(code), STEPS[0].slug, live.answer)
    teacher.run()
    assert "1 of 1 students answered" in markdown(teacher)
    assert not charts(teacher)  # no chart of the class's answers while students still answer
    teacher.button(key="lesson_class_reveal").click().run()
    assert_clean(teacher)
    assert "1 of 1 right" in messages(teacher) and len(charts(teacher)) == 1  # how it went; the step's figure

    own_screen = start_class()[0]  # the teacher's own screen, not projected, keeps the live chart
    send(join(own_screen.session_state["lesson_teach"]), STEPS[0].slug, live.answer)
    own_screen.run()
    assert [spec["layout"]["title"]["text"] for spec in charts(own_screen)] == ["the class's answers so far"]


def test_down_reveals_the_answer_as_right_steps():
    teacher, _ = start_class()
    shortcuts = {b.key: b.proto.shortcut for b in teacher.button}  # as Streamlit spells them: lower case
    assert (shortcuts["lesson_prev"], shortcuts["lesson_next"], shortcuts["lesson_class_reveal"]) == (
        "left", "right", "down")
    assert open_lessons(step=2).button(key="lesson_reveal").proto.shortcut == "down"  # alone, too
    assert "↓ reveals the answer" in teacher.toggle(key="lesson_present_toggle").help


def sidebar_widgets(at: AppTest) -> list:
    return [*at.sidebar.selectbox, *at.sidebar.text_area, *at.sidebar.number_input]


def hidden_sidebar(at: AppTest) -> bool:
    css = "\n".join(str(m.value) for m in at.markdown if "<style>" in str(m.value))
    return '[data-testid="stSidebar"]' in css and "display: none" in css


def test_a_students_class_view_has_no_model_settings(store):
    teacher, code = start_class()
    assert sidebar_widgets(teacher) and not hidden_sidebar(teacher)  # the teacher's own screen keeps them
    student = join(code)
    assert not sidebar_widgets(student) and hidden_sidebar(student)  # the lesson is all a student sees
    assert "preset" not in student.query_params  # nor does the app's state fill the class link
    send(student, STEPS[0].slug, 0)
    assert not sidebar_widgets(student) and store.session_info(code).answered == 1
    student.button(key="lesson_leave").click().run()  # out of the class, the app is whole again
    assert sidebar_widgets(student) and not hidden_sidebar(student)


@pytest.mark.parametrize("code", ["ZZZZZ", "", "   ", "!!"])
def test_a_wrong_code_is_a_message_not_a_traceback(code):
    student = open_lessons()
    student.text_input(key="lesson_join_code").set_value(code).run()
    student.button(key="lesson_join").click().run()
    assert not student.exception
    assert student.error and "lesson_class" not in student.session_state
    assert "code" in student.error[0].value.lower()
    by_link = open_lessons(errors_allowed=True, **{"class": code or "ZZZZZ"})
    assert by_link.error and "lesson_class" not in by_link.session_state


def test_an_expired_code_is_a_message_for_teacher_and_student(store):
    old = store.create_session(now=0.0)  # created in 1970: long expired
    student = open_lessons(errors_allowed=True, **{"class": old.code})
    assert student.error and "ended" in student.error[0].value and "lesson_class" not in student.session_state
    teacher = open_lessons(errors_allowed=True, resume=f"{old.code}.{old.teacher_key}")
    assert teacher.error and "has ended" in teacher.error[0].value and "lesson_teach" not in teacher.session_state
    assert teacher.button(key="lesson_start")  # the teacher can start a new poll


@pytest.mark.parametrize("address, problem", [
    ("http://" + "x" * 10_000 + ".example", "this one has 10,015 characters"),
    ("ftp://192.168.1.20", "must be an http:// or https:// address"),
    ("javascript:alert(1)", "must be an http:// or https:// address"),
    ("http://", "with a host"),
    ("http://192.168.1.20:8501 /x", "without spaces"),
    ("http://192.168.1.20:99999", "does not read as an address"),
    ("http://192.168.1.20:8501/?step=1", "without ? or #"),
], ids=["10000-characters", "ftp", "javascript", "no-host", "space", "bad-port", "query"])
def test_a_bad_student_address_is_a_message_and_the_page_still_works(address, problem):
    teacher, code = start_class()
    images = len(teacher.get("image"))
    teacher.text_input(key="lesson_base").set_value(address).run()
    assert not teacher.exception
    (error,) = [e.value for e in teacher.error]
    assert problem in error and "http:// or https:// address with a host, at most 200 characters" in error
    assert len(teacher.get("image")) == images - 1  # no QR code ...
    assert not [m for m in teacher.markdown if "/lessons?" in str(m.value)]  # ... and no link
    codes = [c.value for c in teacher.get("code")]
    assert f"{code}.{teacher_key(teacher)}" in codes and not [c for c in codes if "resume=" in c]  # the code only
    teacher.button(key="lesson_class_reveal").click().run()  # the lesson and the poll go on
    assert not teacher.exception and len(charts(teacher)) == 1
    teacher.text_input(key="lesson_base").set_value("http://192.168.1.20:8501").run()
    assert len(teacher.get("image")) == images and not teacher.error
    assert f"192.168.1.20:8501/lessons?step=1&class={code}" in markdown(teacher)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # free once closed: nothing listens there


@pytest.mark.parametrize("database", ["postgresql", "sqlite"])
def test_a_stopped_database_says_the_poll_is_unavailable_and_the_lesson_goes_on(monkeypatch, database):
    stopped = (f"postgresql://lab@127.0.0.1:{closed_port()}/attention_lab" if database == "postgresql"
               else "/dev/null/poll.sqlite3")  # a file that cannot be made, whoever runs the test
    monkeypatch.setenv("ATTENTION_LAB_DB", stopped)
    at = open_lessons()
    at.button(key="lesson_start").click().run()
    assert not at.exception and "The class poll is unavailable" in at.error[0].value
    assert "The lesson goes on without it" in at.error[0].value and "lesson_teach" not in at.session_state
    at.text_input(key="lesson_join_code").set_value("K7QPM").run()
    at.button(key="lesson_join").click().run()
    assert "The class poll is unavailable" in at.error[0].value
    at.button(key="lesson_reveal").click().run()  # the lesson itself works
    assert not at.exception and len(at.get("plotly_chart")) == 1


def test_a_database_that_stops_during_a_class_leaves_the_lesson_running(monkeypatch):
    teacher, code = start_class()
    student = join(code)
    monkeypatch.setenv("ATTENTION_LAB_DB", f"postgresql://lab@127.0.0.1:{closed_port()}/attention_lab")
    teacher.run()
    assert not teacher.exception and "The class poll is unavailable" in messages(teacher)
    teacher.button(key="lesson_reveal").click().run()  # the teacher's lesson goes on, alone
    assert not teacher.exception and len(charts(teacher)) == 1
    student.run()
    assert not student.exception and "The class poll is unavailable" in messages(student)
    assert "lesson_class" not in student.session_state and student.button(key="lesson_reveal")


def test_limits_reached_are_clear_messages(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_MAX_STUDENTS", "1")
    monkeypatch.setenv("ATTENTION_LAB_MAX_POLLS", "1")
    teacher, code = start_class()
    join(code)
    second = open_lessons(errors_allowed=True, **{"class": code})
    assert f"Class {code} is full: 1 of 1 places are taken" in messages(second)
    assert "lesson_class" not in second.session_state
    another = open_lessons()
    another.button(key="lesson_start").click().run()
    assert "This server holds 1 of 1 class polls" in messages(another) and "lesson_teach" not in another.session_state


def another_programs_database(path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE pupils (name TEXT)")
    conn.close()


def a_corrupt_file(path) -> None:
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)  # a database's first words, then nothing it can read


@pytest.mark.parametrize("make, said", [(another_programs_database, "holds another program's tables (pupils)"),
                                        (a_corrupt_file, "is not a SQLite database")], ids=["foreign", "corrupt"])
def test_a_database_file_of_another_program_or_corrupt_is_a_message_and_left_as_it_is(monkeypatch, tmp_path, make,
                                                                                       said):
    path = tmp_path / "gradebook.sqlite3"
    make(path)
    before, files = path.read_bytes(), sorted(tmp_path.iterdir())
    monkeypatch.setenv("ATTENTION_LAB_DB", str(path))
    at = open_lessons()
    at.button(key="lesson_start").click().run()
    assert not at.exception and "The class poll is unavailable" in at.error[0].value
    assert said in at.error[0].value and "ATTENTION_LAB_DB" in at.error[0].value
    assert path.read_bytes() == before and sorted(tmp_path.iterdir()) == files  # nothing written, nothing beside it
    assert "lesson_start" in [b.key for b in at.button] and at.title  # the lesson goes on without the poll


def test_an_unusable_database_url_is_a_message(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_DB", "mysql://nowhere/db")
    at = open_lessons()
    at.button(key="lesson_start").click().run()
    assert not at.exception and at.error and "The class poll is unavailable" in at.error[0].value
    at.button(key="lesson_reveal").click().run()
    assert len(at.get("plotly_chart")) == 1


# --- the teacher's report ------------------------------------------------------------------------------------


@pytest.fixture
def downloads(monkeypatch):
    """file name -> (MIME type, the function that writes the file) of every deferred download a page drew: what a
    click on the button would send (AppTest has no browser to click it)."""
    drawn = {}
    real = MediaFileManager.add_deferred

    def spy(self, data, mimetype, coordinates, file_name=None, **kwargs):
        drawn[file_name] = (mimetype, data)
        return real(self, data, mimetype, coordinates, file_name, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", spy)
    return drawn


def expanders(at: AppTest) -> list[str]:
    return [e.label for e in at.main.expander]


def test_the_teachers_report_counts_the_class_and_downloads_as_csv_and_html(store, downloads):
    teacher, code = start_class()
    live = STEPS[0].build()
    right, wrong = live.answer, (live.answer + 1) % len(live.choices)
    students = [join(code) for _ in range(3)]  # the third never answers
    send(students[0], STEPS[0].slug, right)
    send(students[1], STEPS[0].slug, wrong)
    teacher.button(key="lesson_class_reveal").click().run()
    teacher.button(key="lesson_next").click().run()
    students[0].run()
    send(students[0], STEPS[1].slug, 0)
    teacher.run()
    assert_clean(teacher)

    assert f"Report of class {code}" in expanders(teacher)
    text = markdown(teacher)
    assert "3 students joined; 2 answered at least half of the class's 2 steps." in text
    assert f"Hardest: step 1, {STEPS[0].title} (50% right of 2)." in text
    report = store.report(code, teacher_key(teacher))
    titles = report_panel.step_titles()
    mime, written = downloads[f"attention-lab-class-{code}-report.csv"]
    assert mime == "text/csv" and written() == report_csv(report, titles)  # the file: the store's report
    rows = {row["step"]: row for row in csv.DictReader(io.StringIO(written()))}
    one = rows["1"]
    assert (one["title"], one["joined"], one["answered"], one["right_answer"], one["right"], one["share_right"]) == (
        STEPS[0].title, "3", "2", lessons.letter(right), "1", "0.500")
    assert (one["most_common_wrong"], one["most_common_wrong_count"], one["revealed"]) == (
        lessons.letter(wrong), "1", "yes")
    assert [one[f"count {lessons.letter(i)}"] for i in range(len(live.choices))] == [
        "1" if i in (right, wrong) else "0" for i in range(len(live.choices))]  # every choice, the unchosen at 0
    assert float(one["median_seconds_to_answer"]) >= 0 and one["answers_timed"] == "2"
    assert (rows["2"]["answered"], rows["2"]["right_answer"], rows["2"]["note"]) == (
        "1", "", "not revealed yet: no right answer recorded")
    mime, written = downloads[f"attention-lab-class-{code}-report.html"]
    assert mime == "text/html" and written() == report_html(report, titles)
    assert written().count("<svg") >= 2 and "<script" not in written()  # the charts are static SVG


def test_the_report_says_in_words_an_empty_class_no_answers_and_a_step_without_a_right_answer():
    teacher, code = start_class()
    assert "No student has joined this class yet: there is nothing to report." in markdown(teacher)
    student = join(code)
    teacher.run()
    assert "No student has answered yet." in markdown(teacher)
    (table,) = teacher.dataframe
    row = table.value.to_dict("records")[0]
    assert (row["step"], row["answered"], row["right answer"], row["right"], row["each choice"], row["median time"],
            row["note"]) == (1, 0, "—", "—", "—", "—", "no answers")
    send(student, STEPS[0].slug, 0)
    teacher.run()
    assert "No step with answers has been revealed yet: the share right comes with the reveal." in markdown(teacher)
    row = teacher.dataframe[0].value.to_dict("records")[0]
    assert (row["answered"], row["right answer"], row["right"], row["note"]) == (
        1, "—", "—", "not revealed yet: no right answer recorded")
    assert_clean(teacher)


def test_the_report_is_never_projected():
    teacher, code = start_class(present=1)
    send(join(code), STEPS[0].slug, 0)
    teacher.run()
    assert not expanders(teacher) and not teacher.get("download_button")
    assert "The class report is on your own screen" in captions(teacher)
    assert "students joined" not in markdown(teacher)


def test_an_ended_class_keeps_its_report_on_the_teachers_screen_until_its_rows_go(store, downloads, poll_database):
    teacher, code = start_class()
    send(join(code), STEPS[0].slug, 0)
    link = resume_link(teacher)
    teacher.button(key="lesson_end").click().run()
    assert_clean(teacher)
    assert "Its report stays on this screen until then" in messages(teacher)
    assert expanders(teacher) == [f"Report of class {code} (ended)"] and "lesson_teach" not in teacher.session_state
    assert "1 student joined" in markdown(teacher) and "ended by the teacher" in markdown(teacher)
    assert f"attention-lab-class-{code}-report.csv" in downloads

    reloaded = open_lessons(errors_allowed=True, resume=parse_qs(urlsplit(link).query)["resume"][0])
    assert "has ended" in messages(reloaded) and f"The report of class {code} stays on this screen" in messages(reloaded)
    assert expanders(reloaded) == [f"Report of class {code} (ended)"] and not teacher_buttons(reloaded)

    with sqlite3.connect(poll_database) as conn:  # an hour later, the class's rows are purged
        for table in ("poll_answers", "poll_reveals", "poll_openings", "poll_students", "poll_sessions"):
            conn.execute(f"DELETE FROM {table} WHERE code = ?", (code,))
    conn.close()
    teacher.run()
    assert not teacher.exception
    assert f"No class with code {code}: a class's answers are deleted an hour after it ends" in teacher.error[0].value
    teacher.button(key="lesson_report_close").click().run()
    assert not expanders(teacher) and not teacher.error


# --- homework ----------------------------------------------------------------------------------------------


def homework_buttons(at: AppTest) -> list:
    return [b for b in at.get("download_button") if b.key == "lesson_homework"]


def test_the_homework_button_is_on_the_lesson_but_not_projected_nor_in_a_class(downloads):
    at = open_lessons(step=3)
    (button,) = homework_buttons(at)
    assert button.label == "Download this lesson for homework" and button.proto.deferred_file_id  # built on click
    mime, written = downloads["attention-lab-lesson.html"]
    assert mime == "text/html" and written is classroom.homework_file
    assert not homework_buttons(open_lessons(step=3, present=1))  # not on the projector
    teacher, code = start_class()
    assert homework_buttons(teacher)  # the teacher's own screen has it
    assert not homework_buttons(join(code))  # a student in class follows the teacher's step


def test_the_homework_file_says_why_a_step_failed_and_keeps_the_rest(monkeypatch):
    def fails():
        raise ValueError("no checkpoint for this step")

    monkeypatch.setattr(classroom, "STEPS", [STEPS[0], dataclasses.replace(STEPS[1], build=fails)])
    document = classroom.homework_file()
    live = STEPS[0].build()
    assert document.count('<section class="step"') == 2 and html.escape(live.question) in document
    assert "could not be computed when the file was written (ValueError: no checkpoint for this step)" in document
