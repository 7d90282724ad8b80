"""A results folder written before format versions (format 1: the fixture
``runs/v1-window-buffer``, window and buffer on one dialogue with the offline judge, made by the
version before them) opens in ``report``, ``view`` and ``--resume`` with the same figures; a
newer format is refused by name."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import httpx
import pytest

from memory_lab.cli import main
from memory_lab.log.formats import RECORDS_FORMAT, RUN_FORMAT, migrate_record
from memory_lab.log.records import without_timings
from memory_lab.log.run_guard import field_hash
from memory_lab.results.read import ResultsError, read_records, read_results
from memory_lab.results.summary import summarize
from memory_lab.serve.viewer import ViewSettings, create_view_app

from ..conftest import FIXTURES
from ..serve.conftest import running_app

OLD = FIXTURES / "runs" / "v1-window-buffer"
TIMINGS = ("seconds", "memory_seconds", "startup_seconds")


@pytest.fixture
def old(tmp_path) -> Path:
    """The format-1 folder, its dialogue where its run.json says (checksums as then)."""
    folder = tmp_path / "old"
    folder.mkdir()
    for name in ("records.jsonl", "summary.csv"):
        shutil.copy(OLD / name, folder / name)
    shutil.copy(OLD / "dialogue.yaml", tmp_path / "dialogue.yaml")
    info = json.loads((OLD / "run.json").read_text("utf-8"))
    info["dialogue_sources"] = [str(tmp_path / "dialogue.yaml")]
    info["config_sha256"] = {k: field_hash(info.get(k)) for k in info["config_sha256"]}
    (folder / "run.json").write_text(json.dumps(info, indent=2), "utf-8")
    return folder


def _figures(rows: list[dict]) -> list[dict]:
    """Summary rows as text (as summary.csv holds them), timings left out."""
    out = []
    for row in rows:
        kept = {k: v for k, v in row.items() if not any(t in k for t in TIMINGS)}
        out.append({k: "" if str(v) == "nan" else str(v) for k, v in kept.items()})
    return out


def test_an_old_folder_reads_with_the_figures_its_version_wrote(old):
    assert "format_version" not in json.loads((old / "run.json").read_text("utf-8"))
    results = read_results(old)
    assert results.spec.format_version == RUN_FORMAT and results.spec.mode == "replay"
    with open(old / "summary.csv", encoding="utf-8") as fh:
        written = list(csv.DictReader(fh))
    now = summarize(results).to_csv(index=False).splitlines()
    again = list(csv.DictReader(now))
    assert [r["memory"] for r in again] == ["window", "buffer"]
    shared = [k for k in written[0] if k in again[0]]
    assert len(shared) > 20
    assert _figures([{k: r[k] for k in shared} for r in again]) == _figures(
        [{k: r[k] for k in shared} for r in written]
    )


def test_an_old_folder_opens_in_report_and_view(old, capsys):
    assert main(["report", str(old)]) == 0
    assert "window" in (old / "report.html").read_text("utf-8")
    with running_app(create_view_app(ViewSettings([str(old.parent)]))) as url:
        with httpx.Client(base_url=url, timeout=60) as http:
            runs = http.get("/api/runs").json()["runs"]
            assert [r["name"] for r in runs] == ["old"]
            data = http.get("/api/compare", params=[("run", runs[0]["key"])]).json()
            assert data["memories"] == ["window", "buffer"]
            assert len(data["probes"]) == 8 and all(p["correct"] for p in data["probes"])


def test_an_old_interrupted_run_resumes_in_this_format(old, capsys):
    before = read_records(old)
    lines = (old / "records.jsonl").read_text("utf-8").splitlines(keepends=True)
    window_end = next(n for n, x in enumerate(lines) if '"type": "cell"' in x) + 1
    (old / "records.jsonl").write_text("".join(lines[:window_end]), "utf-8")  # buffer lost
    assert main(["run", "--resume", str(old), "--quiet"]) == 0
    info = json.loads((old / "run.json").read_text("utf-8"))
    assert info["format_version"] == RUN_FORMAT and "mode" not in info
    assert info["config"]["models"]["llm"] == "offline" and info["status"] == "complete"
    head = json.loads((old / "records.jsonl").read_text("utf-8").splitlines()[0])
    assert head == {"type": "format", "stream": "records", "version": RECORDS_FORMAT}
    after = read_records(old)
    # the recorded fields keep their values; records written now may carry fields added since
    old_fields = [without_timings(r) for r in before]
    new = [without_timings(r) for r in after]
    assert len(new) == len(old_fields)
    kept = [{k: r.get(k, "absent") for k in o} for r, o in zip(new, old_fields, strict=True)]
    assert kept == old_fields
    assert main(["run", "--resume", str(old), "--quiet"]) == 0  # format 2 resumes too


def test_a_probe_graded_before_several_prompts_gets_its_one_verdict():
    old = {"type": "probe", "judge_correct": False, "judge_raw": "WRONG", "judge_input_tokens": 9}
    verdicts = migrate_record(old, 1)["judge_verdicts"]
    assert verdicts == [
        {
            "prompt": "p1",
            "run": 0,
            "correct": False,
            "raw": "WRONG",
            "input_tokens": 9,
            "output_tokens": 0,
            "cache_hit": False,
        }
    ]
    unjudged = {"type": "probe", "judge_correct": None, "judge_raw": None}
    assert migrate_record(unjudged, 1) == unjudged
    assert migrate_record({**old, "judge_verdicts": None}, RECORDS_FORMAT)["judge_verdicts"] is None


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ({"version": 3}, "its format version 3 is newer than this memory-lab reads"),
        ({"version": "2"}, "its format version must be a whole number"),
    ],
)
def test_a_records_file_of_an_unknown_format_is_refused_by_name(old, header, message):
    text = (old / "records.jsonl").read_text("utf-8")
    line = json.dumps({"type": "format", "stream": "records", **header})
    (old / "records.jsonl").write_text(line + "\n" + text, "utf-8")
    with pytest.raises(ResultsError, match=f"records.jsonl line 1: {message}"):
        read_records(old)
    (old / "records.jsonl").write_text(text + line + "\n", "utf-8")
    with pytest.raises(ResultsError, match="a format header after the first record"):
        read_records(old)
