"""Each benchmark is declared once, in its importer's module; a new module is a new benchmark."""

from __future__ import annotations

import json
import sys

import pytest

from memory_lab import load_dialogues
from memory_lab.dialogue import importers
from memory_lab.dialogue.importers import benchmarks, formats, import_source, parse_source
from memory_lab.dialogue.model import CATEGORIES, EVIDENCE_JUDGED

TOY = """
import json
from pathlib import Path

from memory_lab.dialogue.importers.common import Benchmark, ImportReport, ImportResult


def import_toy(path: Path, budget=None, speaker: str = "me") -> ImportResult:
    rows = json.loads(Path(path).read_text("utf-8"))
    report = ImportReport("toy", str(path))
    docs = []
    for i, row in enumerate(rows):
        docs.append({
            "format": "memory-lab/dialogue@1", "id": f"toy-{i}", "title": "toy",
            "language": "en",
            "sessions": [{"id": "s1", "turns": [
                {"id": "t1", "user": f"{speaker}: {row['fact']}"},
                {"id": "t2", "assistant": "Noted."},
            ]}],
            "probes": [{"id": "q1", "after": "t2", "question": row["question"],
                        "answers": [row["answer"]], "evidence": ["t1"],
                        "category": "single-hop"}],
        })
        report.dialogues += 1
    return ImportResult(docs, report)


BENCHMARK = Benchmark(
    name="toy",
    importer=import_toy,
    origin="toy data is written by the test",
    licence="public domain",
    docs="docs/importers.md",
    categories={"fact": "single-hop"},
)
"""


def test_the_shipped_benchmarks_are_declared_with_their_categories():
    declared = benchmarks()
    assert set(declared) == {"beam", "locomo", "locomo-plus", "longmemeval"}
    assert formats() == tuple(declared)
    for name, bench in declared.items():
        assert bench.name == name and callable(bench.importer)
        assert bench.origin and bench.licence and bench.docs.startswith("docs/")
        # every raw category becomes one of ours
        ours = set(CATEGORIES) | set(EVIDENCE_JUDGED)
        assert set(bench.categories.values()) <= ours, name
    assert declared["beam"].scorer == "memory-lab beam-scores"
    assert declared["locomo"].categories["5"] == "abstention"


def test_a_missing_dataset_names_where_to_get_it():
    with pytest.raises(Exception, match=r"BEAM is not shipped.*see docs/beam\.md"):
        import_source("beam", "/nonexistent/chats")


def test_one_new_module_is_a_new_benchmark(tmp_path, monkeypatch):
    package = tmp_path / "extra"
    package.mkdir()
    (package / "toy.py").write_text(TOY, "utf-8")
    monkeypatch.setattr(importers, "__path__", [*importers.__path__, str(package)])
    monkeypatch.syspath_prepend(str(package))
    importers._declared.cache_clear()
    try:
        assert "toy" in formats()
        data = tmp_path / "toy.json"
        rows = [{"fact": "my cat is Tom", "question": "What is my cat called?", "answer": "Tom"}]
        data.write_text(json.dumps(rows), "utf-8")
        assert parse_source(f"toy:{data}#speaker=ann") == ("toy", data, {"speaker": "ann"})
        (dialogue,) = load_dialogues(f"toy:{data}#speaker=ann")
        assert dialogue.turns[0].text == "ann: my cat is Tom"
        assert dialogue.probes[0].answers == ("Tom",)
        with pytest.raises(Exception, match="toy has no option 'colour'"):
            import_source("toy", data, {"colour": "red"})
    finally:
        sys.modules.pop("memory_lab.dialogue.importers.toy", None)
        importers._declared.cache_clear()
