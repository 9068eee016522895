"""The whole lesson as one self-contained HTML file, for homework without the school's server.

Every step's text and question, its choices to pick from, and behind a "Reveal the answer" control the answer,
why, and the step's figure for the default text. plotly's JavaScript is inlined once, and each figure is drawn
only when its step is revealed (a chart drawn inside a closed <details> would get no width). Nothing is fetched:
the file opens from disk with no network.
"""
from __future__ import annotations

import html
from collections.abc import Sequence

import markdown
from plotly.offline import get_plotlyjs

from ui.figures.standalone import standalone
from ui.lessons.html_page import standalone_page
from ui.lessons.live import Live
from ui.lessons.steps import Step, letter

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 980px; margin: 2rem auto; padding: 0 1rem; line-height: 1.5;
       color: #1f2328; }
section.step { border-top: 1px solid #d0d7de; padding: 1.2rem 0; }
.question { font-weight: 600; }
.choices label { display: block; margin: 0.2rem 0; cursor: pointer; }
details summary { cursor: pointer; font-weight: 600; color: #0b5cad; margin: 0.6rem 0; }
.verdict { font-weight: 600; }
.right { color: #1a7f37; } .wrong { color: #cf222e; }
.figure { width: 100%; min-height: 420px; }
.muted { color: #59636e; font-size: 0.92rem; }
@media print { details { display: block; } details > summary { display: none; } }
"""

# Reveal: draw the step's figure the first time it opens, and say whether the picked choice was right.
SCRIPT = """
document.querySelectorAll('details.reveal').forEach(function (box) {
  box.addEventListener('toggle', function () {
    if (!box.open) return;
    var step = box.dataset.step, answer = Number(box.dataset.answer);
    var picked = document.querySelector('input[name="pick-' + step + '"]:checked');
    var verdict = box.querySelector('.verdict');
    if (!picked) { verdict.textContent = 'You did not pick an answer.'; verdict.className = 'verdict'; }
    else {
      var right = Number(picked.value) === answer;
      verdict.textContent = 'Your answer: ' + picked.dataset.label + (right ? ' \\u2713 right' : ' \\u2717 not this one');
      verdict.className = 'verdict ' + (right ? 'right' : 'wrong');
    }
    var target = box.querySelector('.figure');
    if (target && !target.dataset.drawn) {
      var figure = JSON.parse(document.getElementById('figure-' + step).textContent);
      Plotly.newPlot(target, figure.data, figure.layout, {responsive: true, displaylogo: false});
      target.dataset.drawn = 'yes';
    }
  });
});
"""


def _markdown(text: str) -> str:
    return markdown.markdown(text)


def _inline_json(figure_json: str) -> str:
    """JSON that can sit inside <script>: no '</' can close the tag early."""
    return figure_json.replace("</", "<\\/")


def step_html(number: int, step: Step, live: Live) -> str:
    """One step: its idea, its question and choices, and behind the reveal its answer, why and figure."""
    choices = "\n".join(
        f'<label><input type="radio" name="pick-{number}" value="{i}" data-label="{letter(i)}. {html.escape(c)}"> '
        f"{letter(i)}. {html.escape(c)}</label>" for i, c in enumerate(live.choices))
    answer = f"{letter(live.answer)}. {html.escape(live.choices[live.answer])}"
    caption = f'<p class="muted">{html.escape(live.caption)}</p>' if live.caption else ""
    return f"""
<section class="step" id="step-{number}">
<h2>{number}. {html.escape(step.title)}</h2>
{_markdown(step.text)}
<p class="question">{html.escape(live.question)}</p>
<form class="choices">{choices}</form>
<details class="reveal" data-step="{number}" data-answer="{live.answer}">
<summary>Reveal the answer</summary>
<p class="verdict"></p>
<p><strong>Answer: {answer}</strong> <span class="muted">({html.escape(live.source)})</span></p>
{_markdown(live.why)}
<div class="figure" role="img" aria-label="{html.escape(step.title)}"></div>
{caption}
<div class="muted"><strong>In the app:</strong> {_markdown(step.try_this)}</div>
</details>
<script type="application/json" id="figure-{number}">{_inline_json(standalone(live.figure).to_json())}</script>
</section>"""


def homework_html(steps: Sequence[Step], lives: Sequence[Live], title: str = "Attention Lab: the lesson") -> str:
    """The lesson as one HTML document (plotly.js inlined): open it from disk, no server, no network."""
    contents = "\n".join(f'<li><a href="#step-{n}">{html.escape(s.title)}</a></li>'
                         for n, s in enumerate(steps, start=1))
    body = "\n".join(step_html(n, step, live) for n, (step, live) in enumerate(zip(steps, lives), start=1))
    intro = ("<p>Each step explains one idea and asks a question. Pick your answer, then open <em>Reveal the "
             "answer</em>: it says whether you were right, why, and shows the step's figure, computed on the lesson's "
             "model and its default text. This file needs no server and no network.</p>")
    return standalone_page(title, STYLE, f"{intro}\n<ol>{contents}</ol>\n{body}\n<script>{SCRIPT}</script>",
                           head=f"<script>{get_plotlyjs()}</script>")
