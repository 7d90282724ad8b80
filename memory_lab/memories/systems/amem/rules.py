"""A-Mem's rule script: recognised by A-Mem's own prompts (``agentic_memory.memory_system``).

A-Mem asks its model two things, each as one user message after the system message ``You must
respond with a JSON object.``, with a JSON schema as ``response_format``:

- note construction (``analyze_content``, memory_system.py:176-203): ``Generate a structured
  analysis of the following content`` ... ``Content for analysis:`` and the note's text; reply
  ``{"keywords": [...], "context": "...", "tags": [...]}``;
- memory evolution (``process_memory``, the prompt of memory_system.py:127-157): ``You are an AI
  memory evolution agent`` with the new note's context, content and keywords and its nearest
  neighbours (``memory index:i<TAB>talk start time:...<TAB>memory content: ...<TAB>memory
  context: ...<TAB>memory keywords: [...]<TAB>memory tags: [...]``); reply ``{"should_evolve",
  "actions", "suggested_connections", "tags_to_update", "new_context_neighborhood",
  "new_tags_neighborhood"}``.

The answers, deterministic and read from the prompt alone:

- keywords: the content words of the note's sentences (no English stop word, speaker label,
  number or time word), the most informative sentence first (``informativeness``, the user's
  voice weighing most), at most ``MAX_KEYWORDS``; context: one sentence naming the first
  three; tags: ``conversation``, ``personal`` for a first-person fact (``personal_fact``) else
  ``general``, ``preference`` when one is stated, ``question`` when the user asks, and the
  first keyword.
- evolution (conservative): a neighbour is related when it shares at least one keyword with the
  new note. None related: ``should_evolve`` false and nothing else. Otherwise ``strengthen``
  (connections: the related neighbours as the prompt names them, their ``memory index``, for
  the prompt shows no ids; the note's tags are its construction tags plus the shared keywords)
  and ``update_neighbor`` (each neighbour keeps its context; a related one gains the shared
  keywords as tags, an unrelated one keeps its tags), one entry per neighbour, in order.
"""

from __future__ import annotations

import ast
import json
import re
from functools import lru_cache
from typing import Any

from langchain_core.outputs import ChatResult

from memory_lab.models.offline_base import chat_result
from memory_lab.models.offline_rules.base import Request, RuleScript, RuleSettings
from memory_lab.models.offline_rules.facts import FIRST_PERSON, PREFERENCE, personal_fact
from memory_lab.models.offline_summarizer import informativeness, speaker_sentences
from memory_lab.text.analysis import FUNCTION_WORDS, WORD, en_stopwords
from memory_lab.text.normalize import normalize

ANALYZE_MARK = "Generate a structured analysis of the following content by:"
CONTENT_MARK = "Content for analysis:"
EVOLVE_MARK = "You are an AI memory evolution agent responsible for managing and evolving"
MAX_KEYWORDS = 6

# what A-Mem's prompt says a keyword must not be: the speaker's name or a time
_NOT_KEYWORDS = frozenset(
    "human ai user assistant speaker today yesterday tomorrow tonight morning afternoon evening "
    "night week weeks month months year years day days hour hours minute minutes now later "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)

_EVOLVE = re.compile(
    r"The new memory context:\n(?P<context>.*?)\n\s*content: (?P<content>.*?)\n\s*"
    r"keywords: (?P<keywords>\[.*?\])\n\s*\n\s*The nearest neighbors memories:\n"
    r"(?P<neighbors>.*?)\n\s*Based on this information",
    re.S,
)
_NEIGHBOR = re.compile(
    r"memory index:(?P<index>\d+)\ttalk start time:(?P<time>.*?)\tmemory content: "
    r"(?P<content>.*?)\tmemory context: (?P<context>.*?)\tmemory keywords: (?P<keywords>\[.*?\])"
    r"\tmemory tags: (?P<tags>\[.*?\])\n",
    re.S,
)


@lru_cache(maxsize=1)
def _not_keywords() -> frozenset[str]:
    return FUNCTION_WORDS | _NOT_KEYWORDS | en_stopwords()


def _words(text: str) -> list[str]:
    """``text``'s keyword candidates, in order, without repeats."""
    found = []
    for word in WORD.findall(normalize(text)):
        if word in _not_keywords():
            continue
        if len(word) < 3 or word.isdigit():
            continue
        if word not in found:
            found.append(word)
    return found


def analysis(content: str, min_fact_score: float = RuleSettings.min_fact_score) -> dict[str, Any]:
    """The note-construction reply for ``content``: keywords, context, tags (module doc)."""
    said = speaker_sentences(content)
    ranked = sorted(
        range(len(said)), key=lambda i: (-informativeness(*said[i]), i)
    )  # most informative first, ties in order
    keywords: list[str] = []
    for i in ranked:
        for word in _words(said[i][1]):
            if word not in keywords:
                keywords.append(word)
    keywords = keywords[:MAX_KEYWORDS]
    if not keywords:
        context = "A short exchange with no specific topic."
    elif len(keywords) == 1:
        context = f"A conversation about {keywords[0]}."
    else:
        head = keywords[:3]
        context = f"A conversation about {', '.join(head[:-1])} and {head[-1]}."
    user = [t for s, t in said if s == "Human"]
    personal = any(
        re.search(FIRST_PERSON, t, re.I) and personal_fact(t, min_fact_score) for t in user
    )
    tags = ["conversation", "personal" if personal else "general"]
    if any(PREFERENCE.search(t) for t in user):
        tags.append("preference")
    if any(t.rstrip().endswith(("?", "？")) for t in user):
        tags.append("question")
    tags += [k for k in keywords[:1] if k not in tags]
    return {"keywords": keywords, "context": context, "tags": tags}


def _listed(text: str) -> list[str]:
    """A list as A-Mem prints one (Python's repr), or empty."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def evolution(prompt: str, min_fact_score: float = RuleSettings.min_fact_score) -> dict[str, Any]:
    """The evolution reply for A-Mem's evolution prompt (module doc)."""
    quiet = {
        "should_evolve": False,
        "actions": [],
        "suggested_connections": [],
        "tags_to_update": [],
        "new_context_neighborhood": [],
        "new_tags_neighborhood": [],
    }
    match = _EVOLVE.search(prompt)
    if match is None:
        return quiet
    mine = {k.lower() for k in _listed(match["keywords"])}
    neighbors = list(_NEIGHBOR.finditer(match["neighbors"] + "\n"))
    shared = [[k for k in _listed(n["keywords"]) if k.lower() in mine] for n in neighbors]
    if not any(shared):
        return quiet
    tags = analysis(match["content"], min_fact_score)["tags"]
    for k in (k for common in shared for k in common):
        if k not in tags:
            tags.append(k)
    new_tags = []
    for n, common in zip(neighbors, shared, strict=True):
        held = _listed(n["tags"])
        new_tags.append(held + [k for k in common if k not in held])
    return {
        "should_evolve": True,
        "actions": ["strengthen", "update_neighbor"],
        "suggested_connections": [n["index"] for n, c in zip(neighbors, shared, strict=True) if c],
        "tags_to_update": tags,
        "new_context_neighborhood": [n["context"] for n in neighbors],
        "new_tags_neighborhood": new_tags,
    }


class AMemScript(RuleScript):
    """The module docstring's rules, answered in text (A-Mem parses the JSON itself)."""

    name = "amem"

    def recognises(self, request: Request) -> bool:
        text = request.last_human()
        return (ANALYZE_MARK in text and CONTENT_MARK in text) or EVOLVE_MARK in text

    def answer(self, request: Request, settings: RuleSettings) -> ChatResult:
        prompt, text = request.prompt, request.last_human()
        if EVOLVE_MARK in text:
            reply = evolution(text, settings.min_fact_score)
        else:
            reply = analysis(text.split(CONTENT_MARK, 1)[1].strip(), settings.min_fact_score)
        return chat_result(prompt, json.dumps(reply, ensure_ascii=False))
