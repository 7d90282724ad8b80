"""Execute the notebooks on a Jupyter kernel of this interpreter, and compare their outputs.

The notebooks are committed with their outputs, so a code host shows them as a user sees them.
``tests/test_notebooks.py`` re-executes each one and compares what it shows with what is
committed; ``make notebooks`` (``python -m tests.notebook_outputs``) re-executes them in place
after a change. Both run with the offline embeddings pinned (``tests/notebook_kernel.py``), so
what a notebook shows does not depend on the CPU's last bits: ``make notebooks`` records them.

What varies from one execution to the next is masked before comparing: temporary paths,
figures' bytes (a chart is compared by kind and size, not pixel by pixel: fonts differ between
machines), and table columns that hold timings (``volatile``). Everything else a
cell shows (every figure of a table, every printed line, every warning) must match.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
KERNEL = "memory-lab-notebooks"


def volatile(column: str) -> bool:
    """A table column of wall-clock figures (``seconds``, ``search_seconds_p50``, ``sec``)."""
    return "seconds" in column or column in ("sec", "startup")


_TMP_PATH = re.compile(r"(/[\w.-]+)*/memory-lab-[\w]+(/[\w.-]+)*")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


VECTORS = Path(__file__).resolve().parent / "fixtures" / "golden" / "notebook_vectors.npz"


@contextmanager
def kernel(root: Path, mode: str = "pin") -> Iterator[str]:
    """A kernelspec running this very interpreter, found first through JUPYTER_PATH, its offline
    embeddings pinned to ``VECTORS`` (``tests/notebook_kernel.py``; ``mode`` ``record``
    computes and keeps them)."""
    from tests.notebook_kernel import FILE, MODE

    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "tests.notebook_kernel", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "memory-lab", "language": "python"})
    )
    settings = {
        "JUPYTER_PATH": str(root),
        "TMPDIR": str(root),  # the notebooks' results folders land here
        # an empty call cache: every vector comes from the pinned engines, none from a cache
        "MEMORY_LAB_CACHE": str(root / "cache"),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(NOTEBOOK_DIR.parent), os.environ.get("PYTHONPATH")) if p
        ),
        MODE: mode,
        FILE: str(VECTORS),
    }
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        yield KERNEL
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


SAVE = "import tests.notebook_kernel\ntests.notebook_kernel.save()"


def execute(path: Path, kernel_name: str, record: bool = False) -> nbformat.NotebookNode:
    """The notebook at ``path`` executed top to bottom (raises naming the cell on any error);
    ``record``: the kernel's vectors are saved at the end (a cell run, then taken out)."""
    nb = nbformat.read(path, as_version=4)
    kernelspec = copy.deepcopy(nb.metadata.get("kernelspec"))
    language_info = copy.deepcopy(nb.metadata.get("language_info"))
    if record:
        nb.cells.append(nbformat.v4.new_code_cell(SAVE))
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name=kernel_name,
        record_timing=False,
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    client.execute()
    if record:
        nb.cells.pop()
    # committed as a user's front end would open it, not naming the test kernel
    if kernelspec is not None:
        nb.metadata["kernelspec"] = kernelspec
    if language_info is not None:
        nb.metadata["language_info"] = language_info
    return nb


class _Table(HTMLParser):
    """The rows of an HTML table as lists of cell texts (the header row first)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _table(html: str) -> list[list[str]]:
    parser = _Table()
    parser.feed(html)
    rows = [r for r in parser.rows if r]
    if not rows:
        return []
    header = rows[0]
    # pandas puts the index name's cell first; a column's position is counted from the right
    masked = {len(header) - i for i, name in enumerate(header) if volatile(name)}
    return [
        [("<time>" if len(row) - j in masked else cell) for j, cell in enumerate(row)]
        for row in rows
    ]


def _text(text: str) -> str:
    return _ADDRESS.sub(" at 0x…", _TMP_PATH.sub("<tmp>", text)).rstrip()


def shown(nb: nbformat.NotebookNode) -> list[list[object]]:
    """What each code cell shows, with what varies between executions masked."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs: list[object] = []
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                outputs.append((out.name, _text(out.text)))
            elif out.output_type == "error":
                outputs.append(("error", out.ename, _text(out.evalue)))
            else:
                data = out.get("data", {})
                if "image/png" in data:
                    outputs.append(("image/png", data.get("text/plain", "").strip()))
                elif "text/html" in data and "<table" in data["text/html"]:
                    outputs.append(("table", _table(data["text/html"])))
                else:
                    text = data.get("text/html") or data.get("text/plain", "")
                    outputs.append(("display", _text(text)))
        cells.append(outputs)
    return cells


def drift(committed: nbformat.NotebookNode, fresh: nbformat.NotebookNode) -> list[str]:
    """One line per code cell whose outputs differ (empty when the notebook has not drifted)."""
    old, new = shown(committed), shown(fresh)
    if len(old) != len(new):
        return [f"{len(old)} code cells committed, {len(new)} executed"]
    lines = []
    for i, (a, b) in enumerate(zip(old, new, strict=True)):
        if a != b:
            lines.append(f"code cell {i + 1}: committed {a!r:.300} ... executed {b!r:.300}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Execute the notebooks and write their outputs in place "
        "(--check: only report which cells drifted from what is committed)."
    )
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOK_DIR.glob("*.ipynb"))
    drifted = 0
    mode = "pin" if args.check else "record"
    if not args.check and not args.notebooks:
        VECTORS.unlink(missing_ok=True)  # recorded afresh, every notebook's texts
    with (
        tempfile.TemporaryDirectory(prefix="notebooks-") as root,
        kernel(Path(root), mode) as name,
    ):
        for path in paths:
            fresh = execute(path, name, record=not args.check)
            lines = drift(nbformat.read(path, as_version=4), fresh)
            drifted += bool(lines)
            for line in lines:
                print(f"{path.name}: {line}")
            if not args.check:
                nbformat.write(fresh, path)
                print(f"{path.name}: executed, outputs written")
    return 1 if args.check and drifted else 0


if __name__ == "__main__":
    raise SystemExit(main())
