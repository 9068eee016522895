"""ui.notebook draws the app's own figures outside the app, and docs/notebooks/tour.ipynb runs from top to bottom."""
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from transformer.checkpoint import SHIPPED_DIR, load
from ui.figures.base import head_grid
from ui.notebook import show

ROOT = Path(__file__).resolve().parent.parent
TOUR = ROOT / "docs" / "notebooks" / "tour.ipynb"
TEXT = "The cat sat on the mat. The cat sat on the mat."


@pytest.fixture(scope="module")
def llama_run():
    model, meta = load(SHIPPED_DIR / "llama2-language")
    return show.trace(model, TEXT, task=meta["task"])


def test_a_head_is_drawn_from_the_recorded_weights(llama_run):
    figure = show.pattern(llama_run, layer=3, head=1)
    recorded = llama_run.arrays["blocks.3.attn.hook_pattern"][0, 1]  # (T, T)
    drawn = np.asarray(figure.data[0].z, dtype=float)
    assert drawn.shape == recorded.shape == (len(llama_run.ids),) * 2
    assert np.allclose(np.nan_to_num(drawn), recorded, atol=1e-6)
    assert list(figure.data[0].y)[1].endswith(":T")  # token labels as the app writes them: "<bos>" first


def test_the_grid_is_the_playgrounds_builder_on_the_same_layer(llama_run):
    figure = show.grid(llama_run, layer=2)
    patterns = llama_run.arrays["blocks.2.attn.hook_pattern"][0]
    app = head_grid(patterns, llama_run.labels, llama_run.labels, llama_run.model.cfg.n_kv_heads,
                    mask=llama_run.arrays["blocks.2.attn.hook_mask"][0, 0])
    assert len(figure.data) == len(app.data) == llama_run.model.cfg.n_heads
    for ours, theirs in zip(figure.data, app.data):
        assert np.array_equal(np.asarray(ours.z, dtype=float), np.asarray(theirs.z, dtype=float), equal_nan=True)


@pytest.mark.parametrize("call,message", [
    (lambda run: show.pattern(run, layer=4, head=0), "layer=4 is out of range: this model has 4 layers, 0 to 3"),
    (lambda run: show.grid(run, layer=-1), "layer=-1 is out of range: this model has 4 layers, 0 to 3"),
    (lambda run: show.stages(run, layer=0, head=4), "head=4 is out of range: this layer has 4 heads, 0 to 3"),
    (lambda run: show.compare(run, run, layer=1, head=9), "head=9 is out of range"),
])
def test_a_layer_or_head_out_of_range_names_the_valid_range(llama_run, call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        call(llama_run)


def test_the_committed_notebook_holds_no_outputs():
    notebook = nbformat.read(TOUR, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)


def test_the_tour_runs_from_top_to_bottom_without_an_error():
    """nbclient raises CellExecutionError on the first cell that raises; the kernel starts in the repository's
    root, as it would after `pip install -e .`."""
    notebook = nbformat.read(TOUR, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    drawn = [output for output in outputs if "application/vnd.plotly.v1+json" in output.get("data", {})]
    assert len(drawn) >= 8  # the head, four stages, the grid, the comparison, the lens, the patching
