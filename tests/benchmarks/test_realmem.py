"""RealMem: the importer (probes before their session, evidence, options, errors), the authors'
retrieval metrics against hand-computed values, and the export in their input format. The
fixtures under tests/fixtures/realmem are written for these tests in RealMem's format."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory_lab.benchmarks.declaration import ScoreRequest
from memory_lab.benchmarks.realmem import BENCHMARK
from memory_lab.benchmarks.realmem.export import RESULTS_NAME, export_retrieval, folder_name
from memory_lab.benchmarks.realmem.importer import (
    GOLD_SESSIONS_KEY,
    PERSONA_KEY,
    QUERY_ID_KEY,
    REFERENCE_GOLD_KEY,
    SESSION_KEY,
    UNREACHABLE_KEY,
    import_realmem,
)
from memory_lab.benchmarks.realmem.scores import ALL, RANKING_FIELD, read_csv, rows, score_records
from memory_lab.dialogue.model import DialogueError, parse_documents
from memory_lab.errors import BadInput

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "realmem"
ADA = FIXTURES / "Ada_Test_dialogues_256k.json"
S1, S2, COOK, S3 = "Fitness_1:S1_01", "Fitness_1:S2_01", "Cooking_2:S1_01", "Fitness_1:S3_01"
# each probe's ranked items (turn ids, best first), as a memory would rank them
RANKINGS = {
    ("Ada_Test", "Q-0001"): [[f"{S1}.t1", f"{S1}.t2"]],
    ("Ada_Test", "Q-0002"): [[f"{S2}.t3"], [f"{S1}.t1"], [f"{S2}.t4"]],
    ("Ada_Test", "Q-0003"): [[f"{S1}.t2"], [f"{S2}.t1"]],
    ("Ada_Test", "Q-0004"): [[f"{S1}.t1"], [f"{S2}.t1"], [f"{COOK}.t2"]],
    ("Bo_Test", "Q-0002"): [[f"Travel_9:S{n}_01.t1"] for n in range(7, 0, -1)],
}


def _docs(**options):
    result = import_realmem(FIXTURES, **options)
    dialogues, problems = parse_documents(result.documents, str(FIXTURES))
    assert problems == []
    return result, {d.id: d for d in dialogues}


def _records(memory="vector", ranked=True):
    """Probe records as a run writes them, with the rankings above."""
    result, dialogues = _docs()
    out = []
    for doc in result.documents:
        turn_index = {t.id: t.index for t in dialogues[doc["id"]].turns}
        for probe in doc["probes"]:
            meta = probe["metadata"]
            out.append(
                {
                    "type": "probe",
                    "memory": memory,
                    "dialogue": doc["id"],
                    "probe_id": probe["id"],
                    "exchange": turn_index[probe["after"]],
                    "question": probe["question"],
                    "reply": "a reply",
                    "probe_metadata": meta,
                    RANKING_FIELD: RANKINGS[meta[PERSONA_KEY], probe["id"]] if ranked else None,
                }
            )
    return out


def test_import_places_each_query_before_its_session():
    result, dialogues = _docs()
    ada = dialogues["realmem-ada-test"]
    assert [s.id for s in ada.sessions] == [S1, S2, COOK, S3]
    by_id = {p.id: p for p in ada.probes}
    assert list(by_id) == ["Q-0001", "Q-0002", "Q-0003", "Q-0004"]
    # asked after the previous session's last turn: before any turn of its own session
    assert by_id["Q-0001"].after == f"{S1}.t4"
    assert by_id["Q-0002"].after == by_id["Q-0003"].after == f"{S2}.t4"  # both queries of COOK
    assert by_id["Q-0004"].after == f"{COOK}.t6"
    # the query turn itself stays in its session
    assert ada.sessions[1].turns[0].text.startswith("I finished the first week")
    assert (
        by_id["Q-0002"].question
        == "Can you remind me how often I run now, and suggest a breakfast?"
    )
    assert all(p.category == "cognitive" for p in ada.probes)
    assert ada.sessions[0].date == "2025-12-01 (Monday)"


def test_import_evidence_gold_and_metadata():
    _, dialogues = _docs()
    by_id = {p.id: p for p in dialogues["realmem-ada-test"].probes}
    assert by_id["Q-0001"].evidence == tuple(f"{S1}.t{n}" for n in range(1, 5))
    assert set(by_id["Q-0002"].evidence) == {f"{s}.t{n}" for s in (S1, S2) for n in range(1, 5)}
    q3 = by_id["Q-0003"].metadata  # memory_session_uuids empty: memory_used's uuids
    assert q3[GOLD_SESSIONS_KEY] == [S2] and by_id["Q-0003"].evidence[0] == f"{S2}.t1"
    q4 = by_id["Q-0004"]  # its own session is gold too: kept for scoring, not evidence
    assert q4.metadata[GOLD_SESSIONS_KEY] == [COOK, S3]
    assert q4.metadata[UNREACHABLE_KEY] == [S3]
    assert all(e.startswith(COOK) for e in q4.evidence)
    # the authors key gold by text: Q-0001's text is asked again later with other gold
    assert by_id["Q-0001"].metadata[GOLD_SESSIONS_KEY] == [S1]
    assert by_id["Q-0001"].metadata[REFERENCE_GOLD_KEY] == [COOK]
    assert q4.metadata[SESSION_KEY] == S3 and q4.metadata[QUERY_ID_KEY] == "Q-0004"


def test_import_reports_skips():
    result, dialogues = _docs()
    text = result.report.text()
    assert "2 dialogue(s)" in text and "5 probe(s)" in text
    assert "a query of the first session" in text  # Bo's Q-0001
    assert "empty content" in text and "Travel_9:S2_01 dialogue_turns[2]" in text
    assert "not before the query" in text
    assert [p.id for p in dialogues["realmem-bo-test"].probes] == ["Q-0002"]


def test_import_options():
    result, _ = _docs(persona="Bo_Test")
    assert [d["metadata"]["persona"] for d in result.documents] == ["Bo_Test"]
    result, dialogues = _docs(limit="3")  # the first 3 sessions of each persona
    ada = dialogues["realmem-ada-test"]
    assert len(ada.sessions) == 3 and [p.id for p in ada.probes] == ["Q-0001", "Q-0002", "Q-0003"]
    assert dialogues["realmem-bo-test"].probes == ()
    one = import_realmem(ADA)
    assert len(one.documents) == 1 and one.documents[0]["id"] == "realmem-ada-test"


def test_import_through_the_source_syntax():
    from memory_lab.dialogue.importers import import_source, parse_source

    fmt, path, options = parse_source(f"realmem:{FIXTURES}#persona=Ada_Test+Bo_Test,limit=2")
    result = import_source(fmt, path, options)
    assert len(result.documents) == 2


@pytest.mark.parametrize(
    "options, message",
    [({"persona": "Nobody"}, "no persona Nobody"), ({"limit": "0"}, "limit must be")],
)
def test_import_bad_options(options, message):
    with pytest.raises(DialogueError, match=message):
        import_realmem(FIXTURES, **options)


def _broken(tmp_path, change):
    data = json.loads(ADA.read_text())
    change(data)
    path = tmp_path / "X_dialogues_256k.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "change, where",
    [
        (lambda d: d.pop("dialogues"), "dialogues"),
        (
            lambda d: d["dialogues"][1]["dialogue_turns"][2].update(speaker="Bot"),
            f"{S2}': dialogue_turns[2].speaker",
        ),
        (
            lambda d: d["dialogues"][2]["dialogue_turns"][1].update(memory_session_uuids="aa"),
            "memory_session_uuids",
        ),
        (lambda d: d["dialogues"][0].update(session_identifier=3), "session_identifier"),
        (
            lambda d: d["dialogues"][1]["dialogue_turns"][0].update(content=None),
            "dialogue_turns[0].content",
        ),
    ],
)
def test_import_errors_name_file_record_and_field(tmp_path, change, where):
    path = _broken(tmp_path, change)
    with pytest.raises(DialogueError) as err:
        import_realmem(path)
    assert str(path) in str(err.value) and where in str(err.value)


def test_import_refuses_a_folder_without_personas(tmp_path):
    with pytest.raises(DialogueError, match="holds no"):
        import_realmem(tmp_path)


def _row(table, memory, persona):
    return next(r for r in table if r["memory"] == memory and r["persona"] == persona)


def test_scores_by_hand():
    table = rows(score_records(_records()))
    ada = _row(table, "vector", "Ada_Test")
    # Q-0001: its text's gold (the authors' last turn of that text) is COOK, ranked nowhere: 0
    # Q-0002: [S2, S1] for {S1, S2}: 1, 1, ndcg 2/2; Q-0003: [S1, S2] for {S2}: rank 2 is not
    # discounted, ndcg 1; Q-0004: [S1, S2, COOK] for {COOK, S3}: any 1, all 0, ndcg 1/log2(3)/2
    q4 = 1 / math.log2(3) / 2
    assert ada["questions"] == 4
    for k in (5, 10, 20):
        assert ada[f"recall_any@{k}"] == 0.75
        assert ada[f"recall_all@{k}"] == 0.5
        assert ada[f"ndcg_any@{k}"] == round((0 + 1 + 1 + q4) / 4, 4) == 0.5789
    bo = _row(table, "vector", "Bo_Test")  # its gold session ranked 7th
    assert (bo["recall_any@5"], bo["recall_all@5"], bo["ndcg_any@5"]) == (0.0, 0.0, 0.0)
    assert (bo["recall_any@10"], bo["recall_all@20"]) == (1.0, 1.0)
    assert bo["ndcg_any@10"] == bo["ndcg_any@20"] == round(1 / math.log2(7), 4) == 0.3562
    both = _row(table, "vector", ALL)  # the mean of the personas' means
    assert both["recall_any@5"] == 0.375 and both["recall_any@10"] == 0.875
    assert both["ndcg_any@10"] == round(((2 + q4) / 4 + 1 / math.log2(7)) / 2, 4)


def test_scores_one_question_per_text_the_last_asked():
    records = _records()
    late = dict(records[1], exchange=99, **{RANKING_FIELD: [[f"{S1}.t1"]]})  # Q-0002 again
    table = rows(score_records([*records, late]))
    ada = _row(table, "vector", "Ada_Test")
    assert ada["questions"] == 4  # one question per text
    assert ada["recall_all@5"] == 0.25  # Q-0002 now finds S1 only


def test_memory_that_does_not_rank(monkeypatch, tmp_path):
    records = _records("buffer", ranked=False) + _records("vector")
    import memory_lab.results.read as read

    monkeypatch.setattr(read, "iter_records", lambda *a, **k: iter(records))
    outcome = BENCHMARK.scorer.score(ScoreRequest(tmp_path, export_retrieval=tmp_path / "x"))
    assert "buffer: does not rank" in outcome.text
    table = read_csv(tmp_path / "realmem_scores.csv")
    assert _row(table, "buffer", "Ada_Test")["recall_any@5"] is None
    assert _row(table, "vector", "Ada_Test")["recall_any@5"] == 0.75
    assert not (tmp_path / "x" / "buffer").exists()
    assert (tmp_path / "x" / "vector" / "Ada_Test" / RESULTS_NAME).is_file()


def test_score_with_a_judge_needs_the_checkout(tmp_path):
    # the LLM metrics: tests/benchmarks/test_realmem_judge.py
    with pytest.raises(BadInput, match="--prompts CHECKOUT"):
        BENCHMARK.scorer.score(ScoreRequest(tmp_path, judge="openai:gpt-4o-mini"))
    with pytest.raises(BadInput, match="unknown protocol"):
        BENCHMARK.scorer.score(ScoreRequest(tmp_path, protocols=("fixed",)))


def test_export_in_the_authors_format(tmp_path):
    scored = score_records(_records("window:k=4"))
    files = export_retrieval(scored, tmp_path)
    assert folder_name("window:k=4") == "window_k_4"
    path = tmp_path / "window_k_4" / "Ada_Test" / RESULTS_NAME
    assert path in files
    data = json.loads(path.read_text())
    key = "Can you remind me how often I run now, and suggest a breakfast?"
    assert data[key]["question"] == key and data[key]["id"] == COOK
    assert data[key]["ranked_items"] == [
        {"res_type": "chunk", "chunk_id": S2, "rank": 1},
        {"res_type": "chunk", "chunk_id": S1, "rank": 2},
    ]
    assert data[key]["generated_answer"] == "a reply"
    assert len(data) == 4


AUTHORS_SCRIPT = os.environ.get("REALMEM_AUTO_METRICS")  # eval/compute_auto_metrics_for_realmem.py


@pytest.mark.skipif(not AUTHORS_SCRIPT, reason="set REALMEM_AUTO_METRICS to the authors' script")
def test_parity_with_the_authors_script(tmp_path):
    """Their script, unchanged, on the export of the fixture (numpy 2 lacks their asfarray:
    given as asarray(float) before it runs)."""
    scored = score_records(_records())
    export_retrieval(scored, tmp_path / "out")
    shutil.copytree(FIXTURES, tmp_path / "data")
    shim = (
        "import numpy as np, runpy, sys\n"
        "np.asfarray = getattr(np, 'asfarray', None) or (lambda a: np.asarray(a, dtype=float))\n"
        "sys.argv = sys.argv[1:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    args = [
        "--process_retrieval_results",
        "--retrieval_result_dir",
        str(tmp_path / "out" / "vector"),
    ]
    args += ["--input_data_dir", str(tmp_path / "data")]
    subprocess.run(
        [sys.executable, "-c", shim, AUTHORS_SCRIPT, *args], check=True, capture_output=True
    )
    table = rows(scored)
    for persona in ("Ada_Test", "Bo_Test"):
        theirs = json.loads(
            (tmp_path / "out" / "vector" / persona / "metrics_results.json").read_text()
        )
        ours = _row(table, "vector", persona)
        assert {m: ours[m] for m in theirs} == theirs


def test_a_run_is_imported_ranked_recorded_and_scored_by_the_command(tmp_path, capsys):
    """The whole path a user takes: ``memory-lab run`` over the fixture (a ranking memory and
    one that does not rank), then ``memory-lab score realmem`` with the export."""
    from memory_lab.cli import main

    out, export = tmp_path / "run", tmp_path / "authors"
    source = f"realmem:{FIXTURES}"
    argv = ["run", "--dialogues", source, "--memory", "vector", "buffer", "--out", str(out)]
    assert main([*argv, "--quiet"]) == 0
    probes = [
        json.loads(line)
        for line in (out / "records.jsonl").read_text("utf-8").splitlines()
        if '"type": "probe"' in line
    ]
    vector = [p for p in probes if p["memory"] == "vector"]
    assert vector and all(p[RANKING_FIELD] for p in vector)  # the ranking is on the record
    assert all(p[RANKING_FIELD] is None for p in probes if p["memory"] == "buffer")
    capsys.readouterr()
    assert main(["score", "realmem", str(out), "--export-retrieval", str(export)]) == 0
    text = capsys.readouterr().out
    assert "vector" in text
    scored = {(r["memory"], r["persona"]): r for r in read_csv(out / "realmem_scores.csv")}
    for persona in ("Ada_Test", "Bo_Test"):
        recall = float(scored["vector", persona]["recall_any@5"])
        assert 0.0 <= recall <= 1.0
    assert (export / folder_name("vector") / "Ada_Test" / RESULTS_NAME).is_file()
