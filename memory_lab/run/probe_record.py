"""One probe's record: the reply scored every way a run scores it, beside what asking cost.

A cell recalls a probe's context (``ProbeContext``), a reader answers it (``Answered``), and
``probe_record`` builds the ``ProbeRecord`` from those and the cell's dialogue (``CellFacts``):
the match against the answers (``score_probe``), the field's F1/BLEU-1/EM, evidence recall and
rank scores against what the memory recalled, and with a judge its grades.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory_lab.dialogue.model import EVIDENCE_JUDGED, Dialogue, Probe
from memory_lab.log.records import ProbeRecord
from memory_lab.memories.protocol import Exchange, Recall
from memory_lab.memories.registry import MemorySpec
from memory_lab.models.accounting import Usage
from memory_lab.models.tokens import TextTokens, count_tokens
from memory_lab.scoring.answers import answer_scores
from memory_lab.scoring.probes import evidence_recall, score_probe
from memory_lab.scoring.ranks import rank_scores


@dataclass(frozen=True)
class CellFacts:
    """What every record of a cell names (``ids``: memory label and name, dialogue id) and what
    scoring its probes reads of the dialogue: its language, each turn's text and session."""

    ids: dict[str, str]
    language: str
    turn_text: dict[str, str]
    turn_session: dict[str, str]

    @classmethod
    def of(cls, spec: MemorySpec, dialogue: Dialogue) -> CellFacts:
        return cls(
            ids={"memory": spec.label, "memory_name": spec.name, "dialogue": dialogue.id},
            language=dialogue.language,
            turn_text={t.id: t.text for t in dialogue.turns},
            turn_session={t.id: t.session_id for t in dialogue.turns},
        )


@dataclass
class ProbeContext:
    """What the memory gave one probe's prompt, and what recalling it cost."""

    context: str
    recall: Recall | None
    truncated: bool
    usage: Usage
    seconds: float
    recall_seconds: float = 0.0  # the memory read alone (``PromptMemory.recall_seconds``)
    cut_tokens: int = 0  # memory text the context limit dropped (``PromptMemory.cut_tokens``)


@dataclass
class CellCounts:
    """``count_tokens`` of one cell's prompts and contexts, in order: each counted by what it
    changed since the one before (``TextTokens``), with the same counts. A replay's prompts grow
    with the memory's text, and counting each whole cost a 100K-token ``buffer`` cell about 0.5 s
    of its replay. One per cell (``TextTokens`` is not thread-safe)."""

    prompts: TextTokens = field(default_factory=TextTokens)
    contexts: TextTokens = field(default_factory=TextTokens)


@dataclass(frozen=True)
class Answered:
    """A reader's answer to one prompt: the reply, the exact prompt the model saw, the model's
    usage for this call alone, and how long the call took."""

    reply: str
    prompt: str
    usage: Usage
    seconds: float


def probe_record(
    probe: Probe,
    ex: Exchange,
    cell: CellFacts,
    recalled: ProbeContext,
    answered: Answered,
    judge: Any = None,
    counts: CellCounts | None = None,
) -> ProbeRecord:
    """The record of ``probe`` asked after ``ex``, its reply scored (and graded by ``judge``
    when there is one and the probe's category is not judged by its evidence alone).

    ``seconds`` is left 0: the caller, who times the whole asking, sets it. ``counts``: the
    cell's token counters (a fresh one when not given).
    """
    counts = counts or CellCounts()
    reply, prompt, answer_usage = answered.reply, answered.prompt, answered.usage
    memory_usage = recalled.usage
    context = recalled.context
    counted_prompt = counts.prompts.count(prompt)
    score = score_probe(probe, reply, context)
    field_scores = answer_scores(reply, probe.answers, probe.metadata)
    recalled_ids = recalled.recall.turn_ids if recalled.recall is not None else ()
    evidence = {e: cell.turn_text[e] for e in probe.evidence if e in cell.turn_text}
    recall_share = (
        None if probe.category == "abstention" else evidence_recall(evidence, context, recalled_ids)
    )
    ranking = recalled.recall.ranking if recalled.recall is not None else None
    ranks = rank_scores(
        ranking,
        () if probe.category == "abstention" else probe.evidence,
        cell.turn_session,
    )
    record = ProbeRecord(
        **cell.ids,
        language=cell.language,
        probe_id=probe.id,
        category=probe.category,
        after=probe.after,
        exchange=ex.index,
        question=probe.question,
        answers=list(probe.answers),
        stale_answers=list(probe.stale),
        derived=probe.derived,
        reply=reply,
        correct=score.correct,
        context_hit=score.context_hit,
        stale=score.stale,
        abstained=score.abstained,
        # the provider's own usage when it reports one; our tokenizer's count beside it
        prompt_tokens=answer_usage.input_tokens or counted_prompt,
        completion_tokens=answer_usage.output_tokens or count_tokens(reply),
        prompt_tokens_counted=counted_prompt,
        usage_source="provider" if answer_usage.input_tokens else "tokenizer",
        cache_hit=answer_usage.cache_hits > 0,
        context_tokens=counts.contexts.count(context),
        truncated=recalled.truncated,
        context_cut_tokens=recalled.cut_tokens,
        memory_tokens=memory_usage.total,
        embedding_tokens=memory_usage.embedding_tokens,
        seconds=0.0,
        recall_seconds=recalled.recall_seconds,
        answer_seconds=answered.seconds,
        prompt=prompt,
        evidence=list(probe.evidence),
        evidence_recall=recall_share,
        recalled_turns=list(recalled_ids) if recalled_ids else None,
        ranking=None if ranking is None else [list(item) for item in ranking],
        **ranks,
        answer_scores=field_scores,
        probe_metadata=dict(probe.metadata) if probe.metadata else None,
    )
    if judge is not None and probe.category not in EVIDENCE_JUDGED:
        from memory_lab.scoring.judge import (
            record_fields,  # (cognitive: memory-lab judge-cognitive)
        )

        gradings = judge.grade(
            probe.question, probe.answers, reply, abstention=probe.category == "abstention"
        )
        for name, value in record_fields(gradings).items():  # every (prompt, run) call
            setattr(record, name, value)
    return record
