"""The notebooks run top to bottom on a real Jupyter kernel, and are committed with what they show.

A fresh execution must show what the committed outputs show (timings, temporary paths and
figures' pixels aside: ``tests/notebook_outputs.py``); ``make notebooks`` rewrites them after a
change.
"""

from __future__ import annotations

import copy

import nbformat
import pytest

from tests.notebook_outputs import NOTEBOOK_DIR, drift, execute, kernel, shown

NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory):
    with kernel(tmp_path_factory.mktemp("jupyter")) as name:
        yield name


def test_the_notebooks_are_there():
    assert [p.name for p in NOTEBOOKS][:2] == [
        "01_compare_memories.ipynb",
        "02_custom_memory.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom_and_shows_what_is_committed(path, kernel_name):
    nb = execute(path, kernel_name)  # raises CellExecutionError, naming the cell, on any error
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
    lines = drift(nbformat.read(path, as_version=4), nb)
    assert not lines, (
        f"{path.name} drifted from its committed outputs (run `make notebooks`):\n"
        + ("\n".join(lines))
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_with_its_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    # not cleared: most cells show something (a table, a chart, a printed line)
    assert sum(bool(c.outputs) for c in code) >= len(code) / 2, f"{path.name} has no outputs"
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), "executed top to bottom, once, in order"
    assert nb.metadata["kernelspec"]["name"] == "python3"  # not the executing test kernel


def test_the_drift_check_sees_a_changed_figure_but_not_a_timing():
    committed = nbformat.read(NOTEBOOK_DIR / "01_compare_memories.ipynb", as_version=4)
    summary = next(
        c
        for c in committed.cells
        if c.cell_type == "code" and c.source.strip() == "summarize(results)"
    )
    html = summary.outputs[0]["data"]["text/html"]

    def with_html(new_html):
        nb = copy.deepcopy(committed)
        cell = next(c for c in nb.cells if c.get("source") == summary.source)
        cell.outputs[0]["data"]["text/html"] = new_html
        return nb

    rows = shown(committed)[[c for c in committed.cells if c.cell_type == "code"].index(summary)]
    table = rows[0][1]
    header = table[0]
    first = table[1]
    recall = first[header.index("evidence_recall")]
    assert first[header.index("<time>")] == "<time>"  # the seconds column, masked
    # a timing differs on every run: not drift
    raw_seconds = html.split("<td>")[header.index("<time>")].split("</td>")[0]
    assert not drift(
        committed, with_html(html.replace(f"<td>{raw_seconds}</td>", "<td>99.9</td>", 1))
    )
    # a recall figure that changes is
    assert drift(committed, with_html(html.replace(f"<td>{recall}</td>", "<td>0.123</td>", 1)))
