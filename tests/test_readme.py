"""The README's library example runs as written and says what it prints."""
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_library_example_runs():
    code = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert tuple(namespace["logits"].shape) == (2, 5, 128)  # the encoder-decoder's target length
    assert tuple(namespace["trace"]["blocks.0.attn.hook_pattern"].shape) == (2, 4, 10, 10)
    assert tuple(namespace["tokens"].shape) == (2, 30)
    assert not namespace["ablated"].equal(namespace["model"](namespace["ids"]))


def test_readme_names_the_commands():
    text = README.read_text(encoding="utf-8")
    assert "streamlit run app.py" in text
    assert "python -m pytest -q" in text
