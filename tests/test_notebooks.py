"""The notebooks run top to bottom on a real Jupyter kernel, and are committed without outputs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL = "memory-lab-test"


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory):
    """A kernelspec running this very interpreter, found first through JUPYTER_PATH."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "memory-lab (test)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", str(root))
        mp.setenv("TMPDIR", str(root))  # the notebooks' results folders land in pytest's tmp
        mp.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        yield KERNEL


def test_the_notebooks_are_there():
    assert [p.name for p in NOTEBOOKS][:2] == [
        "01_compare_memories.ipynb",
        "02_custom_memory.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, kernel_name):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    # what a user sees holds no warning (a TqdmWarning, a deprecation): outputs as they would be
    stderr = [
        o.get("text", "")
        for c in nb.cells
        for o in c.get("outputs", [])
        if o.output_type == "stream" and o.get("name") == "stderr"
    ]
    assert not [t for t in stderr if "Warning" in t], stderr
    assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name} cell {i} has outputs; clear them"
            assert cell.execution_count is None, f"{path.name} cell {i} has an execution count"
