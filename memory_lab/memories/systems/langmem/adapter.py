"""``langmem``: LangMem's memory manager over a LangGraph Store, as the Mem0 paper ran "LangMem".

After each exchange LangMem's ``MemoryStoreManager`` (what ``create_memory_store_manager``
builds; here with deletes on) gets the exchange's two messages, searches the Store for the
memories near them, and asks the memory model, through trustcall, to insert (``Memory``),
update (``PatchDoc``) or delete (``RemoveDoc``) memories; it writes the result to the Store
under ``("memories", user)``. Its prompts and tools are LangMem's and trustcall's, unchanged.
Each turn's context is a Store search by the user's message: the ``k`` nearest memories, each
dated and naming the turns of the exchanges that wrote it (the memory keeps that beside the
Store, by key). The Store is an ``InMemoryStore``, or a ``PostgresStore`` on the ``postgres``
resource (``store=postgres``), indexed over each memory's text with the run's metered
embeddings.

Two things are made deterministic so a rerun sends the same prompts (and a real model's calls
come from the cache): the ids LangMem draws with ``uuid4`` (new memory keys, the
``<session_...>`` tag of its prompt) are drawn, in this cell, from a counter; and a memory's id
in the prompt is its Store key (LangMem hashes the namespace with it, and the namespace holds
the cell's unique id).

Offline (``offline:memory``), the memory model recognises LangMem's and trustcall's tools among
the bound ones and calls them by LangMem's rule script, deterministically; the memory does
not know which model answers.
"""

from __future__ import annotations

import contextvars
import threading
import uuid
from collections.abc import Callable
from typing import Any, Literal

from memory_lab.memories.builtin.lg_store import user_id
from memory_lab.memories.cell_ids import CellIds
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
from memory_lab.memories.systems.langmem import SYSTEM

Backend = Literal["memory", "postgres"]
NAMESPACE = "memories"
INDEX_FIELDS = ("content.content",)  # a LangMem item's value: {"kind", "content": {"content"}}
MEMORIES_HEADER = "Memories about the user:"


# ------------------------------------------------------------------------- deterministic ids

_NEXT_ID: contextvars.ContextVar[Callable[[], uuid.UUID] | None] = contextvars.ContextVar(
    "langmem_next_id", default=None
)


_IDS_LOCK = threading.Lock()


def _install_cell_ids() -> None:
    from langmem.knowledge import extraction

    with _IDS_LOCK:
        if not isinstance(extraction.uuid, CellIds):
            extraction.uuid = CellIds(_NEXT_ID)


def _manager_class() -> type:
    from langmem.knowledge.extraction import MemoryStoreManager

    class CellMemoryStoreManager(MemoryStoreManager):
        """LangMem's manager with a memory's prompt id its Store key (see the module doc)."""

        @staticmethod
        def _sort_results(search_results_lists: list[list[Any]], query_limit: int) -> dict:
            # LangMem's own, keyed by the item's key instead of a hash of (namespace, key)
            ranked = MemoryStoreManager._sort_results(search_results_lists, query_limit)
            return {str(item.key): item for item in ranked.values()}

    return CellMemoryStoreManager


# ------------------------------------------------------------------------------------ memory


class LangMemMemory:
    """LangMem's memory manager writing a Store; recall searches it by the user's message."""

    def __init__(
        self,
        manager: Any,
        persistence: Persistence,
        user: str,
        *,
        k: int = 4,
        timestamps: bool = True,
    ):
        self.manager = manager
        self.persistence = persistence
        self.store = persistence.store
        self.user = user
        self.namespace = (NAMESPACE, user)
        self.config = {"configurable": {"langgraph_user_id": user}}
        self.k = k
        self.timestamps = timestamps
        self.sources: dict[str, tuple[tuple[str, ...], str | None]] = {}  # key -> turns, date
        self._ids = 0
        self._closed = False

    def _next_id(self) -> uuid.UUID:
        """The cell's next id, skipping ids its Store already holds: a Store kept on a server
        outlives the process (``serve``), whose counter starts again at 1, and LangMem would
        otherwise overwrite the memory saved under the first id with the new one."""
        while True:
            self._ids += 1
            key = uuid.uuid5(uuid.NAMESPACE_URL, f"memory-lab/langmem/{self._ids}")
            if self.store.get(self.namespace, str(key)) is None:
                return key

    def observe(self, exchange: Exchange) -> None:
        user = exchange.dated_user() if self.timestamps else exchange.user
        messages = [{"role": "user", "content": user}] if exchange.user else []
        if exchange.assistant:
            messages.append({"role": "assistant", "content": exchange.assistant})
        if not messages:
            return
        token = _NEXT_ID.set(self._next_id)
        try:
            puts = self.manager.invoke({"messages": messages}, config=self.config)
        finally:
            _NEXT_ID.reset(token)
        for put in puts:
            key = str(put["key"])
            before = self.sources.get(key, ((), None))[0]
            turns = tuple(dict.fromkeys((*exchange.turn_ids, *before)))
            self.sources[key] = (turns, exchange.session_date)

    def items(self) -> list[Any]:
        """Every memory in the Store, by key."""
        found = self.store.search(self.namespace, limit=100_000)
        return sorted(found, key=lambda i: i.key)

    @staticmethod
    def content(item: Any) -> str:
        value = item.value.get("content")
        return str(value.get("content", value) if isinstance(value, dict) else value)

    def memory_text(self, item: Any) -> str:
        date = self.sources.get(item.key, ((), None))[1]
        text = self.content(item)
        return f"- [{date}] {text}" if self.timestamps and date else f"- {text}"

    def recall(self, query: Query) -> Recall:
        if not query.text:
            return Recall((), ranking=())
        with self.persistence.searching():
            hits = list(self.store.search(self.namespace, query=query.text, limit=self.k))
        found = [
            Item(self.memory_text(i), self.sources.get(i.key, ((), None))[0], "fact") for i in hits
        ]
        header = [Item(MEMORIES_HEADER, (), "other")] if found else []
        return Recall(tuple(header + found), ranking=tuple(f.turn_ids for f in found))

    def end_session(self, session: SessionInfo) -> None:
        """The Store spans sessions; nothing to do."""

    def snapshot(self) -> dict[str, Any]:
        return {
            "backend": self.persistence.backend,
            "k": self.k,
            "memories": {
                i.key: {
                    "content": self.content(i),
                    "turn_ids": list(self.sources.get(i.key, ((), None))[0]),
                }
                for i in self.items()
            },
        }

    def held_texts(self) -> list[str]:
        """The stored memories' texts."""
        return [self.content(i) for i in self.items()]

    def stored(self, session_id: str) -> tuple[Any, list[str], list[tuple[str, ...]]]:
        """(persistence, thread ids, Store namespaces) it keeps: its Store namespace."""
        return self.persistence, [], [self.namespace]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.persistence.forget([], [self.namespace])
        finally:
            self.persistence.close()


def preflight_langmem(params: dict[str, Any], resource: Any) -> None:
    """Before a run: the server, the Store's tables and pgvector, when on Postgres."""
    if params["store"] == "postgres":
        check_postgres(resource, "langmem:store=postgres", store=True, vector=True)


@register_memory(
    "langmem",
    "LangMem's memory manager (create_memory_store_manager): after each exchange the memory "
    "model inserts, updates and deletes memories in a LangGraph Store (trustcall tool "
    "calls); the k memories nearest the user's message are the context.",
    {
        "store": ParamDoc(
            "where the Store lives: in the process, or PostgreSQL with pgvector "
            "(--resource postgres=URL)"
        ),
        "k": ParamDoc("memories in the context", min=1, max=100),
        "query_limit": ParamDoc(
            "stored memories the manager searches and shows the model per exchange "
            "(LangMem's default 5)",
            min=1,
            max=100,
        ),
        "deletes": ParamDoc("let the manager delete memories (RemoveDoc)"),
        "keep": ParamDoc("keep the PostgreSQL rows after the cell"),
    },
    roles=("memory",),
    preflight=preflight_langmem,
    persistent={"store": ("postgres",)},
    system=SYSTEM,
)
def langmem(
    res: MemoryResources,
    store: Backend = "memory",
    k: int = 4,
    query_limit: int = 5,
    deletes: bool = True,
    keep: bool = False,
) -> LangMemMemory:
    _install_cell_ids()
    persistence = Persistence(
        store, res, keep=keep, store=True, embeddings=res.embeddings, index_fields=INDEX_FIELDS
    )
    res.on_close(persistence.close)
    manager = _manager_class()(
        res.memory_llm,
        enable_inserts=True,
        enable_deletes=deletes,
        query_limit=query_limit,
        namespace=(NAMESPACE, "{langgraph_user_id}"),
        store=persistence.store,
    )
    return LangMemMemory(manager, persistence, user_id(res.cell_id), k=k, timestamps=res.timestamps)
