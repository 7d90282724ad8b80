"""Cognee's rule script: recognised by the JSON schema Cognee appends to its prompts.

Cognee's ``litellm_native`` adapter, on its JSON path, ends the system prompt of every
structured call with ``You MUST respond with valid JSON conforming to this schema:`` and the
response model's JSON schema in a fenced block; its title says which step of ``cognify`` asks.
The chunk is the user message. Each is answered from it, by rule:

- ``KnowledgeGraph`` (graph extraction): for each user sentence that states a fact about the
  user (first person, and a durable fact or a preference, as for mem0, Graphiti and Hindsight),
  the node ``user`` (a person) and a node for the sentence's topic (its first name after the
  first word, else three content words, as for Graphiti), the sentence its description, joined
  by the edge ``user -> RELATION -> topic`` (the relation its first content word, lower case),
  the sentence the edge's description; no fact, no nodes;
- ``SummarizedContent`` (chunk summaries): a leading sentence, then the chunk's facts as a
  bulleted list (none: the user's first sentence).

A schema this script has no rule for fails with an error naming it.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.outputs import ChatResult

from memory_lab.errors import BadInput
from memory_lab.models.offline_base import chat_result
from memory_lab.models.offline_rules.base import Request, RuleScript, RuleSettings
from memory_lab.models.offline_rules.facts import fact_sentences, relation, topic, user_sentences

SCHEMA_MARK = "You MUST respond with valid JSON conforming to this schema:\n```json\n"
USER_NODE = {"id": "user", "name": "user", "type": "Person", "description": "The user."}


class CogneeRuleError(BadInput):
    """A Cognee call the script has no rule for."""


def schema_title(text: str) -> str | None:
    """The title of the JSON schema Cognee appended to ``text``, or None."""
    at = text.rfind(SCHEMA_MARK)
    if at < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[at + len(SCHEMA_MARK) :])
    except json.JSONDecodeError:
        return None
    return str(value.get("title") or "") if isinstance(value, dict) else None


def knowledge_graph(chunk: str, settings: RuleSettings) -> dict[str, Any]:
    nodes: dict[str, dict[str, Any]] = {}
    edges: list[dict[str, Any]] = []
    for sentence in fact_sentences(chunk, settings):
        name = topic(sentence)
        nodes.setdefault("user", USER_NODE)
        nodes.setdefault(
            name.lower(), {"id": name, "name": name, "type": "Topic", "description": sentence}
        )
        edges.append(
            {
                "source_node_id": "user",
                "target_node_id": nodes[name.lower()]["id"],
                "relationship_name": relation(sentence).lower(),
                "description": sentence,
            }
        )
    return {"nodes": list(nodes.values()), "edges": edges}


def summarized(chunk: str, settings: RuleSettings) -> dict[str, Any]:
    facts = fact_sentences(chunk, settings) or user_sentences(chunk)[:1]
    if not facts:
        return {"summary": "A conversation turn with no statement by the user.", "description": ""}
    bullets = "\n".join(f"- {f}" for f in facts)
    return {"summary": f"What the user said in a conversation.\n{bullets}", "description": ""}


RULES = {"KnowledgeGraph": knowledge_graph, "SummarizedContent": summarized}


class CogneeScript(RuleScript):
    """The module docstring's rules, answered in text (Cognee validates the JSON)."""

    name = "cognee"

    def recognises(self, request: Request) -> bool:
        return bool(request.messages) and schema_title(str(request.messages[0].content)) is not None

    def answer(self, request: Request, settings: RuleSettings) -> ChatResult:
        title = schema_title(str(request.messages[0].content)) or ""
        rule = RULES.get(title)
        if rule is None:
            raise CogneeRuleError(
                f"offline memory model cannot serve memory 'cognee': no rule for Cognee's "
                f"response schema {title!r} (rules: {', '.join(RULES)})"
            )
        reply = rule(request.last_human(), settings)
        return chat_result(request.prompt, json.dumps(reply, ensure_ascii=False))
