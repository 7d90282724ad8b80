"""Typed records: the single schema of ``records.jsonl`` and of ``read_results`` columns.

A run writes one ``TurnRecord`` per exchange, one ``ProbeRecord`` per probe, one ``UsageRecord``
per memory model role that was called while saving an exchange, and one ``CellRecord`` per
(memory, dialogue) cell. Every field is always written, so a run where every cell failed has
the same columns as one where none did.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass
class _Record:
    kind: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, **dataclasses.asdict(self)}

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
    """One probe: the reply, how it scored, and what the prompt held."""

    kind: ClassVar[str] = "probe"
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
    evidence: list[str] = field(default_factory=list)
    evidence_recall: float | None = None  # share of evidence turns the context carries
    recalled_turns: list[str] | None = None  # source turn ids the memory reported, if any
    # rank-aware retrieval, LongMemEval's definitions (memory_lab.rank_scores.RANK_SCORES):
    # None where the memory does not rank or the probe has no evidence
    turn_recall_all_at_5: float | None = None
    turn_ndcg_any_at_5: float | None = None
    turn_recall_all_at_10: float | None = None
    turn_ndcg_any_at_10: float | None = None
    session_recall_all_at_5: float | None = None
    session_ndcg_any_at_5: float | None = None
    session_recall_all_at_10: float | None = None
    session_ndcg_any_at_10: float | None = None
    # the field's answer scores (memory_lab.answer_scores): best over the accepted answers
    f1_locomo: float | None = None
    f1_mem0: float | None = None
    bleu1: float | None = None
    exact_match: float | None = None
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
    memory: str
    memory_name: str
    dialogue: str
    status: str
    error: str | None
    seconds: float
    memory_tokens_held: int | None = None  # the memory's footprint at the dialogue's end


TIMING_FIELDS = ("seconds", "recall_seconds", "save_seconds", "answer_seconds")


def without_timings(record: dict[str, Any]) -> dict[str, Any]:
    """A record without its timings (``TIMING_FIELDS``, never the same twice): what two runs
    of the same inputs must agree on."""
    return {k: v for k, v in record.items() if k not in TIMING_FIELDS}


RECORD_TYPES: dict[str, type[_Record]] = {
    r.kind: r for r in (TurnRecord, ProbeRecord, UsageRecord, CellRecord)
}
