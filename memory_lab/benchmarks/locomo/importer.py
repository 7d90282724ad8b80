"""LoCoMo (``locomo10.json``) -> dialogue documents.

Accepted layouts: the released list of records ``{sample_id, conversation, qa, ...}``; one record
per JSON file with the conversation keys (``speaker_a``, ``session_<n>`` ...) at the top level;
a folder or a zip of such files. Sessions are read by their ``session_<n>`` keys (some files have
more date keys than sessions). ``speaker_a`` is the user and ``speaker_b`` the assistant; each
turn keeps its speaker's name ("Caroline: ...") because questions ask about both people. Image
turns keep their caption as text. Every probe is asked at the end, as in the dataset's own
evaluation.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_lab.dialogue.importers.common import (
    MISSING_EVIDENCE_KEY,
    ImportReport,
    ImportResult,
    check_record,
    import_error,
    read_json,
    scalar,
    slug,
)
from memory_lab.text.limits import ZIP_ERRORS, InputError, ReadBudget
from memory_lab.text.normalize import contains_answer

# LoCoMo's adversarial questions: a trap about something never said, asked as abstention, and
# scored (``f1.py``: whether the reply declines) and summarised apart (``is_adversarial``).
ADVERSARIAL_CATEGORY = 5
# Category ids as in the LoCoMo paper; "swapped" is the reading some later papers use, where
# the released ids 1 and 4 are exchanged.
CATEGORY_MAPS = {
    "paper": {
        **{1: "multi-hop", 2: "temporal", 3: "inference", 4: "single-hop"},
        ADVERSARIAL_CATEGORY: "abstention",
    },
    "swapped": {
        **{1: "single-hop", 2: "temporal", 3: "inference", 4: "multi-hop"},
        ADVERSARIAL_CATEGORY: "abstention",
    },
}
# A probe's metadata (``BENCHMARK.probe_keys``): readers import these names and the functions
# below rather than spell the keys again.
CATEGORY_KEY = "locomo_category"  # int: the raw category id, whichever reading mapped it
WRONG_ANSWERS_KEY = "wrong_answers"  # [str]: an adversarial question's trap answer
ANSWER_IN_QUESTION_KEY = "answer_in_question"  # True: a choice question ("... A or B?")
PROBE_KEYS = (CATEGORY_KEY, MISSING_EVIDENCE_KEY, WRONG_ANSWERS_KEY, ANSWER_IN_QUESTION_KEY)
_SESSION = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
_CHOICE = re.compile(r"\bor\b", re.IGNORECASE)


def category_id(metadata: Any) -> Any:
    """The raw LoCoMo category id a probe's metadata keeps; None for a probe not LoCoMo's."""
    return metadata.get(CATEGORY_KEY) if isinstance(metadata, dict) else None


def is_adversarial(metadata: Any) -> bool:
    """Whether a probe's metadata is a LoCoMo adversarial question's (the id as a number or a
    string)."""
    return str(category_id(metadata)) == str(ADVERSARIAL_CATEGORY)


@dataclass
class LocomoReport(ImportReport):
    """The import report, with LoCoMo's repaired evidence and choice questions counted."""

    choice_questions: int = 0
    evidence_repaired: int = 0

    def text(self) -> str:
        lines = super().text().split("\n")
        lines.insert(
            1,
            f"  {self.choice_questions} choice question(s) with the answer in the question kept "
            f"as derived; {self.evidence_repaired} evidence string(s) read as a list of ids or "
            "with stray spaces",
        )
        return "\n".join(lines)


def _dia_key(text: str) -> str | None:
    """``D<session>:<turn>`` without spaces or leading zeros, or None when not an id."""
    m = _DIA_ID.fullmatch(text.strip())
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else None


def _evidence(raw: Any, report: LocomoReport) -> tuple[list[str], list[str]]:
    """Evidence ids (as keys) named by a qa item, and the strings that name no id."""
    items = raw if isinstance(raw, list) else [raw] if raw else []
    keys: list[str] = []
    unreadable: list[str] = []
    for item in items:
        text = str(item)
        found = [f"D{int(a)}:{int(b)}" for a, b in _DIA_ID.findall(text)]
        leftover = _DIA_ID.sub("", text).strip(" ;,")
        if not found or leftover:
            unreadable.append(text)
        if found and (len(found) > 1 or text != found[0]):
            report.evidence_repaired += 1
        keys.extend(k for k in found if k not in keys)
    return keys, unreadable


def _records(path: Path, budget: ReadBudget) -> list[tuple[str, Any]]:
    """(name, parsed JSON) for a file, a folder of files or a zip of files, all read within
    ``budget``."""
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        return [(str(p), read_json(str(p), lambda p=p: budget.read_file(p))) for p in files]
    if path.suffix != ".zip":
        return [(str(path), read_json(str(path), lambda: budget.read_file(path)))]
    try:
        budget.check_size(path)
        with zipfile.ZipFile(path) as zf:
            entries = sorted(
                (i for i in zf.infolist() if i.filename.endswith(".json")),
                key=lambda i: i.filename,
            )
            out = []
            for info in entries:
                name = f"{path}!{info.filename}"
                out.append((name, read_json(name, lambda i=info: budget.read_zip_entry(zf, i))))
            return out
    except InputError as exc:
        raise import_error(str(path), None, "file", str(exc)) from None
    except (*ZIP_ERRORS, OSError) as exc:
        raise import_error(str(path), None, "file", f"not a readable zip: {exc}") from None


def read_samples(path: Path, budget: ReadBudget | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Every LoCoMo record of ``path``, read within ``budget`` (64 MiB by default)."""
    out = []
    for name, data in _records(path, budget or ReadBudget()):
        items = data if isinstance(data, list) else [data]
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise import_error(name, f"record {i}", "record", "must be an object")
            check_record(name, f"record {i}", item)
            out.append((name, item))
    if not out:
        raise import_error(str(path), None, "source", "holds no LoCoMo records")
    return out


def _turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text") or "").strip()
    caption = str(turn.get("blip_caption") or "").strip()
    if caption:
        text = f"{text} [shares a photo: {caption}]".strip()
    return f"{turn['speaker']}: {text}" if text else ""


def conversation(name: str, sample_id: str, record: dict[str, Any]) -> dict[str, Any]:
    """A LoCoMo record's conversation (the record itself in one-file-per-conversation form),
    with both speakers named; DialogueError naming the field otherwise."""
    conv = record.get("conversation", record)
    if not isinstance(conv, dict):
        raise import_error(name, sample_id, "conversation", "must be an object")
    for key in ("speaker_a", "speaker_b"):
        if not isinstance(conv.get(key), str):
            raise import_error(name, sample_id, f"conversation.{key}", "missing speaker name")
    return conv


def _convert(
    name: str, index: int, record: dict[str, Any], mapping: dict[int, str], report: LocomoReport
) -> dict[str, Any] | None:
    sample_id = record.get("sample_id") or Path(name).stem or f"conv-{index}"
    if not scalar(sample_id) or not str(sample_id).isprintable():
        raise import_error(
            name, f"record {index}", "sample_id", f"must be a printable string, got {sample_id!r}"
        )
    sample_id = str(sample_id)
    conv = conversation(name, sample_id, record)
    speaker_a = conv["speaker_a"]
    sessions = sample_sessions(name, sample_id, conv, report)
    if not sessions:
        report.skip(sample_id, "conversation has no sessions")
        return None
    texts = {t["id"]: t.get("user") or t.get("assistant") for s in sessions for t in s["turns"]}
    by_key = {_dia_key(tid) or tid: tid for tid in texts}
    qa = record.get("qa", [])
    if not isinstance(qa, list):
        raise import_error(name, sample_id, "qa", "must be a list")
    probes = []
    for q_index, item in enumerate(qa):
        probe = _probe(name, sample_id, q_index, item, mapping, texts, by_key, report)
        if probe is not None:
            probes.append(probe)
    report.dialogues += 1
    report.turns += len(texts)
    report.probes += len(probes)
    return {
        "format": "memory-lab/dialogue@1",
        "id": slug(f"locomo-{sample_id}"),
        "title": f"LoCoMo {sample_id}: {speaker_a} and {conv['speaker_b']}",
        "language": "en",
        "tags": ["locomo"],
        "metadata": {"dataset": "locomo", "sample_id": sample_id},
        "sessions": sessions,
        "probes": probes,
    }


def sample_sessions(
    name: str, sample_id: str, conv: dict[str, Any], report: LocomoReport
) -> list[dict[str, Any]]:
    """The record's ``session_N`` lists as dialogue sessions in session order; sessions without
    a usable turn are skipped (and reported), a dia_id seen in an earlier session too."""
    keys: dict[int, str] = {}
    for key in conv:
        if (m := _SESSION.match(key)) and keys.setdefault(int(m.group(1)), key) != key:
            raise import_error(
                name, sample_id, f"conversation.{key}", f"same session as {keys[int(m.group(1))]}"
            )
    sessions: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n, key in sorted(keys.items()):
        raw = conv[key]
        if not isinstance(raw, list):
            raise import_error(name, sample_id, f"conversation.{key}", "must be a list")
        turns = _turns(name, sample_id, n, key, raw, conv["speaker_a"], seen, report)
        if not turns:
            report.skip(f"{sample_id} session_{n}", "session has no usable turns")
            continue
        session: dict[str, Any] = {"id": f"session-{n}", "turns": turns}
        date = conv.get(f"{key}_date_time")
        if date is not None and not scalar(date):
            raise import_error(
                name, sample_id, f"conversation.{key}_date_time", f"must be a string, got {date!r}"
            )
        if date:
            session["date"] = str(date)
        sessions.append(session)
    return sessions


def _turns(
    name: str,
    sample_id: str,
    n: int,
    key: str,
    raw: list[Any],
    speaker_a: str,
    seen: set[str],
    report: LocomoReport,
) -> list[dict[str, str]]:
    """One session's turns (``speaker_a`` speaks as the user); ``seen`` holds the dia_ids taken."""
    turns = []
    for t_index, turn in enumerate(raw):
        where = f"{sample_id} session_{n}[{t_index}]"
        field_ = f"conversation.{key}[{t_index}]"
        if not isinstance(turn, dict) or "speaker" not in turn or "dia_id" not in turn:
            raise import_error(name, sample_id, field_, "a turn needs speaker, dia_id and text")
        for part in ("speaker", "dia_id", "text", "blip_caption"):
            value = turn.get(part)
            if not (scalar(value) or (value is None and part in ("text", "blip_caption"))):
                raise import_error(
                    name, sample_id, f"{field_}.{part}", f"must be a string, got {value!r}"
                )
        text = _turn_text(turn)
        if not text:
            report.skip(where, "turn has neither text nor an image caption")
            continue
        tid = str(turn["dia_id"]).replace(" ", "")
        if tid in seen:
            report.skip(where, f"duplicate dia_id {tid!r}")
            continue
        seen.add(tid)
        role = "user" if turn["speaker"] == speaker_a else "assistant"
        turns.append({role: text, "id": tid})
    return turns


def _probe(
    name: str,
    sample_id: str,
    q_index: int,
    item: Any,
    mapping: dict[int, str],
    texts: dict[str, str],
    by_key: dict[str, str],
    report: LocomoReport,
) -> dict[str, Any] | None:
    """The probe of one ``qa`` item; None (reported) when it is skipped."""
    where = f"{sample_id} qa[{q_index}]"
    if not isinstance(item, dict) or not isinstance(item.get("question"), str):
        raise import_error(name, sample_id, f"qa[{q_index}].question", "missing question")
    category = item.get("category")
    if not isinstance(category, int) or isinstance(category, bool):
        raise import_error(
            name,
            sample_id,
            f"qa[{q_index}].category",
            f"must be an integer category id, got {category!r}",
        )
    if category not in mapping:
        report.skip(where, f"unknown category {category!r}")
        return None
    probe: dict[str, Any] = {
        "id": f"q{q_index + 1}",
        "question": item["question"],
        "category": mapping[category],
        "metadata": {CATEGORY_KEY: category},
    }
    keys, unreadable = _evidence(item.get("evidence"), report)
    evidence = [by_key[k] for k in keys if k in by_key]
    missing = [k for k in keys if k not in by_key] + unreadable
    if missing:
        probe["metadata"][MISSING_EVIDENCE_KEY] = missing
        report.skip(f"{where} evidence", f"names no turn: {', '.join(missing)}")
    if category == ADVERSARIAL_CATEGORY:
        wrong = item.get("adversarial_answer", item.get("answer"))
        if wrong is not None:
            probe["metadata"][WRONG_ANSWERS_KEY] = [str(wrong)]
        return probe
    answer = item.get("answer")
    if answer is not None and not scalar(answer):
        raise import_error(
            name, sample_id, f"qa[{q_index}].answer", f"must be a string, got {answer!r}"
        )
    if answer is None or str(answer).strip() == "":
        report.skip(where, "no answer")
        return None
    answer = str(answer).strip()
    probe["answers"] = [answer]
    probe["evidence"] = evidence
    if contains_answer(item["question"], answer):
        if not _CHOICE.search(item["question"]):
            report.skip(where, f"answer {answer!r} appears in its own question")
            return None
        probe["metadata"][ANSWER_IN_QUESTION_KEY] = True
        report.choice_questions += 1
    evidence_text = "\n".join(texts[e] for e in evidence)
    if (
        probe["metadata"].get(ANSWER_IN_QUESTION_KEY)
        or not evidence
        or not contains_answer(evidence_text, answer)
    ):
        probe["derived"] = True
        report.derived += 1
    return probe


def import_locomo(
    path: Path, categories: str = "paper", budget: ReadBudget | None = None
) -> ImportResult:
    """Import LoCoMo conversations; ``categories`` is ``paper`` (default) or ``swapped``;
    ``budget`` bounds the bytes read (64 MiB by default)."""
    if categories not in CATEGORY_MAPS:
        raise import_error(
            str(path),
            None,
            "options",
            f"categories must be one of {', '.join(CATEGORY_MAPS)}, got {categories!r}",
        )
    report = LocomoReport("locomo", str(path))
    documents = []
    for i, (name, record) in enumerate(read_samples(path, budget)):
        doc = _convert(name, i, record, CATEGORY_MAPS[categories], report)
        if doc is not None:
            documents.append(doc)
    return ImportResult(documents, report)
