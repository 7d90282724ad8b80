"""Typed records: the single schema of ``records.jsonl`` and of ``read_results`` columns.

A run writes one ``TurnRecord`` per exchange, one ``ProbeRecord`` per probe, one ``UsageRecord``
per memory model role that was called while saving an exchange, and one ``CellRecord`` per
(memory, dialogue) cell. Every field is always written, so a run where every cell failed has
the same columns as one where none did. A turn's or probe's ``prompt`` may be stored as a delta
against its cell's previous prompt (``prompt_store``); ``results.read.read_records`` restores it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Union

from memory_lab.scoring.answers import answer_score_names

# A field whose dict is written flat into the record (its keys are columns of their own).
FLAT = {"flat": True}


@dataclass
class _Record:
    kind: ClassVar[str] = ""
    # the fields a reader of records.jsonl cannot do without (every other field is read as
    # missing when a record lacks it, as in a run from before the field existed)
    NEEDED: ClassVar[tuple[str, ...]] = ("memory", "dialogue")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for f in dataclasses.fields(self):
            if f.metadata.get("flat"):
                data.update(data.pop(f.name))
        return {"type": self.kind, **data}

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]


@dataclass
class TurnRecord(_Record):
    """One exchange: the prompt the answering model would receive, and what saving it cost."""

    kind: ClassVar[str] = "turn"
    memory: str
    memory_name: str
    dialogue: str
    language: str
    session: str
    turn_id: str
    exchange: int
    prompt_tokens: int = 0
    context_tokens: int = 0
    completion_tokens: int = 0
    truncated: bool = False
    context_cut_tokens: int = 0  # memory text the context limit cut from the prompt
    memory_llm_calls: int = 0
    memory_cache_hits: int = 0
    memory_input_tokens: int = 0
    memory_output_tokens: int = 0
    embedding_tokens: int = 0
    memory_tokens: int = 0
    seconds: float = 0.0
    recall_seconds: float = 0.0  # reading memory for the prompt (part of seconds)
    save_seconds: float = 0.0  # writing the exchange into memory, its model calls included
    memory_tokens_held: int | None = None  # the memory's footprint, on a session's last turn
    session_date: str | None = None
    prompt_tokens_counted: int | None = None  # live mode: our count beside the provider's
    reply: str | None = None  # live mode: the model's reply, saved into memory
    prompt: str | None = None


@dataclass
class ProbeRecord(_Record):
    """One probe: the reply, how it scored, and what the prompt held. The field's answer scores
    (best over the accepted answers: ``scoring/answers.py``, a benchmark's own among them) are
    written flat, each its own field (``answer_scores``), after the rank scores among the
    columns, where they have always been; a reader checks each as a share."""

    kind: ClassVar[str] = "probe"
    NEEDED: ClassVar[tuple[str, ...]] = (
        "memory",
        "dialogue",
        "category",
        "answers",
        "stale_answers",
    )
    memory: str
    memory_name: str
    dialogue: str
    language: str
    probe_id: str
    category: str
    after: str
    exchange: int
    question: str
    answers: list[str]
    stale_answers: list[str]
    derived: bool
    reply: str
    correct: bool
    context_hit: bool | None
    stale: bool
    abstained: bool
    prompt_tokens: int
    completion_tokens: int
    prompt_tokens_counted: int
    usage_source: str
    cache_hit: bool
    context_tokens: int
    truncated: bool
    memory_tokens: int
    embedding_tokens: int
    seconds: float
    recall_seconds: float  # reading memory for the prompt (search latency; part of seconds)
    answer_seconds: float  # the answering model's call (recall + answer: total latency)
    prompt: str
    context_cut_tokens: int = 0  # memory text the context limit cut from the prompt
    evidence: list[str] = field(default_factory=list)
    evidence_recall: float | None = None  # share of evidence turns the context carries
    recalled_turns: list[str] | None = None  # source turn ids the memory reported, if any
    # the memory's ranked retrieval (``Recall.ranking``): each retrieved item's turn ids, best
    # first; None where the memory does not rank (a benchmark's own rank metrics read it)
    ranking: list[list[str]] | None = None
    # rank-aware retrieval (memory_lab.scoring.ranks.RANK_SCORES):
    # None where the memory does not rank or the probe has no evidence
    turn_recall_all_at_5: float | None = None
    turn_ndcg_any_at_5: float | None = None
    turn_recall_all_at_10: float | None = None
    turn_ndcg_any_at_10: float | None = None
    session_recall_all_at_5: float | None = None
    session_ndcg_any_at_5: float | None = None
    session_recall_all_at_10: float | None = None
    session_ndcg_any_at_10: float | None = None
    # --judge: the first grading prompt's majority verdict over its runs and its first raw
    # output; tokens summed over every judge call; cache hit: every call was one
    judge_correct: bool | None = None
    judge_raw: str | None = None
    judge_cache_hit: bool | None = None
    judge_input_tokens: int | None = None
    judge_output_tokens: int | None = None
    judge_calls: int | None = None  # grading prompts x --judge-runs
    judge_verdicts: list[dict[str, Any]] | None = None  # per (prompt, run): verdict, raw, usage
    probe_metadata: dict[str, Any] | None = None
    answer_scores: dict[str, float | None] = field(default_factory=dict, metadata=FLAT)

    @classmethod
    def columns(cls) -> list[str]:
        scores = answer_score_names()
        own = [f.name for f in dataclasses.fields(cls) if not f.metadata.get("flat")]
        at = own.index("session_ndcg_any_at_10") + 1
        return own[:at] + scores + own[at:]


@dataclass
class UsageRecord(_Record):
    """Calls of one memory model role while saving one exchange (a breakdown of the turn's).

    For a composite memory (``combined``) each row names the ``part`` it belongs to, and a
    part's embedded tokens have a row of their own (role ``embeddings``).
    """

    kind: ClassVar[str] = "usage"
    memory: str
    memory_name: str
    dialogue: str
    exchange: int
    role: str
    model: str
    llm_calls: int
    cache_hits: int
    input_tokens: int
    output_tokens: int
    embedding_tokens: int = 0
    part: str | None = None


@dataclass
class CellRecord(_Record):
    """How one (memory, dialogue) cell ended."""

    kind: ClassVar[str] = "cell"
    NEEDED: ClassVar[tuple[str, ...]] = ("memory", "dialogue", "status")
    memory: str
    memory_name: str
    dialogue: str
    status: str
    error: str | None
    seconds: float
    memory_tokens_held: int | None = None  # the memory's footprint at the dialogue's end
    # the first cell of each process: the seconds the process spent loading its models and
    # engines before it (``RunModels.warm``), in no cell's seconds; None for the others
    startup_seconds: float | None = None


TIMING_FIELDS = ("seconds", "recall_seconds", "save_seconds", "answer_seconds", "startup_seconds")


def without_timings(record: dict[str, Any]) -> dict[str, Any]:
    """A record without its timings (``TIMING_FIELDS``, never the same twice): what two runs
    of the same inputs must agree on."""
    return {k: v for k, v in record.items() if k not in TIMING_FIELDS}


RECORD_TYPES: dict[str, type[_Record]] = {
    r.kind: r for r in (TurnRecord, ProbeRecord, UsageRecord, CellRecord)
}


# ---------------------------------------------------------------------- reading records back


@dataclass
class JudgeVerdict:
    """What a reader takes from each of a probe's ``judge_verdicts`` (written by
    ``judge.Grading.to_dict``, with the raw output and tokens too)."""

    prompt: str
    run: int
    correct: bool | None


def accepts(hint: Any) -> Callable[[Any], bool]:
    """Whether a value read from JSON is of the annotated type: an int is a number too, a bool
    is no int, a JSON list stands for a list or tuple; a class is matched exactly."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return lambda value: True
    if origin in (Union, types.UnionType):
        parts = [accepts(a) for a in args]
        return lambda value: any(part(value) for part in parts)
    if origin in (list, tuple, frozenset):
        item = accepts(args[0])
        return lambda value: type(value) is list and all(item(x) for x in value)
    if origin is dict:
        item = accepts(args[1])
        return lambda value: type(value) is dict and all(item(x) for x in value.values())
    if origin is not None or not isinstance(hint, type):
        raise TypeError(f"no check for the annotation {hint}")
    exact = (float, int) if hint is float else (hint,)
    return lambda value: type(value) in exact


@functools.cache
def field_checks(record_type: type) -> dict[str, tuple[Callable[[Any], bool], str]]:
    """field -> (its type check by ``accepts``, its annotation as written) of a dataclass."""
    hints = typing.get_type_hints(record_type)
    fields = [f for f in dataclasses.fields(record_type) if not f.metadata.get("flat")]
    checks = {f.name: (accepts(hints[f.name]), str(f.type)) for f in fields}
    if record_type is ProbeRecord:  # the answer scores, each written as a field of its own
        checks.update({n: (accepts(float | None), "float | None") for n in answer_score_names()})
    return checks


def _shown(value: Any, width: int = 40) -> str:
    """A JSON value as a message quotes it, shortened."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


MAX_COUNT = 2**63 - 1  # a count (tokens, calls, an index) fits a 64-bit integer


@functools.cache
def field_bounds(record_type: type) -> dict[str, str]:
    """field -> what its value must lie in, by its annotation: ``count`` (an int: 0 to
    ``MAX_COUNT``), ``seconds`` (a float named ...seconds: finite, at least 0) or ``share`` (any
    other float: evidence recall, the rank and answer scores: 0 to 1)."""
    hints = typing.get_type_hints(record_type)
    bounds = {}
    for f in dataclasses.fields(record_type):
        kinds = set(typing.get_args(hints[f.name])) - {type(None)} or {hints[f.name]}
        if kinds == {int}:
            bounds[f.name] = "count"
        elif kinds == {float}:
            bounds[f.name] = "seconds" if f.name.endswith("seconds") else "share"
    if record_type is ProbeRecord:
        bounds.update(dict.fromkeys(answer_score_names(), "share"))
    return bounds


_BOUNDS = {
    "count": (lambda v: 0 <= v <= MAX_COUNT, "a whole number from 0 to 2^63-1"),
    "seconds": (lambda v: math.isfinite(v) and v >= 0, "a finite number of seconds, at least 0"),
    "share": (lambda v: math.isfinite(v) and 0 <= v <= 1, "a share from 0 to 1"),
}


def _field_problem(what: str, data: dict[str, Any], record_type: type) -> str | None:
    bounds = field_bounds(record_type)
    for name, (check, annotation) in field_checks(record_type).items():
        if name not in data:
            continue
        value = data[name]
        if not check(value):
            return f"{what} field {name!r} must be {annotation}, got {_shown(value)}"
        if name in bounds and value is not None and type(value) is not bool:
            ok, said = _BOUNDS[bounds[name]]
            if not ok(value):
                return f"{what} field {name!r} must be {said}, got {_shown(value)}"
    return None


def record_problem(record: Any) -> str | None:
    """What makes one line of records.jsonl unreadable, or None: not an object, no known
    ``type``, a ``NEEDED`` field missing, a field not of its annotated type, a judge verdict
    without what a reader takes from it (``JudgeVerdict``). Fields this version does not know
    (a newer version's) are left alone."""
    if not isinstance(record, dict):
        return f"a record must be a JSON object, got {_shown(record)}"
    kind = record.get("type")
    if "type" not in record:
        return "a record lacks the field 'type'"
    if not isinstance(kind, str) or kind not in RECORD_TYPES:
        return f"unknown record type {_shown(kind)} (known: {', '.join(RECORD_TYPES)})"
    record_type = RECORD_TYPES[kind]
    for name in record_type.NEEDED:
        if name not in record:
            return f"a {kind} record lacks the field {name!r}"
    problem = _field_problem(f"a {kind} record's", record, record_type)
    for n, verdict in enumerate(record.get("judge_verdicts") or () if not problem else ()):
        where = f"a {kind} record's judge_verdicts[{n}]"
        lacks = [name for name in field_checks(JudgeVerdict) if name not in verdict]
        problem = (
            f"{where} lacks the field {lacks[0]!r}"
            if lacks
            else _field_problem(where, verdict, JudgeVerdict)
        )
        if problem:
            break
    return problem
