"""mem0's rule script: recognised by mem0's extraction prompt (``You are a Memory Extractor``).

mem0's extraction call shows the new messages (``## New Messages``, ``user: ...`` lines) and the
stored memories near them (``## Existing Memories``, JSON). Each first-person user sentence
stating a durable fact or a preference (as for MemGPT) that no stored memory holds already
becomes one memory of the JSON reply ``{"memory": [{"id", "text"}]}``.
"""

from __future__ import annotations

import json
import re

from langchain_core.outputs import ChatResult

from memory_lab.models.offline_base import chat_result
from memory_lab.models.offline_rules.base import Request, RuleScript, RuleSettings
from memory_lab.models.offline_rules.facts import FIRST_PERSON, personal_fact
from memory_lab.models.offline_summarizer import speaker_sentences

EXTRACTOR_MARK = "You are a Memory Extractor"
_SECTION = re.compile(r"^## ([^\n]+)\n(.*?)(?=^## |^# Output:|\Z)", re.S | re.M)


def prompt_sections(text: str) -> dict[str, str]:
    """The ``## Name`` sections of mem0's extraction prompt."""
    return {name.strip(): body.strip() for name, body in _SECTION.findall(text)}


def new_user_sentences(text: str) -> list[str]:
    """The user's sentences in the prompt's ``New Messages`` (``user: ...`` lines)."""
    lines, speaker = [], None
    for line in prompt_sections(text).get("New Messages", "").splitlines():
        head = re.match(r"^(user|assistant|system): ", line)
        if head:
            speaker, line = head.group(1), line[head.end() :]
        if speaker == "user":
            lines.append("Human: " + line)
    return [t for s, t in speaker_sentences("\n".join(lines)) if s == "Human"]


def existing_texts(text: str) -> set[str]:
    """The texts of the memories the prompt shows as existing."""
    try:
        shown = json.loads(prompt_sections(text).get("Existing Memories", "[]"))
    except json.JSONDecodeError:
        return set()
    return {str(m.get("text", "")) for m in shown if isinstance(m, dict)}


class Mem0Script(RuleScript):
    """The module docstring's rule, answered in text (mem0 parses the JSON)."""

    name = "mem0"

    def recognises(self, request: Request) -> bool:
        return bool(request.messages) and EXTRACTOR_MARK in str(request.messages[0].content)

    def answer(self, request: Request, settings: RuleSettings) -> ChatResult:
        prompt = request.prompt
        held = existing_texts(prompt)
        facts: list[str] = []
        for sentence in new_user_sentences(prompt):
            if sentence in held or sentence in facts:
                continue
            if re.search(FIRST_PERSON, sentence, re.I) and personal_fact(
                sentence, settings.min_fact_score
            ):
                facts.append(sentence)
        reply = json.dumps(
            {"memory": [{"id": str(i), "text": f} for i, f in enumerate(facts)]},
            ensure_ascii=False,
        )
        return chat_result(prompt, reply)
