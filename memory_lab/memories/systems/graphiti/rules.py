"""Graphiti's rule script: recognised by the JSON schema Graphiti appends to its prompts.

Graphiti's ``LLMClient`` ends every structured call with ``Respond with a JSON object in the
following format:`` and the response model's JSON schema; the schema's title says which step of
Graphiti's pipeline asks. Each is answered from the prompt's own tagged sections, by rule:

- ``ExtractedEntities`` (entity extraction, ``<CURRENT MESSAGE>``): the speaker ``User``, then
  one entity per user sentence that states a fact (first person, and a durable fact or a
  preference, as for mem0 and MemGPT): its topic, the sentence's first run of capitalised words
  after its first word (a name: ``Lisbon``, ``Blue Bottle``), else its first three content words;
- ``ExtractedEdges`` (fact extraction): for each such sentence whose topic is among the
  ``<ENTITIES>``, the fact ``User -> RELATION -> topic``, the sentence itself as the fact, the
  relation its first content word in capitals, ``valid_at`` the ``<REFERENCE_TIME>``;
- ``EdgeTimestamps``: ``valid_at`` the reference time, no ``invalid_at``;
- ``NodeResolutions`` (entity resolution): an extracted entity duplicates the existing one of
  the same name (case and spacing aside), else none;
- ``EdgeDuplicate`` (deduplication and invalidation): an existing fact of the same text is a
  duplicate; a fact the new one restates with another value (two or more shared content words
  and at least 60% of the smaller's, the rule mem0's, LangMem's and MemGPT's scripts share) is
  contradicted, so Graphiti invalidates it;
- ``SummarizedEntities``, ``EntitySummary``, ``Summary`` (entity summaries): each entity's
  summary as the prompt shows it, cut to its newest lines within Graphiti's 1000 characters.

A schema this script has no rule for fails with an error naming it.
"""

from __future__ import annotations

import ast
import json
import re
from datetime import datetime
from typing import Any

from langchain_core.outputs import ChatResult

from memory_lab.errors import BadInput
from memory_lab.models.offline_base import chat_result
from memory_lab.models.offline_rules.base import Request, RuleScript, RuleSettings
from memory_lab.models.offline_rules.facts import (
    USER,
    fact_sentences,
    relation,
    stored_key,
    topic,
)
from memory_lab.text.normalize import normalize

SCHEMA_MARK = "Respond with a JSON object in the following format:"
SUMMARY_CHARS = 1000  # Graphiti's MAX_SUMMARY_CHARS
_SCHEMA = re.compile(re.escape(SCHEMA_MARK) + r"\s*(\{.*\})\s*$", re.S)


class GraphitiRuleError(BadInput):
    """A Graphiti call the script has no rule for."""


def schema_title(text: str) -> str | None:
    """The title of the JSON schema Graphiti appended to the prompt, or None."""
    match = _SCHEMA.search(text)
    if not match:
        return None
    try:
        return str(json.loads(match.group(1)).get("title") or "")
    except json.JSONDecodeError:
        return None


def tagged(text: str, tag: str) -> str:
    """The body of ``<TAG> ... </TAG>`` in the prompt (the last one), or ''."""
    found = re.findall(rf"<{re.escape(tag)}>\n?(.*?)\n?</{re.escape(tag)}>", text, re.S)
    return found[-1].strip() if found else ""


def _listed(body: str) -> list[Any]:
    """A list Graphiti put in a section, as JSON or as Python's repr."""
    if not body:
        return []
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        try:
            value = ast.literal_eval(body)
        except (ValueError, SyntaxError):
            return []
    return value if isinstance(value, list) else []


def iso_z(text: str) -> str | None:
    """A reference time as Graphiti shows it, in ISO 8601 with a Z suffix."""
    text = text.split("#", 1)[0].strip()
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _same_name(a: str, b: str) -> bool:
    return " ".join(normalize(a).split()) == " ".join(normalize(b).split())


def newest_lines(summary: str, limit: int = SUMMARY_CHARS) -> str:
    """The summary's newest lines that fit within ``limit`` characters, oldest first."""
    kept: list[str] = []
    size = 0
    for line in reversed([x for x in summary.splitlines() if x.strip()]):
        if kept and size + len(line) + 1 > limit:
            break
        kept.append(line[:limit])
        size += len(line) + 1
    return "\n".join(reversed(kept))


# ------------------------------------------------------------------------------ the rules


def extracted_entities(prompt: str, settings: RuleSettings) -> dict[str, Any]:
    message = tagged(prompt, "CURRENT MESSAGE")
    names: list[str] = [USER] if re.search(rf"^{USER}:", message, re.M) else []
    for sentence in fact_sentences(message, settings):
        name = topic(sentence)
        if not any(_same_name(name, n) for n in names):
            names.append(name)
    return {
        "extracted_entities": [
            {"name": n, "entity_type_id": 0, "episode_indices": [0]} for n in names
        ]
    }


def extracted_edges(prompt: str, settings: RuleSettings) -> dict[str, Any]:
    message = tagged(prompt, "CURRENT_MESSAGE")
    listed = [str(e.get("name", "")) for e in _listed(tagged(prompt, "ENTITIES")) if e]
    when = iso_z(tagged(prompt, "REFERENCE_TIME"))
    user = next((n for n in listed if _same_name(n, USER)), None)
    edges = []
    for sentence in fact_sentences(message, settings):
        target = next((n for n in listed if _same_name(n, topic(sentence))), None)
        if user is None or target is None or target == user:
            continue
        edges.append(
            {
                "source_entity_name": user,
                "target_entity_name": target,
                "relation_type": relation(sentence),
                "fact": sentence,
                "valid_at": when,
                "invalid_at": None,
                "episode_indices": [0],
            }
        )
    return {"edges": edges}


def edge_timestamps(prompt: str, settings: RuleSettings) -> dict[str, Any]:
    return {"valid_at": iso_z(tagged(prompt, "REFERENCE TIME")), "invalid_at": None}


def node_resolutions(prompt: str, settings: RuleSettings) -> dict[str, Any]:
    extracted = _listed(tagged(prompt, "ENTITIES"))
    existing = _listed(tagged(prompt, "EXISTING ENTITIES"))
    out = []
    for entity in extracted:
        name = str(entity.get("name", ""))
        match = next((c for c in existing if _same_name(str(c.get("name", "")), name)), None)
        out.append(
            {
                "id": int(entity.get("id", len(out))),
                "name": name,
                "duplicate_candidate_id": int(match["candidate_id"]) if match else -1,
            }
        )
    return {"entity_resolutions": out}


def edge_duplicate(prompt: str, settings: RuleSettings) -> dict[str, Any]:
    new = tagged(prompt, "NEW FACT")
    existing = _listed(tagged(prompt, "EXISTING FACTS"))
    candidates = _listed(tagged(prompt, "FACT INVALIDATION CANDIDATES"))
    duplicates = [int(f["idx"]) for f in existing if _same_name(str(f.get("fact", "")), new)]
    contradicted = [
        int(f["idx"])
        for f in existing + candidates
        if not _same_name(str(f.get("fact", "")), new)
        and stored_key(new, [(str(f["idx"]), str(f.get("fact", "")))]) is not None
    ]
    return {"duplicate_facts": duplicates, "contradicted_facts": contradicted}


def summarized_entities(prompt: str, settings: RuleSettings) -> dict[str, Any]:
    entities = _listed(tagged(prompt, "ENTITIES"))
    return {
        "summaries": [
            {"name": str(e.get("name", "")), "summary": newest_lines(str(e.get("summary") or ""))}
            for e in entities
            if isinstance(e, dict) and e.get("name")
        ]
    }


def entity_summary(prompt: str, settings: RuleSettings) -> dict[str, Any]:
    entity = tagged(prompt, "ENTITY")
    try:
        value = json.loads(entity)
    except json.JSONDecodeError:
        value = {}
    summary = str(value.get("summary") or "") if isinstance(value, dict) else ""
    return {"summary": newest_lines(summary)}


RULES = {
    "ExtractedEntities": extracted_entities,
    "ExtractedEdges": extracted_edges,
    "EdgeTimestamps": edge_timestamps,
    "NodeResolutions": node_resolutions,
    "EdgeDuplicate": edge_duplicate,
    "SummarizedEntities": summarized_entities,
    "EntitySummary": entity_summary,
    "Summary": entity_summary,
}


class GraphitiScript(RuleScript):
    """The module docstring's rules, answered in text (Graphiti parses the JSON)."""

    name = "graphiti"

    def recognises(self, request: Request) -> bool:
        return (
            bool(request.messages) and schema_title(str(request.messages[-1].content)) is not None
        )

    def answer(self, request: Request, settings: RuleSettings) -> ChatResult:
        prompt = request.prompt
        title = schema_title(str(request.messages[-1].content)) or ""
        rule = RULES.get(title)
        if rule is None:
            raise GraphitiRuleError(
                f"offline memory model cannot serve memory 'graphiti': no rule for Graphiti's "
                f"response schema {title!r} (rules: {', '.join(RULES)})"
            )
        return chat_result(prompt, json.dumps(rule(prompt, settings), ensure_ascii=False))
