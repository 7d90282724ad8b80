"""The five classic LangChain memories, behind one adapter.

The factories configure the langchain-classic classes as they are; nothing is reimplemented.
``ClassicMemory`` turns any LangChain ``BaseMemory`` that returns its context as a string under
``history`` into a ``Memory``: an exchange is ``save_context``, a recall is
``load_memory_variables``, and the whole context is one item. A factory may return the
``BaseMemory`` itself: ``as_memory`` wraps it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from langchain_classic.base_memory import BaseMemory

from memory_lab.memories.chroma import STACK as CHROMA_STACK
from memory_lab.memories.chroma import cell_collection, cell_vector_store  # noqa: F401 - re-exported
from memory_lab.memories.protocol import (
    Exchange,
    Item,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
    as_memory,
)
from memory_lab.memories.registry import ParamDoc, register_memory
from memory_lab.models.prompt import INPUT_KEY, MEMORY_KEY, OUTPUT_KEY

LANGCHAIN_KEYS = {"memory_key": MEMORY_KEY, "input_key": INPUT_KEY}  # every classic memory's


class ClassicMemory:
    """A LangChain ``BaseMemory`` seen through the memory protocol.

    ``kind`` labels the recalled item (verbatim, summary, retrieved); ``describe`` returns the
    inspector's snapshot of the wrapped class (its summary, its message count, ...); ``held``
    the texts it holds (``held_texts``, default ``classic_held``). With
    ``timestamps`` (the run's, set by ``as_memory`` when the cell builds it) each user line is
    saved with its session date in front, so a buffer, a summary or a retrieved snippet shows
    when it was said.
    """

    timestamps: bool = True

    def __init__(
        self,
        inner: BaseMemory,
        name: str = "",
        kind: str = "verbatim",
        describe: Callable[[Any], dict[str, Any]] | None = None,
        held: Callable[[Any], list[str]] | None = None,
    ):
        self.inner = inner
        self.name = name or type(inner).__name__
        self.kind = kind
        self._describe = describe
        self._held = held or classic_held

    def observe(self, exchange: Exchange) -> None:
        user = exchange.dated_user() if self.timestamps else exchange.user
        self.inner.save_context({INPUT_KEY: user}, {OUTPUT_KEY: exchange.assistant})

    def end_session(self, session: SessionInfo) -> None:
        """Classic memories know nothing of sessions."""

    def recall(self, query: Query) -> Recall:
        value = self.inner.load_memory_variables({INPUT_KEY: query.text})[MEMORY_KEY]
        if not isinstance(value, str):
            raise TypeError(
                f"memory '{self.name}' returned {type(value).__name__} for '{MEMORY_KEY}'; "
                "a LangChain memory must return its context as a string (return_messages=False)"
            )
        return Recall((Item(value, (), self.kind),) if value else ())

    def snapshot(self) -> dict[str, Any]:
        state: dict[str, Any] = {"class": type(self.inner).__name__}
        if self._describe is not None:
            state.update(self._describe(self.inner))
        return state

    def held_texts(self) -> list[str]:
        return [t for t in self._held(self.inner) if t]

    def close(self) -> None:
        """Stores are released through the factory's ``on_close``."""


class VectorMemory(ClassicMemory):
    """``VectorStoreRetrieverMemory`` whose documents name their source turns, so a recall
    reports its ranking (``Recall.ranking``): the retriever's documents, nearest first.

    Saving and recalling are LangChain's own steps, taken one at a time: ``_form_documents``
    then ``retriever.add_documents`` (``save_context``), with each document's turn ids added to
    its Chroma metadata; ``retriever.invoke`` then ``_documents_to_memory_variables``
    (``load_memory_variables``). So the stored texts, the embedded tokens and the context (one
    item, the documents in the retriever's order) are those of the class as it is. The item
    names no turns: its evidence recall stays the text-carried figure.
    """

    def observe(self, exchange: Exchange) -> None:
        user = exchange.dated_user() if self.timestamps else exchange.user
        docs = self.inner._form_documents({INPUT_KEY: user}, {OUTPUT_KEY: exchange.assistant})
        for doc in docs:
            doc.metadata = {**doc.metadata, TURN_IDS_KEY: json.dumps(list(exchange.turn_ids))}
        self.inner.retriever.add_documents(docs)

    def recall(self, query: Query) -> Recall:
        docs = self.inner.retriever.invoke(query.text)
        value = self.inner._documents_to_memory_variables(docs)[MEMORY_KEY]
        ranking = tuple(tuple(json.loads(doc.metadata.get(TURN_IDS_KEY) or "[]")) for doc in docs)
        return Recall((Item(value, (), self.kind),) if value else (), ranking)


TURN_IDS_KEY = "turn_ids"  # a vector document's source turn ids (JSON list) in its metadata


@as_memory.register(ClassicMemory)
def _with_timestamps(memory: ClassicMemory, res: Any, name: str) -> ClassicMemory:
    memory.timestamps = getattr(res, "timestamps", True)
    return memory


@as_memory.register(BaseMemory)
def _wrapped(memory: BaseMemory, res: Any, name: str) -> ClassicMemory:
    """A LangChain memory a factory returned, behind the adapter."""
    return _with_timestamps(ClassicMemory(memory, name), res, name)


def message_count(memory: Any) -> dict[str, Any]:
    """The stats of a memory holding a chat history: how many messages it holds."""
    return {"messages": len(memory.chat_memory.messages)}


def message_texts(messages: Any) -> list[str]:
    """The texts of chat messages (their content; the ``Human:`` prefix is the prompt's)."""
    return [m.content if isinstance(m.content, str) else str(m.content) for m in messages]


def classic_held(memory: Any) -> list[str]:
    """What a LangChain memory holds: its running summary when it keeps one, then the messages
    it reads (``buffer_as_messages`` when it has it: a window's last k exchanges)."""
    texts = []
    if isinstance(getattr(memory, "moving_summary_buffer", None), str):
        texts.append(memory.moving_summary_buffer)
    if hasattr(memory, "buffer_as_messages"):
        texts += message_texts(memory.buffer_as_messages)
    elif hasattr(memory, "chat_memory"):
        texts += message_texts(memory.chat_memory.messages)
    return texts


@register_memory("buffer", "Every exchange, verbatim (ConversationBufferMemory).")
def buffer(res: MemoryResources) -> ClassicMemory:
    from langchain_classic.memory import ConversationBufferMemory

    memory = ConversationBufferMemory(**LANGCHAIN_KEYS, return_messages=False)
    return ClassicMemory(memory, "buffer", "verbatim", message_count)


@register_memory(
    "window",
    "The last k exchanges, verbatim (ConversationBufferWindowMemory).",
    {"k": ParamDoc("exchanges kept (LangChain's default is 5)", min=1)},
)
def window(res: MemoryResources, k: int = 5) -> ClassicMemory:
    from langchain_classic.memory import ConversationBufferWindowMemory

    memory = ConversationBufferWindowMemory(**LANGCHAIN_KEYS, k=k, return_messages=False)
    return ClassicMemory(memory, "window", "verbatim", message_count)


@register_memory(
    "summary",
    "A running summary rewritten by the memory LLM after every exchange "
    "(ConversationSummaryMemory).",
    roles=("memory",),
)
def summary(res: MemoryResources) -> ClassicMemory:
    from langchain_classic.memory import ConversationSummaryMemory

    memory = ConversationSummaryMemory(**LANGCHAIN_KEYS, llm=res.memory_llm, return_messages=False)
    return ClassicMemory(
        memory, "summary", "summary", lambda m: {"summary": m.buffer}, lambda m: [m.buffer]
    )


@register_memory(
    "summary_buffer",
    "Recent exchanges verbatim up to a token limit, older ones folded into a summary "
    "(ConversationSummaryBufferMemory).",
    {"max_token_limit": ParamDoc("tokens of verbatim history kept before summarising", min=1)},
    roles=("memory",),
)
def summary_buffer(res: MemoryResources, max_token_limit: int = 600) -> ClassicMemory:
    from langchain_classic.memory import ConversationSummaryBufferMemory

    memory = ConversationSummaryBufferMemory(
        **LANGCHAIN_KEYS, llm=res.memory_llm, max_token_limit=max_token_limit, return_messages=False
    )
    return ClassicMemory(
        memory,
        "summary_buffer",
        "verbatim",
        lambda m: {"summary": m.moving_summary_buffer, **message_count(m)},
    )


@register_memory(
    "vector",
    "The k past exchanges most similar to the input, from a Chroma store "
    "(VectorStoreRetrieverMemory).",
    {"k": ParamDoc("exchanges retrieved per prompt", min=1)},
    stack=CHROMA_STACK,
)
def vector(res: MemoryResources, k: int = 4) -> ClassicMemory:
    from langchain_classic.memory import VectorStoreRetrieverMemory

    store = cell_vector_store(res)
    retriever = store.as_retriever(search_kwargs={"k": k})
    memory = VectorStoreRetrieverMemory(
        retriever=retriever, memory_key=MEMORY_KEY, input_key=INPUT_KEY
    )
    return VectorMemory(
        memory,
        "vector",
        "retrieved",
        lambda m: {"documents": store._collection.count()},
        lambda m: store._collection.get(include=["documents"])["documents"],
    )
