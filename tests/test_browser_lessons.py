"""The Lessons page in Chromium: presenter mode at 1920 x 1080 (no sidebar, figure text of 20 px or more,
→ moves to the next step) and a class poll with a teacher and three students in four browser contexts: a
reloaded student page is the same student (its cookie), the same address in another browser a new one, and
the projected teacher screen shows no teacher key, nor does the teacher's address. A student who changes the
answer in a second tab and reloads sees, in every tab, the answer the class counted; the teacher's "Reveal the
answer" is on the first screen of every step at 1920 x 1080 and 1366 x 768, and ↓ presses it.

Screenshots land in artifacts/screenshots/ and refresh docs/screenshots/lessons.png and lessons_present.png.
Chromium must be installed (.ci/run installs it).
"""
import re
import shutil
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from screenshots import SHOTS, VIEWPORT, launch_chromium, save_png, serve_app, wait_until_ready  # noqa: E402

from ui.figures.lesson import PROJECTOR_MIN_FONT  # noqa: E402
from ui.lessons.steps import STEPS, letter  # noqa: E402

ARTIFACTS = ROOT / "artifacts" / "screenshots"
PROJECTOR = {"width": 1920, "height": 1080}
SMALL_PROJECTOR = {"width": 1366, "height": 768}
EXCEPTION = '[data-testid="stException"]'
# the rendered size of every non-empty text inside a plotly figure
FIGURE_FONT_SIZES = """() => Array.from(document.querySelectorAll('.js-plotly-plot text'))
    .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0)
    .map(t => parseFloat(getComputedStyle(t).fontSize))"""

pytestmark = [pytest.mark.timeout(600), pytest.mark.browser]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:  # the server's class polls go to a database of this test's own
        patch.setenv("ATTENTION_LAB_DB", str(tmp_path_factory.mktemp("poll") / "poll.sqlite3"))
        with serve_app() as base:
            yield base


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        yield chromium
        chromium.close()


def new_tab(browser, viewport=VIEWPORT):
    """A page in a browser context of its own: its own cookies and Streamlit session, like another laptop."""
    tab = browser.new_context(viewport=viewport).new_page()
    tab.set_default_timeout(90_000)
    return tab


def open_path(tab, base_url: str, path: str) -> None:
    tab.goto(f"{base_url}/{path}")
    wait_until_ready(tab)
    assert tab.locator(EXCEPTION).count() == 0, tab.locator(EXCEPTION).all_inner_texts()


def pick(tab, index: int) -> None:
    """Choose the answer with this index (the lesson's radio group, not the sidebar's; its options, not its label)."""
    tab.locator('[data-testid="stMain"] [data-testid="stRadio"] [role="radiogroup"] label').nth(index).click()
    tab.wait_for_timeout(300)
    wait_until_ready(tab)


def click_and_wait(tab, name: str) -> None:
    tab.get_by_role("button", name=name).click()
    tab.wait_for_timeout(300)
    wait_until_ready(tab)


def keep(tab, name: str) -> None:
    save_png(tab, ARTIFACTS / name)
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ARTIFACTS / name, SHOTS / name)


def test_presenter_mode_on_a_projector(browser, base_url):
    tab = new_tab(browser, PROJECTOR)
    open_path(tab, base_url, "lessons?present=1&step=1")
    assert tab.locator('[data-testid="stSidebar"]').is_hidden()
    assert tab.locator("h1").first.inner_text().startswith(f"1. {STEPS[0].title}")
    assert tab.locator(".js-plotly-plot").count() == 0  # the question comes first

    click_and_wait(tab, "Reveal without answering")
    tab.wait_for_selector(".js-plotly-plot text")
    sizes = tab.evaluate(FIGURE_FONT_SIZES)
    assert sizes and min(sizes) >= PROJECTOR_MIN_FONT, sorted(sizes)[:5]
    assert tab.locator("img").count() >= 1  # the QR code to this step
    keep(tab, "lessons_present.png")

    tab.evaluate("() => document.activeElement && document.activeElement.blur()")
    tab.keyboard.press("ArrowRight")
    tab.wait_for_function("() => new URLSearchParams(location.search).get('step') === '2'")
    tab.wait_for_function("title => document.querySelector('h1')?.innerText.startsWith(title)", arg=f"2. {STEPS[1].title}")
    wait_until_ready(tab)
    assert "present=1" in tab.url and tab.locator('[data-testid="stSidebar"]').is_hidden()
    assert tab.locator(EXCEPTION).count() == 0
    tab.context.close()


def test_a_learner_answers_and_sees_the_figure(browser, base_url):
    tab = new_tab(browser)
    open_path(tab, base_url, "lessons?step=3")
    pick(tab, 0)
    click_and_wait(tab, "Check my answer")
    tab.wait_for_selector(".js-plotly-plot")
    assert "Your answer: A" in tab.locator("body").inner_text()
    keep(tab, "lessons.png")
    tab.context.close()


class Tabs:
    """Tabs in browser contexts of their own; snap() leaves a screenshot of each (lessons_failure_<n>.png)."""

    def __init__(self, browser):
        self.browser, self.opened = browser, []

    def __call__(self, viewport=VIEWPORT):
        self.opened.append(new_tab(self.browser, viewport))
        return self.opened[-1]

    def snap(self) -> None:
        for n, tab in enumerate(self.opened):
            save_png(tab, ARTIFACTS / f"lessons_failure_{n}.png", full_page=True)


@pytest.fixture
def tabs(browser):
    opened = Tabs(browser)
    yield opened
    for tab in opened.opened:
        tab.context.close()


def test_a_teacher_and_three_students_in_one_poll(tabs, base_url):
    try:
        run_a_poll(tabs, base_url)
    except Exception:
        tabs.snap()
        raise


def run_a_poll(tabs, base_url):
    teacher = tabs()
    open_path(teacher, base_url, "lessons?step=1")
    click_and_wait(teacher, "Start a class poll")
    teacher.wait_for_function("() => document.body.innerText.includes('Class code:')")
    code = re.search(r"Class code: ([A-Z2-9]{5})", teacher.locator("body").inner_text()).group(1)
    teacher.locator('[data-testid="stExpander"]').get_by_text("Private: resume this poll").click()  # own screen
    resume = teacher.locator('[data-testid="stCode"]').filter(has_text=f"{code}.").last.inner_text().strip()
    key = resume.split(".", 1)[1]
    assert len(key) >= 22 and key not in teacher.url and "teach=" not in teacher.url
    assert parse_qs(urlsplit(teacher.url).query)["step"] == ["1"]

    students = []
    for i in range(3):
        student = tabs()
        open_path(student, base_url, "lessons")
        box = student.get_by_role("textbox", name="Class code")
        box.fill(code.lower() if i == 1 else code)  # the code is forgiven its case
        box.press("Enter")
        wait_until_ready(student)
        click_and_wait(student, "Join the class")
        student.wait_for_function("() => document.body.innerText.includes('You are in class')")
        pick(student, i % 2)
        click_and_wait(student, "Send my answer")
        student.wait_for_function("() => document.body.innerText.includes('sent.')")
        students.append(student)
    teacher.wait_for_function("() => document.body.innerText.includes('3 of 3 students answered')", timeout=30_000)

    # A reloaded student page is the same student: the token waits in a cookie of that browser, not in the URL.
    first = students[0]
    first.wait_for_function("name => document.cookie.includes(name)", arg=f"attention_lab_student_{code}=")
    assert f"class={code}" in first.url and "me=" not in first.url
    first.reload()
    wait_until_ready(first)
    first.wait_for_function("() => document.body.innerText.includes('You are back in class')")
    # The same address on another laptop joins as a new student.
    copied = tabs()
    open_path(copied, base_url, first.url.split("/", 3)[3])
    copied.wait_for_function("() => document.body.innerText.includes('You joined class')")
    teacher.wait_for_function("() => document.body.innerText.includes('3 of 4 students answered')", timeout=30_000)

    # The projected screen: presenter mode draws no key, and the teacher's address holds none.
    teacher.get_by_text("Presenter mode").click()
    teacher.wait_for_function("() => new URLSearchParams(location.search).get('present') === '1'")
    wait_until_ready(teacher)
    assert key not in teacher.content() and key not in teacher.url
    assert "hidden in presenter mode" in teacher.locator("body").inner_text()
    save_png(teacher, ARTIFACTS / "lessons_poll_teacher.png")

    click_and_wait(teacher, "Reveal the answer")
    assert "of 3 right" in teacher.locator("body").inner_text()
    students[1].wait_for_selector(".js-plotly-plot", timeout=30_000)  # the student's page follows the reveal
    assert "The class: " in students[1].locator("body").inner_text()
    for tab in (teacher, *students, copied):
        assert tab.locator(EXCEPTION).count() == 0


def start_poll(teacher, base_url: str, query: str = "step=1") -> str:
    """Open the Lessons page, start a class poll; its code."""
    open_path(teacher, base_url, f"lessons?{query}")
    click_and_wait(teacher, "Start a class poll")
    teacher.wait_for_function("() => document.body.innerText.includes('Class code:')")
    return re.search(r"Class code: ([A-Z2-9]{5})", teacher.locator("body").inner_text()).group(1)


def send_answer(student, index: int) -> None:
    pick(student, index)
    click_and_wait(student, "Send my answer")
    student.wait_for_function("l => document.body.innerText.includes(`Sent: ${l}`)", arg=letter(index))


def checked(student) -> list[bool]:
    """Which of the radio's options is selected."""
    return [option.is_checked() for option in student.locator('[data-testid="stRadio"] input[type="radio"]').all()]


def test_every_tab_and_a_reload_show_the_answer_the_class_counted(tabs, base_url):
    try:
        a_student_with_two_tabs(tabs, base_url)
    except Exception:
        tabs.snap()
        raise


def a_student_with_two_tabs(tabs, base_url):
    live = STEPS[0].build()
    right, wrong = live.answer, (live.answer + 1) % len(live.choices)
    teacher = tabs()
    code = start_poll(teacher, base_url)
    first = tabs()  # one browser ...
    open_path(first, base_url, f"lessons?class={code}")
    first.wait_for_function("() => document.body.innerText.includes('You joined class')")
    send_answer(first, right)
    first.wait_for_function("name => document.cookie.includes(name)", arg=f"attention_lab_student_{code}=")
    second = first.context.new_page()  # ... and a second tab of it: the same student
    second.set_default_timeout(90_000)
    open_path(second, base_url, f"lessons?class={code}")
    second.wait_for_function("() => document.body.innerText.includes('You are back in class')")
    assert checked(second)[right]
    send_answer(second, wrong)
    teacher.wait_for_function("() => document.body.innerText.includes('1 of 1 students answered')", timeout=30_000)

    first.reload()  # a reload keeps the answer: the one counted, sent from the other tab
    wait_until_ready(first)
    first.wait_for_function("() => document.body.innerText.includes('You are back in class')")
    assert checked(first)[wrong] and f"Sent: {letter(wrong)}" in first.locator("body").inner_text()

    teacher.evaluate("() => document.activeElement && document.activeElement.blur()")
    teacher.keyboard.press("ArrowDown")  # ↓ reveals
    teacher.wait_for_function("() => document.body.innerText.includes('of 1 right')", timeout=30_000)
    counted = f"Your answer: {letter(wrong)}: {live.choices[wrong]}"
    for tab in (first, second):
        tab.wait_for_function("text => document.body.innerText.includes(text)", arg=counted, timeout=30_000)
        assert "✗" in tab.locator("body").inner_text() and f"Your answer: {letter(right)}" not in \
            tab.locator("body").inner_text()
    first.reload()  # and after the reveal
    wait_until_ready(first)
    first.wait_for_function("text => document.body.innerText.includes(text)", arg=counted, timeout=30_000)
    for tab in (teacher, first, second):
        assert tab.locator(EXCEPTION).count() == 0, tab.locator(EXCEPTION).all_inner_texts()
    assert first.locator('[data-testid="stSidebar"]').is_hidden()  # a student sees the lesson alone


@pytest.mark.parametrize("viewport", [PROJECTOR, SMALL_PROJECTOR], ids=["1920x1080", "1366x768"])
@pytest.mark.parametrize("presenting", [True, False], ids=["projected", "own-screen"])
def test_reveal_is_on_the_first_screen_of_every_step(tabs, base_url, viewport, presenting):
    teacher = tabs(viewport)
    start_poll(teacher, base_url, "step=1&present=1" if presenting else "step=1")
    below = {}
    for index, step in enumerate(STEPS, start=1):
        if index > 1:
            click_and_wait(teacher, "Next ▶")
            teacher.wait_for_function("t => document.querySelector('h1')?.innerText.startsWith(t)", arg=f"{index}.")
        box = teacher.get_by_role("button", name="Reveal the answer").bounding_box()
        if box["y"] + box["height"] > viewport["height"]:
            below[step.slug] = round(box["y"] + box["height"])
            save_png(teacher, ARTIFACTS / f"lessons_reveal_below_{viewport['width']}_{step.slug}.png")
    assert teacher.locator(EXCEPTION).count() == 0
    assert not below, f"the reveal's bottom edge lies below the {viewport['height']} px screen: {below}"


# each step button's label: its text, the width it needs and the width it has (Streamlit cuts a label too long
# for its button short with an ellipsis)
STEP_LABELS = """() => Array.from(document.querySelectorAll('button'))
    .filter(b => /Previous|Next/.test(b.innerText))
    .map(b => b.querySelector('.stMarkdownEllipsis'))
    .filter(e => e && e.getBoundingClientRect().width > 0)
    .map(e => [e.innerText.trim(), e.scrollWidth, e.clientWidth])"""


@pytest.mark.parametrize("viewport", [PROJECTOR, SMALL_PROJECTOR], ids=["1920x1080", "1366x768"])
@pytest.mark.parametrize("presenting", [True, False], ids=["projected", "own-screen"])
def test_the_step_buttons_show_their_whole_labels(tabs, base_url, viewport, presenting):
    tab = tabs(viewport)
    open_path(tab, base_url, "lessons?step=2" + ("&present=1" if presenting else ""))
    tab.wait_for_function(f"() => ({STEP_LABELS})().length === 2")
    labels = tab.evaluate(STEP_LABELS)
    assert sorted(text for text, _, _ in labels) == ["Next ▶", "◀ Previous"]
    assert [text for text, needed, has in labels if needed > has + 1] == []  # "◀ Pre…" no more
