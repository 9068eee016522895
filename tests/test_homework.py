"""The lesson as one HTML file for homework: every step's text, question, choices and figure in it, plotly's
JavaScript inlined; opened in Chromium from a file:// address with every network request blocked, a reveal says
whether the picked answer was right and draws that step's figure, and nothing was fetched."""
import html
import re
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from ui.lessons.homework import homework_html
from ui.lessons.steps import STEPS, letter

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from screenshots import launch_chromium  # noqa: E402

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def lesson():
    lives = [step.build() for step in STEPS]
    return lives, homework_html(STEPS, lives)


def test_every_step_its_question_choices_answer_and_figure_are_in_the_file(lesson):
    lives, document = lesson
    assert document.count('<section class="step"') == len(STEPS)
    assert document.count('<details class="reveal"') == len(STEPS)
    assert len(re.findall(r'<script type="application/json" id="figure-\d+">', document)) == len(STEPS)
    for number, (step, live) in enumerate(zip(STEPS, lives), start=1):
        section = document.split(f'id="step-{number}"')[1].split('<section class="step"')[0]
        assert html.escape(step.title) in section and html.escape(live.question) in section
        assert f'data-answer="{live.answer}"' in section
        assert section.count('type="radio"') == len(live.choices)
    assert "Plotly.newPlot" in document and len(document) > 3_000_000  # plotly.js itself is inside
    assert not re.search(r'<(script|link|img)[^>]+(src|href)="https?:', document)  # nothing to fetch


def test_it_opens_from_disk_with_no_network_and_reveals_answers_and_figures(lesson, tmp_path):
    lives, document = lesson
    path = tmp_path / "lesson.html"
    path.write_text(document, encoding="utf-8")
    fetched = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.route(re.compile(r"^(?!file:).*"), lambda route: (fetched.append(route.request.url), route.abort()))
        page = context.new_page()
        page.set_default_timeout(120_000)  # plotly.js (4 MB) is parsed from the file itself
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(path.as_uri())
        assert page.locator("section.step").count() == len(STEPS)
        assert page.locator(".js-plotly-plot").count() == 0  # figures are drawn when revealed

        first = lives[0]
        wrong = (first.answer + 1) % len(first.choices)
        page.locator('input[name="pick-1"]').nth(wrong).check()
        page.locator('details[data-step="1"] summary').click()
        verdict = page.locator('details[data-step="1"] .verdict')
        expect(verdict).to_have_text(f"Your answer: {letter(wrong)}. {first.choices[wrong]} ✗ not this one")
        page.locator('input[name="pick-1"]').nth(first.answer).check()
        page.locator('details[data-step="1"] summary').click()  # close and open again: the verdict follows the pick
        page.locator('details[data-step="1"] summary').click()
        expect(verdict).to_have_text(re.compile("✓ right$"))
        page.wait_for_selector('details[data-step="1"] .js-plotly-plot')

        page.locator('details[data-step="2"] summary').click()  # no pick: it says so, and still draws
        expect(page.locator('details[data-step="2"] .verdict')).to_have_text("You did not pick an answer.")
        for number in range(3, len(STEPS) + 1):
            page.locator(f'details[data-step="{number}"] summary').click()
        page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length === {len(STEPS)}")
        drawn = page.evaluate("Array.from(document.querySelectorAll('.js-plotly-plot'))"
                              ".map(plot => plot.querySelectorAll('.main-svg').length)")
        assert len(drawn) == len(STEPS) and min(drawn) >= 1
        browser.close()
    assert errors == [] and fetched == []
