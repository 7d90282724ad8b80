"""BEAM ("Beyond a Million Tokens", ``mohammadtavakoli78/BEAM``: its ``chats/``) -> dialogues.

PATH is the ``chats/`` folder (scale folders ``100K``, ``500K``, ``1M``, ``10M``), one scale
folder (numbered conversation folders) or one conversation folder (``probing_questions/
probing_questions.json`` and the chat). Each conversation becomes one dialogue:

- the chat is ``chat_trunecated.json`` when the folder has it (BEAM's own answer generation
  reads that one), else, at 10M, the ``plan-0`` ... ``plan-9`` folders' ``chat.json`` in plan
  order, message ids shifted as BEAM's ``combine_10m_chats`` does (plan k's ids follow plan
  k-1's last id), which is how its questions name them, else ``chat.json``; a 10M file in
  BEAM's combined form (``[{"plan-1": [batches]}, ...]``, ids already shifted) is read plan by
  plan;
- every batch is a session (``b<N>``, ``p<plan>-b<N>`` at 10M) dated by the first
  ``time_anchor`` of its messages (``March-15-2024`` -> ``2024-03-15``); every message is a turn
  with id ``c<chat id>``, its content as given;
- every probing question of every ability is a probe asked at the end, id ``<ability>-<n>``,
  category from ``CATEGORIES`` and BEAM's ability, difficulty, rubric, type and reference answer
  in its metadata; evidence is ``source_chat_ids`` (a list, a list of lists, or a dict of lists
  such as ``{"original_info": [86], "updated_info": [114]}``) as turn ids.

Options (``beam:PATH#scale=100K,conversations=1-3,abilities=abstention+event_ordering``): lists
inside one option are joined with ``+`` (``,`` separates options), ranges with ``-``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_lab.dialogue.importers.common import (
    MISSING_EVIDENCE_KEY,
    REFERENCE_ANSWER_KEY,
    ImportReport,
    ImportResult,
    check_record,
    import_error,
    read_json,
    scalar,
    slug,
)
from memory_lab.text.limits import ReadBudget, bounds_problem
from memory_lab.text.normalize import contains_answer, find_any

SCALES = ("100K", "500K", "1M", "10M")
_SCALE_ALIASES = {"128K": "100K"}  # the paper's name for the smallest scale
# BEAM's ten abilities, in its report's column order, and the memory-lab category of each.
CATEGORIES = {
    "abstention": "abstention",
    "contradiction_resolution": "contradiction",
    "event_ordering": "temporal",
    "information_extraction": "single-hop",
    "instruction_following": "instruction",
    "knowledge_update": "update",
    "multi_session_reasoning": "multi-hop",
    "preference_following": "preference",
    "summarization": "summary",
    "temporal_reasoning": "temporal",
}
ABILITIES = tuple(CATEGORIES)
# The field holding each ability's reference answer (instruction and preference questions have
# a description of the compliant reply instead).
_ANSWER_FIELDS = (
    "answer",
    "ideal_answer",
    "ideal_response",
    "ideal_summary",
    "expected_compliance",
)
_TYPE_FIELDS = (
    "abstention_type",
    "contradiction_type",
    "ordering_type",
    "question_type",
    "instruction_type",
    "update_type",
    "reasoning_type",
    "preference_type",
    "summarization_type",
    "temporal_type",
)
# A rubric item whose nugget is a value the reply should state: graded offline by answer
# matching (memory_lab.benchmarks.beam.grading), and a probe's accepted answer when it is its
# only item.
VALUE_NUGGET = re.compile(r"^\s*LLM response should state:\s*(.+?)\s*$", re.IGNORECASE | re.DOTALL)
QUESTIONS_FILE = Path("probing_questions") / "probing_questions.json"
# A probe's metadata (``BENCHMARK.probe_keys``): readers import these names rather than spell the
# keys again. BEAM's own fields keep their names (``difficulty``, ``rubric``, ``source_chat_ids``).
ABILITY_KEY = "beam_ability"  # str: one of ABILITIES
SCALE_KEY = "beam_scale"  # str: one of SCALES, "unknown" outside a scale folder
INDEX_KEY = "beam_index"  # int: the question's place in its ability's list
DIFFICULTY_KEY = "difficulty"  # str or None, as given
RUBRIC_KEY = "rubric"  # [str]: the nuggets BEAM's judge grades
TYPE_KEY = "type"  # str: the question's ``<ability>_type`` field (_TYPE_FIELDS), when it has one
SOURCE_CHAT_IDS_KEY = "source_chat_ids"  # the evidence as given: ids, lists or an object of lists
PROBE_KEYS = (
    ABILITY_KEY,
    SCALE_KEY,
    INDEX_KEY,
    DIFFICULTY_KEY,
    RUBRIC_KEY,
    REFERENCE_ANSWER_KEY,
    TYPE_KEY,
    SOURCE_CHAT_IDS_KEY,
    MISSING_EVIDENCE_KEY,
)
_PLAN = re.compile(r"^plan-(\d+)$")


@dataclass
class BeamReport(ImportReport):
    """The import report, with BEAM's evidence counted."""

    with_evidence: int = 0
    evidence_missing: int = 0
    per_ability: dict[str, int] = field(default_factory=dict)

    def text(self) -> str:
        lines = super().text().split("\n")
        abilities = ", ".join(f"{a} {n}" for a, n in self.per_ability.items())
        lines.insert(
            1,
            f"  {self.with_evidence} probe(s) with evidence turns; {self.evidence_missing} "
            f"source_chat_id(s) naming no message; by ability: {abilities or 'none'}",
        )
        return "\n".join(lines)


def _selection(source: str, option: str, raw: str | None, known: tuple[str, ...]) -> set[str]:
    """The values of a ``+``-joined option, each checked against ``known``; all when None."""
    if raw is None:
        return set(known)
    picked = set()
    for part in filter(None, (p.strip() for p in raw.split("+"))):
        value = _SCALE_ALIASES.get(part.upper(), part) if option == "scale" else part
        match = [k for k in known if k.lower() == value.lower()]
        if not match:
            raise import_error(
                source, None, "options", f"{option} {part!r} is not one of {', '.join(known)}"
            )
        picked.add(match[0])
    if not picked:
        raise import_error(source, None, "options", f"{option} names nothing")
    return picked


def _numbers(source: str, raw: str | None) -> set[int] | None:
    """The conversation numbers of ``conversations=1-3+7``; None for all."""
    if raw is None:
        return None
    out: set[int] = set()
    for part in filter(None, (p.strip() for p in raw.split("+"))):
        m = re.fullmatch(r"([0-9]{1,6})(?:-([0-9]{1,6}))?", part)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise import_error(
                source,
                None,
                "options",
                f"conversations must be numbers or ranges joined with '+' (1-3+7), got {part!r}",
            )
        out.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    if not out:
        raise import_error(source, None, "options", "conversations names nothing")
    return out


def _is_conversation(folder: Path) -> bool:
    return (folder / QUESTIONS_FILE).is_file()


def _numbered(folder: Path) -> list[Path]:
    """The numbered subfolders of ``folder`` in numeric order."""
    subs = [p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()]
    return sorted(subs, key=lambda p: int(p.name))


def _scale_of(name: str) -> str | None:
    name = _SCALE_ALIASES.get(name.upper(), name)
    return next((s for s in SCALES if s.lower() == name.lower()), None)


def _conversations(
    path: Path, scales: set[str], numbers: set[int] | None
) -> list[tuple[str, Path]]:
    """(scale, folder) of every selected conversation under ``path``."""
    if not path.is_dir():
        raise import_error(
            str(path),
            None,
            "source",
            "must be BEAM's chats/ folder, a scale folder or a conversation folder",
        )
    if _is_conversation(path):
        found = [(_scale_of(path.parent.name) or "unknown", path)]
    elif any(_is_conversation(p) for p in _numbered(path)):
        scale = _scale_of(path.name) or "unknown"
        found = [(scale, p) for p in _numbered(path) if _is_conversation(p)]
    else:
        found = []
        for child in sorted(path.iterdir()):
            scale = _scale_of(child.name) if child.is_dir() else None
            if scale:
                found += [(scale, p) for p in _numbered(child) if _is_conversation(p)]
        found.sort(key=lambda x: (SCALES.index(x[0]), int(x[1].name)))
        if not found:
            raise import_error(
                str(path),
                None,
                "source",
                f"holds no BEAM conversation "
                f"(no {QUESTIONS_FILE} in it, its numbered folders or scale folders)",
            )
    picked = [
        (s, p)
        for s, p in found
        if (s in scales or s == "unknown")
        and (numbers is None or (p.name.isdigit() and int(p.name) in numbers))
    ]
    if not picked:
        raise import_error(str(path), None, "options", "the selection matches no conversation")
    return picked


def _chat_files(folder: Path) -> list[tuple[str, Path]]:
    """(plan label, chat file) of a conversation: one for 100K-1M, one per plan at 10M."""
    plans = sorted(
        ((int(m.group(1)), p) for p in folder.iterdir() if (m := _PLAN.match(p.name))),
        key=lambda x: x[0],
    )
    truncated = folder / "chat_trunecated.json"
    if truncated.is_file():
        return [("", truncated)]
    if plans:
        for expected, (n, _) in enumerate(plans):
            if n != expected:
                raise import_error(
                    str(folder / f"plan-{expected}"),
                    None,
                    "file",
                    "missing: the 10M plans must run plan-0, plan-1, ... in order",
                )
        return [(f"p{n}-", p / "chat.json") for n, p in plans]
    return [("", folder / "chat.json")]


def _date(anchor: Any) -> str:
    text = str(anchor).strip()
    try:
        return datetime.strptime(text, "%B-%d-%Y").date().isoformat()
    except ValueError:
        return text


def _messages(name: str, batch: Any, b_index: int) -> list[tuple[str, Any, Any]]:
    """(field, message, its dict) of one batch: its ``turns`` are lists of messages."""
    where = f"[{b_index}]"
    if not isinstance(batch, dict) or not isinstance(batch.get("turns"), list):
        raise import_error(name, None, f"{where}.turns", "a batch needs a list of turns")
    _check_values(name, where, {k: v for k, v in batch.items() if k != "turns"})
    out = []
    for t_index, turn in enumerate(batch["turns"]):
        if not isinstance(turn, list):
            raise import_error(
                name, None, f"{where}.turns[{t_index}]", "must be a list of messages"
            )
        for m_index, message in enumerate(turn):
            field_ = f"{where}.turns[{t_index}][{m_index}]"
            if not isinstance(message, dict):
                raise import_error(name, None, field_, "must be an object")
            _check_values(name, field_, message)
            out.append((field_, message, batch))
    return out


def _check_values(name: str, where: str, value: dict[str, Any]) -> None:
    """DialogueError naming the file and field when a message or batch holds what a dialogue
    may not (a lone surrogate, a non-finite number, nesting too deep)."""
    problem = bounds_problem(value)
    if problem:
        raise import_error(name, None, where, problem)


def _plan_sessions(
    name: str, label: str, chat: Any, offset: int, texts: dict[str, str], report: BeamReport
) -> tuple[list[dict[str, Any]], int]:
    """One chat file's batches as sessions, ids shifted by ``offset``; and its last shifted id."""
    if not isinstance(chat, list):
        raise import_error(name, None, "file", "must be a JSON list of batches")
    sessions, last = [], -1
    for b_index, batch in enumerate(chat):
        turns, date = [], None
        for field_, message, _ in _messages(name, batch, b_index):
            role, content, mid = message.get("role"), message.get("content"), message.get("id")
            if role not in ("user", "assistant"):
                raise import_error(
                    name, None, f"{field_}.role", f"must be 'user' or 'assistant', got {role!r}"
                )
            if not isinstance(mid, int) or isinstance(mid, bool) or mid < 0:
                raise import_error(
                    name, None, f"{field_}.id", f"must be a whole number, got {mid!r}"
                )
            if content is not None and not scalar(content):
                raise import_error(
                    name, None, f"{field_}.content", f"must be a string, got {content!r}"
                )
            anchor = message.get("time_anchor")
            if anchor is not None and not isinstance(anchor, str):
                raise import_error(
                    name, None, f"{field_}.time_anchor", f"must be a string, got {anchor!r}"
                )
            last = mid + offset
            tid = f"c{last}"
            if tid in texts:
                raise import_error(name, None, f"{field_}.id", f"duplicate chat id {mid}")
            date = date or (anchor and _date(anchor))
            text = str(content or "").strip()
            if not text:
                report.skip(f"{name} {field_}", "empty content")
                continue
            texts[tid] = text
            turns.append({role: text, "id": tid})
        number = batch.get("batch_number", b_index + 1)
        date = date or (batch.get("time_anchor") and _date(batch["time_anchor"]))
        if not turns:
            report.skip(f"{name} [{b_index}]", "batch has no usable messages")
            continue
        session: dict[str, Any] = {"id": f"{label}b{number}", "turns": turns}
        if date:
            session["date"] = date
        sessions.append(session)
    return sessions, last


def _sessions(
    folder: Path, budget: ReadBudget, texts: dict[str, str], report: BeamReport
) -> list[dict[str, Any]]:
    """Every session of a conversation, 10M plans one after the other (BEAM's id shift)."""
    sessions: list[dict[str, Any]] = []
    last_id = 0
    for label, file in _chat_files(folder):
        if not file.is_file():
            raise import_error(
                str(file),
                None,
                "file",
                "missing (every chat file of the "
                "conversation is needed: its ids number the evidence)",
            )
        chat = read_json(str(file), lambda f=file: budget.read_file(f))
        combined = _combined_plans(chat)
        if combined is not None:  # BEAM's own concatenation: ids already shifted
            for n, plan in combined:
                sessions += _plan_sessions(
                    f"{file} plan-{n + 1}", f"p{n}-", plan, 0, texts, report
                )[0]
            continue
        offset = last_id + 1 if last_id != 0 else 0  # as combine_10m_chats
        part, last = _plan_sessions(str(file), label, chat, offset, texts, report)
        sessions += part
        last_id = last if last >= 0 else last_id
    return sessions


def _combined_plans(chat: Any) -> list[tuple[int, Any]] | None:
    """The plans of a 10M ``chat.json``/``chat_trunecated.json`` as BEAM writes it (a list of
    ``{"plan-N": [batches]}``, N from 1, ids already shifted), as (N - 1, batches); None for a
    list of batches."""
    if not isinstance(chat, list) or not chat:
        return None
    keys = [next(iter(p)) if isinstance(p, dict) and len(p) == 1 else "" for p in chat]
    matches = [re.fullmatch(r"plan-([0-9]{1,3})", k) for k in keys]
    if not all(matches):
        return None
    return [(int(m.group(1)) - 1, plan[k]) for m, plan, k in zip(matches, chat, keys, strict=True)]


def _evidence_ids(name: str, where: str, raw: Any) -> list[int]:
    """The chat ids of ``source_chat_ids`` in order, once each: a list of ids or of lists of
    ids, or an object whose values are such lists (``{"original_info": [86], ...}``)."""
    if raw is None:
        return []
    parts = list(raw.values()) if isinstance(raw, dict) else [raw]
    out: list[int] = []

    def walk(value: Any, depth: int) -> None:
        if isinstance(value, list) and depth < 3:
            for v in value:
                walk(v, depth + 1)
        elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            if value not in out:
                out.append(value)
        elif isinstance(value, str) and value.strip().isdigit():
            walk(int(value), depth)
        else:
            raise import_error(
                name,
                where,
                "source_chat_ids",
                f"must be chat ids, lists of them or an object of lists, got {value!r}",
            )

    for part in parts:
        walk(part, 1 if isinstance(raw, dict) else 0)
    return out


def _answers(rubric: list[str], reference: str) -> list[str]:
    """The accepted answers: the reference answer, and the value of a one-item rubric that is a
    value nugget (stating it is the whole rubric)."""
    answers = [reference] if reference else []
    if len(rubric) == 1 and (m := VALUE_NUGGET.match(rubric[0])) and m.group(1) not in answers:
        answers.append(m.group(1))
    return answers


def _checked_question(name: str, where: str, item: Any) -> tuple[str, list[str]]:
    """The question and rubric of a probing question; DialogueError naming the field otherwise."""
    if not isinstance(item, dict):
        raise import_error(name, where, "question", "a probing question must be an object")
    check_record(name, where, item)
    question = item.get("question")
    if not isinstance(question, str) or not question.strip():
        raise import_error(name, where, "question", f"must be a non-empty string, got {question!r}")
    rubric = item.get("rubric")
    if not isinstance(rubric, list) or not rubric or not all(isinstance(r, str) for r in rubric):
        raise import_error(
            name, where, "rubric", f"must be a non-empty list of strings, got {rubric!r}"
        )
    for key in (*_ANSWER_FIELDS, "difficulty"):
        if item.get(key) is not None and not scalar(item[key]):
            raise import_error(name, where, key, f"must be a string, got {item[key]!r}")
    return question.strip(), rubric


def _probe(
    name: str,
    ability: str,
    index: int,
    item: Any,
    scale: str,
    texts: dict[str, str],
    report: BeamReport,
) -> dict[str, Any]:
    """The probe of one probing question (every question becomes one)."""
    where = f"{ability}[{index}]"
    question, rubric = _checked_question(name, where, item)
    reference = next((str(item[k]).strip() for k in _ANSWER_FIELDS if item.get(k)), "")
    ids = _evidence_ids(name, where, item.get("source_chat_ids"))
    evidence = [f"c{i}" for i in ids if f"c{i}" in texts]
    missing = [i for i in ids if f"c{i}" not in texts]
    metadata: dict[str, Any] = {
        ABILITY_KEY: ability,
        SCALE_KEY: scale,
        INDEX_KEY: index,
        DIFFICULTY_KEY: item.get("difficulty"),
        RUBRIC_KEY: rubric,
        REFERENCE_ANSWER_KEY: reference,
    }
    kind = next((str(item[k]) for k in _TYPE_FIELDS if item.get(k) is not None), None)
    if kind is not None:
        metadata[TYPE_KEY] = kind
    if item.get("source_chat_ids") is not None:
        metadata[SOURCE_CHAT_IDS_KEY] = item["source_chat_ids"]
    if missing:
        metadata[MISSING_EVIDENCE_KEY] = missing
        report.evidence_missing += len(missing)
        report.skip(f"{name} {where} source_chat_ids", f"names no message: {missing}")
    probe: dict[str, Any] = {
        "id": f"{ability.replace('_', '-')}-{index + 1}",
        "question": question,
        "category": CATEGORIES[ability],
    }
    if ability != "abstention":
        answers = _answers(rubric, reference) or list(rubric)
        probe["answers"] = answers
        probe["evidence"] = evidence
        evidence_text = "\n".join(texts[e] for e in evidence)
        if (
            not evidence
            or any(contains_answer(question, a) for a in answers)
            or find_any(evidence_text, answers) is None
        ):
            probe["derived"] = True
            report.derived += 1
        report.with_evidence += bool(evidence)
    probe["metadata"] = metadata
    report.per_ability[ability] = report.per_ability.get(ability, 0) + 1
    return probe


def _convert(
    scale: str,
    folder: Path,
    abilities: set[str],
    budget: ReadBudget,
    report: BeamReport,
) -> dict[str, Any]:
    """One conversation folder as a dialogue document."""
    name = str(folder / QUESTIONS_FILE)
    questions = read_json(name, lambda: budget.read_file(folder / QUESTIONS_FILE))
    if not isinstance(questions, dict):
        raise import_error(name, None, "file", "must be an object of abilities")
    for key in questions:
        if key not in CATEGORIES:
            report.skip(f"{name} {key}", f"unknown ability (known: {', '.join(ABILITIES)})")
    texts: dict[str, str] = {}
    sessions = _sessions(folder, budget, texts, report)
    if not sessions:
        raise import_error(str(folder), None, "chat", "holds no message")
    probes = []
    for ability in ABILITIES:
        items = questions.get(ability, [])
        if not isinstance(items, list):
            raise import_error(name, None, ability, "must be a list of probing questions")
        if ability in abilities:
            probes += [
                _probe(name, ability, i, item, scale, texts, report) for i, item in enumerate(items)
            ]
    report.dialogues += 1
    report.turns += len(texts)
    report.probes += len(probes)
    return {
        "format": "memory-lab/dialogue@1",
        "id": slug(f"beam-{scale}-{folder.name}"),
        "title": f"BEAM {scale} conversation {folder.name}",
        "language": "en",
        "tags": ["beam", f"beam-{scale.lower()}"],
        "metadata": {"dataset": "beam", "scale": scale, "conversation": folder.name},
        "sessions": sessions,
        "probes": probes,
    }


def import_beam(
    path: Path,
    scale: str | None = None,
    conversations: str | None = None,
    abilities: str | None = None,
    budget: ReadBudget | None = None,
) -> ImportResult:
    """Import BEAM conversations under ``path``; ``scale`` (``100K+500K``), ``conversations``
    (folder numbers, ``1-3+7``) and ``abilities`` (``abstention+event_ordering``) select, all by
    default; ``budget`` bounds the bytes read (64 MiB by default)."""
    source = str(path)
    scales = _selection(source, "scale", scale, SCALES)
    chosen = _selection(source, "abilities", abilities, ABILITIES)
    numbers = _numbers(source, conversations)
    budget = budget or ReadBudget()
    report = BeamReport("beam", source)
    documents = [
        _convert(s, folder, chosen, budget, report)
        for s, folder in _conversations(path, scales, numbers)
    ]
    return ImportResult(documents, report)
