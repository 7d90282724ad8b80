"""``memgpt``: MemGPT's memory tiers, kept by an agent that calls memory tools.

Three tiers, as in MemGPT (Packer et al., 2023):

- **core memory**: two text blocks, ``persona`` (who the assistant is) and ``human`` (what it
  knows about the user), each at most ``max_chars`` characters. An edit that would pass the limit
  is refused and the tool returns ``CORE_FULL_ERROR`` to the agent; the block is unchanged.
- **recall memory**: the full transcript, every message with its turn id and session date,
  searched by ``conversation_search`` (keywords ranked by rarity, over an inverted index).
- **archival memory**: a per-cell Chroma collection (the run's embeddings, metered), written by
  ``archival_memory_insert`` and read by ``archival_memory_search``.

After each exchange an agent decides what to keep: the memory model with ``bind_tools`` gets the
instructions and the core memory (system message) and the exchange (human message), then the
loop runs model -> tool calls -> ``ToolMessage`` results -> model until a reply has no tool calls
or ``max_steps`` model calls were made. A reply's tool calls run one after another, in order
(LangGraph's ``ToolNode`` would run them concurrently, making core-memory edits order-dependent).
Every model call, including the tokens of its tool calls, is charged to the ``memory`` role as
memory maintenance, and every archival insert or search embeds through the run's metered
embeddings; the calls of each exchange (name, arguments, their tokens, the result) are kept and
shown by ``snapshot()``.

At a turn or a probe the context is the core memory, then what ``archival_memory_search`` and
``conversation_search`` return for the user's message (read-only: nothing is written).

Offline (``offline:memory``), the memory model recognises these tools among the bound ones and
calls them by MemGPT's rule script, deterministically; the memory does not know which model
answers.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from memory_lab.errors import ConfigError
from memory_lab.memories.chroma import STACK as CHROMA_STACK
from memory_lab.memories.protocol import (
    Exchange,
    Item,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
)
from memory_lab.memories.registry import ParamDoc, register_memory
from memory_lab.text.analysis import content_words

LABELS = ("persona", "human")
DEFAULT_PERSONA = "I am the user's assistant. I remember what the user tells me."
CORE_FULL_ERROR = (
    "Error: core memory section '{label}' is full: {used} of {limit} characters used, and this "
    "edit needs {needed}. Nothing was written. Use core_memory_replace to shorten the section, "
    "or archival_memory_insert to keep the information in archival memory."
)
CORE_HEADER = "Core memory ({label}):"
ARCHIVAL_HEADER = "Archival memory:"
CONVERSATION_HEADER = "Earlier in the conversation:"
RESULT_SHOWN = 300  # characters of each tool result kept in the snapshot

_HANGUL = re.compile(r"[\uac00-\ud7a3]")


# ---------------------------------------------------------------------------------- core memory


class CoreMemory:
    """The ``persona`` and ``human`` blocks, at most ``max_chars`` characters each.

    A block is text, one entry a line; ``sources`` remembers which turns wrote each line, so a
    recall can name them.
    """

    def __init__(self, max_chars: int, persona: str = DEFAULT_PERSONA):
        self.max_chars = max_chars
        self.blocks = {"persona": persona[:max_chars], "human": ""}
        self.sources: dict[str, tuple[str, ...]] = {}
        self.refused = 0

    def _check(self, label: str) -> str | None:
        if label not in self.blocks:
            return f"Error: core memory has no section {label!r} (sections: {', '.join(LABELS)})"
        return None

    def _full(self, label: str, new: str) -> str | None:
        if len(new) <= self.max_chars:
            return None
        self.refused += 1
        used = len(self.blocks[label])
        return CORE_FULL_ERROR.format(
            label=label, used=used, limit=self.max_chars, needed=len(new) - used
        )

    def append(self, label: str, content: str, turn_ids: tuple[str, ...] = ()) -> str:
        error = self._check(label)
        if error:
            return error
        content = content.strip()
        if not content:
            return "Error: content is empty; nothing was written."
        old = self.blocks[label]
        new = f"{old}\n{content}" if old else content
        error = self._full(label, new)
        if error:
            return error
        self.blocks[label] = new
        self.sources[content] = turn_ids
        return f"OK: appended to core memory '{label}' ({len(new)}/{self.max_chars} characters)."

    def replace(
        self, label: str, old_content: str, new_content: str, turn_ids: tuple[str, ...] = ()
    ) -> str:
        error = self._check(label)
        if error:
            return error
        block = self.blocks[label]
        if not old_content or old_content not in block:
            return (
                f"Error: old_content not found in core memory '{label}'; it must be an exact "
                "part of the section. Nothing was written."
            )
        new = block.replace(old_content, new_content.strip(), 1)
        new = "\n".join(line for line in new.splitlines() if line.strip())  # deletes leave no gap
        error = self._full(label, new)
        if error:
            return error
        self.blocks[label] = new
        if new_content.strip():
            self.sources[new_content.strip()] = turn_ids
        self.sources = {c: ids for c, ids in self.sources.items() if c in self.text()}
        return f"OK: replaced in core memory '{label}' ({len(new)}/{self.max_chars} characters)."

    def text(self) -> str:
        return "\n".join(self.blocks.values())

    def turn_ids(self, label: str) -> tuple[str, ...]:
        """The turns that wrote the block's lines (as far as known), in order.

        ``sources`` holds only contents still in some block, so this stays bounded by the
        blocks' size however long the dialogue.
        """
        ids: list[str] = []
        for line in self.blocks[label].splitlines():
            if line in self.sources:
                ids.extend(self.sources[line])
                continue
            for content, source in self.sources.items():  # a line an edit changed in part
                if content in line or line in content:
                    ids.extend(source)
        return tuple(dict.fromkeys(ids))

    def render(self) -> str:
        """The blocks as the agent's system message shows them."""
        return "\n".join(
            f'<{label} characters="{len(text)}/{self.max_chars}">\n{text}\n</{label}>'
            for label, text in self.blocks.items()
        )


# -------------------------------------------------------------------------------- recall memory


@dataclass(frozen=True)
class Message:
    """One message of the transcript."""

    role: str  # "Human" or "AI"
    text: str
    turn_id: str
    session_id: str
    date: str | None
    exchange: int


def search_terms(text: str) -> set[str]:
    """The words a search matches on: normalised content words, plus Hangul bigrams (Korean
    words carry particles: ``부산에서`` and ``부산으로`` share ``부산``)."""
    words = content_words(text)
    grams = {w[i : i + 2] for w in words if _HANGUL.search(w) for i in range(len(w) - 1)}
    return words | grams


class ConversationLog:
    """The full transcript with an inverted index: word -> messages holding it, oldest first.

    A search scores messages by the summed rarity (``log(1 + N / df)``) of the query words they
    hold, examining at most the newest ``scan`` messages of each word, so its cost stays flat
    as the transcript grows: rare words (names, numbers) are found however old, common ones
    among recent messages.
    """

    def __init__(self, scan: int = 200):
        self.scan = scan
        self.messages: list[Message] = []
        self.postings: dict[str, list[int]] = defaultdict(list)

    def add(self, message: Message) -> None:
        index = len(self.messages)
        self.messages.append(message)
        for term in search_terms(message.text):
            self.postings[term].append(index)

    def search(self, query: str, k: int, page: int = 0) -> list[Message]:
        total = len(self.messages)
        scores: dict[int, float] = defaultdict(float)
        for term in sorted(search_terms(query)):  # one summing order: the same float scores
            posting = self.postings.get(term)
            if not posting:
                continue
            weight = math.log(1 + total / len(posting))
            for index in posting[-self.scan :]:
                scores[index] += weight
        ranked = sorted(scores, key=lambda i: (-scores[i], -i))
        return [self.messages[i] for i in ranked[page * k : (page + 1) * k]]


# ----------------------------------------------------------------------------------------- tools


class AppendArgs(BaseModel):
    label: Literal["persona", "human"] = Field(
        description="Section of core memory to edit: 'persona' or 'human'."
    )
    content: str = Field(description="Content to write to the memory.")


class ReplaceArgs(BaseModel):
    label: Literal["persona", "human"] = Field(
        description="Section of core memory to edit: 'persona' or 'human'."
    )
    old_content: str = Field(description="String to replace. Must be an exact match.")
    new_content: str = Field(
        description="Content to write to the memory. An empty string deletes old_content."
    )


class InsertArgs(BaseModel):
    content: str = Field(
        description="Content to write to the memory, phrased so it can be found later."
    )


class SearchArgs(BaseModel):
    query: str = Field(description="What to search for.")
    page: int = Field(default=0, ge=0, le=20, description="Page of results (0 is the first).")


# ---------------------------------------------------------------------------------------- agent

SYSTEM_PROMPT = """\
You are the memory manager of a chatbot, in the manner of MemGPT. After each exchange between the \
user (Human) and the assistant (AI) you decide what to remember, by calling tools:
- core_memory_append / core_memory_replace on the 'human' section for durable personal facts \
about the user (name, family, job, home, health, plans, dates, preferences). When a fact changes, \
replace the old line with core_memory_replace instead of appending. Use 'persona' only for how \
the assistant should behave.
- archival_memory_insert for every detail that may be asked about later (names, numbers, dates, \
plans), phrased so it can be found later.
- archival_memory_search and conversation_search to check what is already stored.
Each core memory section holds at most {max_chars} characters. When you are done, reply without \
tool calls.
{date}
Core memory:
{core}"""


# ---------------------------------------------------------------------------------------- memory


class MemGPTMemory:
    """Core, recall and archival memory, edited by the agent through five tools."""

    def __init__(
        self,
        model: Any,
        store: Any,
        *,
        max_chars: int = 2000,
        k: int = 4,
        conversation_k: int = 4,
        max_steps: int = 5,
        scan: int = 200,
        timestamps: bool = True,
        count_tokens: Any = None,
        name: str = "memgpt",
    ):
        self.core = CoreMemory(max_chars)
        self.conversation = ConversationLog(scan)
        self.store = store
        self.k = k
        self.conversation_k = conversation_k
        self.max_steps = max_steps
        self.timestamps = timestamps
        self.count_tokens = count_tokens or _count_tokens
        self.passages = 0
        self.current: Exchange | None = None
        self.log: list[dict[str, Any]] = []
        self.step_limit_hits = 0
        self.tools = self._tools()
        self.by_name = {t.name: t for t in self.tools}
        try:
            self.agent = model.bind_tools(self.tools)
        except NotImplementedError:
            raise ConfigError(
                f"memory '{name}' needs a memory model that can call tools (bind_tools); "
                f"{type(model).__name__} cannot: choose another --memory-llm"
            ) from None
        self._closed = False

    # ------------------------------------------------------------------ tools

    def _ids(self) -> tuple[str, ...]:
        return self.current.turn_ids if self.current is not None else ()

    def _tools(self) -> list[StructuredTool]:
        def core_memory_append(label: str, content: str) -> str:
            return self.core.append(label, content, self._ids())

        def core_memory_replace(label: str, old_content: str, new_content: str) -> str:
            return self.core.replace(label, old_content, new_content, self._ids())

        def archival_memory_insert(content: str) -> str:
            return self.insert(content)

        def archival_memory_search(query: str, page: int = 0) -> str:
            hits = self.archival_search(query, self.k, page)
            if not hits:
                return "No results found in archival memory."
            return "\n".join(self._passage_text(text, meta) for text, meta in hits)

        def conversation_search(query: str, page: int = 0) -> str:
            hits = self.conversation.search(query, self.conversation_k, page)
            if not hits:
                return "No results found in the conversation."
            return "\n".join(self._message_text(m) for m in hits)

        specs = [
            (
                core_memory_append,
                AppendArgs,
                "Append to the contents of core memory (a new line in the section).",
            ),
            (
                core_memory_replace,
                ReplaceArgs,
                "Replace the contents of core memory. To delete memories, use an empty string "
                "for new_content.",
            ),
            (
                archival_memory_insert,
                InsertArgs,
                "Add to archival memory. Make sure to phrase the memory contents such that it "
                "can be easily queried later.",
            ),
            (
                archival_memory_search,
                SearchArgs,
                "Search archival memory using semantic (embedding-based) search.",
            ),
            (
                conversation_search,
                SearchArgs,
                "Search prior conversation history (every message so far) by keywords.",
            ),
        ]
        return [
            StructuredTool.from_function(
                fn,
                name=fn.__name__,
                description=description,
                args_schema=schema,
                handle_tool_error=True,
                handle_validation_error=_invalid_arguments,
            )
            for fn, schema, description in specs
        ]

    def insert(self, content: str) -> str:
        content = content.strip()
        if not content:
            return "Error: content is empty; nothing was written."
        ex = self.current
        meta = {
            "turn_ids": ",".join(self._ids()),
            "session": ex.session_id if ex else "",
            "date": (ex.session_date or "") if ex else "",
            "exchange": ex.index if ex else -1,
        }
        self.store.add_texts([content], metadatas=[meta], ids=[f"p{self.passages}"])
        self.passages += 1
        return f"OK: inserted into archival memory ({self.passages} passages)."

    def archival_search(self, query: str, k: int, page: int = 0) -> list[tuple[str, dict]]:
        if not self.passages or not query.strip():
            return []
        docs = self.store.similarity_search(query, k=min(self.passages, k * (page + 1)))
        return [(d.page_content, d.metadata) for d in docs[page * k : (page + 1) * k]]

    # ------------------------------------------------------------------ the agent

    def observe(self, exchange: Exchange) -> None:
        reply_id = exchange.assistant_turn_ids[0] if exchange.assistant_turn_ids else None
        for role, text, turn_id in (
            ("Human", exchange.user, exchange.user_turn_id),
            ("AI", exchange.assistant, reply_id),
        ):
            if text and turn_id:
                self.conversation.add(
                    Message(
                        role,
                        text,
                        turn_id,
                        exchange.session_id,
                        exchange.session_date,
                        exchange.index,
                    )
                )
        self.current = exchange
        try:
            self.run_agent(exchange)
        finally:
            self.current = None

    def transcript(self, ex: Exchange) -> str:
        lines = [f"Human: {ex.user}"] if ex.user else []
        return "\n".join(lines + ([f"AI: {ex.assistant}"] if ex.assistant else []))

    def run_agent(self, ex: Exchange) -> None:
        """Model -> tool calls -> tool results -> model, until no tool calls or ``max_steps``."""
        date = f"Session date: {ex.session_date}\n" if ex.session_date else ""
        system = SYSTEM_PROMPT.format(
            max_chars=self.core.max_chars, date=date, core=self.core.render()
        )
        messages: list[BaseMessage] = [SystemMessage(system), HumanMessage(self.transcript(ex))]
        entry: dict[str, Any] = {"exchange": ex.index, "turn_ids": list(ex.turn_ids), "calls": []}
        for step in range(self.max_steps):
            reply = self.agent.invoke(messages)
            messages.append(reply)
            entry["steps"] = step + 1
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                result = self.call_tool(call)
                messages.append(result)
                entry["calls"].append(
                    {
                        "name": call["name"],
                        "args": call["args"],
                        "tokens": self.count_tokens(
                            call["name"] + json.dumps(call["args"], ensure_ascii=False)
                        ),
                        "result": str(result.content)[:RESULT_SHOWN],
                    }
                )
        else:
            self.step_limit_hits += 1
            entry["step_limit"] = True
        self.log.append(entry)

    def call_tool(self, call: dict[str, Any]) -> ToolMessage:
        tool = self.by_name.get(call["name"])
        if tool is None:
            return ToolMessage(
                f"Error: no tool {call['name']!r} (tools: {', '.join(self.by_name)})",
                tool_call_id=call.get("id") or "",
                name=call["name"],
                status="error",
            )
        result = tool.invoke({**call, "type": "tool_call"})
        return (
            result
            if isinstance(result, ToolMessage)
            else ToolMessage(str(result), tool_call_id=call.get("id") or "", name=call["name"])
        )

    # ------------------------------------------------------------------ recall

    def _dated(self, date: str | None, text: str) -> str:
        return f"[{date}] {text}" if self.timestamps and date else text

    def _passage_text(self, text: str, meta: dict) -> str:
        return "- " + self._dated(meta.get("date") or None, text)

    def _message_text(self, m: Message) -> str:
        return "- " + self._dated(m.date, f"{m.role}: {m.text}")

    def recall(self, query: Query) -> Recall:
        items = [
            Item(f"{CORE_HEADER.format(label=label)}\n{text}", self.core.turn_ids(label), "core")
            for label, text in self.core.blocks.items()
            if text
        ]
        if not query.text.strip():
            return Recall(tuple(items), ranking=())
        shown: set[str] = set()
        passages = []
        ranking = []  # archival search's passages, nearest first (conversation search apart)
        for text, meta in self.archival_search(query.text, self.k):
            ids = tuple(t for t in str(meta.get("turn_ids", "")).split(",") if t)
            shown.update(ids)
            ranking.append(ids)
            passages.append(Item(self._passage_text(text, meta), ids, "retrieved"))
        if passages:
            items += [Item(ARCHIVAL_HEADER, (), "other"), *passages]
        messages = [
            Item(self._message_text(m), (m.turn_id,), "verbatim")
            for m in self.conversation.search(query.text, self.conversation_k)
            if m.turn_id not in shown
        ]
        if messages:
            items += [Item(CONVERSATION_HEADER, (), "other"), *messages]
        return Recall(tuple(items), ranking=tuple(ranking))

    def end_session(self, session: SessionInfo) -> None:
        """MemGPT keeps no session boundary: the transcript and both stores span sessions."""

    def snapshot(self) -> dict[str, Any]:
        counts = Counter(c["name"] for e in self.log for c in e["calls"])
        return {
            "core": dict(self.core.blocks),
            "core_chars": {label: len(text) for label, text in self.core.blocks.items()},
            "max_chars": self.core.max_chars,
            "core_refusals": self.core.refused,
            "archival_passages": self.passages,
            "conversation_messages": len(self.conversation.messages),
            "tool_call_counts": dict(sorted(counts.items())),
            "tool_call_tokens": sum(c["tokens"] for e in self.log for c in e["calls"]),
            "step_limit_hits": self.step_limit_hits,
            "tool_calls": self.log,
        }

    def held_texts(self) -> list[str]:
        """The core blocks, the archival passages and the whole transcript (recall memory)."""
        passages = self.store.get(include=["documents"])["documents"] if self.passages else []
        messages = [m.text for m in self.conversation.messages]
        return [*self.core.blocks.values(), *passages, *messages]

    def close(self) -> None:
        """The collection is dropped through the factory's ``on_close``."""


def _invalid_arguments(error: Exception) -> str:
    """What a tool tells the agent about arguments it could not accept."""
    lines = [
        f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
        for e in getattr(error, "errors", lambda: [])()
    ]
    return "Error: invalid arguments: " + ("; ".join(lines) or str(error))


def _count_tokens(text: str) -> int:
    from memory_lab.models.tokens import count_tokens

    return count_tokens(text)


@register_memory(
    "memgpt",
    "MemGPT's tiers: core memory blocks (persona, human), the searchable transcript and an "
    "archival Chroma store, kept by a tool-calling agent after every exchange.",
    {
        "max_chars": ParamDoc("characters each core memory block may hold", min=1),
        "k": ParamDoc("archival passages per search (and shown per prompt)", min=1),
        "conversation_k": ParamDoc(
            "transcript messages per conversation_search (and shown per prompt)", min=1
        ),
        "max_steps": ParamDoc("model calls of the agent per exchange at most", min=1),
        "scan": ParamDoc(
            "newest messages examined per search word by conversation_search (bounds its "
            "cost as the transcript grows)",
            min=1,
        ),
    },
    roles=("memory",),
    stack=CHROMA_STACK,
    rules="memory_lab.models.offline_rules.memgpt:MemGPTScript",
)
def memgpt(
    res: MemoryResources,
    max_chars: int = 2000,
    k: int = 4,
    conversation_k: int = 4,
    max_steps: int = 5,
    scan: int = 200,
) -> MemGPTMemory:
    from memory_lab.memories.chroma import cell_vector_store

    store = cell_vector_store(res)
    return MemGPTMemory(
        res.memory_llm,
        store,
        max_chars=max_chars,
        k=k,
        conversation_k=conversation_k,
        max_steps=max_steps,
        scan=scan,
        timestamps=res.timestamps,
        count_tokens=res.count_tokens,
        name=res.memory_name or "memgpt",
    )
