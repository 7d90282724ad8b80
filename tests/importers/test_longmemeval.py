"""LongMemEval import: one dialogue per question, evidence from has_answer, abstention, export."""

from __future__ import annotations

import json

import pytest

from memory_lab import load_dialogues, read_results
from memory_lab.cli import main
from memory_lab.dialogue import DialogueError

from ..conftest import FIXTURES

LME = FIXTURES / "longmemeval" / "longmemeval_mini.json"


def test_each_question_is_a_dialogue_with_dated_sessions_and_one_probe():
    dialogues = {d.id: d for d in load_dialogues(f"longmemeval:{LME}")}
    d = dialogues["lme-e47becba"]
    assert [s.date for s in d.sessions] == ["2023/05/20 (Sat) 02:21", "2023/05/22 (Mon) 10:10"]
    (probe,) = d.probes
    assert probe.answers == ("Business Administration",) and probe.evidence == ("s2.t1",)
    assert probe.category == "single-hop"
    assert probe.metadata["question_type"] == "single-session-user"
    assert dialogues["lme-gpt4-2655b836-abs"].probes[0].category == "abstention"
    update = dialogues["lme-6a1eabeb"].probes[0]
    assert update.category == "update" and not update.derived  # "5" is found as "five"


def test_question_date_is_kept_and_haystack_dates_date_the_sessions(tmp_path):
    dialogues = {d.id: d for d in load_dialogues(f"longmemeval:{LME}")}
    assert dialogues["lme-e47becba"].probes[0].metadata["question_date"] == "2023/05/30 (Tue) 23:40"
    update = dialogues["lme-6a1eabeb"]
    assert update.probes[0].metadata["question_date"] == "2023/06/30"
    assert [s.date for s in update.sessions] == ["2023/06/10", "2023/06/20"]
    data = json.loads(LME.read_text())
    data[2]["answer"] = "6"  # said nowhere: kept, marked derived
    del data[2]["haystack_dates"]  # sessions without dates stay undated
    path = tmp_path / "variant.json"
    path.write_text(json.dumps(data))
    probe = {d.id: d for d in load_dialogues(f"longmemeval:{path}")}["lme-6a1eabeb"]
    assert probe.probes[0].derived and [s.date for s in probe.sessions] == [None, None]


def test_malformed_record_names_question_and_field(tmp_path):
    data = json.loads(LME.read_text())
    data[0]["haystack_sessions"][1][0]["role"] = "narrator"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(DialogueError, match=r"e47becba.*haystack_sessions\[1\]\[0\]\.role"):
        load_dialogues(f"longmemeval:{bad}")


def test_run_then_export_hypotheses_for_the_official_judge(tmp_path):
    out = tmp_path / "run"
    args = ["run", "--memory", "buffer", "--dialogues", f"longmemeval:{LME}", "--out", str(out)]
    assert main([*args, "--quiet"]) == 0
    hyp = tmp_path / "hyp.jsonl"
    assert main(["export", "longmemeval", str(out), "--out", str(hyp)]) == 0
    lines = [json.loads(x) for x in hyp.read_text().splitlines()]
    assert {x["question_id"] for x in lines} == {"e47becba", "gpt4_2655b836_abs", "6a1eabeb"}
    probes = read_results(out).probes
    replies = dict(zip(probes["probe_id"], probes["reply"], strict=True))
    assert lines[0]["hypothesis"] == replies["e47becba"]
