"""What a judge's calls say: one call's ``Verdict``, the reading of a reply (``parse_verdict``:
CORRECT, WRONG or unreadable), a probe's ``Grading`` per (prompt, run) and the judge fields of
its record (``record_fields``: the majority verdict, the tokens, the calls)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from memory_lab.scoring.judge_core import JudgeVerdict
from memory_lab.scoring.stats import majority_vote

_WORD = re.compile(r"[A-Za-z]+")
_LABEL = re.compile(r"""["']?label["']?\s*[:=]\s*["']?([A-Za-z]+)""", re.I)


@dataclass(frozen=True)
class Verdict:
    """One judge call: the verdict (None when unparseable), the raw output, its usage, and
    whether the call was served from the on-disk cache."""

    correct: bool | None
    raw: str
    input_tokens: int
    output_tokens: int
    cache_hit: bool = False

    @classmethod
    def of(cls, verdict: JudgeVerdict) -> Verdict:
        """The probe judge's reading of a core verdict (``parsed``: the CORRECT/WRONG call)."""
        v = verdict
        return cls(v.parsed, v.raw, v.input_tokens, v.output_tokens, v.cache_hit)


# Words before the first verdict word that make it no verdict ("I cannot tell if this is
# correct" is not CORRECT): the reply is then unreadable, counted apart, never a vote.
_HEDGE = re.compile(
    r"\b(?:cannot|can['’]?t|unsure|unclear|unknown|unable|if|whether|maybe|perhaps|possibly|"
    r"might)\b",
    re.IGNORECASE,
)


def parse_verdict(text: str) -> bool | None:
    """True for CORRECT, False for WRONG/INCORRECT, else None (unreadable).

    A ``"label": "..."`` field (the JSON answer some published grading prompts ask for) decides
    when present; otherwise the first such word wins (``not correct`` is WRONG), unless a hedge
    comes before it (``cannot``, ``if``, ``unsure``, ... : ``_HEDGE``), which makes the reply
    no verdict.
    """
    label = _LABEL.search(text)
    if label is not None and label.group(1).upper() in ("CORRECT", "WRONG", "INCORRECT"):
        return label.group(1).upper() == "CORRECT"
    previous = ""
    for match in _WORD.finditer(text):
        word = match.group().upper()
        if word in ("WRONG", "INCORRECT", "CORRECT"):
            if _HEDGE.search(text[: match.start()]):
                return None
            return word == "CORRECT" and previous != "NOT"
        previous = word
    return None


@dataclass(frozen=True)
class Grading:
    """One judge call of a probe: which prompt, which run (0-based), and its verdict."""

    prompt: str
    run: int
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "prompt": self.prompt,
            "run": self.run,
            "correct": v.correct,
            "raw": v.raw,
            "input_tokens": v.input_tokens,
            "output_tokens": v.output_tokens,
            "cache_hit": v.cache_hit,
        }


def record_fields(gradings: list[Grading]) -> dict[str, Any]:
    """A probe record's judge fields for its gradings (see ``ProbeRecord``).

    ``judge_correct`` is the majority verdict of the first prompt's runs (``majority_vote``:
    unreadable runs ignored, a tie to the earliest run); ``judge_raw`` that prompt's first run's
    output; tokens are summed over every call; ``judge_cache_hit`` says every call was a hit.
    """
    first = [g for g in gradings if g.prompt == gradings[0].prompt]
    return {
        "judge_correct": majority_vote([g.verdict.correct for g in first]),
        "judge_raw": first[0].verdict.raw,
        "judge_cache_hit": all(g.verdict.cache_hit for g in gradings),
        "judge_input_tokens": sum(g.verdict.input_tokens for g in gradings),
        "judge_output_tokens": sum(g.verdict.output_tokens for g in gradings),
        "judge_calls": len(gradings),
        "judge_verdicts": [g.to_dict() for g in gradings],
    }
