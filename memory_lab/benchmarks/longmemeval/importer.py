"""LongMemEval (``longmemeval_s.json``, ``_m``, ``_oracle`` and ``_cleaned`` variants) -> dialogues.

Each question becomes one dialogue: its haystack sessions (turns ``{role, content, has_answer?}``)
dated by ``haystack_dates``, and one probe asked at the end with ``question``, ``answer`` and
``question_type``. Evidence is the turns marked ``has_answer``; a question whose id ends in
``_abs`` is an abstention probe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory_lab.dialogue.importers.common import (
    REFERENCE_ANSWER_KEY,
    ImportReport,
    ImportResult,
    check_record,
    import_error,
    read_json,
    scalar,
    slug,
)
from memory_lab.text.limits import ReadBudget
from memory_lab.text.normalize import contains_answer

QUESTION_TYPES = {
    "single-session-user": "single-hop",
    "single-session-assistant": "single-hop",
    "single-session-preference": "preference",
    "multi-session": "multi-hop",
    "temporal-reasoning": "temporal",
    "knowledge-update": "update",
}
_REQUIRED = ("question_id", "question_type", "question", "haystack_sessions")
# A probe's metadata (``BENCHMARK.probe_keys``), LongMemEval's own fields under their own names:
# readers import these names rather than spell the keys again.
QUESTION_ID_KEY = "question_id"  # str: what its own judge matches hypotheses by
QUESTION_TYPE_KEY = "question_type"  # str: one of QUESTION_TYPES
QUESTION_DATE_KEY = "question_date"  # str or None, as given
ANSWER_SESSIONS_KEY = "answer_session_ids"  # list, as given
HAYSTACK_SESSIONS_KEY = "haystack_session_ids"  # list, as given, when the record has one
PROBE_KEYS = (
    QUESTION_ID_KEY,
    QUESTION_TYPE_KEY,
    QUESTION_DATE_KEY,
    ANSWER_SESSIONS_KEY,
    HAYSTACK_SESSIONS_KEY,
    REFERENCE_ANSWER_KEY,
)


def _convert(name: str, index: int, item: Any, report: ImportReport) -> dict[str, Any] | None:
    qid = _check_record(name, index, item)
    answer = item.get("answer")
    abstention = qid.endswith("_abs")
    qtype = item["question_type"]
    if qtype not in QUESTION_TYPES:
        report.skip(qid, f"unknown question_type {qtype!r}")
        return None
    dates = item.get("haystack_dates") or []
    sessions, evidence, texts = _haystack(name, qid, item["haystack_sessions"], dates, report)
    if not sessions:
        report.skip(qid, "no haystack sessions")
        return None
    probe: dict[str, Any] = {
        "id": slug(qid),
        "question": item["question"],
        "category": "abstention" if abstention else QUESTION_TYPES[qtype],
        "metadata": {
            QUESTION_ID_KEY: qid,
            QUESTION_TYPE_KEY: qtype,
            QUESTION_DATE_KEY: item.get("question_date"),
            ANSWER_SESSIONS_KEY: item.get("answer_session_ids", []),
        },
    }
    session_ids = item.get("haystack_session_ids") or []
    if session_ids:
        probe["metadata"][HAYSTACK_SESSIONS_KEY] = session_ids
    answer = "" if answer is None else str(answer).strip()
    if abstention:
        probe["metadata"][REFERENCE_ANSWER_KEY] = answer
    else:
        if not answer:
            report.skip(qid, "no answer")
            return None
        if contains_answer(probe["question"], answer):
            report.skip(qid, f"answer {answer!r} appears in its own question")
            return None
        probe["answers"] = [answer]
        probe["evidence"] = evidence
        if not evidence or not contains_answer(" ".join(texts[e] for e in evidence), answer):
            probe["derived"] = True
            report.derived += 1
    report.dialogues += 1
    report.turns += len(texts)
    report.probes += 1
    return {
        "format": "memory-lab/dialogue@1",
        "id": slug(f"lme-{qid}"),
        "title": f"LongMemEval {qid} ({qtype})",
        "language": "en",
        "tags": ["longmemeval", qtype],
        "metadata": {"dataset": "longmemeval", "question_id": qid},
        "sessions": sessions,
        "probes": [probe],
    }


def _check_record(name: str, index: int, item: Any) -> str:
    """Check that a record's fields have the types an import needs (DialogueError naming the
    record and the field otherwise); the record's question id."""
    if not isinstance(item, dict):
        raise import_error(name, f"record {index}", "record", "must be an object")
    qid = item.get("question_id", f"record {index}")
    if not scalar(qid) or not str(qid).strip() or not str(qid).isprintable():
        raise import_error(
            name, f"record {index}", "question_id", f"must be a printable string, got {qid!r}"
        )
    qid = str(qid)
    check_record(name, qid, item)
    for key in _REQUIRED:
        if key not in item:
            raise import_error(name, qid, key, "missing field")
    dates = item.get("haystack_dates") or []
    session_ids = item.get("haystack_session_ids") or []
    if not isinstance(item["haystack_sessions"], list):
        raise import_error(name, qid, "haystack_sessions", "must be a list of sessions")
    for key, value in (("haystack_dates", dates), ("haystack_session_ids", session_ids)):
        if not isinstance(value, list):
            raise import_error(name, qid, key, f"must be a list, got {value!r}")
        for i, part in enumerate(value):
            if part is not None and not scalar(part):
                raise import_error(name, qid, f"{key}[{i}]", f"must be a string, got {part!r}")
    for key in ("question", "question_type"):
        if not isinstance(item[key], str) or not item[key].strip():
            raise import_error(name, qid, key, f"must be a non-empty string, got {item[key]!r}")
    answer = item.get("answer")
    if answer is not None and not scalar(answer):
        raise import_error(name, qid, "answer", f"must be a string, got {answer!r}")
    return qid


def _haystack(
    name: str, qid: str, haystack: list[Any], dates: list[Any], report: ImportReport
) -> tuple[list[dict[str, Any]], list[str], dict[str, str]]:
    """The haystack as dialogue sessions, the ids of the turns marked ``has_answer`` and every
    turn's text by id; empty turns and sessions are skipped (and reported)."""
    sessions, evidence, texts = [], [], {}
    for s_index, raw in enumerate(haystack):
        if not isinstance(raw, list):
            raise import_error(name, qid, f"haystack_sessions[{s_index}]", "must be a list")
        sid = f"s{s_index + 1}"
        turns = []
        for t_index, turn in enumerate(raw):
            field_ = f"haystack_sessions[{s_index}][{t_index}]"
            if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant"):
                raise import_error(name, qid, f"{field_}.role", "must be 'user' or 'assistant'")
            if turn.get("content") is not None and not scalar(turn["content"]):
                raise import_error(
                    name, qid, f"{field_}.content", f"must be a string, got {turn['content']!r}"
                )
            content = str(turn.get("content") or "").strip()
            if not content:
                report.skip(f"{qid} {field_}", "empty content")
                continue
            tid = f"{sid}.t{len(turns) + 1}"
            turns.append({turn["role"]: content, "id": tid})
            texts[tid] = content
            if turn.get("has_answer"):
                evidence.append(tid)
        if not turns:
            report.skip(f"{qid} haystack_sessions[{s_index}]", "session has no usable turns")
            continue
        session: dict[str, Any] = {"id": sid, "turns": turns}
        if s_index < len(dates) and dates[s_index]:
            session["date"] = str(dates[s_index])
        sessions.append(session)
    return sessions, evidence, texts


def import_longmemeval(path: Path, budget: ReadBudget | None = None) -> ImportResult:
    """Import every question of a LongMemEval file as its own dialogue; ``budget`` bounds the
    bytes read (64 MiB by default)."""
    budget = budget or ReadBudget()
    data = read_json(str(path), lambda: budget.read_file(path))
    if not isinstance(data, list):
        raise import_error(str(path), None, "file", "must be a JSON list of questions")
    report = ImportReport("longmemeval", str(path))
    documents = [d for i, item in enumerate(data) if (d := _convert(str(path), i, item, report))]
    return ImportResult(documents, report)
