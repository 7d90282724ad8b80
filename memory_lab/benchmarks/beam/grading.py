"""Grading one BEAM question: Kendall's tau-b for event ordering, the line-to-item alignment, the
judge model's grader and the offline one (value nuggets by answer matching), and a question's
score from its items' grades (see ``scores.py`` for the whole protocol)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memory_lab.benchmarks.beam.importer import (
    VALUE_NUGGET,
)
from memory_lab.benchmarks.beam.judge import PROTOCOLS, BeamPrompts, item_score, judge_prompt
from memory_lab.errors import BadInput
from memory_lab.models.accounting import Usage
from memory_lab.scoring.judge_core import Judge, JudgeProtocol
from memory_lab.text.normalize import contains_answer

_MAX_VALUE_WORDS = 6


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's τ-b of two rankings with ties (``scipy.stats.kendalltau``'s ``variant="b"``):
    (concordant - discordant) / sqrt((pairs - ties in x) (pairs - ties in y)); NaN when either
    ranking is constant, clipped to [-1, 1]."""
    n = len(x)
    total = n * (n - 1) // 2
    con = dis = x_ties = y_ties = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            x_ties += dx == 0
            y_ties += dy == 0
            if dx * dy > 0:
                con += 1
            elif dx * dy < 0:
                dis += 1
    if x_ties == total or y_ties == total:
        return math.nan
    tau = (con - dis) / math.sqrt(total - x_ties) / math.sqrt(total - y_ties)
    return min(1.0, max(-1.0, tau))


def align(
    reference: list[str], system: list[str], equivalent: Callable[[str, str], bool]
) -> list[str]:
    """The reply's items with each replaced by the first unused reference item the judge finds
    equivalent (``equivalent(reference_item, reply_item)``), as the reference's
    ``align_with_llm``."""
    used: set[int] = set()
    out = []
    for s in system:
        matched = None
        for index, r in enumerate(reference):
            if index not in used and equivalent(r, s):
                matched = index
                break
        if matched is None:
            out.append(s)
        else:
            out.append(reference[matched])
            used.add(matched)
    return out


def event_ordering_score(
    reference: list[str], system: list[str], equivalent: Callable[[str, str], bool]
) -> dict[str, float]:
    """Precision, recall, F1, normalised τ-b and their product, as ``event_ordering_score``."""
    canon = align(reference, system, equivalent)
    tp = len(set(reference) & set(canon))
    fp = len([x for x in canon if x not in reference])
    fn = len([x for x in reference if x not in canon])
    precision = tp / (tp + fp) if tp + fp else 0
    recall = tp / (tp + fn) if tp + fn else 0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0
    union = list(dict.fromkeys(reference + canon))
    tie_rank = len(union) + 1

    def ranks(seq: list[str]) -> list[int]:
        r = {item: i + 1 for i, item in enumerate(seq)}
        return [r.get(u, tie_rank) for u in union]

    tau_norm = (kendall_tau_b(ranks(reference), ranks(canon)) + 1) / 2
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "tau_norm": tau_norm,
        "final_score": tau_norm * f1,
    }


@dataclass(frozen=True)
class ItemGrade:
    """One rubric item: its score (None: ungraded or unreadable), how, and the judge's output."""

    item: str
    score: float | None
    how: str  # "judge", "match" (offline answer matching), "ungraded" or "unreadable"
    raw: str = ""


@dataclass(frozen=True)
class QuestionScore:
    """A question's BEAM scores under one protocol. ``score`` is what BEAM's report averages:
    ``tau_norm`` for event ordering, ``judge_score`` otherwise; None when nothing was graded."""

    ability: str
    protocol: str
    judge_score: float | None
    tau_norm: float | None
    grades: tuple[ItemGrade, ...]

    @property
    def score(self) -> float | None:
        return self.tau_norm if self.ability == "event_ordering" else self.judge_score

    @property
    def graded(self) -> int:
        return sum(g.score is not None for g in self.grades)


class LLMBeamGrader:
    """A judge (a ``judge_core.Judge``, or a LangChain chat model made one) with BEAM's two
    protocols: one call per rubric item, one per (reply line, reference item) pair of the
    equivalence alignment; ``usage`` is what its calls used so far."""

    def __init__(self, model: Any, prompts: BeamPrompts):
        self.judge = Judge.of(model)
        self.prompts = prompts
        self.rubric = prompts.rubric
        self.equivalence = prompts.equivalence
        self.aligns = True

    @property
    def name(self) -> str:
        return self.judge.name

    @property
    def protocols(self) -> tuple[JudgeProtocol, ...]:
        return (self.rubric, self.equivalence)

    def usage(self) -> Usage:
        return self.judge.usage()

    def grade(self, prompt: str, item: str, reply: str, ability: str) -> tuple[Any, str, str]:
        verdict = self.judge.verdict(self.rubric, prompt)
        parsed = verdict.parsed
        return parsed, ("judge" if parsed is not None else "unreadable"), verdict.raw

    def equivalent(self, first: str, second: str) -> bool:
        prompt = self.equivalence.fill(first, second)
        return bool(self.judge.verdict(self.equivalence, prompt).parsed)


def value_of(item: str, ability: str) -> str | None:
    """The value of a rubric item that states a short value (``should state: March 29``)."""
    m = VALUE_NUGGET.match(item)
    if not m or ability in ("abstention", "contradiction_resolution"):
        return None
    value = m.group(1).strip().strip("'\"").rstrip(".")
    return value if value and len(value.split()) <= _MAX_VALUE_WORDS else None


class OfflineBeamGrader:
    """No judge model: value nuggets graded by answer matching (1 or 0), the rest ungraded;
    no equivalence alignment, so event ordering's τ-b is ungraded."""

    aligns = False
    name = "offline"
    protocols: tuple[JudgeProtocol, ...] = ()

    def usage(self) -> Usage:
        return Usage()  # no model is called

    def grade(self, prompt: str, item: str, reply: str, ability: str) -> tuple[Any, str, str]:
        value = value_of(item, ability)
        if value is None:
            return None, "ungraded", ""
        return {"score": 1.0 if contains_answer(reply, value) else 0.0}, "match", ""

    def equivalent(self, first: str, second: str) -> bool:  # pragma: no cover - never aligned
        raise NotImplementedError


def score_question(
    ability: str,
    question: str,
    rubric: list[str],
    reply: str,
    grader: Any,
    protocol: str,
    template: str = "",
) -> QuestionScore:
    """One question's BEAM scores: every rubric item judged, their mean over graded items (all
    of them with a judge model), and for event ordering the normalised τ-b of the reply's lines."""
    if protocol not in PROTOCOLS:
        raise BadInput(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    grades = []
    for item in rubric:
        prompt = judge_prompt(template, question, item, reply, protocol) if template else ""
        parsed, how, raw = grader.grade(prompt, item, reply, ability)
        score = item_score(parsed, protocol, ability) if parsed is not None else None
        if parsed is not None and score is None:
            how = "unreadable"
        grades.append(ItemGrade(item, score, how, raw))
    scores = [g.score for g in grades if g.score is not None]
    tau = None
    if ability == "event_ordering" and grader.aligns:
        tau = event_ordering_score(rubric, reply.split("\n"), grader.equivalent)["tau_norm"]
    judge = sum(scores) / len(scores) if scores else None
    return QuestionScore(ability, protocol, judge, tau, tuple(grades))
