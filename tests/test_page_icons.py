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


def test_the_browser_tab_icon_is_a_material_icon():
    app = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    icons = [keyword.value.value for node in ast.walk(app) if isinstance(node, ast.Call)
             for keyword in node.keywords if keyword.arg == "page_icon"]
    assert icons and all(material_name(icon) for icon in icons), icons
