"""Every icon the navigation draws is one of Streamlit's own Material icons, whose font Streamlit serves itself:
an emoji draws as an empty box on a machine without an emoji font (Debian's Chromium, many school images)."""
import ast
import re
from pathlib import Path

import pytest
from streamlit.material_icon_names import ALL_MATERIAL_ICONS

from ui.app.navigation import PAGES

ROOT = Path(__file__).resolve().parent.parent
MATERIAL = re.compile(r":material/([a-z0-9_]+):")


def material_name(icon: str) -> str | None:
    """The Material icon an icon string names, or None when it is anything else (an emoji, a letter)."""
    match = MATERIAL.fullmatch(icon)
    return match.group(1) if match and match.group(1) in ALL_MATERIAL_ICONS else None


def test_the_check_tells_an_emoji_from_a_material_icon():
    assert material_name(":material/home:") == "home"
    assert material_name("🏠") is None
    assert material_name(":material/no_such_icon_here:") is None
    assert material_name(":material/home: 🏠") is None


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.slug)
def test_every_page_icon_in_the_navigation_is_a_material_icon(page):
    assert material_name(page.icon), f"{page.title}: {page.icon!r} is not a Material icon"


def test_the_browser_tab_icon_is_a_local_image():
    """Not a Material icon: for the tab, Streamlit's page fetches that from Google's font server, which an offline
    classroom cannot reach (a console error and no icon); an image file is served by the app itself."""
    from PIL import Image

    app = (ROOT / "app.py").read_text(encoding="utf-8")
    assert 'page_icon=str(ROOT / "assets" / "icon.png")' in app
    with Image.open(ROOT / "assets" / "icon.png") as icon:
        assert icon.size == (64, 64) and icon.getextrema()[3][1] == 255  # drawn, not blank


EMOJI = re.compile("[\U0001F300-\U0001FAFF\u2600-\u26FF\u2705\u274C\u2B50]")  # drawn only by an emoji font
APP_FILES = sorted([ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "ui").rglob("*.py")])


@pytest.mark.parametrize("path", APP_FILES, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_alert_banner_or_button_icon_is_an_emoji(path):
    """The icons of st.success / info / warning / error, page links and buttons, as the navigation's: Material."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    icons = [keyword.value.value for node in ast.walk(tree) if isinstance(node, ast.Call)
             for keyword in node.keywords if keyword.arg == "icon" and isinstance(keyword.value, ast.Constant)]
    assert all(material_name(icon) for icon in icons), [icon for icon in icons if not material_name(icon)]
    labels = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
              and EMOJI.search(node.value)]
    allowed = path.name in {"tokens.py", "token_counts.py"}  # the Tokens page splits emoji on purpose
    assert allowed or not labels, labels


def test_the_emoji_check_sees_an_emoji():
    assert EMOJI.search("🎓 trained") and EMOJI.search("done ✅") and not EMOJI.search("✓ ✗ · — √")
