"""The Lessons page under Streamlit's AppTest: every step asks before it shows, answering reveals the true
answer and the figure; the step and presenter mode live in the URL; the class poll's teacher and students,
with bad input (wrong or expired code, a double answer, a late joiner, a reloaded teacher page).

The true answers themselves are checked against the library where a test can recompute them
independently (the trained head's choice, the KV-cache bytes, the skipped tiles, the parameter share).
"""
import json

import numpy as np
import pytest

from streamlit.testing.v1 import AppTest

from apptest_helpers import APP, assert_clean
from transformer import MODEL_CARDS, kv_cache_bytes_per_token, param_counts
from transformer.flash import tile_plan
from ui.figures import lesson as lesson_figures
from ui.lessons import steps as lessons
from ui.lessons.classroom import N_STEPS
from ui.lessons.poll_store import open_store

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


def test_the_steps_are_data_and_the_lecture_in_order():
    assert len(STEPS) == N_STEPS == 12
    assert len({s.slug for s in STEPS}) == N_STEPS
    assert [s.slug for s in STEPS][:3] == ["soft-lookup", "five-lines", "masks"]
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
    at.radio(key="lesson_pick_soft-lookup").set_value(live.answer).run()
    at.button(key="lesson_check").click().run()
    assert "✓" in messages(at)
    at = open_lessons(step=2)
    at.button(key="lesson_reveal").click().run()
    assert f"{lessons.letter(STEPS[1].build().answer)}:" in messages(at) and len(at.get("plotly_chart")) == 1


# --- the true answers come from the model and the library ----------------------------------------


def test_the_soft_lookup_answer_is_the_trained_heads_argmax():
    model = lessons.lesson_model()
    live = STEPS[0].build()
    layer, head, query = (int(live.query[k]) for k in ("layer", "head", "query"))
    looked = int(np.argmax(model.trace.pattern(layer)[head, query]))
    assert live.choices[live.answer] == lessons.token_name(model, looked)
    assert model.trained and "Weights of trained checkpoint" in live.caption
    if "clearest induction head" in live.caption:  # it looks at the token after the earlier copy of the query's token
        earlier = max(j for j in range(query) if model.tokens.ids[j] == model.tokens.ids[query])
        assert looked == earlier + 1
    else:  # no head of the checkpoint follows copies: its clearest previous-token head, on its clearest query
        assert "clearest previous-token head" in live.caption and looked == query - 1


def test_the_kv_cache_answer_is_the_presets_arithmetic():
    real = MODEL_CARDS["llama2"].real["70B"]
    live = STEPS[8].build()
    assert kv_cache_bytes_per_token(real) * 4096 == 2 * 80 * 8 * 128 * 2 * 4096
    assert live.choices[live.answer] == lessons.binary_size(kv_cache_bytes_per_token(real) * 4096) == "1.25 GiB"


def test_the_flash_and_moe_answers_are_computed():
    skipped = sum(t.skipped for t in tile_plan(32, 32, 8, 8, is_causal=True))
    live = STEPS[9].build()
    assert live.choices[live.answer].startswith(f"{skipped} of 16")
    counts = param_counts(MODEL_CARDS["mixtral"].real["8x7B"])
    assert 0.2 < counts["active"] / counts["total"] < 0.35
    assert STEPS[7].build().choices[STEPS[7].build().answer] == "About 1/4"


def test_the_images_step_links_to_the_vision_page_only_when_it_exists(monkeypatch):
    step = STEPS[10]
    monkeypatch.setattr(lessons, "page_exists", lambda page: False)
    assert step.link() is None
    monkeypatch.setattr(lessons, "page_exists", lambda page: True)
    assert step.link() == "vit"
    patches = lessons.patches_of(lessons.synthetic_image(), 2)
    assert patches.shape == (16, 4)
    assert np.array_equal(patches[1], lessons.synthetic_image()[0:2, 2:4].reshape(-1))  # reading order, row by row


# --- the URL, the keyboard buttons and presenter mode -----------------------------------------------


def test_the_step_lives_in_the_url_and_the_buttons_move_it():
    at = open_lessons(step=3)
    assert at.query_params["step"] == "3"
    at.button(key="lesson_next").click().run()
    assert at.title[0].value.startswith("4.") and at.query_params["step"] == "4"
    at.button(key="lesson_prev").click().run()
    at.button(key="lesson_prev").click().run()
    assert at.title[0].value.startswith("2.") and at.query_params["step"] == "2"
    at.selectbox(key="lesson_jump").set_value(12).run()
    assert at.title[0].value.startswith("12.") and at.button(key="lesson_next").disabled


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


def start_class(step: int = 1) -> tuple[AppTest, str]:
    teacher = open_lessons(step=step)
    teacher.button(key="lesson_start").click().run()
    assert_clean(teacher)
    code = teacher.session_state["lesson_teach"]
    assert f"Class code: **{code}**" in markdown(teacher)
    assert teacher.query_params["teach"] == code
    return teacher, code


def join(code: str, how: str = "link") -> AppTest:
    if how == "link":
        return open_lessons(**{"class": code})
    student = open_lessons()
    student.text_input(key="lesson_join_code").set_value(code.lower()).run()  # typed in lower case
    student.button(key="lesson_join").click().run()
    assert_clean(student)
    return student


def send(student: AppTest, slug: str, choice: int) -> None:
    student.radio(key=f"lesson_class_pick_{slug}").set_value(choice).run()
    student.button(key="lesson_send").click().run()
    assert_clean(student)


def test_a_class_poll_counts_answers_and_reveals():
    teacher, code = start_class()
    live = STEPS[0].build()
    students = [join(code, "link"), join(code, "typed"), join(code, "typed")]
    for student in students:
        assert student.session_state["lesson_class"] == code and not student.get("plotly_chart")
        assert student.query_params["class"] == code
    for i, student in enumerate(students):
        send(student, "soft-lookup", [live.answer, live.answer, (live.answer + 1) % len(live.choices)][i])
        assert f"Answer {lessons.letter([live.answer, live.answer, (live.answer + 1) % len(live.choices)][i])} sent" \
               in messages(student)
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
    students[2].run()
    assert "✗" in messages(students[2])


def test_a_double_answer_replaces_the_first_and_the_count_stays_right():
    teacher, code = start_class()
    student = join(code)
    send(student, "soft-lookup", 0)
    send(student, "soft-lookup", 1)
    assert "only your latest answer counts" in messages(student)
    teacher.run()
    assert "1 of 1 students answered" in markdown(teacher)
    reloaded = open_lessons(**{"class": code, "me": student.session_state["lesson_me"]})  # the student reloads
    send(reloaded, "soft-lookup", 2)
    teacher.run()
    assert "1 of 1 students answered" in markdown(teacher)


def test_students_follow_the_teachers_step_and_a_late_joiner_answers_it():
    teacher, code = start_class(step=1)
    early = join(code)
    teacher.button(key="lesson_next").click().run()
    teacher.button(key="lesson_next").click().run()
    early.run()
    assert early.title[0].value.startswith("3.") and early.query_params["step"] == "3"
    late = join(code, "typed")
    assert late.title[0].value.startswith("3.")
    send(late, "masks", 0)
    teacher.run()
    assert "1 of 2 students answered" in markdown(teacher)


def test_the_teachers_page_reloaded_keeps_the_poll_and_its_counts():
    teacher, code = start_class(step=2)
    for _ in range(2):
        send(join(code), "five-lines", 1)
    reloaded = open_lessons(step=2, teach=code)
    assert reloaded.session_state["lesson_teach"] == code
    assert "2 of 2 students answered" in markdown(reloaded)
    assert "picked up again" in messages(reloaded)


@pytest.mark.parametrize("code", ["ZZZZZ", "", "   ", "!!"])
def test_a_wrong_code_is_a_message_not_a_traceback(code):
    student = open_lessons()
    student.text_input(key="lesson_join_code").set_value(code).run()
    student.button(key="lesson_join").click().run()
    assert not student.exception
    assert student.error and "lesson_class" not in student.session_state
    assert "code" in student.error[0].value.lower()


def test_an_expired_code_is_a_message_for_teacher_and_student(poll_database):
    store = open_store(str(poll_database))
    old = store.create_session(now=0.0)  # created in 1970: long expired
    student = open_lessons(errors_allowed=True, **{"class": old})
    assert student.error and "ended" in student.error[0].value and "lesson_class" not in student.session_state
    teacher = open_lessons(errors_allowed=True, teach=old)
    assert teacher.error and "lesson_teach" not in teacher.session_state
    assert teacher.button(key="lesson_start")  # the teacher can start a new poll


def test_an_answer_after_the_reveal_is_refused_with_a_message():
    teacher, code = start_class()
    student = join(code)
    student.radio(key="lesson_class_pick_soft-lookup").set_value(0).run()
    teacher.button(key="lesson_class_reveal").click().run()
    student.button(key="lesson_send").click().run()  # the student's page has not refreshed yet
    assert not student.exception
    assert "revealed" in messages(student)


def test_an_unusable_database_is_a_message(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_DB", "mysql://nowhere/db")
    at = open_lessons()
    at.button(key="lesson_start").click().run()
    assert not at.exception and at.error and "not available" in at.error[0].value
    at.button(key="lesson_reveal").click().run()
    assert len(at.get("plotly_chart")) == 1
