"""Prompts for the jobs memories give their LLM: summarise, extract as JSON, score importance.

Each prompt is plain instructions any chat model follows, opened by a one-line task tag
(``[memory-lab task: NAME]``) so the offline memory model knows which job it is given without
guessing. Memories build their prompts here and parse replies with ``parse_json_reply``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

TASK_TAG = "[memory-lab task: {name}]"
KNOWN_FACTS = "Known facts:"
_TAG = re.compile(r"^\s*\[memory-lab task: ([a-z_]+)\]", re.M)

FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "key": {"type": "string", "description": "a short stable name for the fact"},
                    "value": {"type": "string", "description": "what is true now"},
                    "kind": {"type": "string", "enum": ["fact", "preference"]},
                },
                "required": ["key", "value", "kind"],
            },
        }
    },
    "required": ["facts"],
}


def task_of(prompt: str) -> str | None:
    """The task tag a prompt opens with, or None."""
    match = _TAG.search(prompt)
    return match.group(1) if match else None


def summarize_prompt(transcript: str, previous: str = "", sentences: str = "3-5") -> str:
    """Ask for a running summary of ``previous`` summary plus the new ``transcript`` lines."""
    return (
        f"{TASK_TAG.format(name='summarize')}\n"
        f"Update the summary of a conversation in {sentences} sentences. Keep names, numbers, "
        "dates and the user's facts and preferences; when a fact changed, keep only the new "
        "value.\n\n"
        f"Previous summary:\n{previous or '(none)'}\n\n"
        f"New lines:\n{transcript}\n\n"
        "Summary:"
    )


def extract_prompt(
    transcript: str,
    schema: dict[str, Any] | None = None,
    known: Sequence[tuple[str, str]] = (),
) -> str:
    """Ask for the facts and preferences in ``transcript`` as JSON matching ``schema``.

    ``known`` (key, value) pairs are facts already stored: the model is asked to reuse a key
    when the conversation changes that fact, so the new value replaces the old one.
    """
    schema = schema or FACTS_SCHEMA
    stored = ""
    if known:
        lines = "\n".join(f"- {key}: {value}" for key, value in known)
        stored = (
            "When the conversation changes one of these stored facts, give the new value under "
            f"the same key.\n{KNOWN_FACTS}\n{lines}\n\n"
        )
    return (
        f"{TASK_TAG.format(name='extract')}\n"
        "Extract the durable facts and preferences the user states in the conversation below. "
        "Reply with JSON only, matching this JSON schema:\n"
        f"JSON schema: {json.dumps(schema, ensure_ascii=False)}\n\n"
        f"{stored}"
        f"Conversation:\n{transcript}\n\n"
        "JSON:"
    )


def known_facts(prompt: str) -> list[tuple[str, str]]:
    """The (key, value) pairs listed under ``Known facts:`` in an extract prompt."""
    if KNOWN_FACTS not in prompt:
        return []
    out = []
    for line in section(prompt, KNOWN_FACTS, "\n\n").splitlines():
        key, sep, value = line.strip().removeprefix("- ").partition(": ")
        if sep and key.strip():
            out.append((key.strip(), value.strip()))
    return out


def importance_prompt(text: str) -> str:
    """Ask how important a memory is to keep, from 1 (trivial) to 10 (essential)."""
    return (
        f"{TASK_TAG.format(name='importance')}\n"
        "On a scale of 1 (small talk) to 10 (an essential fact about the user), how important is "
        "it to remember the following? Reply with one integer only.\n\n"
        f"Memory:\n{text}\n\n"
        "Importance:"
    )


def section(prompt: str, header: str, end: str) -> str:
    """The text between ``header`` and the next ``end`` marker (ValueError when absent)."""
    start = prompt.find(header)
    if start == -1:
        raise ValueError(f"prompt lacks {header!r}")
    start += len(header)
    stop = prompt.find(end, start)
    return prompt[start : stop if stop != -1 else len(prompt)].strip()


def parse_json_reply(text: str) -> Any:
    """The JSON value in a model's reply (tolerates code fences and text around it)."""
    cleaned = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip(), flags=re.S)
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError:
        start = min((i for i in (cleaned.find("{"), cleaned.find("[")) if i != -1), default=-1)
        if start == -1:
            raise ValueError(f"reply holds no JSON: {text[:200]!r}") from None
        end = max(cleaned.rfind("}"), cleaned.rfind("]"))
        return json.loads(cleaned[start : end + 1])


def parse_importance(text: str) -> int:
    """The 1..10 integer in an importance reply (5 when none is found)."""
    match = re.search(r"\d+", text)
    return max(1, min(10, int(match.group()))) if match else 5
