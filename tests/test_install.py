"""`pip install .` and `pip install -e .` give a working library and app outside the repository: the wheel carries
the library, the poll store, the app's pages and the shipped checkpoints; `attention-lab` serves the app from any
folder and hands its options to Streamlit. Installs go into throwaway virtual environments that see the running
interpreter's packages, whether it is a virtual environment or the system Python, so nothing is fetched: only the
project itself is built and installed."""
import site
import socket
import subprocess
import sysconfig
import sys
import time
import tomllib
import urllib.request
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from ui.app.cli import PROJECT_SETTINGS, streamlit_arguments
from ui.app.navigation import PAGES

pytestmark = pytest.mark.service

ROOT = Path(__file__).resolve().parent.parent
NO_FETCH = ["--no-deps", "--no-build-isolation", "--no-index", "--quiet"]


def run(*command, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def venv(directory: Path) -> Path:
    """A virtual environment that sees the running interpreter's packages (torch, pip and setuptools among them:
    --without-pip keeps an older bundled copy from shadowing them); returns its bin folder.

    --system-site-packages alone is not enough: from inside a virtual environment it shows the base Python's
    packages, not the environment's. So a .pth file adds the running interpreter's own site folders, after the new
    environment's, where an installed project is found first."""
    result = run(sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", directory,
                 cwd=directory.parent)
    assert result.returncode == 0, result.stderr
    own = Path(sysconfig.get_path("purelib", vars={"base": str(directory), "platbase": str(directory)}))
    running = [folder for folder in site.getsitepackages() if Path(folder).is_dir()]
    (own / "running_interpreter.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({folder!r})" for folder in running) + "\n")
    return directory / "bin"


def test_a_nested_environment_imports_what_the_running_interpreter_imports(tmp_path):
    bin_dir = venv(tmp_path / "env")
    result = run(bin_dir / "python", "-c", "import sys, torch, setuptools, pip; print(sys.prefix)", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == tmp_path / "env"


def as_parsed(requirement: str) -> tuple:
    """A requirement as (name, extras, versions), whatever order its bounds are written in."""
    parsed = Requirement(requirement)
    return parsed.name, frozenset(parsed.extras), parsed.specifier


def requirements(path: Path) -> list[str]:
    return [line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    result = run(sys.executable, "-m", "pip", "wheel", *NO_FETCH, "--wheel-dir", out, ROOT, cwd=out)
    assert result.returncode == 0, result.stderr
    return next(out.glob("attention_lab-*.whl"))


def test_the_wheel_carries_the_library_the_poll_store_every_page_and_the_checkpoints(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"app.py", "transformer/__init__.py", "transformer/interop/hub.py", "polls/store.py", "ui/notebook.py",
            "ui/app/cli.py", "assets/checkpoints/index.json", "assets/text/english-held-out.txt"} <= names
    assert {page.script for page in PAGES} <= names
    shipped = {path.relative_to(ROOT).as_posix() for path in (ROOT / "assets").rglob("*") if path.is_file()}
    assert shipped <= names, sorted(shipped - names)[:5]
    assert not [name for name in names if name.startswith(("tests/", "benchmarks/", "scripts/")) or "__pycache__" in name]


def test_the_wheel_reads_its_dependencies_from_requirements_txt(wheel):
    """One list of pins: pyproject.toml reads requirements.txt, so the wheel asks for exactly those."""
    archive = zipfile.ZipFile(wheel)
    metadata = Parser().parsestr(archive.read(next(n for n in archive.namelist() if n.endswith("METADATA"))).decode())
    declared = {as_parsed(requirement) for requirement in metadata.get_all("Requires-Dist")}
    assert declared == {as_parsed(requirement) for requirement in requirements(ROOT / "requirements.txt")}
    entry_points = archive.read(next(n for n in archive.namelist() if n.endswith("entry_points.txt"))).decode()
    assert "attention-lab = ui.app.cli:main" in entry_points


def test_an_installed_wheel_opens_a_shipped_checkpoint_from_any_folder(wheel, tmp_path):
    bin_dir = venv(tmp_path / "env")
    result = run(bin_dir / "python", "-m", "pip", "install", *NO_FETCH, wheel, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    probe = ("import transformer, ui.notebook\nfrom transformer.checkpoint import SHIPPED_DIR, load\n"
             "model, meta = load(SHIPPED_DIR / 'llama2-language')\n"
             "print(transformer.__file__, SHIPPED_DIR.is_dir(), meta['task'], model.cfg.n_layers)\n")
    result = run(bin_dir / "python", "-c", probe, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    where, found, task, layers = result.stdout.split()
    assert Path(where).is_relative_to(tmp_path / "env") and found == "True" and (task, layers) == ("language", "4")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_editable_install_serves_the_app_from_another_folder_with_streamlits_options(tmp_path):
    bin_dir = venv(tmp_path / "env")
    result = run(bin_dir / "python", "-m", "pip", "install", *NO_FETCH, "--editable", ROOT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run(bin_dir / "python", "-c", "import transformer; print(transformer.__file__)", cwd=elsewhere)
    assert Path(result.stdout.strip()) == ROOT / "transformer" / "__init__.py", result.stderr

    unknown = run(bin_dir / "attention-lab", "--server.no_such_option", "1", cwd=elsewhere, timeout=60)
    assert unknown.returncode == 2 and "No such option '--server.no_such_option'" in unknown.stderr

    port = free_port()
    server = subprocess.Popen([str(bin_dir / "attention-lab"), "--server.address", "127.0.0.1", "--server.port",
                               str(port)], cwd=elsewhere, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        answer = None
        deadline = time.monotonic() + 120
        while answer is None and time.monotonic() < deadline and server.poll() is None:
            try:
                answer = urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read()
            except OSError:
                time.sleep(0.5)
        assert answer == b"ok", f"no answer on port {port}"
    finally:
        server.terminate()
        printed = server.communicate(timeout=30)[0]
    assert f"127.0.0.1:{port}" in printed


def test_the_command_line_puts_the_projects_settings_first_so_the_callers_win():
    arguments = streamlit_arguments(["--server.port", "9000", "--server.headless", "false"])
    assert arguments[:2] == ["run", str(ROOT / "app.py")]
    assert arguments[-4:] == ["--server.port", "9000", "--server.headless", "false"]
    assert arguments.index("--server.headless") < len(arguments) - 4  # the project's own, before the caller's


def test_the_command_line_sets_what_the_repositorys_streamlit_config_sets():
    """Streamlit reads .streamlit/config.toml only from the folder it starts in: the installed command passes the
    same settings itself."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    as_options = {f"{section}.{name}": str(value).lower() if isinstance(value, bool) else str(value)
                  for section, options in config.items() for name, value in options.items()}
    assert PROJECT_SETTINGS == as_options

