"""The offline memory model (``offline:memory``): the LLM inside memories, deterministic.

It is an ordinary LangChain chat model: memories call ``invoke``, ``bind_tools`` and
``with_structured_output`` on it as on any provider's. It serves LangChain's summary prompt
(previous summary + new lines -> extractive summary, as the offline summarizer always has), the
entity-extraction, entity-summary and knowledge-triple prompts of LangChain's entity and
knowledge-graph memories (``langchain_prompts``), the task prompts of ``memory_lab.models.tasks``
(summarise, extract facts as JSON for a schema, score importance), and structured output (the
facts of the prompt fitted to the schema asked for, as JSON, parsed into it).

With tools bound it calls them by rule: the ``tool_rules`` declared on the model, else the rule
script of a memory system it recognises from the request (MemGPT's, LangMem's and mem0's, in
``memory_lab.models.offline_rules``), else none. Any other prompt gets an extractive summary of
its conversation lines, so it never raises on an unfamiliar prompt; a request it cannot serve (a
tool rule naming a tool that was not bound) fails with one error naming the memory and the task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.utils.function_calling import convert_to_json_schema, convert_to_openai_tool
from pydantic import BaseModel

from memory_lab.errors import BadInput
from memory_lab.models.langchain_prompts import langchain_memory_reply
from memory_lab.models.offline_base import chat_result
from memory_lab.models.offline_rules import (
    Request,
    RuleScript,
    RuleSettings,
    numbered,
    recognised,
)
from memory_lab.models.offline_rules.facts import PREFERENCE, stored_key
from memory_lab.models.offline_summarizer import (
    OfflineSummarizer,
    informativeness,
    parse_summary_prompt,
    speaker_sentences,
)
from memory_lab.models.tasks import known_facts, parse_json_reply, section, task_of
from memory_lab.text.analysis import FUNCTION_WORDS, WORD
from memory_lab.text.normalize import normalize


class OfflineMemoryError(BadInput):
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


@dataclass(frozen=True)
class DeclaredRules(RuleScript):
    """A model's own ``tool_rules`` (none: a reply without tool calls), by its ``tool_calls``."""

    tool_calls: Callable[[str, tuple[str, ...]], list[dict[str, Any]]]
    name = "declared tool rules"

    def recognises(self, request: Request) -> bool:
        return bool(request.tools)

    def calls(self, request: Request, settings: RuleSettings) -> list[dict[str, Any]]:
        return self.tool_calls(request.last_human(), request.tools)


class OfflineMemoryModel(OfflineSummarizer):
    """Deterministic memory LLM: summaries, JSON extraction, importance and rule tool calls."""

    memory_name: str = ""
    min_fact_score: float = 2.0
    tool_rules: tuple[ToolRule, ...] = ()

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

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable:
        """The model with ``tools`` bound (their OpenAI schemas), as a provider's model binds
        them: the tools reach each call as its ``tools`` argument."""
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable:
        """Replies parsed into ``schema`` (a pydantic class, else JSON): the model answers the
        prompt with JSON, for the schema it is given (``structured_output``)."""
        wanted = convert_to_json_schema(schema)
        is_model = isinstance(schema, type) and issubclass(schema, BaseModel)

        def parse(message: Any) -> Any:
            data = parse_json_reply(str(message.content))
            return schema.model_validate(data) if is_model else data

        def parse_with_raw(message: Any) -> dict[str, Any]:
            try:
                return {"raw": message, "parsed": parse(message), "parsing_error": None}
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                return {"raw": message, "parsed": None, "parsing_error": exc}

        return self.bind(structured_output=wanted) | RunnableLambda(
            parse_with_raw if include_raw else parse
        )

    def _fail(self, task: str, why: str) -> OfflineMemoryError:
        who = f"memory '{self.memory_name}'" if self.memory_name else "a memory"
        return OfflineMemoryError(f"offline memory model cannot serve {who}: task {task}: {why}")

    # ------------------------------------------------------------------ a call

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        structured_output: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        request = Request(list(messages), tuple(t["function"]["name"] for t in tools or ()))
        script = self.script_for(request)
        if script is not None:
            return script.answer(request, RuleSettings(self.min_fact_score))
        prompt = request.prompt
        if structured_output is not None and task_of(prompt) is None:
            facts = self.fit_facts(structured_output, prompt, known_facts(prompt))
            return chat_result(prompt, json.dumps(facts, ensure_ascii=False))
        return chat_result(prompt, self.respond(prompt))

    def script_for(self, request: Request) -> RuleScript | None:
        """The rules answering ``request``: the declared ``tool_rules`` when tools are bound
        and rules declared, else a recognised memory system's script, else the declared rules
        (none) when tools are bound; None for a text reply."""
        declared = DeclaredRules(self.tool_calls)
        if request.tools and self.tool_rules:
            return declared
        return recognised(request) or (declared if request.tools else None)

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
        """The facts of an extract prompt's conversation, shaped by the prompt's JSON schema."""
        try:
            schema = parse_json_reply(section(prompt, "JSON schema:", "\n\n"))
        except ValueError as exc:
            raise self._fail(
                "extract", f"the prompt's JSON schema does not parse ({exc})"
            ) from None
        return self.fit_facts(
            schema, section(prompt, "Conversation:", "\nJSON:"), known_facts(prompt)
        )

    def fit_facts(
        self, schema: Any, conversation: str, known: Sequence[tuple[str, str]] = ()
    ) -> Any:
        """Facts from the user's informative sentences, fitted to a JSON schema.

        A user sentence is a fact when ``informativeness`` reaches ``min_fact_score`` or it
        states a preference (like, love, prefer, ...; 좋아, 선호, ...), which is its kind then.
        A fact that restates one of the ``known`` facts takes its key (``stored_key``).
        """
        known = list(known)
        facts = [
            {"key": stored_key(text, known) or fact_key(text), "value": text, "kind": _kind(text)}
            for speaker, text in speaker_sentences(conversation)
            if speaker == "Human"
            and (informativeness(speaker, text) >= self.min_fact_score or PREFERENCE.search(text))
        ]
        return _shape(schema, facts, conversation)

    # ------------------------------------------------------------------ tool calls

    def tool_calls(self, text: str, bound: Sequence[str]) -> list[dict[str, Any]]:
        """The calls the declared rules make for the user's message, in rule then sentence
        order; ``bound``: the names of the tools bound."""
        calls: list[dict[str, Any]] = []
        sentences = [t for s, t in speaker_sentences(text) if s == "Human"] or [text]
        for rule in self.tool_rules:
            if rule.tool not in bound:
                raise self._fail(
                    "tool call",
                    f"rule calls {rule.tool!r}, which was not bound (bound: {', '.join(bound)})",
                )
            for sentence in sentences:
                match = re.search(rule.pattern, sentence, re.I)
                if match:
                    values = {"sentence": sentence, "match": match.group(0), "query": text}
                    numbered(calls, rule.tool, **{k: v.format(**values) for k, v in rule.args})
        return calls


def _kind(text: str) -> str:
    return "preference" if PREFERENCE.search(text) else "fact"


def fact_key(text: str) -> str:
    """A short key for a fact: its first three content words, normalised."""
    words = [w for w in WORD.findall(normalize(text)) if w not in FUNCTION_WORDS]
    return "_".join(words[:3]) or "fact"


def _shape(schema: Any, facts: list[dict[str, str]], conversation: str) -> Any:
    """Fit the facts to the schema: a facts list, a list property, or named fields."""
    if not isinstance(schema, dict):
        return {"facts": facts}
    if schema.get("type") == "array":
        return facts
    defs = schema.get("$defs") or {}

    def resolved(node: Any) -> Any:  # a "$ref" to the schema's "$defs", else the node
        ref = node.get("$ref", "") if isinstance(node, dict) else ""
        return defs.get(ref.removeprefix("#/$defs/"), node) if ref else node

    props = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for name, prop in props.items():
        prop = resolved(prop)
        kind = prop.get("type") if isinstance(prop, dict) else None
        if (
            kind == "array"
            and isinstance(resolved(prop.get("items")), dict)
            and (resolved(prop["items"]).get("type") == "object")
        ):
            out[name] = facts
        else:
            out[name] = _field_value(name, prop if isinstance(prop, dict) else {}, facts, kind)
    return out


def _field_value(name: str, prop: dict[str, Any], facts: list[dict[str, str]], kind: Any) -> Any:
    """The fact sharing most words with the field's name and description, or None/[]."""
    wanted = set(WORD.findall(normalize(f"{name.replace('_', ' ')} {prop.get('description', '')}")))
    wanted -= FUNCTION_WORDS
    best, best_overlap = None, 0
    for fact in facts:
        overlap = len(wanted & set(WORD.findall(normalize(fact["value"]))))
        if overlap > best_overlap:
            best, best_overlap = fact["value"], overlap
    if kind == "array":
        return [best] if best else []
    return best
