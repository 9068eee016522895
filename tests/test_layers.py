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


def _imported_by(node: ast.Import | ast.ImportFrom, package: tuple[str, ...]) -> set[str]:
    """The modules one import statement names, relative imports resolved against the file's package."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    anchor = package[:len(package) - node.level + 1] if node.level else ()  # `..` is one package up
    base = ".".join([*anchor, *([node.module] if node.module else [])])
    return {base} | {f"{base}.{alias.name}" for alias in node.names}  # `from . import training` names a module


def modules_named_in_strings(path: Path) -> set[str]:
    """Every module a file names in a whole string (docstrings aside): what importlib.import_module or
    `python -m` is handed."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = _docstrings(tree)
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings and MODULE_NAME.fullmatch(node.value)}


def referenced_modules(path: Path, root: Path = ROOT) -> set[str]:
    """Every module a file imports, at any depth (inside functions too, relative imports resolved), and every
    module it names in a whole string."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.relative_to(root).parent.parts
    imported = [_imported_by(node, package) for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    return set().union(*imported, modules_named_in_strings(path))


def top_level_imports(path: Path, root: Path = ROOT) -> set[str]:
    """The modules a file imports as it is itself imported: its import statements outside functions and classes
    (inside a top-level `if` or `try` too), those under `if TYPE_CHECKING:` aside, which never run."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.relative_to(root).parent.parts
    found, statements = set(), list(tree.body)
    while statements:
        node = statements.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= _imported_by(node, package)
        elif isinstance(node, ast.If) and ast.unparse(node.test) not in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            statements += node.body + node.orelse
        elif isinstance(node, ast.Try):
            statements += node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
    return found


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycle(files: list[Path], root: Path = ROOT, every_import: bool = False) -> list[str]:
    """A cycle among these files' top-level imports (with `every_import`, their imports at any depth: inside
    functions and under TYPE_CHECKING too), as the modules around it ([] when there is none). A package a
    module sits in is left out: Python runs it first, so it can never be half-made when the module needs it."""
    modules = {module_name(path, root): path for path in files}
    read = referenced_modules if every_import else top_level_imports
    imports = {name: sorted(m for m in read(path, root) if m in modules and m != name and not name.startswith(m + "."))
               for name, path in modules.items()}
    done: set[str] = set()

    def walk(name: str, path: list[str]) -> list[str]:
        if name in path:  # met again on its own path: it imports itself through the others
            return path[path.index(name):] + [name]
        if name in done:
            return []
        cycle = next(filter(None, (walk(imported, path + [name]) for imported in imports[name])), [])
        done.add(name)
        return cycle

    return next(filter(None, (walk(name, []) for name in sorted(modules))), [])


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


def test_the_library_imports_itself_at_the_top_without_a_cycle():
    """A cycle would force an import inside a function or a module named in a string (importlib), which hides from
    the reader what needs what: the one loader (checkpoint.py) imports the kinds it reads (vision.py, rnn.py) at the
    top, and they build on the file format (checkpoint_format.py) alone."""
    assert import_cycle(LIBRARY) == []
    loader = top_level_imports(ROOT / "transformer" / "checkpoint.py")
    assert {"transformer.vision", "transformer.rnn", "transformer.checkpoint_format"} <= loader


def test_the_library_names_none_of_its_modules_in_a_string():
    """No importlib dispatch: one library module reaches another through an import statement."""
    named = {f"{path.relative_to(ROOT)} names {module}" for path in LIBRARY for module in modules_named_in_strings(path)
             if _within(module, {"transformer"})}
    assert not named, sorted(named)


def test_the_cycle_finder_sees_top_level_imports_only(tmp_path):
    package = tmp_path / "lib"
    package.mkdir()
    (package / "__init__.py").write_text("from .a import A\n")  # the package itself is no cycle
    (package / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\nA = 1\n")
    (package / "b.py").write_text("from . import a\n\ndef later():\n    from .c import C\n")
    (package / "c.py").write_text("from .b import later\n")
    files = sorted(package.glob("*.py"))
    assert import_cycle(files, root=tmp_path) == []
    (package / "a.py").write_text("try:\n    from .c import later\nexcept ImportError:\n    later = None\n")
    assert import_cycle(files, root=tmp_path) == ["lib.a", "lib.c", "lib.b", "lib.a"]


PROJECT = sorted(path for top in ("transformer", "ui", "pages", "polls", "scripts", "benchmarks")
                 for path in (ROOT / top).rglob("*.py")) + [ROOT / "app.py"]


def test_no_module_of_the_project_reaches_back_to_one_that_imports_it():
    """Imports run one way (the table of choices -> config -> modules -> model -> app), counting the imports
    hidden inside functions and under TYPE_CHECKING: a circle there is one the reader cannot see at the top."""
    assert import_cycle(PROJECT, every_import=True) == []
    config_imports = {m for m in referenced_modules(ROOT / "transformer" / "config.py") if m.startswith("transformer")}
    assert config_imports <= {"transformer.axes", "transformer.axes.AXES", "transformer.axes.FIELD_AXES",
                              "transformer.axes.Choice", "transformer.axes.divisors", "transformer.axes.keys",
                              "transformer.layer_plan", "transformer.layer_plan.LayerSpec",
                              "transformer.layer_plan.build_plan"}, "config.py imports only the table and the plan"
    assert "torch" not in {m.split(".")[0] for m in referenced_modules(ROOT / "transformer" / "config.py")}


def test_the_cycle_finder_sees_hidden_imports_when_asked(tmp_path):
    package = tmp_path / "lib"
    package.mkdir()
    (package / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\nA = 1\n")
    (package / "b.py").write_text("def later():\n    from .a import A\n")
    files = sorted(package.glob("*.py"))
    assert import_cycle(files, root=tmp_path) == []
    assert import_cycle(files, root=tmp_path, every_import=True) == ["lib.a", "lib.b", "lib.a"]


def test_no_file_of_the_library_or_the_app_does_so_much_that_it_runs_past_600_lines():
    long = {f"{path.relative_to(ROOT)}: {n}" for top in ("transformer", "ui") for path in (ROOT / top).rglob("*.py")
            if (n := len(path.read_text().splitlines())) > 600}
    assert not long, f"split these by job: {sorted(long)}"
