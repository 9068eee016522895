"""The page list has one home, ui/app/navigation.py: app.py builds the navigation from it, and the tools that
open every page (screenshots, browser tests, benchmarks) import it rather than reading app.py's text."""
import ast
import sys
from pathlib import Path

from ui.app.navigation import HOME, PAGES, by_section, existing_pages

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from screenshots import page_paths  # noqa: E402

from benchmarks.app_latency import app_pages  # noqa: E402


def test_every_page_script_is_listed_once_with_a_url_of_its_own():
    scripts = [page.script for page in PAGES]
    assert sorted(scripts) == sorted(f"pages/{path.name}" for path in (ROOT / "pages").glob("*.py"))
    assert len({page.slug for page in PAGES}) == len(PAGES)
    assert HOME in scripts and existing_pages() == list(PAGES)


def test_sections_keep_the_navigation_order():
    assert [page for pages in by_section().values() for page in pages] == list(PAGES)
    assert list(by_section())[0] == "Start"


def test_the_tools_that_open_every_page_read_the_same_list():
    assert app_pages() == [(page.script, page.title) for page in PAGES]
    assert page_paths() == {page.slug: page.title for page in PAGES}


def test_app_py_holds_no_page_of_its_own():
    """With no script named in app.py, a tool can only learn the pages from the navigation module."""
    app = ast.parse((ROOT / "app.py").read_text())
    named = [node.value for node in ast.walk(app)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("pages/")]
    assert not named
