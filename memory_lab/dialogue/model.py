"""Dialogue format v1 (docs/dialogues.md): data objects, loading and validation.

A file either loads completely or not at all: every problem in it is collected and reported
together, each naming the file, the dialogue id and the field.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memory_lab.errors import BadInput
from memory_lab.text.limits import (
    MAX_FILE_BYTES,
    InputError,
    ReadBudget,
    bounds_problem,
    decode,
    parse_errors,
    parse_json,
    printable,
)
from memory_lab.text.normalize import contains_answer, find_any

FORMAT = "memory-lab/dialogue@1"
CATEGORIES = (
    "single-hop",
    "multi-hop",
    "temporal",
    "update",
    "long-range",
    "preference",
    "abstention",
    "inference",
    "contradiction",
    "instruction",
    "summary",
    "cognitive",
)
# Probes judged against their evidence rather than matched to answers: LoCoMo-Plus's Cognitive
# category (a trigger that only makes sense if an earlier cue is remembered; no reference answer).
EVIDENCE_JUDGED = ("cognitive",)

_DIALOGUE_KEYS = {"format", "id", "title", "language", "tags", "sessions", "probes", "metadata"}
_SESSION_KEYS = {"id", "date", "turns"}
_TURN_KEYS = {"user", "assistant", "id"}
_PROBE_KEYS = {
    "id",
    "after",
    "question",
    "answers",
    "stale",
    "evidence",
    "category",
    "derived",
    "metadata",
}
_DIALOGUE_ID = re.compile(r"[a-z0-9][a-z0-9-]*")  # fullmatch: no trailing newline
_LANGUAGE = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*")


@dataclass(frozen=True)
class Turn:
    """One utterance. ``index`` is its 0-based position in the whole dialogue."""

    id: str
    role: str  # "user" | "assistant"
    text: str
    session_id: str
    index: int


@dataclass(frozen=True)
class Session:
    id: str
    date: str | None
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Probe:
    """A question asked at a point of the dialogue, with the answers that count as correct."""

    id: str
    after: str
    question: str
    answers: tuple[str, ...]
    stale: tuple[str, ...]
    evidence: tuple[str, ...]
    category: str
    derived: bool = False
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Dialogue:
    id: str
    title: str
    language: str
    tags: tuple[str, ...]
    sessions: tuple[Session, ...]
    probes: tuple[Probe, ...]
    source: str
    content_hash: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def turns(self) -> tuple[Turn, ...]:
        return tuple(t for s in self.sessions for t in s.turns)


@dataclass(frozen=True)
class Problem:
    """One validation problem, located by file, dialogue id and field."""

    file: str
    dialogue: str | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"dialogue '{self.dialogue}'" if self.dialogue else "document"
        return printable(f"{self.file}: {where}: {self.field}: {self.message}")


class DialogueError(BadInput):
    """Raised when dialogue files are invalid; ``problems`` lists every problem found."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        lines = [str(p) for p in self.problems]
        head = f"{len(lines)} problem(s) in dialogue files:" if len(lines) > 1 else ""
        super().__init__("\n".join([head, *lines]) if head else lines[0])


# --------------------------------------------------------------------------- parsing


class _Collector:
    def __init__(self, file: str):
        self.file = file
        self.problems: list[Problem] = []

    def add(self, dialogue: str | None, field_: str, message: str) -> None:
        self.problems.append(Problem(self.file, dialogue, field_, message))


def _read_documents(path: Path, out: _Collector) -> list[Any]:
    """The documents of one file, or [] with a problem; bounded in size, depth and expansion."""
    try:
        text = decode(ReadBudget(MAX_FILE_BYTES).read_file(path))
        if path.suffix == ".json":
            data = parse_json(text)
            docs = data if isinstance(data, list) else [data]
        else:
            docs = _load_yaml(text)
    except InputError as exc:
        out.add(None, "file", str(exc))
        return []
    for i, doc in enumerate(docs):
        problem = bounds_problem(doc)
        if problem:
            where = "file" if len(docs) == 1 else f"document {i + 1}"
            out.add(None, where, problem)
            return []
    return docs


def _load_yaml(text: str) -> list[Any]:
    with parse_errors("YAML", yaml.YAMLError):
        return [d for d in yaml.safe_load_all(text) if d is not None]


def _str_list(value: Any, did: str | None, name: str, out: _Collector) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        out.add(did, name, f"must be a list, got {type(value).__name__}")
        return ()
    items = []
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            out.add(did, f"{name}[{i}]", f"must be a string, got {type(item).__name__}")
            continue
        text = str(item).strip()
        if not text:
            out.add(did, f"{name}[{i}]", "must not be empty")
            continue
        items.append(text)
    return tuple(items)


def content_hash(document: Any) -> str:
    """A dialogue document's content hash (SHA-256 of its canonical JSON), as run.json records
    it: what a resume and a scorer check a dialogue against."""
    canonical = json.dumps(document, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _parse_dialogue(doc: Any, source: str, out: _Collector) -> Dialogue | None:
    start = len(out.problems)
    if not isinstance(doc, dict):
        out.add(None, "document", f"must be a mapping, got {type(doc).__name__}")
        return None
    did = doc.get("id")
    did = did if isinstance(did, str) else None
    for key in sorted(set(doc) - _DIALOGUE_KEYS):
        out.add(did, key, f"unknown key (allowed: {', '.join(sorted(_DIALOGUE_KEYS))})")
    if doc.get("format") != FORMAT:
        out.add(did, "format", f"must be '{FORMAT}', got {doc.get('format')!r}")
    if did is None or not _DIALOGUE_ID.fullmatch(did):
        out.add(did, "id", f"must be a non-empty string of [a-z0-9-], got {doc.get('id')!r}")
    title = doc.get("title", did or "")
    if not isinstance(title, str):
        out.add(did, "title", "must be a string")
    language = doc.get("language", "en")
    if not isinstance(language, str) or not _LANGUAGE.fullmatch(language):
        out.add(did, "language", f"must be a BCP-47 tag like 'en' or 'ko', got {language!r}")
    tags = _str_list(doc.get("tags"), did, "tags", out)
    metadata = doc.get("metadata") or {}
    if not isinstance(metadata, dict):
        out.add(did, "metadata", "must be a mapping")
        metadata = {}

    sessions = _parse_sessions(doc.get("sessions"), did, out)
    turns = [t for s in sessions for t in s.turns]
    probes = _parse_probes(doc.get("probes"), did, turns, out)
    if len(out.problems) > start:
        return None
    return Dialogue(
        id=did,  # type: ignore[arg-type]
        title=title,
        language=language,
        tags=tags,
        sessions=tuple(sessions),
        probes=tuple(probes),
        source=source,
        content_hash=content_hash(doc),
        metadata=metadata,
    )


def _parse_sessions(raw: Any, did: str | None, out: _Collector) -> list[Session]:
    if not isinstance(raw, list) or not raw:
        out.add(did, "sessions", "must be a non-empty list of sessions")
        return []
    sessions: list[Session] = []
    seen_sessions: set[str] = set()
    seen_turns: set[str] = set()
    index = 0
    for si, sraw in enumerate(raw):
        where = f"sessions[{si}]"
        if not isinstance(sraw, dict):
            out.add(did, where, "must be a mapping with 'turns'")
            continue
        for key in sorted(set(sraw) - _SESSION_KEYS):
            out.add(did, f"{where}.{key}", "unknown key (allowed: date, id, turns)")
        sid = sraw.get("id", f"s{si + 1}")
        if not isinstance(sid, str) or not sid.strip() or not sid.isprintable():
            out.add(did, f"{where}.id", f"must be a non-empty printable string, got {sid!r}")
            sid = f"s{si + 1}"
        if sid in seen_sessions:
            out.add(did, f"{where}.id", f"duplicate session id '{sid}'")
        seen_sessions.add(sid)
        date = sraw.get("date")
        if date is not None and not isinstance(date, str):
            out.add(did, f"{where}.date", 'must be a quoted string such as "2026-03-02"')
            date = str(date)
        traw = sraw.get("turns")
        if not isinstance(traw, list) or not traw:
            out.add(did, f"{where}.turns", "must be a non-empty list of turns")
            traw = []
        turns: list[Turn] = []
        for ti, t in enumerate(traw):
            twhere = f"{where}.turns[{ti}]"
            if not isinstance(t, dict):
                out.add(did, twhere, "must be a mapping with 'user' or 'assistant'")
                continue
            for key in sorted(set(t) - _TURN_KEYS):
                out.add(did, f"{twhere}.{key}", "unknown key (allowed: assistant, id, user)")
            roles = [r for r in ("user", "assistant") if r in t]
            if len(roles) != 1:
                out.add(did, twhere, "must have exactly one of 'user' or 'assistant'")
                continue
            role = roles[0]
            text = t[role]
            if isinstance(text, bool) or not isinstance(text, (str, int, float)):
                out.add(did, f"{twhere}.{role}", "must be a string")
                continue
            text = str(text)
            if not text.strip():
                out.add(did, f"{twhere}.{role}", "must not be empty")
            tid = t.get("id", f"{sid}.t{ti + 1}")
            if not isinstance(tid, str) or not tid.isprintable() or not tid or " " in tid:
                out.add(
                    did,
                    f"{twhere}.id",
                    f"must be a string without spaces or control characters, got {tid!r}",
                )
                continue
            if tid in seen_turns:
                out.add(did, f"{twhere}.id", f"duplicate turn id '{tid}'")
            seen_turns.add(tid)
            turns.append(Turn(id=tid, role=role, text=text, session_id=sid, index=index))
            index += 1
        sessions.append(Session(id=sid, date=date, turns=tuple(turns)))
    return sessions


def _parse_probes(raw: Any, did: str | None, turns: list[Turn], out: _Collector) -> list[Probe]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        out.add(did, "probes", "must be a list")
        return []
    by_id = {t.id: t for t in turns}
    probes: list[Probe] = []
    seen: set[str] = set()
    for pi, p in enumerate(raw):
        if not isinstance(p, dict):
            out.add(did, f"probes[{pi}]", "must be a mapping")
            continue
        probes.append(_parse_probe(pi, p, did, turns, by_id, seen, out))
    return probes


def _parse_probe(
    pi: int,
    p: dict[str, Any],
    did: str | None,
    turns: list[Turn],
    by_id: dict[str, Turn],
    seen: set[str],
    out: _Collector,
) -> Probe:
    """Probe ``pi`` of a dialogue, its problems added to ``out``; ``seen`` holds the ids taken."""
    last = turns[-1].id if turns else ""
    pid = p.get("id")
    where = f"probes[{pid}]" if isinstance(pid, str) and pid else f"probes[{pi}]"
    for key in sorted(set(p) - _PROBE_KEYS):
        out.add(did, f"{where}.{key}", f"unknown key (allowed: {', '.join(sorted(_PROBE_KEYS))})")
    if not isinstance(pid, str) or not pid.strip() or not pid.isprintable():
        out.add(did, f"{where}.id", f"must be a non-empty printable string, got {pid!r}")
        pid = f"probe-{pi + 1}"
    if pid in seen:
        out.add(did, f"{where}.id", f"duplicate probe id '{pid}'")
    seen.add(pid)
    question = p.get("question")
    if not isinstance(question, str) or not question.strip():
        out.add(did, f"{where}.question", "must be a non-empty string")
        question = ""
    category = p.get("category")
    if category not in CATEGORIES:
        out.add(
            did,
            f"{where}.category",
            f"must be one of {', '.join(CATEGORIES)}, got {category!r}",
        )
    answers = _str_list(p.get("answers"), did, f"{where}.answers", out)
    stale = _str_list(p.get("stale"), did, f"{where}.stale", out)
    evidence = _str_list(p.get("evidence"), did, f"{where}.evidence", out)
    derived = p.get("derived", False)
    if not isinstance(derived, bool):
        out.add(did, f"{where}.derived", "must be true or false")
        derived = False
    metadata = p.get("metadata") or {}
    if not isinstance(metadata, dict):
        out.add(did, f"{where}.metadata", "must be a mapping")
        metadata = {}
    after = p.get("after", last)
    probe = Probe(
        id=pid,
        after=after if isinstance(after, str) else last,
        question=question,
        answers=answers,
        stale=stale,
        evidence=evidence,
        category=category if isinstance(category, str) else "",
        derived=derived,
        metadata=metadata,
    )
    _check_against_turns(probe, after, did, where, turns, by_id, out)
    return probe


def _check_against_turns(
    probe: Probe,
    after: Any,
    did: str | None,
    where: str,
    turns: list[Turn],
    by_id: dict[str, Turn],
    out: _Collector,
) -> None:
    """The problems of a probe with its dialogue's turns: ``after`` (as written) and the evidence
    name turns before it, its answers are in the evidence and not in the question, its stale
    answers in an earlier turn."""
    if not isinstance(after, str) or after not in by_id:
        out.add(did, f"{where}.after", f"names no turn: {after!r}")
        after_index = len(turns)
    else:
        after_index = by_id[after].index
    for eid in probe.evidence:
        if eid not in by_id:
            out.add(did, f"{where}.evidence", f"names no turn: '{eid}'")
        elif by_id[eid].index > after_index:
            out.add(did, f"{where}.evidence", f"turn '{eid}' comes after the probe ('{after}')")
    answers, derived = probe.answers, probe.derived
    if probe.category == "abstention":
        if answers:
            out.add(did, f"{where}.answers", "an abstention probe must have no answers")
    elif probe.category in EVIDENCE_JUDGED:
        if answers:
            out.add(did, f"{where}.answers", f"a {probe.category} probe has no answers")
        if not probe.evidence:
            out.add(did, f"{where}.evidence", f"a {probe.category} probe needs its evidence turns")
    elif probe.category in CATEGORIES and not answers:
        out.add(did, f"{where}.answers", "a non-abstention probe needs at least one answer")
    if not derived:
        for answer in answers:
            if contains_answer(probe.question, answer):
                out.add(
                    did,
                    f"{where}.answers",
                    f"answer '{answer}' already appears in the question "
                    "(rephrase it, or set derived: true for a choice question)",
                )
    if answers and not derived:
        if not probe.evidence:
            out.add(did, f"{where}.evidence", "needs at least one turn id (or set derived: true)")
        else:
            evidence_text = "\n".join(by_id[e].text for e in probe.evidence if e in by_id)
            if find_any(evidence_text, list(answers)) is None:
                listed = ", ".join(f"'{a}'" for a in answers)
                out.add(
                    did,
                    f"{where}.answers",
                    f"none of the accepted answers ({listed}) appears in an evidence turn; "
                    "one must (fix the evidence or set derived: true)",
                )
    if probe.stale:
        earlier = "\n".join(t.text for t in turns if t.index <= after_index)
        if find_any(earlier, list(probe.stale)) is None:
            listed = ", ".join(f"'{a}'" for a in probe.stale)
            out.add(
                did,
                f"{where}.stale",
                f"none of the stale answers ({listed}) appears in an earlier turn",
            )


def check_file(path: Path) -> tuple[list[Dialogue], list[Problem]]:
    """Parse one file; return its dialogues (empty if anything failed) and every problem."""
    out = _Collector(str(path))
    dialogues = []
    docs = _read_documents(path, out)
    if not docs and not out.problems:
        out.add(None, "file", "holds no dialogue")
    for doc in docs:
        d = _parse_dialogue(doc, str(path), out)
        if d is not None:
            dialogues.append(d)
    return ([] if out.problems else dialogues), out.problems


def parse_documents(docs: list[Any], source: str) -> tuple[list[Dialogue], list[Problem]]:
    """Parse dialogue documents already in memory (e.g. from an importer), all or nothing."""
    out = _Collector(source)
    dialogues = [d for doc in docs if (d := _parse_dialogue(doc, source, out)) is not None]
    return ([] if out.problems else dialogues), out.problems
