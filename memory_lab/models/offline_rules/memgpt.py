"""MemGPT's rule script: recognised by MemGPT's core-memory tools among the bound ones.

The agent's system message shows the core memory (``<human ...>`` block) and its human message
the exchange. For that exchange:

1. a user sentence in the first person (``I``, ``my``, ``we``, ...; ``저는``, ``제가``, ``우리``,
   ...) that carries a durable fact (the offline memory model's informativeness of at least its
   ``min_fact_score``, or a stated preference) and is not a question ->
   ``core_memory_append(label="human", content=sentence)``, unless the block already holds it;
2. such a sentence that restates a line of the ``human`` block shown in the prompt (two or more
   shared content words and at least 60% of the smaller's, as the offline extractor reuses a
   fact's key) -> ``core_memory_replace(label="human", old_content=line, new_content=sentence)``;
3. every exchange -> ``archival_memory_insert(content=the exchange's transcript)``;
4. after tool results, a reply with no tool calls (the loop ends).
"""

from __future__ import annotations

import re
from typing import Any

from memory_lab.models.offline_rules.base import Request, RuleScript, RuleSettings, numbered
from memory_lab.models.offline_rules.facts import FIRST_PERSON, personal_fact, stored_key
from memory_lab.models.offline_summarizer import speaker_sentences

CORE_TOOLS = frozenset({"core_memory_append", "core_memory_replace"})
_BLOCK = r"<{label}[^>]*>\n(.*?)\n?</{label}>"


def core_block(prompt: str, label: str) -> list[str]:
    """The lines of block ``label`` in a rendered core memory (``<label ...>...</label>``)."""
    match = re.search(_BLOCK.format(label=label), prompt, re.S)
    return [line for line in match.group(1).splitlines() if line.strip()] if match else []


class MemGPTScript(RuleScript):
    """Rules 1-4 of the module docstring."""

    name = "memgpt"

    def recognises(self, request: Request) -> bool:
        return CORE_TOOLS <= set(request.tools)

    def calls(self, request: Request, settings: RuleSettings) -> list[dict[str, Any]]:
        human = next((str(m.content) for m in reversed(request.messages) if m.type == "human"), "")
        return memgpt_calls(human, core_block(request.text_of("system"), "human"), settings)


def memgpt_calls(
    transcript: str, human_block: list[str], settings: RuleSettings
) -> list[dict[str, Any]]:
    """Rules 1-3 for one exchange's transcript and the ``human`` block's lines."""
    calls: list[dict[str, Any]] = []
    known = [(line, line) for line in human_block]
    said = [t for s, t in speaker_sentences(transcript) if s == "Human"]
    for sentence in said:
        if not re.search(FIRST_PERSON, sentence, re.I):  # rule 1's first-person pattern
            continue
        if sentence in human_block or not personal_fact(sentence, settings.min_fact_score):
            continue
        old = stored_key(sentence, known)
        if old is not None:
            numbered(
                calls, "core_memory_replace", label="human", old_content=old, new_content=sentence
            )
            known = [(k, v) for k, v in known if k != old]
        else:
            numbered(calls, "core_memory_append", label="human", content=sentence)
    if transcript.strip():
        numbered(calls, "archival_memory_insert", content=transcript.strip())
    return calls
