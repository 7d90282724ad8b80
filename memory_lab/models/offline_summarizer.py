"""The offline summarizer: the LLM inside summary memories, deterministic and extractive.

It receives LangChain's summary prompt (previous summary + new lines of conversation), keeps the
most informative sentences within a token budget and returns them in conversation order. Only the
text after the prompt's last "Current summary:" marker is read, so the worked example in
LangChain's default prompt never leaks into a summary.
"""

from __future__ import annotations

import re
from typing import Any

from memory_lab.models.offline_base import OfflineChatModel
from memory_lab.models.tokens import count_tokens
from memory_lab.text.normalize import sentences

SUMMARY_MARKER = "Current summary:"
NEW_LINES_MARKER = "New lines of conversation:"
END_MARKER = "New summary:"

_SPEAKER = re.compile(r"^\s*(Human|AI)\s*:\s*(.*)$", re.S)
_WORD = re.compile(r"\w+", re.UNICODE)
_SMALL_TALK = re.compile(
    r"^(hi|hello|hey|thanks|thank you|ok|okay|sure|great|cool|nice|sounds good|bye|good|"
    r"안녕|감사|고마워|네|응|좋아요|좋네요|그렇군요)\b",
    re.I,
)


def parse_summary_prompt(prompt: str) -> tuple[str, str]:
    """Return (previous summary, new lines) from a summary prompt; ValueError if absent."""
    start = prompt.rfind(SUMMARY_MARKER)
    middle = prompt.find(NEW_LINES_MARKER, start)
    end = prompt.find(END_MARKER, middle)
    if start == -1 or middle == -1 or end == -1:
        raise ValueError(
            "offline summarizer expects LangChain's summary prompt layout "
            f"({SUMMARY_MARKER!r} ... {NEW_LINES_MARKER!r} ... {END_MARKER!r})"
        )
    summary = prompt[start + len(SUMMARY_MARKER) : middle].strip()
    new_lines = prompt[middle + len(NEW_LINES_MARKER) : end].strip()
    return summary, new_lines


def speaker_sentences(text: str) -> list[tuple[str, str]]:
    """(speaker, sentence) pairs; lines without a speaker prefix keep the previous speaker."""
    out: list[tuple[str, str]] = []
    speaker = "Human"
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        match = _SPEAKER.match(line)
        if match:
            speaker, line = match.group(1), match.group(2).strip()
        out.extend((speaker, part) for part in sentences(line))
    return out


def informativeness(speaker: str, sentence: str) -> float:
    """How likely a sentence carries a durable fact: numbers, names, length, the human's voice."""
    words = _WORD.findall(sentence)
    score = min(len(words), 20) / 10
    score += 2.0 * bool(re.search(r"\d", sentence))
    score += 0.5 * sum(1 for w in words[1:] if w[:1].isupper() and w[:1].isascii())
    score += 1.0 if speaker == "Human" else 0.0
    if sentence.endswith(("?", "？")):
        score -= 1.5
    if _SMALL_TALK.match(sentence) and len(words) <= 4:
        score -= 2.0
    return score


class OfflineSummarizer(OfflineChatModel):
    """Deterministic extractive summarizer with a token budget, for offline benchmark runs."""

    budget_tokens: int = 256

    @property
    def _llm_type(self) -> str:
        return "memory-lab-offline-summarizer"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": "offline-summarizer", "budget_tokens": self.budget_tokens}

    def respond(self, prompt: str) -> str:
        return self.summarize(*parse_summary_prompt(prompt))

    def summarize(self, previous: str, new_lines: str) -> str:
        """Keep the most informative sentences of previous + new within the budget, in order."""
        items = speaker_sentences(previous) + speaker_sentences(new_lines)
        items = list(dict.fromkeys(items))
        ranked = sorted(
            range(len(items)),
            key=lambda i: (-informativeness(*items[i]), -i),  # ties: newer first
        )
        kept: set[int] = set()
        used = 0
        for i in ranked:
            cost = count_tokens(f"{items[i][0]}: {items[i][1]}\n")
            if used + cost <= self.budget_tokens:
                kept.add(i)
                used += cost
        return "\n".join(f"{items[i][0]}: {items[i][1]}" for i in sorted(kept))
