"""Each benchmark is declared once, in its package; a new package is a new benchmark, imported by
``FORMAT:PATH`` and scored by ``memory-lab score``."""

from __future__ import annotations

import json
import sys

import pytest

import memory_lab.benchmarks as benchmark_packages
from memory_lab import load_dialogues
from memory_lab.cli import main
from memory_lab.dialogue.importers import benchmarks, formats, import_source, parse_source
from memory_lab.dialogue.model import CATEGORIES, EVIDENCE_JUDGED

TOY = """
import json
from pathlib import Path

from memory_lab.benchmarks import Benchmark, Scorer, ScoreOutcome
from memory_lab.dialogue.importers.common import ImportReport, ImportResult


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


def score_toy(request):
    from memory_lab.results.read import read_records

    replies = [r for r in read_records(request.results_dir) if r.get("type") == "probe"]
    out = request.results_dir / "toy_scores.txt"
    out.write_text(f"{len(replies)} {request.judge} {','.join(request.protocols)}", "utf-8")
    return ScoreOutcome(f"toy: {len(replies)} replies scored", [out])


BENCHMARK = Benchmark(
    name="toy",
    importer=import_toy,
    origin="toy data is written by the test",
    licence="public domain",
    docs="docs/importers.md",
    categories={"fact": "single-hop"},
    scorer=Scorer(score=score_toy, writes="toy_scores.txt", offline=True,
                  protocols=("reference", "fixed")),
)
"""


def test_the_shipped_benchmarks_are_declared_with_their_categories():
    declared = benchmarks()
    assert set(declared) == {"beam", "locomo", "locomo-plus", "longmemeval", "realmem"}
    assert formats() == tuple(declared)
    for name, bench in declared.items():
        assert bench.name == name and callable(bench.importer)
        assert bench.origin and bench.licence and bench.docs.startswith("docs/")
        # every raw category becomes one of ours
        ours = set(CATEGORIES) | set(EVIDENCE_JUDGED)
        assert set(bench.categories.values()) <= ours, name
    assert declared["beam"].scorer.protocols == ("reference", "corrected")
    assert declared["locomo-plus"].scorer.offline is False  # its judge needs a model
    assert declared["locomo"].categories["5"] == "abstention"


def test_a_missing_dataset_names_where_to_get_it():
    with pytest.raises(Exception, match=r"BEAM is not shipped.*see docs/beam\.md"):
        import_source("beam", "/nonexistent/chats")


def test_one_new_package_is_a_new_benchmark_imported_and_scored(tmp_path, monkeypatch, capsys):
    package = tmp_path / "extra" / "toy"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(TOY, "utf-8")
    path = [*benchmark_packages.__path__, str(package.parent)]
    monkeypatch.setattr(benchmark_packages, "__path__", path)
    monkeypatch.syspath_prepend(str(package.parent))
    benchmark_packages._declared.cache_clear()
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
        out = tmp_path / "run"
        source = f"toy:{data}"
        assert main(["run", "--dialogues", source, "--memory", "buffer", "--out", str(out)]) == 0
        assert main(["score", "toy", str(out)]) == 0
        assert "toy: 1 replies scored" in capsys.readouterr().out
        assert (out / "toy_scores.txt").read_text("utf-8") == "1 offline reference,fixed"
        assert main(["score", "toy", str(out), "--protocol", "fixed"]) == 0
        assert (out / "toy_scores.txt").read_text("utf-8") == "1 offline fixed"
        assert main(["score", "toy", str(out), "--protocol", "nope"]) == 2
        assert "toy: no protocol 'nope' (known: reference, fixed, all)" in capsys.readouterr().err
        assert main(["score", "toy", str(out), "--export-retrieval", str(tmp_path / "x")]) == 2
        assert "not declared by its scorer" in capsys.readouterr().err
    finally:
        sys.modules.pop("toy", None)
        benchmark_packages._declared.cache_clear()
