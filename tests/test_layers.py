"""Each layer imports only the ones below it: the app launches benchmarks but never imports them,
and the library imports neither the app nor Streamlit."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (inside functions too), relative imports left out."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("files,forbidden", [
    ([ROOT / "app.py", *(ROOT / "ui").rglob("*.py"), *(ROOT / "pages").rglob("*.py")], {"benchmarks"}),
    (list((ROOT / "transformer").rglob("*.py")), {"benchmarks", "ui", "pages", "streamlit"}),
], ids=["app never imports benchmarks", "library never imports the app"])
def test_no_layer_imports_one_it_must_not(files, forbidden):
    assert files
    offending = {f"{path.relative_to(ROOT)} imports {module}" for path in files for module in imported_modules(path)
                 if module.split(".")[0] in forbidden}
    assert not offending, sorted(offending)
