"""Readers of probe metadata use the keys their benchmark declares (``BENCHMARK.probe_keys``,
``memory_lab.dialogue.importers``), by the declared names: no module past the importers spells a
declared key as a string, and the table by category reads each benchmark's own category.

Read from the source with ``ast`` (docstrings aside). ``KNOWN_LITERALS`` names the readers still
to change; an entry that is fixed fails the test too, so it only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd
import pytest

from memory_lab.dialogue.importers import benchmarks
from memory_lab.results.summary import _source_category

from ..dialogue.importers.test_probe_metadata import written

PACKAGE = Path(__file__).resolve().parents[2] / "memory_lab"
# the stages that read records after the importers wrote them (tests/test_code_shape.py)
READERS = ("scoring", "log", "results", "run", "views", "serve", "cli")
# BEAM's "type" is also every record's kind ({"type": "probe"}): a literal cannot tell them apart
AMBIGUOUS = {"type"}
# "module: key" of readers that still spell a declared key
KNOWN_LITERALS: set[str] = set()


def declared() -> set[str]:
    return {key for bench in benchmarks().values() for key in bench.probe_keys} - AMBIGUOUS


def literals(path: Path, keys: set[str]) -> set[str]:
    """The declared keys ``path`` spells as a string constant, its docstrings aside."""
    tree = ast.parse(path.read_text("utf-8"))
    docs = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in keys and id(node) not in docs
    }


def test_no_reader_spells_a_declared_key():
    keys = declared()
    found = {
        f"{path.relative_to(PACKAGE).as_posix()}: {key}"
        for stage in READERS
        for path in sorted((PACKAGE / stage).rglob("*.py"))
        for key in literals(path, keys)
    }
    new = found - KNOWN_LITERALS
    assert not new, f"import the benchmark's declared name instead: {sorted(new)}"
    gone = KNOWN_LITERALS - found
    assert not gone, f"gone, remove from KNOWN_LITERALS: {sorted(gone)}"


def test_the_check_sees_a_literal_and_skips_docstrings(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""Reads locomo_category."""\nx = meta.get("locomo_category")\n')
    assert literals(module, {"locomo_category", "judge_evidence"}) == {"locomo_category"}
    module.write_text('"""locomo_category"""\n')
    assert literals(module, {"locomo_category"}) == set()


@pytest.mark.parametrize("fmt", sorted(benchmarks()))
def test_the_table_by_category_reads_each_benchmarks_own_category(fmt, tmp_path):
    bench = benchmarks()[fmt]
    keys = [b.category_key for b in benchmarks().values() if b.category_key]
    for meta in written(fmt, tmp_path):
        row = pd.Series({"probe_metadata": meta})
        assert _source_category(row, keys) == f"{bench.category_key}={meta[bench.category_key]}"
    assert _source_category(pd.Series({"probe_metadata": {"other": 1}}), keys) == ""
