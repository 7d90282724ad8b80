"""RealMem's LLM metrics on a memory-lab run, as its ``eval/compute_llm_metrics_for_realmem.py``
(``AvatarMemory/RealMemBench``) computes them, on the judge core.

**The prompts are not bundled**: they are read from the user's RealMemBench checkout (its
``eval/compute_llm_metrics_for_realmem.py``, parsed, never run; the values Python would keep):

- ``QA_eval_prompt`` and ``Mem_eval_prompt`` (plain string literals);
- the QA prompt as ``evaluate_single_item`` assembles it: the f-string assigned to
  ``qa_formatted_prompt``, whose placeholders may be ``QA_eval_prompt``, ``question``,
  ``gt_memory``, ``gt_answer`` and ``generated_answer``;
- the retrieved-memory text as ``construct_evidence_text`` writes it: the f-string each item is
  appended as (its placeholders ``i + 1`` and ``content``) and the separator string the items are
  joined with.

**The ground truth** is their ``load_ground_truth`` over the persona's whole file (the run's
source, as run.json records it, checked against the dialogues' content hashes): every non-empty
``User`` turn's stripped text -> the next ``Assistant`` turn (any turns between skipped) and its
``memory_used`` contents joined by newlines (``No specific memory annotation found.`` when
none); a later turn of the same text replaces an earlier one, whether it is a query or not.

**Per question** (the probe records of a (memory, persona), keyed by question text, the last
asked's record, as their results dict keeps it; a text without ground truth is not judged):

- QA: the filled QA prompt with the memory's reply as the candidate answer;
- memory: the top ``TOP_K`` (5) sessions of the probe's ranking (each session at its best place,
  as ``eval_mem0.py`` writes one ``chunk`` per session), each session's text as ``eval_mem0.py``
  writes a chunk's ``content`` (``Speaker <User|Assistant>: <content>`` for each turn with
  content, joined by newlines) stripped, through their item format and separator; asked only
  when there is such text and the ground-truth memory is not the placeholder, as theirs.

Each reply is read as their ``extract_json_from_text`` reads it (a fenced ```` ```json ```` block,
else the outermost ``{...}``, else the whole text, as JSON; anything failing: nothing). The two
replies' objects are merged (QA's, then memory's over it) and read as their ``main`` reads the
result: ``score``, ``Mem_recall`` and ``Mem_helpful_score`` count where they are numbers (a bool
is one, as ``isinstance(x, (int, float))`` has it). Their summary per persona: the mean QA score,
its distribution over 0..3, the hallucination (0) and perfect (3) rates, the mean memory recall
and the mean helpfulness, each rounded to 4 places; over personas, ``collect_all_llm_metrics.py``'s
mean of each persona figure and the sum of the distributions.
"""

from __future__ import annotations

import ast
import csv
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from memory_lab.benchmarks.realmem.importer import NO_MEMORY, PERSONA_KEY, checked_sessions
from memory_lab.benchmarks.realmem.scores import (
    ALL,
    RANKING_FIELD,
    PersonaScores,
    probe_rankings,
    session_ranking,
)
from memory_lab.dialogue.model import content_hash
from memory_lab.errors import BadInput
from memory_lab.scoring.judge_core import Judge, JudgeProtocol
from memory_lab.scoring.prompt_source import (
    assigned_value,
    format_fields,
    last_binding,
    literal_text,
    python_source,
)
from memory_lab.text.limits import printable

SCRIPT = Path("eval") / "compute_llm_metrics_for_realmem.py"  # in a RealMemBench checkout
MAX_SCRIPT_BYTES = 1024 * 1024  # the script is about 25 KB
ACCOUNT = "realmem-judge"  # the judge's account in the results folder (results.judge_costs)
LLM_SCORES_FILE = "realmem_llm_scores.csv"
VERDICTS_FILE = "realmem_llm_verdicts.json"  # every verdict, unless --out names another file
TOP_K = 5  # their --top_k default: the chunks the memory judge reads
QA_PROMPT, MEM_PROMPT = "QA_eval_prompt", "Mem_eval_prompt"
QA_FUNCTION, QA_VARIABLE = "evaluate_single_item", "qa_formatted_prompt"
EVIDENCE_FUNCTION = "construct_evidence_text"
_QA_NAMES = ("QA_eval_prompt", "question", "gt_memory", "gt_answer", "generated_answer")
_MEM_NAMES = ("question", "groundtruth_memory", "retrieved_memory")
_ITEM_NAMES = {"i + 1": "index", "content": "content"}  # construct_evidence_text's placeholders
_FENCED = re.compile(r"```json\s*(.*?)\s*```", re.DOTALL)
_BRACED = re.compile(r"\{.*\}", re.DOTALL)
SUMMARY_KEYS = (
    "average_qa_score",
    "qa_hallucination_rate",
    "qa_perfect_rate",
    "average_mem_recall",
    "average_mem_helpful_score",
)
COLUMNS = (
    "memory",
    "persona",
    "questions",
    "unmatched",
    "qa_scored",
    "average_qa_score",
    *(f"qa_score_{i}" for i in range(4)),
    "qa_hallucination_rate",
    "qa_perfect_rate",
    "mem_judged",
    "mem_recall_scored",
    "average_mem_recall",
    "mem_helpful_scored",
    "average_mem_helpful_score",
)


class RealMemJudgeError(BadInput):
    """RealMem's judge prompts or ground truth cannot be read: one line naming the file."""


# ------------------------------------------------------------------------------ the prompts


def extract_json(text: str | None) -> Any:
    """Their ``extract_json_from_text``: a fenced json block, else the outermost braces, else the
    whole text, parsed as JSON; None when that fails (or is JSON null)."""
    try:
        match = _FENCED.search(text)  # type: ignore[arg-type]
        if match:
            return json.loads(match.group(1))
        match = _BRACED.search(text)  # type: ignore[arg-type]
        if match:
            return json.loads(match.group(0))
        return json.loads(text)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - theirs returns None on any failure
        return None


def number(value: Any) -> bool:
    """``isinstance(value, (int, float))``: their test of a figure (a bool passes)."""
    return isinstance(value, (int, float))


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


@dataclass(frozen=True)
class RealMemQA(JudgeProtocol):
    """The QA judge: ``QA_eval_prompt`` inside ``evaluate_single_item``'s f-string (``template``:
    its text with the placeholders as ``str.format`` fields), read by ``extract_json``; its score
    the object's ``score`` where a number."""

    name: ClassVar[str] = "realmem-qa"

    instructions: str
    template: str

    @property
    def prompts(self) -> Mapping[str, str]:
        return {QA_PROMPT: self.instructions, f"{QA_FUNCTION}.{QA_VARIABLE}": self.template}

    def fill(self, question: str, memory: str, answer: str, reply: str) -> str:
        return self.template.format(
            QA_eval_prompt=self.instructions,
            question=question,
            gt_memory=memory,
            gt_answer=answer,
            generated_answer=reply,
        )

    def read(self, raw: str) -> tuple[Any, float | None]:
        parsed = extract_json(raw)
        value = parsed.get("score") if isinstance(parsed, dict) else None
        return parsed, (float(value) if number(value) else None)


@dataclass(frozen=True)
class RealMemMemory(JudgeProtocol):
    """The memory judge: ``Mem_eval_prompt`` (a ``str.format`` template), the retrieved chunks
    written as ``construct_evidence_text`` writes them (``item``: a template of ``{index}`` and
    ``{content}``, joined by ``separator``); its score the object's ``Mem_recall``."""

    name: ClassVar[str] = "realmem-memory"

    template: str
    item: str
    separator: str

    @property
    def prompts(self) -> Mapping[str, str]:
        return {
            MEM_PROMPT: self.template,
            f"{EVIDENCE_FUNCTION}.item": self.item,
            f"{EVIDENCE_FUNCTION}.separator": self.separator,
        }

    def evidence(self, chunks: Sequence[str]) -> str:
        """The retrieved memory text of ``chunks`` (the top ones, best first)."""
        return self.separator.join(
            self.item.format(index=i + 1, content=c.strip()) for i, c in enumerate(chunks)
        )

    def fill(self, question: str, memory: str, evidence: str) -> str:
        return self.template.format(
            question=question, groundtruth_memory=memory, retrieved_memory=evidence
        )

    def read(self, raw: str) -> tuple[Any, float | None]:
        parsed = extract_json(raw)
        value = parsed.get("Mem_recall") if isinstance(parsed, dict) else None
        return parsed, (float(value) if number(value) else None)


@dataclass(frozen=True)
class RealMemPrompts:
    source: str
    qa: RealMemQA
    memory: RealMemMemory

    @property
    def protocols(self) -> list[JudgeProtocol]:
        return [self.qa, self.memory]


def _function(tree: ast.Module, name: str, where: str) -> ast.FunctionDef:
    found = last_binding(tree.body, name)
    if found is None or not isinstance(found[0], ast.FunctionDef):
        at = f"line {found[0].lineno}: " if found else ""
        raise RealMemJudgeError(f"{where}: {at}{name}: no such function in it")
    return found[0]


def _fstring(node: ast.expr, names: Mapping[str, str], at: str) -> str:
    """A string literal, or an f-string whose placeholders are ``names`` (their source text ->
    the field written), as a ``str.format`` template; RealMemJudgeError naming ``at`` else."""
    if not isinstance(node, ast.JoinedStr):
        return _escape(literal_text(node, at, RealMemJudgeError))
    parts = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            parts.append(_escape(str(part.value)))
            continue
        assert isinstance(part, ast.FormattedValue)
        try:
            text = ast.unparse(part.value)
        except RecursionError:  # pragma: no cover - a pathological expression
            text = "..."
        if text not in names or part.conversion != -1 or part.format_spec is not None:
            known = ", ".join(f"{{{n}}}" for n in names)
            raise RealMemJudgeError(
                f"{at}: f-string placeholder {{{printable(text[:60])}}}: only {known}, as they "
                "are, can be filled in"
            )
        parts.append("{" + names[text] + "}")
    return "".join(parts)


def _evidence_format(tree: ast.Module, where: str) -> tuple[str, str]:
    """``construct_evidence_text``'s item f-string (the last ``.append(...)`` of one in it) and
    the separator string its ``return`` joins the items with."""
    fn = _function(tree, EVIDENCE_FUNCTION, where)
    item = separator = None
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "append"
            and len(node.args) == 1
            and isinstance(node.args[0], (ast.JoinedStr, ast.Constant))
        ):
            if item is None or node.lineno >= item.lineno:
                item = node.args[0]
    for node in fn.body:
        if isinstance(node, ast.Return):
            call = node.value
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "join"
                and isinstance(call.func.value, ast.Constant)
                and isinstance(call.func.value.value, str)
            ):
                separator = call.func.value.value
    if item is None:
        raise RealMemJudgeError(
            f"{where}: line {fn.lineno}: {EVIDENCE_FUNCTION}: no item appended as an f-string"
        )
    if separator is None:
        raise RealMemJudgeError(
            f"{where}: line {fn.lineno}: {EVIDENCE_FUNCTION}: no return 'SEP'.join(...)"
        )
    at = f"{where}: line {item.lineno}: {EVIDENCE_FUNCTION}'s item"
    return _fstring(item, _ITEM_NAMES, at), separator


def _literal(tree: ast.Module, name: str, where: str) -> tuple[str, str]:
    value = assigned_value(tree.body, name, where, RealMemJudgeError)
    if value is None:
        raise RealMemJudgeError(f"{where}: {name}: not assigned")
    at = f"{where}: line {value.lineno}: {name}"
    return literal_text(value, at, RealMemJudgeError), at


def _try_format(template: str, at: str, names: Iterable[str]) -> None:
    format_fields(template, at, RealMemJudgeError)
    try:
        template.format(**{n: "x" for n in names})
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
        known = ", ".join(f"{{{n}}}" for n in names)
        raise RealMemJudgeError(
            f"{at}: unusable placeholder {printable(exc)} (it takes {known})"
        ) from None


def load_prompts(path: str | Path) -> RealMemPrompts:
    """The judge prompts of a RealMemBench checkout (the checkout, a folder inside it such as
    ``eval/``, or the script itself), parsed without running it; RealMemJudgeError (one line,
    naming the file) when there is no such file or it cannot be read as expected."""
    path = Path(path)
    file = path
    if path.is_dir():
        candidates = [folder / SCRIPT for folder in (path, *path.resolve().parents)]
        candidates.insert(1, path / SCRIPT.name)
        file = next((c for c in candidates if c.is_file()), path / SCRIPT)
    where = str(file)
    if not file.is_file():
        raise RealMemJudgeError(
            f"{where}: no such file (give your RealMemBench checkout: its judge prompts are not "
            "bundled)"
        )
    tree = python_source(
        file,
        MAX_SCRIPT_BYTES,
        "compute_llm_metrics_for_realmem.py is about 25 KB",
        RealMemJudgeError,
    )
    instructions, _ = _literal(tree, QA_PROMPT, where)
    mem, mem_at = _literal(tree, MEM_PROMPT, where)
    _try_format(mem, mem_at, _MEM_NAMES)
    fn = _function(tree, QA_FUNCTION, where)
    node = assigned_value(fn.body, QA_VARIABLE, where, RealMemJudgeError)
    if node is None:
        raise RealMemJudgeError(f"{where}: line {fn.lineno}: {QA_FUNCTION}: no {QA_VARIABLE}")
    qa_at = f"{where}: line {node.lineno}: {QA_FUNCTION}.{QA_VARIABLE}"
    qa = _fstring(node, {n: n for n in _QA_NAMES}, qa_at)
    item, separator = _evidence_format(tree, where)
    return RealMemPrompts(where, RealMemQA(instructions, qa), RealMemMemory(mem, item, separator))


# ------------------------------------------------------------------------------ the ground truth


def ground_truth(sessions: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """Their ``load_ground_truth``: stripped question text -> (reference answer, memory)."""
    out: dict[str, tuple[str, str]] = {}
    for session in sessions:
        turns = session.get("dialogue_turns") or []
        for i, turn in enumerate(turns):
            if turn.get("speaker") != "User":
                continue
            question = str(turn.get("content", "")).strip()
            if not question:
                continue
            j = i + 1
            while j < len(turns) and turns[j].get("speaker") != "Assistant":
                j += 1
            answer = memory = ""
            if j < len(turns):
                reply = turns[j]
                answer = str(reply.get("content", "")).strip()
                used = reply.get("memory_used") or []
                contents = [m.get("content", "") for m in used if isinstance(m, dict)]
                memory = "\n".join(str(c) for c in contents if c)
            out[question] = (answer, memory or NO_MEMORY)
    return out


def session_chunks(sessions: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each session's ``chunk`` content as ``eval_mem0.py`` writes it."""
    out: dict[str, str] = {}
    for session in sessions:
        parts = [
            f"Speaker {t.get('speaker', '')}: {t['content']}"
            for t in session.get("dialogue_turns") or []
            if isinstance(t, dict) and t.get("content")
        ]
        out[str(session["session_identifier"])] = "\n".join(parts)
    return out


@dataclass(frozen=True)
class PersonaTruth:
    file: str
    truth: dict[str, tuple[str, str]]
    chunks: dict[str, str]


def _verified(documents: Sequence[Mapping[str, Any]], recorded: Mapping[str, Any], files: Any):
    """``documents`` when each is one the run read (its content hash as run.json records it,
    the document's ``file`` written as any of ``files`` names it), else None."""
    for doc in documents:
        want = recorded.get(str(doc.get("id")))
        if want is None:
            continue
        meta = dict(doc.get("metadata") or {})
        name = Path(str(meta.get("file", ""))).name
        hashes = {content_hash(doc)}
        for candidate in files(name):
            hashes.add(content_hash({**doc, "metadata": {**meta, "file": candidate}}))
        if want not in hashes:
            return None
    return documents


def run_personas(results_dir: Path, checkout: Path | None = None) -> dict[str, PersonaTruth]:
    """The ground truth and session texts of every RealMem persona the run in ``results_dir``
    read: its ``realmem:`` sources as run.json records them (else, for a source that is gone or
    changed, the same options on ``checkout``), each dialogue checked against the content hash
    run.json records (the persona file's path aside, for the checkout); RealMemJudgeError naming
    the source otherwise."""
    from memory_lab.dialogue.importers import import_source, parse_source
    from memory_lab.dialogue.importers.common import read_json
    from memory_lab.results.read import read_run_json
    from memory_lab.text.limits import MAX_FILE_BYTES, ReadBudget

    run = read_run_json(Path(results_dir))
    recorded = {
        str(d.get("id")): d.get("sha256") for d in run.get("dialogues") or [] if isinstance(d, dict)
    }
    out: dict[str, PersonaTruth] = {}
    for source in run.get("dialogue_sources") or []:
        parsed = parse_source(str(source)) if isinstance(source, str) else None
        if parsed is None or parsed[0] != "realmem":
            continue
        _, path, options = parsed

        def as_recorded(name: str, path: Path = path) -> list[str]:
            return [str(path), str(path / name), str(path / "dataset" / name)]

        documents = None
        for where in (path, checkout):
            if where is None:
                continue
            try:
                documents = import_source("realmem", where, options).documents
            except (ValueError, OSError):  # DialogueError is a ValueError
                continue
            documents = _verified(documents, recorded, as_recorded)
            if documents is not None:
                break
        if documents is None:
            raise RealMemJudgeError(
                f"{source}: the RealMem data the run read is gone or no longer what it read "
                "(the LLM metrics read each question's reference reply and memory and the "
                "sessions' text from it; give a checkout holding it with --prompts)"
            )
        mib = options.get("max_mib")
        budget = ReadBudget(int(mib) * 1024 * 1024 if mib else MAX_FILE_BYTES)
        for doc in documents:
            meta = doc.get("metadata") or {}
            persona, file = meta.get("persona"), meta.get("file")
            if not isinstance(persona, str) or not isinstance(file, str) or persona in out:
                continue
            data = read_json(file, lambda f=file, b=budget: b.read_file(Path(f)))
            sessions = checked_sessions(file, data)
            out[persona] = PersonaTruth(file, ground_truth(sessions), session_chunks(sessions))
    return out


# ------------------------------------------------------------------------------ judging


@dataclass
class PersonaJudged:
    """One (memory, persona): its judged questions' rows, and the texts without ground truth."""

    memory: str
    persona: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    unmatched: int = 0

    def summary(self) -> dict[str, Any]:
        """Their ``summary``, as ``main`` writes it."""
        figures = {k: [r[k] for r in self.rows if number(r.get(k))] for k in _FIGURES}
        qa, recalls, helpful = (figures[k] for k in _FIGURES)
        summary: dict[str, Any] = {}
        if qa:
            summary["average_qa_score"] = round(float(np.mean(qa)), 4)
            dist = {i: qa.count(i) for i in range(4)}
            summary["qa_score_distribution"] = dist
            summary["qa_hallucination_rate"] = round(dist.get(0, 0) / len(qa), 4)
            summary["qa_perfect_rate"] = round(dist.get(3, 0) / len(qa), 4)
        if recalls:
            summary["average_mem_recall"] = round(float(np.mean(recalls)), 4)
        if helpful:
            summary["average_mem_helpful_score"] = round(float(np.mean(helpful)), 4)
        return summary

    def row(self) -> dict[str, Any]:
        summary = self.summary()
        figures = {k: [r[k] for r in self.rows if number(r.get(k))] for k in _FIGURES}
        dist = summary.get("qa_score_distribution") or {}
        return {
            "memory": self.memory,
            "persona": self.persona,
            "questions": len(self.rows),
            "unmatched": self.unmatched,
            "qa_scored": len(figures["score"]),
            **{f"qa_score_{i}": dist.get(i, 0) for i in range(4)},
            "mem_judged": sum(1 for r in self.rows if r.get("mem_raw") is not None),
            "mem_recall_scored": len(figures["Mem_recall"]),
            "mem_helpful_scored": len(figures["Mem_helpful_score"]),
            **{k: summary.get(k) for k in SUMMARY_KEYS},
        }


_FIGURES = ("score", "Mem_recall", "Mem_helpful_score")  # what their main reads of a result


def judge_group(
    group: PersonaScores, truth: PersonaTruth, judge: Judge, prompts: RealMemPrompts
) -> PersonaJudged:
    """Every question of one (memory, persona) judged as their ``evaluate_single_item``."""
    out = PersonaJudged(group.memory, group.persona)
    for text, record in group.questions.items():
        found = truth.truth.get(text)
        if found is None:
            out.unmatched += 1
            continue
        answer, memory = found
        reply = record.get("reply") or ""
        qa = judge.verdict(prompts.qa, prompts.qa.fill(text, memory, answer, reply))
        merged: dict[str, Any] = {}
        if isinstance(qa.parsed, dict):
            merged.update(qa.parsed)
        sessions = session_ranking(record.get(RANKING_FIELD) or ())[:TOP_K]
        evidence = prompts.memory.evidence([truth.chunks.get(s, "") for s in sessions])
        mem = None
        if evidence and memory and memory != NO_MEMORY:
            mem = judge.verdict(prompts.memory, prompts.memory.fill(text, memory, evidence))
            if isinstance(mem.parsed, dict):
                merged.update(mem.parsed)
        out.rows.append(
            {
                "memory": group.memory,
                "persona": group.persona,
                "probe_id": record.get("probe_id"),
                "question": text,
                "retrieved_sessions": sessions,
                **{k: merged.get(k) for k in _FIGURES},
                "result": merged,
                "qa_raw": qa.raw,
                "mem_raw": None if mem is None else mem.raw,
                "input_tokens": qa.input_tokens + (mem.input_tokens if mem else 0),
                "output_tokens": qa.output_tokens + (mem.output_tokens if mem else 0),
                "cache_hit": qa.cache_hit and (mem is None or mem.cache_hit),
            }
        )
    return out


def judge_records(
    records: Iterable[Mapping[str, Any]],
    personas: Mapping[str, PersonaTruth],
    judge: Judge,
    prompts: RealMemPrompts,
) -> list[PersonaJudged]:
    """Every (memory, persona) of a run's RealMem probe records, judged."""
    out = []
    for group in probe_rankings(records).values():
        truth = personas.get(group.persona)
        if truth is None:
            raise RealMemJudgeError(
                f"persona {group.persona}: not among the RealMem sources run.json records"
            )
        out.append(judge_group(group, truth, judge, prompts))
    return out


def rows(judged: Sequence[PersonaJudged]) -> list[dict[str, Any]]:
    """The CSV's rows: each (memory, persona), then each memory's ``all`` row when it has several
    personas: ``collect_all_llm_metrics.py``'s aggregate (each figure's mean over the personas
    that have it, of their rounded figures; the counts and the distribution summed)."""
    out: list[dict[str, Any]] = []
    for memory in dict.fromkeys(j.memory for j in judged):
        mine = [j.row() for j in sorted(judged, key=lambda j: j.persona) if j.memory == memory]
        out += mine
        if len(mine) > 1:
            total: dict[str, Any] = {"memory": memory, "persona": ALL}
            for column in COLUMNS[2:]:
                values = [r[column] for r in mine if r.get(column) is not None]
                if column in SUMMARY_KEYS:
                    total[column] = float(np.mean(values)) if values else None
                else:
                    total[column] = sum(values)
            out.append(total)
    return out


def write_csv(path: Path, table: Sequence[Mapping[str, Any]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(COLUMNS))
        writer.writeheader()
        for row in table:
            writer.writerow({c: ("" if row.get(c) is None else row.get(c)) for c in COLUMNS})


def table_text(table: Sequence[Mapping[str, Any]]) -> str:
    shown = (
        "average_qa_score",
        "qa_hallucination_rate",
        "qa_perfect_rate",
        "average_mem_recall",
        "average_mem_helpful_score",
    )
    head = ["memory", "persona", "questions", "qa", "halluc.", "perfect", "mem_recall", "helpful"]
    body = [
        [str(r["memory"]), str(r["persona"]), str(r["questions"])]
        + [("-" if r.get(m) is None else f"{r[m]:.4f}") for m in shown]
        for r in table
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=False)]
    lines = ["RealMem LLM metrics (the authors' compute_llm_metrics_for_realmem.py)"]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in body]
    unmatched = sum(int(r["unmatched"]) for r in table if r["persona"] != ALL)
    if unmatched:
        lines.append(f"{unmatched} question(s) without ground truth not judged, as theirs")
    return "\n".join(lines)


def score_llm(
    results_dir: Path,
    judge: Judge,
    prompts: RealMemPrompts,
    out: Path | None = None,
    checkout: Path | None = None,
) -> tuple[str, list[Path], Any]:
    """Judge the run in ``results_dir``: ``realmem_llm_scores.csv`` (the summaries),
    ``out`` (default ``realmem_llm_verdicts.json``: every question's verdicts and the judge's
    account) and the account into the results folder; (text, files, account)."""
    from memory_lab.results.judge_costs import write_account
    from memory_lab.results.read import iter_records

    folder = Path(results_dir)
    personas = run_personas(folder, checkout)
    records = (
        r
        for r in iter_records(folder, prompts="dropped")
        if PERSONA_KEY in (r.get("probe_metadata") or {})
    )
    judged = judge_records(records, personas, judge, prompts)
    table = rows(judged)
    scores = folder / LLM_SCORES_FILE
    write_csv(scores, table)
    account = write_account(folder, ACCOUNT, judge, prompts.protocols)
    verdicts = Path(out) if out is not None else folder / VERDICTS_FILE
    document = {
        "prompts": prompts.source,
        "judge": judge.account(prompts.protocols).to_dict(),
        "summaries": {j.memory: {} for j in judged},
        "judged": [r for j in judged for r in j.rows],
    }
    for j in judged:
        document["summaries"][j.memory][j.persona] = j.summary()
    verdicts.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", "utf-8")
    text = table_text(table) + f"\n{judge.account(prompts.protocols).describe()}"
    text += f"\nwrote {scores} and every verdict to {verdicts}"
    return text, [scores, verdicts], account
