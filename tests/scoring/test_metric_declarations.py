"""A metric is declared once: a probe's answer score is an ``AnswerScore`` (``scoring/answers.py``,
or a benchmark's ``answer_scores``: LoCoMo's F1) written flat into the probe record, and its
declaration (``scoring/metrics.py`` or the benchmark's ``metrics``); the records, the summary,
the report and the viewer take it from there."""

from __future__ import annotations

import dataclasses

from memory_lab.log.records import ProbeRecord, record_problem
from memory_lab.results.summary import FIELD_SCORES
from memory_lab.scoring.answers import answer_score_names, answer_scores
from memory_lab.scoring.metrics import metric


def test_every_answer_score_is_a_declared_score_and_a_probe_record_field():
    names = answer_score_names()
    assert names == ["f1_locomo", "f1_mem0", "bleu1", "exact_match"] == FIELD_SCORES
    for name in names:
        assert metric(name).unit == "score" and metric(name).label
    columns = ProbeRecord.columns()
    at = columns.index("session_ndcg_any_at_10")
    assert columns[at + 1 : at + 1 + len(names)] == names  # where the columns always were
    flat = [f for f in dataclasses.fields(ProbeRecord) if f.name == "answer_scores"]
    fields = len(dataclasses.fields(ProbeRecord))
    assert len(columns) == len(set(columns)) == fields - 1 + len(names)
    assert flat and flat[0].name not in columns  # written flat: each score a column


def test_a_probe_record_carries_and_checks_its_answer_scores():
    scores = answer_scores("Paris", ["Paris"])
    assert scores["exact_match"] == 1.0
    record = {"type": "probe", "memory": "m", "dialogue": "d", "category": "single-hop"}
    record |= {"answers": ["Paris"], "stale_answers": [], **scores}
    assert record_problem(record) is None
    assert "field 'bleu1' must be float | None" in record_problem({**record, "bleu1": "x"})
