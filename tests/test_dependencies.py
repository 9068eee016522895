"""The dependency policy: requirements files state the supported ranges, constraints.txt pins one tested point
inside them, and the README's commands and .ci/run install through it."""
import re
import subprocess
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def declared(path: Path) -> list[Requirement]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line and not line.startswith("-r")]


def pinned() -> dict[str, Version]:
    pins = {}
    for requirement in declared(ROOT / "constraints.txt"):
        (spec,) = requirement.specifier
        assert spec.operator == "==", requirement
        pins[canonical(requirement.name)] = Version(spec.version)
    return pins


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_requirement_is_pinned_inside_its_own_range():
    pins = pinned()
    for requirement in declared(ROOT / "requirements.txt") + declared(ROOT / "requirements-dev.txt"):
        name = canonical(requirement.name)
        if name == "torch":  # the CPU or CUDA build is the caller's choice; the commands name torch==2.13.0
            assert "torch" not in pins and Version("2.13.0") in requirement.specifier
            continue
        assert name in pins, f"{requirement.name} is not pinned in constraints.txt"
        assert pins[name] in requirement.specifier, (requirement, pins[name])


def test_every_install_command_in_the_readme_goes_through_the_constraints():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line.strip() for line in readme.splitlines() if line.startswith("    pip install")]
    assert len(commands) >= 3
    assert all("-c constraints.txt" in command for command in commands), commands


def test_ci_runs_the_readmes_test_command_in_a_fresh_virtual_environment():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Run the tests", 1)[1]
    expected = next(line[4:] for line in section.splitlines() if re.match(r"^    \S", line))
    script = (ROOT / ".ci" / "run").read_text()
    extraction = re.search(r"test_command=\$\((awk .*?README\.md)\)", script).group(1)
    found = subprocess.run(["bash", "-c", extraction], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert found.strip() == expected and "python -m pytest" in expected
    assert "python3 -m venv" in script and 'eval "$test_command"' in script
