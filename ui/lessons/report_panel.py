"""The teacher's report of a class, on the teacher's own screen: the lesson in sentences, a table of the steps,
a CSV and a printable HTML summary to download (written by ui/lessons/class_report.py from the poll's
`ClassReport`, polls/report.py). Never drawn in presenter mode.

When the teacher ends the poll, the report stays on that screen until the class's rows are deleted (an hour
later); the private resume link of an ended class brings back its report, and nothing else.
"""
from __future__ import annotations

from datetime import datetime, timezone
from functools import partial

import streamlit as st

from polls import ClassReport
from ui.lessons.class_actions import close_report
from ui.lessons.class_report import report_csv, report_html, summary_lines, table_rows
from ui.lessons.poll_client import TeacherPoll
from ui.lessons.steps import STEPS
from ui.lessons.url_state import PRESENT


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
        report, error = TeacherPoll(code, key).report()
        if error:
            st.error(error)
        else:
            _report(report)
        if ended:
            st.button("Close the report", key="lesson_report_close", on_click=close_report)
        else:
            st.button("Refresh the report", key="lesson_report_refresh")


def _report(report: ClassReport) -> None:
    titles = step_titles()
    for line in summary_lines(report, titles):
        st.markdown(line)
    if report.steps:
        # every choice's count in full ("A 12 · B 9 · C 5 · D 4 · E 0"): the automatic width cut the last ones off
        st.dataframe(table_rows(report, titles), hide_index=True,
                     column_config={"each choice": st.column_config.TextColumn(width="large")})
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
