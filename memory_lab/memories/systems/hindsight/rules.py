"""Hindsight's rule script: recognised by the JSON schema Hindsight appends to its prompts.

Hindsight's OpenAI-compatible provider ends the system message of every structured call with
``You must respond with valid JSON matching this schema:`` and the response model's JSON
schema; its title says which step asks. Each is answered from the prompt, by rule:

- ``FactExtractionResponse`` (retain's fact extraction, the exchange under ``Content:``): one
  fact per user sentence that states a fact about the user (first person, and a durable fact or
  a preference, as for mem0, Graphiti and MemGPT), the sentence itself as ``what``, ``who`` the
  user, a ``conversation`` fact of type ``world`` (no event dates), its entities ``user`` and the
  sentence's topic (its first name after the first word, else three content words, as for
  Graphiti);
- ``_ConstrainedConsolidationBatchResponse`` / ``_ConsolidationBatchResponse`` (consolidation
  into observations): each new fact updates the existing observation it restates (the same
  text, or the same facet with another value: two or more shared content words and at least
  60% of the smaller's, the rule the other scripts share), its text becoming the fact's, and
  otherwise creates an observation of its own; a fact restating one created earlier in the
  batch joins it. Nothing is deleted.
- ``_DedupDecision`` (consolidation's 1-by-1 check of a new observation against the nearest
  existing one, ``[NEW]`` and ``[EXISTING]``; Hindsight asks it once its bank holds an
  observation above its similarity threshold): ``merge`` when the two assert the same fact
  wording aside (the same content words), the longer text kept; otherwise ``keep``, as its
  prompt asks for any differing detail.

A schema this script has no rule for fails with an error naming it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.outputs import ChatResult

from memory_lab.errors import BadInput
from memory_lab.models.offline_base import chat_result
from memory_lab.models.offline_rules.base import Request, RuleScript, RuleSettings
from memory_lab.models.offline_rules.facts import fact_sentences, stored_key, topic
from memory_lab.text.analysis import content_words

SCHEMA_MARK = "You must respond with valid JSON matching this schema:"
_NEW_FACT = re.compile(r"^\[([0-9a-fA-F-]{36})\]\s*(.*)$")
_FACT_META = re.compile(r"\s*\((?:occurred_start|occurred_end|mentioned_at)=[^)]*\)\s*$")


class HindsightRuleError(BadInput):
    """A Hindsight call the script has no rule for."""


def schema_title(text: str) -> str | None:
    """The title of the JSON schema Hindsight appended to ``text``, or None."""
    at = text.rfind(SCHEMA_MARK)
    if at < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[at + len(SCHEMA_MARK) :].lstrip())
    except json.JSONDecodeError:
        return None
    return str(value.get("title") or "") if isinstance(value, dict) else None


def section(text: str, head: str, until: tuple[str, ...]) -> str:
    """The text after the last ``head`` up to the first of ``until`` (or the end)."""
    at = text.rfind(head)
    if at < 0:
        return ""
    body = text[at + len(head) :]
    ends = [i for i in (body.find(u) for u in until) if i >= 0]
    return body[: min(ends)] if ends else body


def fact_text(line: str) -> str:
    """A new fact's text as Hindsight lists it, without its ``| Involving:`` label and its
    temporal fields."""
    text = _FACT_META.sub("", line)
    return text.split(" | ", 1)[0].strip()


# ------------------------------------------------------------------------------ the rules


def extracted_facts(prompt: str, settings: RuleSettings) -> dict[str, Any]:
    content = section(prompt, "\nContent:\n", ("\n\nYou must respond",))
    return {
        "facts": [
            {
                "what": sentence,
                "when": "N/A",
                "where": "N/A",
                "who": "user",
                "why": "N/A",
                "fact_kind": "conversation",
                "fact_type": "world",
                "entities": ["user", topic(sentence)],
            }
            for sentence in fact_sentences(content, settings)
        ]
    }


def consolidated(prompt: str, settings: RuleSettings) -> dict[str, Any]:
    facts_body = section(prompt, "### New facts", ("### Existing observations",))
    observations_body = section(prompt, "### Existing observations", ("\n## ", "\n### ")).strip()
    try:
        shown = json.loads(observations_body or "[]")
    except json.JSONDecodeError:
        shown = []
    existing = [(str(o["id"]), str(o.get("text", ""))) for o in shown if isinstance(o, dict)]
    updates: dict[str, dict[str, Any]] = {}
    creates: list[dict[str, Any]] = []
    for line in facts_body.splitlines():
        match = _NEW_FACT.match(line.strip())
        if not match:
            continue
        fact_id, text = match.group(1), fact_text(match.group(2))
        same = next((oid for oid, old in existing if old == text), None)
        target = same or stored_key(text, existing)
        if target is not None:
            update = updates.setdefault(
                target,
                {
                    "observation_id": target,
                    "current_text": dict(existing)[target],
                    "text": text,
                    "source_fact_ids": [],
                    "reason": "the fact restates this observation's facet",
                },
            )
            update["text"] = text
            update["source_fact_ids"].append(fact_id)
            continue
        made = stored_key(text, [(str(i), c["text"]) for i, c in enumerate(creates)])
        if made is not None:
            creates[int(made)]["text"] = text
            creates[int(made)]["source_fact_ids"].append(fact_id)
            continue
        creates.append(
            {
                "text": text,
                "source_fact_ids": [fact_id],
                "reason": "no existing observation covers this facet",
            }
        )
    return {"creates": creates, "updates": list(updates.values()), "deletes": []}


def dedup_decision(prompt: str, settings: RuleSettings) -> dict[str, Any]:
    new = section(prompt, "[NEW] ", ("\n[EXISTING] ",)).strip()
    existing = section(prompt, "[EXISTING] ", ("\n\nRespond with ONLY",)).strip()
    if new and existing and content_words(new) == content_words(existing):
        return {
            "action": "merge",
            "text": max((existing, new), key=len),
            "reason": "the two assert the same fact, wording aside",
        }
    return {"action": "keep", "text": "", "reason": "they differ in a detail"}


RULES = {
    "FactExtractionResponse": extracted_facts,
    "_ConstrainedConsolidationBatchResponse": consolidated,
    "_ConsolidationBatchResponse": consolidated,
    "_DedupDecision": dedup_decision,
}


class HindsightScript(RuleScript):
    """The module docstring's rules, answered in text (Hindsight parses the JSON)."""

    name = "hindsight"

    def recognises(self, request: Request) -> bool:
        return bool(request.messages) and schema_title(str(request.messages[0].content)) is not None

    def answer(self, request: Request, settings: RuleSettings) -> ChatResult:
        prompt = request.prompt
        title = schema_title(str(request.messages[0].content)) or ""
        rule = RULES.get(title)
        if rule is None:
            raise HindsightRuleError(
                f"offline memory model cannot serve memory 'hindsight': no rule for Hindsight's "
                f"response schema {title!r} (rules: {', '.join(RULES)})"
            )
        return chat_result(prompt, json.dumps(rule(prompt, settings), ensure_ascii=False))
