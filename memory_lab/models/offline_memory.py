"""The offline memory model: the LLM inside memories, deterministic, for any memory prompt.

It serves LangChain's summary prompt (previous summary + new lines -> extractive summary, as the
offline summarizer always has), the entity-extraction, entity-summary and knowledge-triple
prompts of LangChain's entity and knowledge-graph memories (``langchain_prompts``), the task
prompts of ``memory_lab.models.tasks`` (summarise, extract facts as JSON for a schema, score
importance), and tool calls chosen by a declared rule
script when tools are bound. Any other prompt gets an extractive summary of its conversation
lines, so it never raises on an unfamiliar prompt; a request it cannot serve (a tool rule naming
a tool that was not bound) fails with one error naming the memory and the task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.outputs import ChatResult

from memory_lab.models.langchain_prompts import langchain_memory_reply
from memory_lab.models.offline_base import chat_result
from memory_lab.models.offline_summarizer import (
    OfflineSummarizer,
    informativeness,
    parse_summary_prompt,
    speaker_sentences,
)
from memory_lab.models.tasks import known_facts, parse_json_reply, section, task_of
from memory_lab.normalize import normalize

_WORD = re.compile(r"\w+", re.UNICODE)
_PREFERENCE = re.compile(
    r"\b(love|like|prefer|favou?rite|enjoy|hate|dislike|can't stand|allergic)\b|"
    r"좋아|선호|싫어|알레르기",
    re.I,
)
_FUNCTION_WORDS = frozenset(
    "i i'm im my me we our you your a an the is am are was were be to of in on at for and or but"
    " so it this that just really very".split()
)


class OfflineMemoryError(ValueError):
    """A request the offline memory model cannot serve, naming the memory and the task."""


@dataclass(frozen=True)
class ToolRule:
    """Call ``tool`` for every user sentence matching ``pattern``.

    ``args`` maps each argument name to a template: ``{sentence}`` is the matching sentence,
    ``{match}`` the matched text, ``{query}`` the user's whole message.
    """

    tool: str
    pattern: str
    args: tuple[tuple[str, str], ...] = (("content", "{sentence}"),)


class OfflineMemoryModel(OfflineSummarizer):
    """Deterministic memory LLM: summaries, JSON extraction, importance and rule tool calls."""

    memory_name: str = ""
    min_fact_score: float = 2.0
    tool_rules: tuple[ToolRule, ...] = ()
    bound_tools: tuple[str, ...] = ()

    @property
    def _llm_type(self) -> str:
        return "memory-lab-offline-memory-model"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model": "offline-memory-model",
            "budget_tokens": self.budget_tokens,
            "min_fact_score": self.min_fact_score,
            "tool_rules": [r.__dict__ for r in self.tool_rules],
        }

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineMemoryModel:
        """A copy that may call ``tools`` (by name), as a real model with ``bind_tools``."""
        names = tuple(_tool_name(t) for t in tools)
        return self.model_copy(update={"bound_tools": names})

    def _fail(self, task: str, why: str) -> OfflineMemoryError:
        who = f"memory '{self.memory_name}'" if self.memory_name else "a memory"
        return OfflineMemoryError(f"offline memory model cannot serve {who}: task {task}: {why}")

    # ------------------------------------------------------------------ text replies

    def respond(self, prompt: str) -> str:
        task = task_of(prompt)
        if task == "summarize":
            previous = section(prompt, "Previous summary:", "New lines:")
            lines = section(prompt, "New lines:", "\nSummary:")
            return self.summarize("" if previous == "(none)" else previous, lines)
        if task == "extract":
            return json.dumps(self.extract(prompt), ensure_ascii=False)
        if task == "importance":
            return str(self.importance(section(prompt, "Memory:", "\nImportance:")))
        if task is not None:
            raise self._fail(task, "unknown task tag (known: summarize, extract, importance)")
        reply = langchain_memory_reply(prompt)
        if reply is not None:
            return reply
        try:
            return self.summarize(*parse_summary_prompt(prompt))
        except ValueError:  # an unfamiliar prompt: summarise whatever conversation it holds
            return self.summarize("", prompt)

    def importance(self, text: str) -> int:
        """1..10 from how much durable information the text carries."""
        items = speaker_sentences(text)
        best = max((informativeness(s, t) for s, t in items), default=0.0)
        return max(1, min(10, round(1 + best * 1.5)))

    def extract(self, prompt: str) -> Any:
        """Facts from the user's informative sentences, shaped by the prompt's JSON schema.

        A user sentence is a fact when ``informativeness`` reaches ``min_fact_score`` or it
        states a preference (like, love, prefer, ...; 좋아, 선호, ...), which is its kind then.
        A fact that restates one of the prompt's ``Known facts`` takes its key (``stored_key``).
        """
        try:
            schema = parse_json_reply(section(prompt, "JSON schema:", "\n\n"))
        except ValueError as exc:
            raise self._fail(
                "extract", f"the prompt's JSON schema does not parse ({exc})"
            ) from None
        conversation = section(prompt, "Conversation:", "\nJSON:")
        known = known_facts(prompt)
        facts = [
            {"key": stored_key(text, known) or fact_key(text), "value": text, "kind": _kind(text)}
            for speaker, text in speaker_sentences(conversation)
            if speaker == "Human"
            and (informativeness(speaker, text) >= self.min_fact_score or _PREFERENCE.search(text))
        ]
        return _shape(schema, facts, conversation)

    # ------------------------------------------------------------------ tool calls

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if not self.bound_tools:
            return super()._generate(messages, stop, run_manager, **kwargs)
        prompt = "\n".join(str(m.content) for m in messages)
        calls = (
            []
            if messages and isinstance(messages[-1], ToolMessage)
            else self.tool_calls(_last_human(messages))
        )
        reply = "" if calls else "No memory tools needed."
        billed = reply + json.dumps(calls, ensure_ascii=False)
        return chat_result(prompt, reply, billed, tool_calls=calls)

    def tool_calls(self, text: str) -> list[dict[str, Any]]:
        """The calls the rule script makes for the user's message, in rule then sentence order."""
        calls = []
        sentences = [t for s, t in speaker_sentences(text) if s == "Human"] or [text]
        for rule in self.tool_rules:
            if rule.tool not in self.bound_tools:
                raise self._fail(
                    "tool call",
                    f"rule calls {rule.tool!r}, which was not bound "
                    f"(bound: {', '.join(self.bound_tools)})",
                )
            for sentence in sentences:
                match = re.search(rule.pattern, sentence, re.I)
                if match:
                    values = {"sentence": sentence, "match": match.group(0), "query": text}
                    args = {k: v.format(**values) for k, v in rule.args}
                    calls.append({"name": rule.tool, "args": args, "id": f"call_{len(calls)}"})
        return calls


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        return str(tool.get("name") or tool.get("function", {}).get("name"))
    return str(getattr(tool, "name", getattr(tool, "__name__", tool)))


def _last_human(messages: list[BaseMessage]) -> str:
    for message in reversed(messages):
        if message.type == "human":
            return str(message.content)
    return str(messages[-1].content) if messages else ""


def _kind(text: str) -> str:
    return "preference" if _PREFERENCE.search(text) else "fact"


def fact_key(text: str) -> str:
    """A short key for a fact: its first three content words, normalised."""
    words = [w for w in _WORD.findall(normalize(text)) if w not in _FUNCTION_WORDS]
    return "_".join(words[:3]) or "fact"


def content_words(text: str) -> set[str]:
    """The normalised words of ``text`` that are not function words."""
    return {w for w in _WORD.findall(normalize(text)) if w not in _FUNCTION_WORDS}


def stored_key(text: str, known: list[tuple[str, str]]) -> str | None:
    """The key of the stored fact ``text`` restates with a new value, or None.

    Restating: at least two content words in common, and at least 60% of the smaller fact's
    content words (``I prefer aisle seats on flights`` -> ``I now prefer window seats on
    flights``). The most overlapping stored fact wins; ties go to the one listed first.
    """
    words = content_words(text)
    best, best_shared = None, 0
    for key, value in known:
        old = content_words(value)
        shared = len(words & old)
        if shared >= 2 and shared >= 0.6 * min(len(words), len(old)) and shared > best_shared:
            best, best_shared = key, shared
    return best


def _shape(schema: Any, facts: list[dict[str, str]], conversation: str) -> Any:
    """Fit the facts to the schema: a facts list, a list property, or named fields."""
    if not isinstance(schema, dict):
        return {"facts": facts}
    if schema.get("type") == "array":
        return facts
    props = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for name, prop in props.items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        if (
            kind == "array"
            and isinstance(prop.get("items"), dict)
            and (prop["items"].get("type") == "object")
        ):
            out[name] = facts
        else:
            out[name] = _field_value(name, prop if isinstance(prop, dict) else {}, facts, kind)
    return out


def _field_value(name: str, prop: dict[str, Any], facts: list[dict[str, str]], kind: Any) -> Any:
    """The fact sharing most words with the field's name and description, or None/[]."""
    wanted = set(
        _WORD.findall(normalize(f"{name.replace('_', ' ')} {prop.get('description', '')}"))
    )
    wanted -= _FUNCTION_WORDS
    best, best_overlap = None, 0
    for fact in facts:
        overlap = len(wanted & set(_WORD.findall(normalize(fact["value"]))))
        if overlap > best_overlap:
            best, best_overlap = fact["value"], overlap
    if kind == "array":
        return [best] if best else []
    return best
