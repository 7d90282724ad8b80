"""``store``: LangGraph Store long-term memory beside a checkpointer thread.

After each exchange the memory model extracts the user's facts and preferences (the JSON schema
``key``, ``value``, ``kind`` of ``models.tasks``) and the memory ``put``s each under
``(user_id, kind)``: a newer value under the same key replaces the older one. The extraction
prompt lists the stored facts nearest to the exchange, so the model can give a changed fact its
old key. At each turn the memory searches the Store by the user's message (the Store's own
semantic index over ``value``, embedded with the run's embeddings and metered) and injects the
``k`` hits before the thread's messages. The thread is a ``thread`` memory (no policy) on the same
backend, a new one every session by default: within a session the thread remembers, across
sessions only the Store does, as for a deployed bot meeting a returning user.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from memory_lab.memories.builtin.lg_thread import ThreadMemory, ThreadPolicy, build_thread_graph
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

# no SQLite: SqliteStore's index loads sqlite-vec, and Python's sqlite3 is often built (as here)
# without extension loading
Backend = Literal["memory", "postgres"]
Search = Literal["semantic", "recent"]
ThreadPer = Literal["session", "dialogue"]
KINDS = ("fact", "preference")
KNOWN_SHOWN = 5  # stored facts shown to the extractor with each exchange
FACTS_HEADER = "Stored facts about the user:"


class StoreMemory:
    """Facts in a LangGraph Store (one namespace per user and kind) plus a thread."""

    def __init__(
        self,
        thread: ThreadMemory,
        persistence: Persistence,
        model: Any,
        user_id: str,
        *,
        k: int = 4,
        search: str = "semantic",
        timestamps: bool = True,
    ):
        self.thread = thread
        self.persistence = persistence
        self.store = persistence.store
        self.model = model
        self.user_id = user_id
        self.k = k
        self.search = search
        self.timestamps = timestamps
        self.unparsed_replies = 0
        self._closed = False

    def observe(self, exchange: Exchange) -> None:
        self.thread.observe(exchange)
        if exchange.user:
            self.remember(exchange)

    def remember(self, ex: Exchange) -> None:
        """Extract the exchange's facts and put each under ``(user_id, kind)`` by its key."""
        from memory_lab.models.tasks import extract_prompt, parse_json_reply

        known = [(i.key, str(i.value["value"])) for i in self.lookup(ex.user, KNOWN_SHOWN)]
        transcript = (
            f"Human: {ex.user}\nAI: {ex.assistant}" if ex.assistant else f"Human: {ex.user}"
        )
        reply = self.model.invoke(extract_prompt(transcript, known=known))
        try:
            facts = parse_json_reply(str(reply.content))
        except ValueError:
            self.unparsed_replies += 1
            return
        if isinstance(facts, dict):
            facts = facts.get("facts", [])
        for fact in facts if isinstance(facts, list) else []:
            if not isinstance(fact, dict) or not fact.get("key") or not fact.get("value"):
                continue
            kind = fact.get("kind") if fact.get("kind") in KINDS else "fact"
            key = str(fact["key"]).strip()
            for other in KINDS:  # one value per key, whatever kind it had before
                if other != kind:
                    self.store.delete((self.user_id, other), key)
            value = {
                "value": str(fact["value"]),
                "kind": kind,
                "date": ex.session_date,
                "session": ex.session_id,
                "turn_ids": [ex.user_turn_id] if ex.user_turn_id else [],
            }
            self.store.put((self.user_id, kind), key, value)

    def lookup(self, text: str, limit: int) -> list[Any]:
        """The stored facts for ``text``: nearest by the index, or the most recently updated."""
        if self.search == "semantic":
            with self.persistence.searching():
                return list(self.store.search((self.user_id,), query=text, limit=limit))
        items = self.store.search((self.user_id,), limit=100_000)
        return sorted(items, key=lambda i: (i.updated_at, i.key), reverse=True)[:limit]

    def fact_text(self, item: Any) -> str:
        value = item.value
        date = value.get("date")
        return f"- [{date}] {value['value']}" if self.timestamps and date else f"- {value['value']}"

    def recall(self, query: Query) -> Recall:
        hits = self.lookup(query.text, self.k) if query.text else []
        facts = [Item(self.fact_text(i), tuple(i.value.get("turn_ids", ())), "fact") for i in hits]
        header = [Item(FACTS_HEADER, (), "other")] if facts else []
        # ranked: the semantic search's facts, nearest first ("recent" does not rank by query)
        ranking = tuple(f.turn_ids for f in facts) if self.search == "semantic" else None
        return Recall(tuple(header + facts) + self.thread.recall(query).items, ranking=ranking)

    def end_session(self, session: SessionInfo) -> None:
        self.thread.end_session(session)

    def facts(self) -> dict[str, str]:
        """Every stored fact, key -> value."""
        items = self.store.search((self.user_id,), limit=100_000)
        return {i.key: str(i.value["value"]) for i in sorted(items, key=lambda i: i.key)}

    def snapshot(self) -> dict[str, Any]:
        return {
            "backend": self.persistence.backend,
            "search": self.search,
            "facts": self.facts(),
            "unparsed_replies": self.unparsed_replies,
            "thread": self.thread.snapshot(),
        }

    def held_texts(self) -> list[str]:
        """The stored facts' values, then the threads' texts."""
        return [*self.facts().values(), *self.thread.held_texts()]

    def stored(self, session_id: str) -> tuple[Any, list[str], list[tuple[str, ...]]]:
        """(persistence, thread ids, Store namespaces) it keeps for a session (see
        ``ThreadMemory.stored``): its thread and the user's facts."""
        return self.persistence, [self.thread.thread_id(session_id)], [(self.user_id,)]

    def stored_exchanges(self, session_id: str) -> list[tuple[str, str]]:
        """The session's (message, reply) pairs as its thread holds them."""
        return self.thread.stored_exchanges(session_id)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.persistence.forget(list(self.thread.threads), [(self.user_id,)])
        finally:
            self.persistence.close()


def user_id(cell_id: str) -> str:
    """The cell's user id: its cell id without the periods Store namespaces may not hold."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", cell_id)


def preflight_store(params: dict[str, Any], resource: Any) -> None:
    """Before a run: the server, its tables and (for semantic search) pgvector, when on Postgres."""
    if params["backend"] == "postgres":
        vector = params["search"] == "semantic"
        check_postgres(resource, "store:backend=postgres", store=True, vector=vector)


@register_memory(
    "store",
    "Facts and preferences the memory model extracts into a LangGraph Store "
    "(user_id, kind), newest value per key, searched by the user's message; beside a "
    "thread per session.",
    {
        "backend": ParamDoc(
            "where the Store and thread live: in the process, or PostgreSQL "
            "(--resource postgres=URL; semantic search needs pgvector there)"
        ),
        "k": ParamDoc("stored facts injected per prompt", min=1),
        "search": ParamDoc(
            "find facts by the Store's semantic index over the user's message, or take the "
            "most recently updated (a Store without an index)"
        ),
        "thread_per": ParamDoc(
            "a new thread every session (only the Store spans sessions), or one thread per dialogue"
        ),
        "keep": ParamDoc("keep the SQLite file or the PostgreSQL rows after the cell"),
    },
    roles=("memory",),
    preflight=preflight_store,
    persistent={"backend": ("postgres",)},
)
def store(
    res: MemoryResources,
    backend: Backend = "memory",
    k: int = 4,
    search: Search = "semantic",
    thread_per: ThreadPer = "session",
    keep: bool = False,
) -> StoreMemory:
    embeddings = res.embeddings if search == "semantic" else None
    persistence = Persistence(backend, res, keep=keep, store=True, embeddings=embeddings)
    res.on_close(persistence.close)
    policy = ThreadPolicy("none")
    graph = build_thread_graph(policy, None, persistence.checkpointer)
    thread = ThreadMemory(
        graph,
        persistence,
        res.cell_id,
        policy=policy,
        thread_per=thread_per,
        timestamps=res.timestamps,
    )
    return StoreMemory(
        thread,
        persistence,
        res.memory_llm,
        user_id(res.cell_id),
        k=k,
        search=search,
        timestamps=res.timestamps,
    )
