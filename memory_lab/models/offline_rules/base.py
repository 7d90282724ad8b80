"""The shared shape of a rule script: what a request holds, and the tool-calling guard."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.outputs import ChatResult

from memory_lab.models.offline_base import chat_result

DONE_REPLY = "No memory tools needed."  # a reply without tool calls (the agent loop ends)


@dataclass(frozen=True)
class RuleSettings:
    """What the rule scripts read of the model that follows them: a user sentence is a fact
    when its informativeness reaches ``min_fact_score`` (or it states a preference)."""

    min_fact_score: float = 2.0


@dataclass(frozen=True)
class Request:
    """One call of the offline memory model: its messages and the tools bound to it."""

    messages: list[BaseMessage]
    tools: tuple[str, ...] = ()  # names of the bound tools, in binding order

    @property
    def prompt(self) -> str:
        """Every message's text, one after another (what the call is billed for)."""
        return "\n".join(str(m.content) for m in self.messages)

    @property
    def after_tool_results(self) -> bool:
        """The last message is a tool's result: the model has called its tools already."""
        return bool(self.messages) and isinstance(self.messages[-1], ToolMessage)

    def text_of(self, kind: str) -> str:
        """The text of every ``kind`` message (``system``, ``human``, ...), joined."""
        return "\n".join(str(m.content) for m in self.messages if m.type == kind)

    def last_human(self) -> str:
        """The last human message, else the last message's text."""
        for message in reversed(self.messages):
            if message.type == "human":
                return str(message.content)
        return str(self.messages[-1].content) if self.messages else ""


def tool_reply(prompt: str, calls: list[dict[str, Any]], idle: str = DONE_REPLY) -> ChatResult:
    """A reply making ``calls`` (``idle`` as its text when none), the calls' JSON billed."""
    reply = "" if calls else idle
    billed = reply + json.dumps(calls, ensure_ascii=False)
    return chat_result(prompt, reply, billed, tool_calls=calls)


class RuleScript:
    """How the offline memory model answers one memory system, recognised by its request.

    A tool-calling script is recognised by the tools bound (``recognises``) and implements
    ``calls``; ``answer`` is the guard they share: after tool results the model makes no more
    calls (``DONE_REPLY``), else the script's calls, ``idle`` as the text when there are none.
    A script answering in text overrides ``answer``.
    """

    name = ""
    idle = DONE_REPLY

    def recognises(self, request: Request) -> bool:
        raise NotImplementedError

    def calls(self, request: Request, settings: RuleSettings) -> list[dict[str, Any]]:
        raise NotImplementedError

    def answer(self, request: Request, settings: RuleSettings) -> ChatResult:
        if request.after_tool_results:
            return tool_reply(request.prompt, [])
        return tool_reply(request.prompt, self.calls(request, settings), self.idle)


def numbered(calls: list[dict[str, Any]], name: str, **args: Any) -> None:
    """Append a call of ``name`` with ``args``, its id ``call_N`` by position."""
    calls.append({"name": name, "args": args, "id": f"call_{len(calls)}"})
