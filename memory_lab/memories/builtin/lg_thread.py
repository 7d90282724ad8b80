"""``thread``: a LangGraph checkpointer thread, with the guides' short-term policies as nodes.

Each exchange is one ``invoke`` of a ``StateGraph(MessagesState)`` compiled with a checkpointer
(``saver``): the user's message and the reply arrive as input (in replay the scripted reply, so
the ``chatbot`` node has nothing to generate), the policy node edits the thread, and the
checkpointer persists the result. Every recall reads the thread back from the checkpointer
(``get_state``): what is measured is what the saver persisted.

Policies, each a node after ``chatbot`` written the way the LangGraph guides write it:

- ``none``: every message stays.
- ``summarize``: with ``summarizer=node``, when the thread holds more than ``max_messages``
  messages the memory model folds all but the last ``keep_last`` into the running summary and
  ``RemoveMessage`` deletes them; with ``summarizer=langmem``, langmem's ``SummarizationNode``
  keeps a running summary once the messages reach ``max_tokens`` and replaces the summarised
  messages in the thread.
- ``trim``: ``trim_messages`` keeps the newest messages within ``max_tokens`` (starting on a
  user message); the rest are removed from the thread.
- ``filter``: only system messages and the last ``keep_last`` messages stay.

Every token count uses the bundled tokenizer; summaries are prompts of ``models.tasks``, so the
offline memory model serves them deterministically and any real model follows them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from memory_lab.errors import ConfigError, EnvironmentProblem
from memory_lab.memories.lg_backends import Persistence, check_postgres
from memory_lab.memories.protocol import (
    Exchange,
    Item,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
)
from memory_lab.memories.registry import ParamDoc, register_memory

Saver = Literal["memory", "sqlite", "postgres"]
Policy = Literal["none", "summarize", "trim", "filter"]
Summarizer = Literal["node", "langmem"]
ThreadPer = Literal["dialogue", "session"]
SUMMARY_TOKENS = 256  # what the offline memory model writes at most; langmem budgets for it


@dataclass(frozen=True)
class ThreadPolicy:
    """What the policy node does to the thread after each exchange (see the module docstring)."""

    name: str = "none"
    summarizer: str = "node"
    max_messages: int = 10
    keep_last: int = 4
    max_tokens: int = 600


def message_tokens(messages: Any) -> int:
    """Tokens of messages as the prompt shows them (``Human: ...`` lines), bundled tokenizer."""
    from langchain_core.messages import convert_to_messages

    from memory_lab.models.tokens import count_message_tokens

    return count_message_tokens(convert_to_messages(list(messages)))


@lru_cache(maxsize=1)
def thread_state() -> type:
    """``MessagesState`` plus the running summary of each summarizer."""
    from langgraph.graph import MessagesState

    class ThreadState(MessagesState, total=False):
        summary: str  # summarizer=node
        context: dict[str, Any]  # summarizer=langmem keeps its RunningSummary here

    return ThreadState


def _chatbot(state: dict[str, Any]) -> dict[str, Any]:
    """Where a live graph calls its model; in replay the reply arrives with the input."""
    return {}


def _summarize_node(model: Any, keep_last: int) -> Any:
    from langchain_core.messages import RemoveMessage, get_buffer_string

    from memory_lab.models.tasks import summarize_prompt

    def summarize(state: dict[str, Any]) -> dict[str, Any]:
        messages = state["messages"]
        old = messages[: len(messages) - keep_last]
        prompt = summarize_prompt(get_buffer_string(old), state.get("summary", ""))
        summary = str(model.invoke(prompt).content)
        return {"summary": summary, "messages": [RemoveMessage(id=m.id) for m in old]}

    return summarize


def _langmem_prompt(with_summary: bool) -> Any:
    """langmem's summary prompt slot, filled with our task prompt (the transcript as text)."""
    from langchain_core.messages import HumanMessage, get_buffer_string
    from langchain_core.prompt_values import ChatPromptValue
    from langchain_core.runnables import RunnableLambda

    from memory_lab.models.tasks import summarize_prompt

    def render(inputs: dict[str, Any]) -> ChatPromptValue:
        previous = str(inputs.get("existing_summary", "")) if with_summary else ""
        text = summarize_prompt(get_buffer_string(inputs["messages"]), previous)
        return ChatPromptValue(messages=[HumanMessage(text)])

    return RunnableLambda(render)


def _langmem_node(model: Any, max_tokens: int) -> Any:
    try:
        from langmem.short_term import SummarizationNode
    except ImportError:
        raise EnvironmentProblem(
            "memory 'thread' summarises with LangMem's SummarizationNode here, and langmem is "
            "not installed: pip install 'memory-lab[langmem]'"
        ) from None

    return SummarizationNode(
        model=model,
        max_tokens=max_tokens,
        max_summary_tokens=min(SUMMARY_TOKENS, max_tokens // 2),
        token_counter=message_tokens,
        initial_summary_prompt=_langmem_prompt(False),
        existing_summary_prompt=_langmem_prompt(True),
        input_messages_key="messages",
        output_messages_key="messages",  # the summarised messages leave the thread
    )


def _trim_node(max_tokens: int) -> Any:
    from langchain_core.messages import RemoveMessage, trim_messages

    def trim(state: dict[str, Any]) -> dict[str, Any]:
        messages = state["messages"]
        kept = trim_messages(
            messages,
            max_tokens=max_tokens,
            token_counter=message_tokens,
            strategy="last",
            start_on="human",
            include_system=True,
        )
        ids = {m.id for m in kept}
        return {"messages": [RemoveMessage(id=m.id) for m in messages if m.id not in ids]}

    return trim


def _filter_node(keep_last: int) -> Any:
    from langchain_core.messages import RemoveMessage

    def filter_messages(state: dict[str, Any]) -> dict[str, Any]:
        messages = state["messages"]
        recent = {m.id for m in messages[len(messages) - keep_last :]} if keep_last else set()
        return {
            "messages": [
                RemoveMessage(id=m.id)
                for m in messages
                if m.id not in recent and m.type != "system"
            ]
        }

    return filter_messages


def build_thread_graph(policy: ThreadPolicy, model: Any, checkpointer: Any) -> Any:
    """``START -> chatbot -> [policy node] -> END``, compiled with ``checkpointer``."""
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(thread_state())
    builder.add_node("chatbot", _chatbot)
    builder.add_edge(START, "chatbot")
    if policy.name == "none":
        builder.add_edge("chatbot", END)
        return builder.compile(checkpointer=checkpointer)
    if policy.name == "summarize" and policy.summarizer == "node":
        builder.add_node("summarize", _summarize_node(model, policy.keep_last))

        def should_summarize(state: dict[str, Any]) -> str:
            return "summarize" if len(state["messages"]) > policy.max_messages else END

        builder.add_conditional_edges("chatbot", should_summarize, ["summarize", END])
        builder.add_edge("summarize", END)
        return builder.compile(checkpointer=checkpointer)
    nodes = {
        "summarize": lambda: _langmem_node(model, policy.max_tokens),
        "trim": lambda: _trim_node(policy.max_tokens),
        "filter": lambda: _filter_node(policy.keep_last),
    }
    builder.add_node(policy.name, nodes[policy.name]())
    builder.add_edge("chatbot", policy.name)
    builder.add_edge(policy.name, END)
    return builder.compile(checkpointer=checkpointer)


def exchange_messages(ex: Exchange, timestamps: bool = True) -> list[Any]:
    """The exchange as chat messages, ids from its turns (the turns ride along for records)."""
    from langchain_core.messages import AIMessage, HumanMessage

    out: list[Any] = []
    if ex.user:
        user = ex.dated_user() if timestamps else ex.user
        turns = [ex.user_turn_id] if ex.user_turn_id else []
        out.append(HumanMessage(user, id=ex.user_turn_id, response_metadata={"turn_ids": turns}))
    if ex.assistant:
        ids = list(ex.assistant_turn_ids)
        first = ids[0] if ids else None
        out.append(AIMessage(ex.assistant, id=first, response_metadata={"turn_ids": ids}))
    return out


def message_items(messages: list[Any]) -> list[Item]:
    """One verbatim item per user or AI message, rendered as ``Human: ...`` / ``AI: ...``."""
    from langchain_core.messages import get_buffer_string

    return [
        Item(
            get_buffer_string([m]),
            tuple(m.response_metadata.get("turn_ids", ())),
            "verbatim",
        )
        for m in messages
        if m.type != "system"
    ]


class ThreadMemory:
    """A checkpointer thread per dialogue (or per session): written by the graph, read back."""

    def __init__(
        self,
        graph: Any,
        persistence: Persistence,
        thread_base: str,
        *,
        policy: ThreadPolicy,
        thread_per: str = "dialogue",
        timestamps: bool = True,
    ):
        self.graph = graph
        self.persistence = persistence
        self.thread_base = thread_base
        self.policy = policy
        self.thread_per = thread_per
        self.timestamps = timestamps
        self.threads: dict[str, None] = {}
        self.current: str | None = None
        self._closed = False

    def thread_id(self, session_id: str | None) -> str:
        """This cell's thread for a session (one per dialogue unless ``thread_per=session``)."""
        if self.thread_per == "session" and session_id is not None:
            return f"{self.thread_base}/{session_id}"
        if self.thread_per == "session" and self.current is not None:
            return self.current
        return self.thread_base

    def _config(self, thread_id: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread_id}}

    def observe(self, exchange: Exchange) -> None:
        messages = exchange_messages(exchange, self.timestamps)
        thread_id = self.thread_id(exchange.session_id)
        self.threads[thread_id] = None
        self.current = thread_id
        if messages:
            self.graph.invoke({"messages": messages}, self._config(thread_id))

    def end_session(self, session: SessionInfo) -> None:
        """A new session opens a new thread at its first exchange (``thread_per=session``)."""

    def state(self, session_id: str | None = None) -> dict[str, Any]:
        """The thread's values as the checkpointer has them now."""
        return dict(self.graph.get_state(self._config(self.thread_id(session_id))).values)

    def summary(self, values: dict[str, Any]) -> str:
        """The running summary a summarize policy keeps (empty when none yet)."""
        running = (values.get("context") or {}).get("running_summary")
        if running is not None:
            return str(running.summary)
        return str(values.get("summary") or "")

    def recall(self, query: Query) -> Recall:
        values = self.state(query.session_id)
        summary = self.summary(values)
        items = [Item(summary, (), "summary")] if summary else []
        return Recall(tuple(items + message_items(values.get("messages", []))))

    def snapshot(self) -> dict[str, Any]:
        values = self.state()
        out: dict[str, Any] = {
            "saver": self.persistence.backend,
            "policy": self.policy.name,
            "thread_id": self.thread_id(None),
            "threads": len(self.threads),
            "messages": len([m for m in values.get("messages", []) if m.type != "system"]),
        }
        if self.policy.name == "summarize":
            out["summary"] = self.summary(values)
        return out

    def held_texts(self) -> list[str]:
        """Every thread of the cell as the checkpointer has it: its summary, then its user and
        AI messages (older sessions' threads too, with ``thread_per=session``)."""
        from memory_lab.memories.builtin.classic import message_texts

        texts: list[str] = []
        for thread_id in self.threads:
            values = dict(self.graph.get_state(self._config(thread_id)).values)
            messages = [m for m in values.get("messages", []) if m.type != "system"]
            texts += [self.summary(values), *message_texts(messages)]
        return texts

    def stored(self, session_id: str) -> tuple[Any, list[str], list[tuple[str, ...]]]:
        """What it keeps for a session where it keeps its state: (persistence, thread ids,
        Store namespaces), for ``memory-lab serve``'s forget and release."""
        return self.persistence, [self.thread_id(session_id)], []

    def stored_exchanges(self, session_id: str) -> list[tuple[str, str]]:
        """(message, reply) pairs as the session's thread holds them (a trim, filter or
        summarize policy keeps only the newest messages)."""
        pairs: list[tuple[str, str]] = []
        for message in self.state(session_id).get("messages", []):
            if message.type == "human":
                pairs.append((str(message.content), ""))
            elif message.type == "ai" and pairs and not pairs[-1][1]:
                pairs[-1] = (pairs[-1][0], str(message.content))
        return pairs

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.persistence.forget(list(self.threads))
        finally:
            self.persistence.close()


def preflight_thread(params: dict[str, Any], resource: Any) -> None:
    """Before a run: contradicting parameters, and a reachable server for ``saver=postgres``."""
    if (
        params["policy"] == "summarize"
        and params["summarizer"] == "node"
        and params["keep_last"] >= params["max_messages"]
    ):
        raise ConfigError(
            f"memory 'thread': keep_last ({params['keep_last']}) must be below max_messages "
            f"({params['max_messages']}) for policy=summarize"
        )
    if params["saver"] == "postgres":
        check_postgres(resource, "thread:saver=postgres")


THREAD_PARAMS = {
    "saver": ParamDoc(
        "where the checkpointer keeps the thread: in the process, a SQLite file per cell, or "
        "PostgreSQL (--resource postgres=URL or MEMORY_LAB_POSTGRES)"
    ),
    "policy": ParamDoc(
        "the graph node run after each exchange: keep everything, summarize old messages, "
        "trim to max_tokens, or filter to the last keep_last"
    ),
    "max_messages": ParamDoc("summarize (node): summarise when the thread holds more", min=1),
    "keep_last": ParamDoc("summarize (node) and filter: newest messages kept verbatim", min=0),
    "max_tokens": ParamDoc(
        "trim: token budget of the kept messages; summarize with langmem: messages' tokens "
        "that trigger a summary",
        min=1,
    ),
    "summarizer": ParamDoc(
        "summarize: the guides' node (max_messages, keep_last, RemoveMessage) or langmem's "
        "SummarizationNode (max_tokens, running summary)"
    ),
    "thread_per": ParamDoc(
        "one thread per dialogue, or a new thread every session (a returning user)"
    ),
    "keep": ParamDoc("keep the SQLite file or the PostgreSQL rows after the cell"),
}


@register_memory(
    "thread",
    "A LangGraph StateGraph(MessagesState) thread persisted by a checkpointer, read back "
    "every turn; policy nodes summarize, trim or filter it.",
    THREAD_PARAMS,
    roles=("memory",),
    preflight=preflight_thread,
    persistent={"saver": ("postgres",)},
)
def thread(
    res: MemoryResources,
    saver: Saver = "memory",
    policy: Policy = "none",
    max_messages: int = 10,
    keep_last: int = 4,
    max_tokens: int = 600,
    summarizer: Summarizer = "node",
    thread_per: ThreadPer = "dialogue",
    keep: bool = False,
) -> ThreadMemory:
    persistence = Persistence(saver, res, keep=keep)
    res.on_close(persistence.close)
    rule = ThreadPolicy(policy, summarizer, max_messages, keep_last, max_tokens)
    graph = build_thread_graph(rule, res.memory_llm, persistence.checkpointer)
    return ThreadMemory(
        graph,
        persistence,
        res.cell_id,
        policy=rule,
        thread_per=thread_per,
        timestamps=res.timestamps,
    )
