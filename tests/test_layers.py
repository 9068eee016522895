"""Each layer imports only the ones below it: the app never imports benchmarks, nor launches them as a
process; the library imports neither the app nor Streamlit; the model's modules never reach training; the
class poll (polls/) imports neither the app, Streamlit nor the benchmarks that measure it."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")  # "benchmarks.flash_memory", "transformer.rnn"


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def referenced_modules(path: Path, root: Path = ROOT) -> set[str]:
    """Every module a file imports, at any depth (inside functions too, relative imports resolved), and every
    module it names in a whole string: what importlib.import_module or `python -m` is handed."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = _docstrings(tree)
    package = path.relative_to(root).parent.parts
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            anchor = package[:len(package) - node.level + 1] if node.level else ()  # `..` is one package up
            base = ".".join([*anchor, *([node.module] if node.module else [])])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}  # `from . import training` names a module
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and MODULE_NAME.fullmatch(node.value)):
            found.add(node.value)
    return found


def _within(module: str, forbidden: set[str]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in forbidden)


LIBRARY = sorted((ROOT / "transformer").rglob("*.py"))
POLLS = sorted((ROOT / "polls").rglob("*.py"))
TRAINING = ROOT / "transformer" / "training"
# The GRU of Before attention is built for its task's vocabulary (Seq2SeqConfig.task reads TASKS["copy"]):
# until that vocabulary has a home below training, the chapter's module is the one that reaches up.
MODEL_READS_ITS_TASK = {ROOT / "transformer" / "rnn.py"}


@pytest.mark.parametrize("files,forbidden", [
    ([ROOT / "app.py", *(ROOT / "ui").rglob("*.py"), *(ROOT / "pages").rglob("*.py")], {"benchmarks"}),
    (LIBRARY, {"benchmarks", "ui", "pages", "streamlit"}),
    ([path for path in LIBRARY if TRAINING not in path.parents and path not in MODEL_READS_ITS_TASK],
     {"transformer.training"}),
    (POLLS, {"benchmarks", "ui", "pages", "streamlit"}),
], ids=["app never imports benchmarks", "library never imports the app", "the model never imports training",
        "the poll never imports the app"])
def test_no_layer_imports_one_it_must_not(files, forbidden):
    assert files
    offending = {f"{path.relative_to(ROOT)} names {module}" for path in files for module in referenced_modules(path)
                 if _within(module, forbidden)}
    assert not offending, sorted(offending)


def test_the_reader_sees_relative_imports_and_launched_modules(tmp_path):
    package = tmp_path / "transformer"
    package.mkdir()
    (package / "probe.py").write_text('"""Mentions benchmarks.flash_memory in words only."""\n'
                                      "from .training.tasks import TASKS\nfrom . import checkpoint\n"
                                      "COMMAND = ['python', '-m', 'benchmarks.flash_memory']\n")
    assert referenced_modules(package / "probe.py", root=tmp_path) == {
        "transformer.training.tasks", "transformer.training.tasks.TASKS", "transformer", "transformer.checkpoint",
        "benchmarks.flash_memory"}
