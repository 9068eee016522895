"""The app's pages, in the order the navigation shows them: one row per page, no Streamlit.

app.py builds st.navigation from these rows; the screenshot script, the browser tests and the
latency and load benchmarks import the same rows, so a page listed here is served, photographed
and timed alike.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class PageEntry:
    section: str  # the heading it sits under in the navigation
    script: str  # relative to the repository root
    title: str
    icon: str  # a Material icon (":material/name:"): Streamlit ships its font, so it draws without an emoji font

    @property
    def slug(self) -> str:
        """Its URL path: st.Page names a page after its script's stem."""
        return Path(self.script).stem


def _section(section: str, *pages: tuple[str, str, str]) -> list[PageEntry]:
    return [PageEntry(section, script, title, icon) for script, title, icon in pages]


HOME = "pages/home.py"  # the page the bare URL opens
PAGES: tuple[PageEntry, ...] = (
    *_section("Start",
              (HOME, "Home", ":material/home:"),
              ("pages/lessons.py", "Lessons", ":material/school:")),
    *_section("Explore",
              ("pages/playground.py", "Attention playground", ":material/tune:"),
              ("pages/stepper.py", "Forward-pass stepper", ":material/footprint:"),
              ("pages/compare.py", "Compare", ":material/compare:"),
              ("pages/interpret.py", "Why this prediction?", ":material/biotech:")),
    *_section("The five axes",
              ("pages/kv_heads.py", "KV heads", ":material/key:"),
              ("pages/masks.py", "Masks", ":material/theater_comedy:"),
              ("pages/positions.py", "Positions", ":material/location_on:"),
              ("pages/norms.py", "Norms", ":material/straighten:"),
              ("pages/ffn.py", "FFN and MoE", ":material/calculate:"),
              ("pages/scores.py", "Scores: QK-norm, caps, sinks", ":material/sliders:")),
    *_section("Why it works",
              ("pages/tokens.py", "Tokens", ":material/text_fields:"),
              ("pages/before_attention.py", "Before attention", ":material/skip_previous:"),
              ("pages/state.py", "The state", ":material/loop:"),
              ("pages/scaling.py", "Why divide by √d", ":material/function:"),
              ("pages/permutation.py", "Why positions", ":material/shuffle:"),
              ("pages/vit.py", "The same block on images", ":material/image:")),
    *_section("At scale",
              ("pages/costs.py", "What a model costs", ":material/payments:"),
              ("pages/growth.py", "How models grow", ":material/trending_up:"),
              ("pages/tradeoffs.py", "Trade-offs, measured", ":material/sports_score:"),
              ("pages/long_texts.py", "Long texts", ":material/menu_book:")),
    *_section("Go further",
              ("pages/flash.py", "Flash attention", ":material/bolt:"),
              ("pages/speculative.py", "Speculative decoding", ":material/fast_forward:"),
              ("pages/train.py", "Train", ":material/fitness_center:"),
              ("pages/hf_model.py", "Your Hugging Face model", ":material/hub:")),
)


def by_section() -> dict[str, list[PageEntry]]:
    """section -> its pages, sections and pages in navigation order."""
    sections: dict[str, list[PageEntry]] = {}
    for page in PAGES:
        sections.setdefault(page.section, []).append(page)
    return sections


def existing_pages() -> list[PageEntry]:
    """The listed pages whose script is in this checkout (what a tool that opens every page can open)."""
    return [page for page in PAGES if (ROOT / page.script).exists()]
