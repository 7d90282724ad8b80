"""LangMem's rule script: recognised by trustcall's and LangMem's tools among the bound ones.

LangMem's manager shows the exchange in a ``<session_...>`` block and the stored memories near
it as trustcall's ``<instance ...>`` elements. For each first-person user sentence stating a
durable fact or a preference (as for MemGPT), one call: ``RemoveDoc`` when it restates a stored
memory and retracts it (``no longer``, ``not anymore``, ...), ``PatchDoc`` replacing
``/content`` when it restates one with a new value (two or more shared content words, at least
60% of the smaller's), nothing when a memory holds it already, ``Memory(content=sentence)``
otherwise. Only tools that were bound are called (``RemoveDoc`` is bound when memories exist
and deletes are on).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from memory_lab.models.offline_rules.base import Request, RuleScript, RuleSettings, numbered
from memory_lab.models.offline_rules.facts import FIRST_PERSON, personal_fact, stored_key
from memory_lab.models.offline_summarizer import speaker_sentences

# LangMem's memory schema and trustcall's own tools (patches, deletes, error repairs)
TOOLS = frozenset({"Memory", "PatchDoc", "RemoveDoc", "PatchFunctionErrors"})
RETRACT = re.compile(
    r"\b(no longer|not any ?more|don't .{0,40}any ?more|never mind|forget that)\b|"
    r"더 이상|이제 안",
    re.I,
)
_INSTANCE = re.compile(r'<instance id=(\S+) schema_type="(\w+)">\n(.*?)\n</instance>', re.S)
_MESSAGE = re.compile(
    r"=+ (Human|Ai) Message =+\n\n(.*?)(?=\n\n=+ (?:Human|Ai) Message =+|\Z)", re.S
)
_SESSION = re.compile(r"<session_[^>]*>\n(.*?)\n</session_[^>]*>", re.S)
_DATE = re.compile(r"^\[[^\]]*\]\s*")


def existing_memories(text: str) -> list[tuple[str, str]]:
    """``(id, content)`` of each ``<instance ...>`` trustcall shows the model."""
    out = []
    for doc_id, _kind, body in _INSTANCE.findall(text):
        try:
            value = ast.literal_eval(body.strip())
        except (ValueError, SyntaxError):
            value = body
        content = value.get("content", body) if isinstance(value, dict) else value
        out.append((doc_id, str(content)))
    return out


def session_user_sentences(text: str) -> list[str]:
    """The user's sentences in LangMem's ``<session_...>`` block (dates in front dropped)."""
    session = _SESSION.search(text)
    lines = []
    for speaker, body in _MESSAGE.findall(session.group(1) if session else text):
        if speaker == "Human":
            lines.append("Human: " + _DATE.sub("", body.strip()).replace("\n", " "))
    return [t for s, t in speaker_sentences("\n".join(lines)) if s == "Human"]


class LangMemScript(RuleScript):
    """The module docstring's rules."""

    name = "langmem"
    idle = "No memories to form."

    def recognises(self, request: Request) -> bool:
        return bool(TOOLS & set(request.tools))

    def calls(self, request: Request, settings: RuleSettings) -> list[dict[str, Any]]:
        prompt = request.prompt
        return langmem_calls(
            session_user_sentences(prompt), existing_memories(prompt), request.tools, settings
        )


def langmem_calls(
    sentences: list[str],
    existing: list[tuple[str, str]],
    bound: tuple[str, ...],
    settings: RuleSettings,
) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    held = {content for _, content in existing}
    known = list(existing)

    def call(name: str, **args: Any) -> None:
        if name in bound:
            numbered(calls, name, **args)

    for sentence in sentences:
        if not re.search(FIRST_PERSON, sentence, re.I) or sentence in held:
            continue
        if not personal_fact(sentence, settings.min_fact_score):
            continue
        old = stored_key(sentence, known)
        if old is not None and RETRACT.search(sentence):
            call("RemoveDoc", json_doc_id=old)
        elif old is not None:
            call(
                "PatchDoc",
                json_doc_id=old,
                planned_edits="replace /content with the user's newer statement",
                patches=[{"op": "replace", "path": "/content", "value": sentence}],
            )
        else:
            call("Memory", content=sentence)
        if old is not None:
            known = [(k, v) for k, v in known if k != old]
        held.add(sentence)
    return calls
