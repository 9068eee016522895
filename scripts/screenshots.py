"""Refresh docs/screenshots/<page>.png: start the app, open each page in Chromium, save a small PNG.

    python scripts/screenshots.py            # every page of the navigation (ui/app/navigation.py)
    python scripts/screenshots.py playground # only these

The helpers (serve the app, open Chromium, wait for a page to finish) are shared with
tests/test_browser.py.
"""
from __future__ import annotations

import contextlib
import io
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python scripts/screenshots.py` as well as an import from the tests
    sys.path.insert(0, str(ROOT))

from ui.app.navigation import existing_pages  # noqa: E402

SHOTS = ROOT / "docs" / "screenshots"
VIEWPORT = {"width": 1280, "height": 900}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-gpu"]
START_TIMEOUT_S = 60
PAGE_TIMEOUT_MS = 90_000


def page_paths() -> dict[str, str]:
    """url path -> title of every page of the navigation whose script exists."""
    return {page.slug: page.title for page in existing_pages()}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve_app(port: int | None = None) -> Iterator[str]:
    """`streamlit run app.py` on a free local port; yields the base URL and stops the server afterwards."""
    port = port or free_port()
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(f"the Streamlit server did not start within {START_TIMEOUT_S} s:\n"
                                   + log.read().decode(errors="replace"))
            time.sleep(0.3)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


def launch_chromium(playwright):
    executable = shutil.which("chromium")
    if executable is None:
        raise RuntimeError("chromium is not installed (Debian: apt-get install chromium); .ci/run installs it")
    return playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)


READY = '[data-testid="stApp"][data-test-script-state="notRunning"]'


def wait_until_ready(page, timeout_ms: int = PAGE_TIMEOUT_MS) -> None:
    """Wait until the script run has finished (the app reports "notRunning") and a title is drawn."""
    page.wait_for_selector(READY, timeout=timeout_ms, state="attached")
    page.wait_for_selector("h1", timeout=timeout_ms)
    page.wait_for_timeout(800)  # let plotly and graphviz finish their first draw


def save_png(page, path: Path, full_page: bool = False) -> None:
    """A screenshot, palette-compressed when Pillow is there (a fraction of the size)."""
    png = page.screenshot(full_page=full_page)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        from PIL import Image
    except ImportError:
        path.write_bytes(png)
        return
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=128)
    image.save(path, optimize=True)


def main(names: list[str]) -> None:
    from playwright.sync_api import sync_playwright

    pages = page_paths()
    wanted = names or list(pages)
    with serve_app() as base, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_page(viewport=VIEWPORT)
        for name in wanted:
            page.goto(f"{base}/{'' if name == 'home' else name}")
            wait_until_ready(page)
            save_png(page, SHOTS / f"{name}.png")
            print(f"{SHOTS / f'{name}.png'}: {(SHOTS / f'{name}.png').stat().st_size // 1024} KiB")
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1:])
