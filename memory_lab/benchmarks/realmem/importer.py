"""RealMem (``AvatarMemory/RealMemBench``) -> dialogue documents, one per persona.

A persona's file (``dataset/<Name>_dialogues_256k.json``: ``_metadata`` and ``dialogues``, a list
of sessions with ``session_identifier``, ``session_uuid``, ``current_time`` and
``dialogue_turns``) becomes one dialogue: its sessions in file order (session id: the
``session_identifier``, turn ids ``<session id>.t<n>``, date: ``current_time``), each turn
``User`` -> user, ``Assistant`` -> assistant.

The questions are inside the sessions: a ``User`` turn with ``is_query: true``. The authors'
loop (``eval/eval_mem0.py``) asks every query of a session from the memory of the EARLIER
sessions and only then adds the session; so each query becomes a probe asked after the last turn
of the session before its own (every query of a session at that point, in order), while the
query turn itself stays in its session and enters memory with it. The probe's evidence is every
turn of its gold sessions (``memory_session_uuids`` of the next ``Assistant`` turn, with the
session uuids of its ``memory_used`` items as the fallback, as the authors' scoring reads them)
that come before the probe; a gold session at or after the query's own session (it cannot be in
memory yet) stays in the metadata and is reported. The probe's category is ``cognitive``
(graded against its evidence, no short answer); its metadata keeps the persona, the query id,
the session asked in, the gold sessions, the reference reply and memory, and the gold the
authors' ``compute_auto_metrics_for_realmem.py`` would match to its text (``REFERENCE_GOLD_KEY``:
their code keys gold by question text over the whole file: ``memory_lab.benchmarks.realmem
.scores``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_lab.dialogue.importers.common import (
    REFERENCE_ANSWER_KEY,
    ImportReport,
    ImportResult,
    check_record,
    import_error,
    read_json,
    slug,
)
from memory_lab.text.limits import ReadBudget

FILE_SUFFIX = "_dialogues_256k.json"  # dataset/<persona>_dialogues_256k.json
DATASET_DIR = "dataset"  # in a RealMemBench checkout
# A probe's metadata (``BENCHMARK.probe_keys``): readers import these names.
PERSONA_KEY = "realmem_persona"  # str: the persona (the file's name before _dialogues_256k.json)
QUERY_ID_KEY = "realmem_query_id"  # str or None: the turn's query_id, as given
QUERY_TEXT_KEY = "realmem_query"  # str: the query's content stripped, the authors' key for it
SESSION_KEY = "realmem_session"  # str: session_identifier of the session it is asked in
SESSION_UUID_KEY = "realmem_session_uuid"  # str: that session's session_uuid
GOLD_SESSIONS_KEY = "realmem_gold_sessions"  # [str]: its own gold, session identifiers
GOLD_UUIDS_KEY = "memory_session_uuids"  # [str]: the next Assistant turn's field, as given
REFERENCE_GOLD_KEY = "realmem_reference_gold"  # [str] or None: the gold the authors' code
# matches to this question's text (the last User turn of that text with gold wins), None: none
UNREACHABLE_KEY = "realmem_unreachable_gold"  # [str]: gold sessions not before the probe
CATEGORY_KEY = "realmem_category"  # str: category_name, as given
TOPIC_KEY = "realmem_topic"  # str: topic, as given
SESSION_TYPE_KEY = "realmem_session_type"  # str: single_session / multi_session, as given
MEMORY_KEY = "realmem_memory"  # str: the memory_used contents joined, what the LLM judge is shown
PROBE_KEYS = (
    PERSONA_KEY,
    QUERY_ID_KEY,
    QUERY_TEXT_KEY,
    SESSION_KEY,
    SESSION_UUID_KEY,
    GOLD_SESSIONS_KEY,
    GOLD_UUIDS_KEY,
    REFERENCE_GOLD_KEY,
    UNREACHABLE_KEY,
    CATEGORY_KEY,
    TOPIC_KEY,
    SESSION_TYPE_KEY,
    MEMORY_KEY,
    REFERENCE_ANSWER_KEY,
)
# the dataset's categories (category_name); each is graded against its evidence
CATEGORIES = {
    "Dynamic Incremental": "cognitive",
    "Dynamic Updating": "cognitive",
    "Implicit Preference": "cognitive",
    "Temporal-reasoning": "cognitive",
}
NO_MEMORY = "No specific memory annotation found."  # compute_llm_metrics_for_realmem.py's
_ROLES = {"User": "user", "Assistant": "assistant"}


@dataclass
class RealMemReport(ImportReport):
    """The import report, with the personas read and the gold sessions no probe can reach."""

    personas: list[str] = field(default_factory=list)
    unreachable: int = 0

    def text(self) -> str:
        lines = super().text().split("\n")
        lines.insert(1, f"  personas: {', '.join(self.personas) or 'none'}")
        if self.unreachable:
            lines.insert(
                2,
                f"  {self.unreachable} gold session(s) at or after their question's own session "
                "(not in memory when it is asked; still scored as the authors score them)",
            )
        return "\n".join(lines)


def persona_of(path: Path) -> str:
    """The persona a file holds, named as the authors' batch scripts name it."""
    name = path.name
    return name[: -len(FILE_SUFFIX)] if name.endswith(FILE_SUFFIX) else path.stem


def persona_files(path: Path) -> list[Path]:
    """The persona files of a checkout, its ``dataset/`` folder, or a file itself."""
    if path.is_file():
        return [path]
    folder = path / DATASET_DIR if (path / DATASET_DIR).is_dir() else path
    files = sorted(p for p in folder.glob(f"*{FILE_SUFFIX}") if p.is_file())
    if not files:
        raise import_error(str(path), None, "source", f"holds no *{FILE_SUFFIX} file")
    return files


def _limit(source: str, raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    if not re.fullmatch(r"[0-9]{1,9}", raw.strip()) or int(raw) < 1:
        raise import_error(
            source, None, "options", f"limit must be a whole number >= 1, got {raw!r}"
        )
    return int(raw)


def checked_sessions(name: str, data: Any) -> list[dict[str, Any]]:
    """The checked sessions of one persona's parsed file."""
    if not isinstance(data, dict):
        raise import_error(name, None, "file", "must be an object with 'dialogues'")
    sessions = data.get("dialogues")
    if not isinstance(sessions, list) or not sessions:
        raise import_error(name, None, "dialogues", "must be a non-empty list of sessions")
    seen: set[str] = set()
    for i, s in enumerate(sessions):
        where = f"dialogues[{i}]"
        if not isinstance(s, dict):
            raise import_error(name, where, "session", "must be an object")
        check_record(name, where, s)
        sid = s.get("session_identifier")
        if not isinstance(sid, str) or not sid.strip() or not sid.isprintable() or " " in sid:
            raise import_error(
                name, where, "session_identifier", f"must be a string without spaces, got {sid!r}"
            )
        if sid in seen:
            raise import_error(name, where, "session_identifier", f"duplicate {sid!r}")
        seen.add(sid)
        if s.get("session_uuid") is not None and not isinstance(s["session_uuid"], str):
            raise import_error(
                name, sid, "session_uuid", f"must be a string, got {s['session_uuid']!r}"
            )
        if s.get("current_time") is not None and not isinstance(s["current_time"], str):
            raise import_error(
                name, sid, "current_time", f"must be a string, got {s['current_time']!r}"
            )
        turns = s.get("dialogue_turns")
        if not isinstance(turns, list):
            raise import_error(name, sid, "dialogue_turns", "must be a list of turns")
        for j, t in enumerate(turns):
            tw = f"dialogue_turns[{j}]"
            if not isinstance(t, dict):
                raise import_error(name, sid, tw, "must be an object")
            if t.get("speaker") not in _ROLES:
                raise import_error(
                    name,
                    sid,
                    f"{tw}.speaker",
                    f"must be 'User' or 'Assistant', got {t.get('speaker')!r}",
                )
            if not isinstance(t.get("content"), str):
                raise import_error(
                    name, sid, f"{tw}.content", f"must be a string, got {t.get('content')!r}"
                )
            for key in (GOLD_UUIDS_KEY, "memory_used"):
                if t.get(key) is not None and not isinstance(t[key], list):
                    raise import_error(name, sid, f"{tw}.{key}", f"must be a list, got {t[key]!r}")
            if not isinstance(t.get("is_query", False), bool):
                raise import_error(
                    name, sid, f"{tw}.is_query", f"must be true or false, got {t['is_query']!r}"
                )
    return sessions


def gold_of(reply: dict[str, Any], uuid_to_sid: dict[str, str]) -> list[str]:
    """The gold sessions of a reply, as ``get_ground_truth`` reads them: its
    ``memory_session_uuids`` known to the file, else its ``memory_used`` items' ``session_uuid``
    (in first-seen order; the authors keep a set)."""
    gold = [uuid_to_sid[u] for u in reply.get(GOLD_UUIDS_KEY) or () if u in uuid_to_sid]
    if not gold:
        for mem in reply.get("memory_used") or ():
            if isinstance(mem, dict) and mem.get("session_uuid") in uuid_to_sid:
                gold.append(uuid_to_sid[mem["session_uuid"]])
    return list(dict.fromkeys(gold))


def reference_gold(sessions: list[dict[str, Any]]) -> dict[str, list[str]]:
    """``get_ground_truth`` of ``compute_auto_metrics_for_realmem.py``: every non-empty ``User``
    turn followed directly by an ``Assistant`` turn with gold, keyed by its stripped text (a
    later turn of the same text replaces an earlier one)."""
    uuid_to_sid = {
        s["session_uuid"]: s["session_identifier"] for s in sessions if s.get("session_uuid")
    }
    out: dict[str, list[str]] = {}
    for s in sessions:
        turns = s["dialogue_turns"]
        for i, turn in enumerate(turns):
            text = turn["content"].strip()
            if turn["speaker"] != "User" or not text or i + 1 >= len(turns):
                continue
            if turns[i + 1]["speaker"] == "Assistant":
                gold = gold_of(turns[i + 1], uuid_to_sid)
                if gold:
                    out[text] = gold
    return out


def _memory_text(reply: dict[str, Any]) -> str:
    """``load_ground_truth``'s memory string: the memory_used contents joined."""
    items = [m.get("content", "") for m in reply.get("memory_used") or () if isinstance(m, dict)]
    return "\n".join(str(c) for c in items if c) or NO_MEMORY


def _evidence(gold: list[str], sessions: list[dict[str, Any]], order: dict[str, int]) -> list[str]:
    """The turn ids of the ``gold`` sessions (those with text), as the importer names them."""
    return [
        f"{g}.t{n + 1}"
        for g in gold
        for n, turn in enumerate(sessions[order[g]]["dialogue_turns"])
        if turn["content"].strip()
    ]


def _probe_id(qid: Any, fallback: str, taken: set[str]) -> str:
    """The query's own id where it is one word, else ``fallback``; unique among ``taken``."""
    pid = str(qid) if isinstance(qid, str) and qid.strip() and " " not in qid else fallback
    while pid in taken:
        pid += "-b"
    taken.add(pid)
    return pid


def _probe(
    pid: str,
    after: str,
    question: str,
    evidence: list[str],
    turn: dict[str, Any],
    reply: dict[str, Any],
    metadata: dict[str, Any],
) -> dict[str, Any]:
    """A query turn as a probe asked ``after`` the previous session, its metadata ``metadata``
    and what the turn and its reply say of it."""
    qid = turn.get("query_id")
    return {
        "id": pid,
        "after": after,
        "question": question,
        "category": CATEGORIES.get(str(turn.get("category_name")), "cognitive"),
        "evidence": evidence,
        "metadata": {
            **metadata,
            QUERY_ID_KEY: qid if isinstance(qid, str) else None,
            QUERY_TEXT_KEY: question,
            GOLD_UUIDS_KEY: list(reply.get(GOLD_UUIDS_KEY) or []),
            CATEGORY_KEY: str(turn.get("category_name") or ""),
            TOPIC_KEY: str(turn.get("topic") or ""),
            SESSION_TYPE_KEY: str(turn.get("session_type") or ""),
            MEMORY_KEY: _memory_text(reply),
            REFERENCE_ANSWER_KEY: reply["content"].strip(),
        },
    }


def _convert(
    name: str,
    persona: str,
    sessions: list[dict[str, Any]],
    limit: int | None,
    report: RealMemReport,
) -> dict[str, Any] | None:
    """One persona's sessions (the first ``limit``) as a dialogue document."""
    ref = reference_gold(sessions)
    uuid_to_sid = {
        s["session_uuid"]: s["session_identifier"] for s in sessions if s.get("session_uuid")
    }
    order = {s["session_identifier"]: i for i, s in enumerate(sessions)}
    out_sessions: list[dict[str, Any]] = []
    probes: list[dict[str, Any]] = []
    probe_ids: set[str] = set()
    last_turn: str | None = None  # the last turn id of the sessions so far
    for si, s in enumerate(sessions[:limit]):
        sid = s["session_identifier"]
        turns = s["dialogue_turns"]
        out_turns = []
        for j, t in enumerate(turns):
            tid = f"{sid}.t{j + 1}"
            if not t["content"].strip():
                report.skip(f"{name} {sid} dialogue_turns[{j}]", "empty content")
                continue
            out_turns.append({_ROLES[t["speaker"]]: t["content"], "id": tid})
            if not t.get("is_query"):
                continue
            where = f"{name} {sid} dialogue_turns[{j}]"
            question = t["content"].strip()
            reply = (
                turns[j + 1]
                if j + 1 < len(turns) and turns[j + 1]["speaker"] == "Assistant"
                else None
            )
            if last_turn is None:
                report.skip(where, "a query of the first session: nothing is in memory yet")
                continue
            if reply is None:
                report.skip(where, "no Assistant turn follows the query: it has no gold")
                continue
            gold = gold_of(reply, uuid_to_sid)
            reachable = [g for g in gold if order[g] < si]
            unreachable = [g for g in gold if order[g] >= si]
            if unreachable:
                report.unreachable += len(unreachable)
                report.skip(
                    f"{where} gold",
                    f"session(s) {unreachable} not before the query: no evidence (still scored)",
                )
            if not reachable:
                report.skip(
                    where, "no gold session before the query (memory_session_uuids / memory_used)"
                )
                continue
            evidence = _evidence(reachable, sessions, order)
            pid = _probe_id(t.get("query_id"), f"q-{sid}-{j + 1}", probe_ids)
            metadata = {
                PERSONA_KEY: persona,
                SESSION_KEY: sid,
                SESSION_UUID_KEY: s.get("session_uuid") or "",
                GOLD_SESSIONS_KEY: gold,
                REFERENCE_GOLD_KEY: ref.get(question),
                UNREACHABLE_KEY: unreachable,
            }
            probes.append(_probe(pid, last_turn, question, evidence, t, reply, metadata))
        if not out_turns:
            report.skip(f"{name} {sid}", "a session with no turn")
            continue
        # the session's probes are asked before its turns: after the previous session's last
        out_sessions.append(
            {
                "id": sid,
                "turns": out_turns,
                **({"date": s["current_time"]} if s.get("current_time") else {}),
            }
        )
        last_turn = out_turns[-1]["id"]
    if not out_sessions:
        report.skip(name, "no session with a turn")
        return None
    report.dialogues += 1
    report.turns += sum(len(s["turns"]) for s in out_sessions)
    report.probes += len(probes)
    report.personas.append(persona)
    return {
        "format": "memory-lab/dialogue@1",
        "id": slug(f"realmem-{persona}"),
        "title": f"RealMem {persona.replace('_', ' ')}",
        "language": "en",
        "tags": ["realmem"],
        "metadata": {"dataset": "realmem", "persona": persona, "file": name},
        "sessions": out_sessions,
        "probes": probes,
    }


def import_realmem(
    path: Path,
    persona: str | None = None,
    limit: str | None = None,
    budget: ReadBudget | None = None,
) -> ImportResult:
    """Import RealMem: ``path`` a RealMemBench checkout, its ``dataset/`` folder or one persona's
    file; ``persona`` the persona(s) to read (``Kenta_Tanaka+Lin_Wanyu``; all by default);
    ``limit`` the first N sessions of each (their queries with them); ``budget`` bounds the
    bytes read, every file together."""
    source = str(path)
    count = _limit(source, limit)
    budget = budget or ReadBudget()
    files = persona_files(Path(path))
    by_name = {persona_of(f): f for f in files}
    if persona:
        wanted = [p.strip() for p in persona.split("+") if p.strip()]
        unknown = [p for p in wanted if p not in by_name]
        if unknown or not wanted:
            raise import_error(
                source,
                None,
                "options",
                f"no persona {', '.join(unknown) or repr(persona)} (known: {', '.join(by_name)})",
            )
        files = [by_name[p] for p in dict.fromkeys(wanted)]
    report = RealMemReport("realmem", source)
    documents = []
    for file in files:
        name = str(file)
        sessions = checked_sessions(name, read_json(name, lambda f=file: budget.read_file(f)))
        doc = _convert(name, persona_of(file), sessions, count, report)
        if doc is not None:
            documents.append(doc)
    return ImportResult(documents, report)
