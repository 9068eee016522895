"""A lecture hall for real: scripts/hall.py starts PostgreSQL, two Streamlit replicas and nginx on loopback, and a
teacher on one replica and two students on the other share one class poll, in Chromium, through the proxy.

Real processes only: Debian's PostgreSQL server, nginx and Chromium (.ci/run installs them). The hall is
started and stopped with the script's own commands, as the README says; whatever happens in the tests,
the fixture stops it and checks that none of its processes is left.
"""
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from benchmarks import hall_load, poll
from scripts import hall

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from screenshots import VIEWPORT, launch_chromium, wait_until_ready  # noqa: E402

HALL = [sys.executable, str(ROOT / "scripts" / "hall.py")]
EXCEPTION = '[data-testid="stException"]'
WAIT_MS = 60_000

pytestmark = [pytest.mark.timeout(600), pytest.mark.browser, pytest.mark.service]


def run_hall(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*HALL, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def running_hall():
    """(run folder, proxy URL) of a hall of two replicas on free ports, stopped after the module's tests."""
    run_dir = Path(tempfile.mkdtemp(prefix="attention-lab-hall-test-"))
    started = run_hall("start", "--run-dir", str(run_dir), "--port", str(hall.free_ports(3)),
                       "--db-port", str(hall.free_ports(1)))
    pids = [pid for _, pid, _, _ in hall.status(run_dir)]
    try:
        assert started.returncode == 0, started.stderr
        yield run_dir, started.stdout.strip()
    finally:
        stopped = run_hall("stop", "--run-dir", str(run_dir))
        left = [pid for pid in pids if hall.alive(pid)]
        shutil.rmtree(run_dir, ignore_errors=True)
        assert stopped.returncode == 0 and not left, (stopped.stderr, left)


@pytest.fixture
def browser():
    """Chromium, closed after its test: playwright's loop must be gone before the benchmark's asyncio.run."""
    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        yield chromium
        chromium.close()


def test_start_prints_the_proxy_and_status_sees_every_part_answer(running_hall):
    run_dir, url = running_hall
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
    status = run_hall("status", "--run-dir", str(run_dir))
    assert status.returncode == 0, status.stdout + status.stderr
    parts = {line.split("  ")[0]: line for line in status.stdout.splitlines()}
    assert set(parts) == {"PostgreSQL", "replica 1", "replica 2", "nginx"}
    assert all(" up " in line for line in parts.values()), status.stdout
    with urllib.request.urlopen(f"{url}/_stcore/health") as response:  # through the proxy
        assert response.read() == b"ok" and response.headers[hall.REPLICA_HEADER]


def replica_of(url: str, cookie: str) -> str:
    request = urllib.request.Request(f"{url}/_stcore/health", headers={"Cookie": f"{hall.STICKY_COOKIE}={cookie}"})
    with urllib.request.urlopen(request) as response:
        return response.headers[hall.REPLICA_HEADER]


def sticky_cookie_for(url: str, replica: str) -> str:
    """A value of the proxy's cookie that nginx's consistent hash sends to `replica`."""
    for n in range(200):
        if replica_of(url, f"probe-{n}") == replica:
            return f"probe-{n}"
    raise AssertionError(f"no cookie value out of 200 reaches {replica}")


class Tab:
    """A page in a browser context of its own (another laptop) that notes which replica answered each request."""

    def __init__(self, browser, url: str, cookie: str | None = None):
        self.context = browser.new_context(viewport=VIEWPORT)
        if cookie:
            self.context.add_cookies([{"name": hall.STICKY_COOKIE, "value": cookie, "url": url}])
        self.page = self.context.new_page()
        self.page.set_default_timeout(WAIT_MS)
        self.replicas: set[str] = set()
        self.page.on("response", lambda r: self.replicas.add(r.headers.get(hall.REPLICA_HEADER.lower()) or "none"))

    def cookie(self) -> str:
        return next(c["value"] for c in self.context.cookies() if c["name"] == hall.STICKY_COOKIE)

    def open(self, address: str) -> None:
        self.page.goto(address)
        wait_until_ready(self.page)

    def click(self, name: str) -> None:
        self.page.get_by_role("button", name=name).click()
        self.page.wait_for_timeout(300)
        wait_until_ready(self.page)

    def wait_for_text(self, text: str) -> None:
        self.page.wait_for_function("text => document.body.innerText.includes(text)", arg=text, timeout=WAIT_MS)


def stream_replicas(run_dir: Path, cookie: str) -> set[str]:
    """The replicas nginx sent this cookie's WebSockets to (logged when each closes)."""
    log = (run_dir / "nginx" / "access.log").read_text()
    return set(re.findall(rf'"GET /_stcore/stream [^"]*" 101 replica=(\S+) cookie={re.escape(cookie)}$', log, re.M))


def replica_ports(run_dir: Path) -> list[str]:
    """Each replica as nginx names it in its header: 127.0.0.1:<port>."""
    return [f"127.0.0.1:{r['port']}" for r in hall.read_state(run_dir)["replicas"]]


def test_a_teacher_and_students_on_different_replicas_share_one_poll(running_hall, browser):
    run_dir, url = running_hall
    teacher = Tab(browser, url)  # no cookie yet: nginx picks a replica and sets one
    teacher.open(f"{url}/lessons?step=1")
    (teacher_replica,), teacher_cookie = teacher.replicas, teacher.cookie()
    student_cookie = sticky_cookie_for(url, next(p for p in replica_ports(run_dir) if p != teacher_replica))
    students = [Tab(browser, url, student_cookie) for _ in range(2)]
    try:
        teacher.click("Start a class poll")
        code = re.search(r"Class code: (\w+)", teacher.page.inner_text("body")).group(1)
        for student in students:
            student.open(f"{url}/lessons?step=1&class={code}")
            student.wait_for_text(f"Class {code}")

        teacher.click("Next ▶")  # the step moves, for the students too
        for student in students:
            student.page.wait_for_function("() => document.querySelector('h1')?.innerText.startsWith('2.')",
                                           timeout=WAIT_MS)
            wait_until_ready(student.page)
        for i, student in enumerate(students):
            student.page.locator('[data-testid="stRadio"] [role="radiogroup"] label').nth(i).click()
            wait_until_ready(student.page)
            student.click("Send my answer")
            student.wait_for_text("Sent: ")

        teacher.wait_for_text("2 of 2 students answered")  # the answers are counted, on the other replica
        teacher.click("Reveal the answer")
        for student in students:
            student.page.wait_for_selector(".js-plotly-plot", timeout=WAIT_MS)  # the reveal arrives
        for tab in (teacher, *students):
            assert tab.page.locator(EXCEPTION).count() == 0, tab.page.locator(EXCEPTION).all_inner_texts()
    finally:
        for tab in (teacher, *students):
            tab.context.close()

    # every request of each laptop went to one replica, the teacher's to one, the students' to the other ...
    student_replica = replica_of(url, student_cookie)
    assert student_replica != teacher_replica
    assert teacher.replicas == {teacher_replica}
    assert all(student.replicas == {student_replica} for student in students)
    # ... and so did their sessions: each WebSocket, as nginx logged it when it closed
    deadline = time.monotonic() + 10
    while not (stream_replicas(run_dir, teacher_cookie) and stream_replicas(run_dir, student_cookie)) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    assert stream_replicas(run_dir, teacher_cookie) == {teacher_replica}
    assert stream_replicas(run_dir, student_cookie) == {student_replica}


def download(tab: Tab, button: str) -> str:
    """The text of the file a download button sends."""
    # the file is built when the button is clicked: with the suite's other worker driving its own browser on the
    # second core, one report took over a minute, so a download gets three waits
    with tab.page.expect_download(timeout=3 * WAIT_MS) as caught:
        tab.page.get_by_role("button", name=button).click()
    return Path(caught.value.path()).read_text(encoding="utf-8")


def test_the_teachers_report_is_the_same_on_either_replica_and_counts_the_stored_rows(running_hall, browser):
    """A teacher on one replica, students on the other; the teacher's report, read on the teacher's replica and on
    the other (the poll resumed there with its private link), gives the same file, and it counts the database."""
    import csv
    import io
    from collections import Counter

    import psycopg

    run_dir, url = running_hall
    first, second = replica_ports(run_dir)
    teacher = Tab(browser, url, sticky_cookie_for(url, first))
    students = [Tab(browser, url, sticky_cookie_for(url, second)) for _ in range(3)]
    elsewhere = Tab(browser, url, sticky_cookie_for(url, second))  # the teacher's second screen, on the other replica
    tabs = (teacher, *students, elsewhere)
    try:
        teacher.open(f"{url}/lessons?step=1")
        teacher.click("Start a class poll")
        code = re.search(r"Class code: (\w+)", teacher.page.inner_text("body")).group(1)
        for i, student in enumerate(students):
            student.open(f"{url}/lessons?step=1&class={code}")
            student.wait_for_text(f"Class {code}")
            student.page.locator('[data-testid="stRadio"] [role="radiogroup"] label').nth(min(i, 1)).click()
            wait_until_ready(student.page)
            student.click("Send my answer")
            student.wait_for_text("Sent: ")
        teacher.wait_for_text("3 of 3 students answered")
        teacher.click("Reveal the answer")
        teacher.page.get_by_text("Private: resume this poll after a reload").click()
        resume = teacher.page.locator('[data-testid="stCode"]').filter(has_text=f"{code}.").last.inner_text().strip()
        teacher.page.get_by_text(f"Report of class {code}").click()
        here = download(teacher, "Download the report (CSV)")

        elsewhere.open(f"{url}/lessons?resume={resume}")
        elsewhere.wait_for_text(f"Class poll {code} resumed")
        elsewhere.page.get_by_text(f"Report of class {code}").click()
        there = download(elsewhere, "Download the report (CSV)")
        for tab in tabs:
            assert tab.page.locator(EXCEPTION).count() == 0, tab.page.locator(EXCEPTION).all_inner_texts()
    finally:
        for tab in tabs:
            tab.context.close()
    assert teacher.replicas == {first} and elsewhere.replicas == {second}  # read on each replica
    assert here == there  # the same report, byte for byte

    with psycopg.connect(hall.read_state(run_dir)["database_url"]) as conn:  # and it counts the stored rows
        answers = Counter(a for (a,) in conn.execute(
            "SELECT answer FROM poll_answers WHERE code = %s AND step = 1", (code,)))
        (right,) = conn.execute("SELECT right_answer FROM poll_reveals WHERE code = %s AND step = 1", (code,)).fetchone()
    (row,) = [r for r in csv.DictReader(io.StringIO(here)) if r["step"] == "1"]
    assert sum(answers.values()) == int(row["answered"]) == 3 and int(row["joined"]) == 3
    assert {a: int(row[f"count {a}"]) for a in answers} == dict(answers)
    assert row["right_answer"] == right and int(row["right"]) == answers.get(right, 0)


def test_the_benchmarks_run_against_the_hall(running_hall):
    run_dir, _ = running_hall
    (row,) = hall_load.main(["--smoke", "--run-dir", str(run_dir)])
    assert row["students"] == 3 and row["answers_counted"] == 3, row["error_messages"]
    assert row["errors"] == 0 and row["exceptions"] == 0, row["error_messages"]
    assert row["page_runs"] == 3 * 3  # each student: the page, the pick, the send
    assert sum(row["students_per_replica"].values()) == 3 and isinstance(row["met"], bool)

    database = hall.read_state(run_dir)["database_url"]  # the store the replicas use
    stored = poll.hall("postgresql", database, students=20, window_s=1.0)
    assert stored["answers_in"] == 20 and stored["lost_answers"] == 0 and stored["n_errors"] == 0, stored


def test_a_second_hall_on_taken_ports_or_the_same_folder_is_refused_with_a_clear_message(running_hall):
    run_dir, url = running_hall
    taken = run_hall("start", "--run-dir", str(run_dir.with_name(run_dir.name + "-other")),
                     "--port", url.rsplit(":", 1)[1])
    assert taken.returncode == 2 and "is not free" in taken.stderr and "--port" in taken.stderr, taken.stderr
    again = run_hall("start", "--run-dir", str(run_dir), "--port", str(hall.free_ports(3)))
    assert again.returncode == 2 and "a hall already runs from" in again.stderr, again.stderr
    assert not run_dir.with_name(run_dir.name + "-other").exists()  # nothing was started for the refused hall


def test_missing_nginx_or_postgresql_says_what_to_install(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(hall.os.path, "exists", lambda path: False)
    with pytest.raises(hall.HallError, match=r"apt-get install -y nginx"):
        hall.nginx_program()
    monkeypatch.setattr(hall.glob, "glob", lambda pattern: [])
    with pytest.raises(hall.HallError, match=r"apt-get install -y postgresql"):
        hall.postgres_programs()


def test_status_and_stop_without_a_hall_say_so(tmp_path):
    status = run_hall("status", "--run-dir", str(tmp_path))
    assert status.returncode == 3 and "no hall runs from" in status.stderr
    stop = run_hall("stop", "--run-dir", str(tmp_path))
    assert stop.returncode == 0 and "no hall runs from" in stop.stderr
