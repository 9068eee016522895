"""The fast tier stays fast and honest: a test file that drives Chromium is marked browser, one that starts a real
server is marked service, so `-m "not slow and not browser and not service"` needs neither."""
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
NEEDS = {  # what a file's source mentions -> the marker it must carry
    "browser": re.compile(r"sync_playwright|launch_chromium"),
    "service": re.compile(r"\binitdb\b|pg_ctl|\bnginx\b|hall\.py|\bpip\", \"install"),
}


def marks_of(source: str) -> set[str]:
    line = next((line for line in source.splitlines() if line.startswith("pytestmark")), "")
    return set(re.findall(r"pytest\.mark\.(\w+)", line))


@pytest.mark.parametrize("marker", NEEDS)
def test_every_file_that_needs_a_browser_or_a_server_says_so(marker):
    unmarked = [path.name for path in sorted(TESTS.glob("test_*.py")) if path.name != "test_tiers.py"
                and NEEDS[marker].search(path.read_text(encoding="utf-8"))
                and marker not in marks_of(path.read_text(encoding="utf-8"))]
    assert not unmarked, f"mark these files pytestmark = pytest.mark.{marker}: {unmarked}"


def test_the_tiers_are_declared_once_in_pytest_ini():
    ini = (TESTS.parent / "pytest.ini").read_text()
    assert "--strict-markers" in ini
    for marker in ("browser:", "service:", "slow:"):
        assert ini.count(marker) == 1
