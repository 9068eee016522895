"""The teacher's report of a class poll in words and as files: sentences, table rows, a CSV and a printable page.

No Streamlit and no database here: the report itself is computed by the poll (polls/report.py,
`ClassReport`, from the rows `PollStore.report` read); this module only writes it for people. The same
report gives the same words and the same files, whichever server read it.

The empty cases are said in words: a class no student joined, a class with no answers yet, a step without a
right answer (not revealed yet, or revealed before the store recorded right answers).
"""
from __future__ import annotations

import csv
import html
import io
import math
from collections.abc import Mapping
from datetime import datetime, timezone

from polls.report import ClassReport, StepReport
from ui.lessons.html_page import standalone_page


# --- in words ---------------------------------------------------------------------------------------------


def percent(share: float | None) -> str:
    return "—" if share is None else f"{100 * share:.0f}%"


def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f} s" if value < 60 else f"{int(value // 60)} min {value % 60:02.0f} s"


def title_of(step: int, titles: Mapping[int, str]) -> str:
    return titles.get(step) or ("before the first step" if step == 0 else f"step {step}")


def when(report: ClassReport) -> str:
    """The class's start, in UTC (a server's own time zone is nobody's)."""
    return datetime.fromtimestamp(report.created_at, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def state(report: ClassReport) -> str:
    if report.ended_at is not None:
        return "ended by the teacher"
    return "running" if report.running else "ended (its code expired)"


def summary_lines(report: ClassReport, titles: Mapping[int, str]) -> list[str]:
    """The lesson's report in sentences, the empty cases said in words."""
    lines = [f"Class {report.code}, started {when(report)}, {state(report)}."]
    if not report.students:
        return lines + ["No student has joined this class yet: there is nothing to report."]
    n = len(report.steps)
    lines.append(f"{report.students} student{'s' if report.students != 1 else ''} joined; "
                 f"{report.steady} answered at least half of the class's {n} step{'s' if n != 1 else ''}.")
    if not report.answers:
        return lines + ["No student has answered yet."]
    hardest = report.hardest
    if hardest:
        lines.append("Hardest: " + "; ".join(f"step {s.step}, {title_of(s.step, titles)} ({percent(s.share_right)} "
                                             f"right of {s.answered})" for s in hardest) + ".")
    elif any(s.share_right is not None for s in report.steps):
        lines.append("Every revealed step that was answered, the class got right.")
    else:
        lines.append("No step with answers has been revealed yet: the share right comes with the reveal.")
    return lines


def choices_text(s: StepReport) -> str:
    return " · ".join(f"{answer} {n}" for answer, n in s.counts.items()) or "—"


def wrong_text(s: StepReport) -> str:
    wrong = s.common_wrong
    if wrong is not None:
        return f"{wrong[0]} ({wrong[1]})"
    return "none" if s.right_answer is not None and s.answered else "—"


def table_rows(report: ClassReport, titles: Mapping[int, str]) -> list[dict[str, object]]:
    """One row per step, as the teacher's screen shows it."""
    return [{"step": s.step, "title": title_of(s.step, titles), "answered": s.answered,
             "right answer": s.right_answer or "—", "right": percent(s.share_right),
             "each choice": choices_text(s), "most common wrong": wrong_text(s), "median time": seconds(s.median_s),
             "note": s.status()} for s in report.steps]


# --- files ----------------------------------------------------------------------------------------------------


def _number(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def report_csv(report: ClassReport, titles: Mapping[int, str]) -> str:
    """One row per step: counts, the right answer and its share, the most common wrong answer, the median time.

    A column per choice (`count A`, ...) holds that step's count; it is empty where the step had no such
    choice (or, before the reveal recorded the choices, where no one chose it). Empty cells are numbers that
    do not exist: no right answer before the reveal, no time without a recorded opening; `note` says which.
    """
    letters = sorted({a for s in report.steps for a in s.counts}, key=lambda a: (len(a), a))
    columns = ["step", "title", "joined", "answered", "right_answer", "right", "share_right",
               "most_common_wrong", "most_common_wrong_count", "median_seconds_to_answer", "answers_timed",
               "opened_minutes_into_class", "revealed", *[f"count {a}" for a in letters], "note"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for s in report.steps:
        wrong = s.common_wrong
        writer.writerow([
            s.step, title_of(s.step, titles), report.students, s.answered, s.right_answer or "",
            "" if s.right is None else s.right, _number(s.share_right, 3), wrong[0] if wrong else "",
            wrong[1] if wrong else "", _number(s.median_s, 1), s.timed,
            _number(None if s.opened_at is None else (s.opened_at - report.created_at) / 60, 1),
            "yes" if s.revealed else "no", *[s.counts.get(a, "") for a in letters], s.status()])
    return out.getvalue()


HTML_STYLE = """
@page { size: A4; margin: 12mm; }
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; margin: 0 auto; max-width: 186mm;
       font-size: 10.5px; line-height: 1.35; }
h1 { font-size: 18px; margin: 0 0 4px 0; }
p { margin: 2px 0; }
.charts { display: flex; gap: 10px; margin: 8px 0; }
.charts figure { margin: 0; flex: 1; }
figcaption { font-weight: 600; font-size: 11px; }
svg text { font-family: inherit; }
table { border-collapse: collapse; width: 100%; font-size: 9px; }
th, td { border-bottom: 1px solid #d0d7de; padding: 1px 4px; text-align: left; vertical-align: middle; }
td.choices { white-space: nowrap; font-size: 8.5px; }
td.choices svg { vertical-align: middle; margin-right: 4px; }
th { background: #f6f8fa; }
td.n { text-align: right; white-space: nowrap; }
.muted { color: #59636e; }
@media print { body { max-width: none; } }
"""
GREEN, RED, BLUE, GREY = "#009E73", "#D55E00", "#0072B2", "#9e9e9e"  # the app's Okabe-Ito colours


def _bars_svg(values: list[tuple[str, float | None]], top: float, unit: str, colour: str, label: str) -> str:
    """A static bar chart as SVG: one bar per (label, value); a missing value is a grey dash."""
    width, height, left, bottom, head = 340, 115, 34, 16, 8
    n = max(len(values), 1)
    slot = (width - left - 4) / n
    top = top if top > 0 else 1
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" '
             f'aria-label="{html.escape(label)}">']
    for tick in (0, 0.5, 1):
        y = head + (height - head - bottom) * (1 - tick)
        parts.append(f'<line x1="{left}" x2="{width - 4}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e1e4e8"/>')
        parts.append(f'<text x="{left - 3}" y="{y + 3:.1f}" font-size="8" text-anchor="end">'
                     f'{html.escape(_tick(top * tick, unit))}</text>')
    for i, (name, value) in enumerate(values):
        x = left + i * slot + slot * 0.15
        w = slot * 0.7
        if value is None:
            y = height - bottom - 1.5
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="1.5" fill="{GREY}"/>')
        else:
            h = (height - head - bottom) * min(value / top, 1)
            parts.append(f'<rect x="{x:.1f}" y="{height - bottom - h:.1f}" width="{w:.1f}" height="{h:.1f}" '
                         f'fill="{colour}"><title>{html.escape(name)}: {html.escape(_tick(value, unit))}</title></rect>')
        parts.append(f'<text x="{x + w / 2:.1f}" y="{height - bottom + 10}" font-size="8" text-anchor="middle">'
                     f'{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _tick(value: float, unit: str) -> str:
    return f"{100 * value:.0f}%" if unit == "%" else f"{value:.0f} s"


def _choice_bars_svg(s: StepReport) -> str:
    """A step's choices as one stacked bar: the right answer green, the most common wrong one orange."""
    if not s.answered:
        return '<span class="muted">no answers</span>'
    wrong = s.common_wrong
    width, x, parts = 60.0, 0.0, []
    for answer, n in s.counts.items():
        if not n:
            continue
        w = width * n / s.answered
        colour = GREEN if answer == s.right_answer else RED if wrong and answer == wrong[0] else GREY
        parts.append(f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="10" fill="{colour}" stroke="#fff">'
                     f'<title>{html.escape(answer)}: {n}</title></rect>')
        x += w
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} 10" width="{width:.0f}" height="10" '
            f'role="img" aria-label="{html.escape(choices_text(s))}">{"".join(parts)}</svg>')


def _right_cell(s: StepReport) -> str:
    if s.right_answer is not None:
        return s.right_answer
    return "not revealed" if not s.revealed else "not recorded"


def report_html(report: ClassReport, titles: Mapping[int, str]) -> str:
    """A one-page printable summary: the lesson in sentences, two charts (share right and median time per step,
    static SVG, nothing to fetch or run) and a table of the steps."""
    lines = "".join(f"<p>{html.escape(line)}</p>" for line in summary_lines(report, titles))
    charts = ""
    if report.steps:
        share = _bars_svg([(str(s.step), s.share_right) for s in report.steps], 1.0, "%", GREEN,
                          "share right per step")
        slowest = max((s.median_s for s in report.steps if s.median_s is not None), default=0.0)
        top = max(10.0, math.ceil(slowest / 10) * 10)
        times = _bars_svg([(str(s.step), s.median_s) for s in report.steps], top, "s", BLUE,
                          "median time to answer per step")
        charts = (f'<div class="charts"><figure><figcaption>Share right, by step</figcaption>{share}</figure>'
                  f'<figure><figcaption>Median time to answer, by step</figcaption>{times}</figure></div>'
                  '<p class="muted">A grey dash: no right answer recorded (the step was not revealed, or revealed '
                  'before the store recorded right answers), or no answer timed.</p>')
    rows = "".join(
        f"<tr><td class=n>{s.step}</td><td>{html.escape(title_of(s.step, titles))}</td><td class=n>{s.answered}</td>"
        f"<td>{html.escape(_right_cell(s))}</td><td class=n>{percent(s.share_right)}</td>"
        f"<td class=choices>{_choice_bars_svg(s)}{html.escape(choices_text(s))}</td><td>{html.escape(wrong_text(s))}</td>"
        f"<td class=n>{seconds(s.median_s)}</td></tr>"
        for s in report.steps)
    table = ("<table><thead><tr><th>Step</th><th>Title</th><th>Answered</th><th>Right answer</th><th>Right</th>"
             "<th>Each choice</th><th>Most common wrong</th><th>Median time</th></tr></thead>"
             f"<tbody>{rows}</tbody></table>") if report.steps else "<p>The class has not been shown a step yet.</p>"
    title = f"Class {report.code}: report"
    footer = ('<p class="muted">Attention Lab, Lessons. Students are anonymous: the class poll keeps no name, address or '
              "browser of anyone. Times run from the step opening on the teacher's screen to the answer the class "
              "counted.</p>")
    return standalone_page(title, HTML_STYLE, f"{lines}\n{charts}\n{table}\n{footer}")
