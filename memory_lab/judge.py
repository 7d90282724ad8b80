"""The LLM judge: a second, model-graded correctness beside string matching.

The grading prompt is published in the package (``memory_lab/data/judge_prompt.txt``): it shows
the judge the question, the accepted answers and the reply, and asks for one word, CORRECT or
WRONG. ``JUDGE_PROMPT_VERSION`` identifies the prompt text in a run's records.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.prompts import PromptTemplate

from memory_lab.models.offline_base import OfflineChatModel
from memory_lab.models.tokens import count_tokens
from memory_lab.normalize import find_any
from memory_lab.scoring import is_abstention

JUDGE_PROMPT_TEXT = (resources.files("memory_lab") / "data" / "judge_prompt.txt").read_text("utf-8")
JUDGE_PROMPT = PromptTemplate.from_template(JUDGE_PROMPT_TEXT)
JUDGE_PROMPT_VERSION = hashlib.sha256(JUDGE_PROMPT_TEXT.encode("utf-8")).hexdigest()[:12]

NO_ANSWERS = "(none)"
_SECTIONS = (
    "### Abstention probe\n",
    "### Question\n",
    "### Accepted answers\n",
    "### Reply\n",
    "### End of reply",
)
_WORD = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True)
class Verdict:
    """One judge call: the verdict (None when unparseable), the raw output and its usage."""

    correct: bool | None
    raw: str
    input_tokens: int
    output_tokens: int


def format_answers(answers: Sequence[str]) -> str:
    """Accepted answers one per line as ``- answer``; ``(none)`` when there are none."""
    lines = [" ".join(str(a).split()) for a in answers]
    return "\n".join(f"- {a}" for a in lines if a) or NO_ANSWERS


def judge_prompt(question: str, answers: Sequence[str], reply: str, *, abstention: bool) -> str:
    """The grading prompt for one probe, exactly as the judge receives it."""
    return JUDGE_PROMPT.format(
        abstention="yes" if abstention else "no",
        question=question.strip(),
        answers=format_answers(answers),
        reply=reply.strip(),
    )


def parse_verdict(text: str) -> bool | None:
    """True for CORRECT, False for WRONG/INCORRECT (first such word wins), else None."""
    previous = ""
    for word in _WORD.findall(text):
        word = word.upper()
        if word in ("WRONG", "INCORRECT"):
            return False
        if word == "CORRECT":
            return previous != "NOT"
        previous = word
    return None


def _text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = [p if isinstance(p, str) else p.get("text", "") for p in content]
    return "".join(str(p) for p in parts)


def judge_reply(
    model: BaseChatModel, question: str, answers: Sequence[str], reply: str, *, abstention: bool
) -> Verdict:
    """Ask ``model`` whether ``reply`` answers ``question``; usage from the provider if given."""
    prompt = judge_prompt(question, answers, reply, abstention=abstention)
    message = model.invoke(prompt)
    raw = _text_of(message).strip()
    usage = getattr(message, "usage_metadata", None) or {}
    if usage:
        input_tokens = int(usage.get("input_tokens", 0))
        output_tokens = int(usage.get("output_tokens", 0))
    else:
        input_tokens, output_tokens = count_tokens(prompt), count_tokens(raw)
    return Verdict(parse_verdict(raw), raw, input_tokens, output_tokens)


def parse_judge_prompt(prompt: str) -> tuple[str, list[str], str, bool]:
    """(question, answers, reply, abstention) read back from a formatted judge prompt."""
    bounds = []
    start = 0
    for marker in _SECTIONS[:-1]:
        pos = prompt.find(marker, start)
        if pos == -1:
            raise ValueError(f"not a judge prompt: no {marker.strip()!r} section")
        start = pos + len(marker)
        bounds.append((pos, start))
    end = prompt.rfind(_SECTIONS[-1])
    if end < start:
        raise ValueError("not a judge prompt: no '### End of reply' marker")
    ends = [pos for pos, _ in bounds[1:]] + [end]
    abstention, question, answer_text, reply = (
        prompt[body:stop].strip() for (_, body), stop in zip(bounds, ends, strict=True)
    )
    answers = [
        line.strip().removeprefix("- ").strip()
        for line in answer_text.splitlines()
        if line.strip() and line.strip() != NO_ANSWERS
    ]
    return question, answers, reply, abstention.lower() == "yes"


class OfflineJudge(OfflineChatModel):
    """A deterministic judge that grades exactly like string matching (see ``scoring.py``).

    It exists to exercise the judge path offline (tests, ``--judge offline``), not to grade:
    CORRECT iff an accepted answer is in the reply and the reply does not abstain, or, for
    abstention probes, iff the reply abstains. Its verdicts agree with string matching by
    construction.
    """

    @property
    def _llm_type(self) -> str:
        return "memory-lab-offline-judge"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": "offline-judge"}

    def respond(self, prompt: str) -> str:
        return self.grade(prompt)

    def grade(self, prompt: str) -> str:
        """CORRECT or WRONG for a formatted judge prompt."""
        _question, answers, reply, abstention = parse_judge_prompt(prompt)
        abstained = is_abstention(reply)
        if abstention:
            correct = abstained
        else:
            correct = not abstained and find_any(reply, answers) is not None
        return "CORRECT" if correct else "WRONG"


def resolve_judge(spec: str, base_url: str | None = None) -> BaseChatModel:
    """``offline`` -> OfflineJudge; ``PROVIDER:MODEL`` -> a real model (ProviderError if not)."""
    if spec == "offline":
        return OfflineJudge()
    from memory_lab.models.providers import provider_chat_model

    return provider_chat_model(spec, base_url=base_url)
