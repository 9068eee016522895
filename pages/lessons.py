"""Lessons: the lecture's sequence, one idea per step -- predict, then reveal; presenter mode and a class poll.

The steps live in ui/lessons/steps/ (one module per chapter); the page's views -- the question, the reveal,
presenter mode and the class poll -- live in ui/lessons/classroom.py, beside its URL state (url_state.py), the
poll's client (poll_client.py), the share link with its QR code (share.py) and the teacher's report (report_panel.py).
"""
from ui.app.app_entry import run_inside_app

run_inside_app()  # a shared link on a fresh server runs the page without app.py

from ui.lessons import classroom  # noqa: E402  (after the app has taken over the run)

classroom.show()
