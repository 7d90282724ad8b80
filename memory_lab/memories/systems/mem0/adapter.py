"""``mem0``: the open-source ``mem0ai`` package (``mem0.Memory``), through its LangChain providers.

mem0's ``llm`` is the run's memory model, its ``embedder`` the run's metered embeddings and its
vector store a LangChain ``Chroma`` store on the cell's own collection. After each exchange the
exchange's two messages are ``add``ed (the session date in the metadata). The pinned version
(2.2.1) runs its "V3" pipeline: one extraction call (``ADDITIVE_EXTRACTION_PROMPT``, JSON
``{"memory": [{"id", "text"}]}``) that sees the ten stored memories nearest the exchange and the
last messages from its history database, then embeds and inserts each new memory; a memory
whose text is stored already is skipped (mem0's hash dedup). This version's ``add`` only adds:
it makes no update or delete call. Each turn's context is ``search(user message, limit=k)``:
the ``k`` best memories, dated and naming the turns of the exchanges that wrote them (kept
beside mem0, by memory id, from ``add``'s returned events).

Kept out of the user's home and off the network: ``MEM0_TELEMETRY`` is set to ``False`` and
``MEM0_DIR`` (read once, when mem0 is first imported, which writes its ``config.json`` there)
to a folder of the first cell's, both before mem0 is imported; each cell's history database is
in its own folder.

Three things differ from a bare ``Memory`` so runs are reproducible and correct:

- the ids mem0 draws with ``uuid4`` come from the cell's counter (reruns send the same
  prompts, so a real model's calls come from the cache);
- the extraction prompt's ``Current Date`` (mem0 puts today's date there) is the session's
  date, as the dialogue has it;
- mem0's LangChain store takes the ``(document, score)`` pairs of Chroma's
  ``similarity_search_by_vector_with_relevance_scores`` as similarities, but Chroma returns
  cosine distances (lower is nearer), which would rank memories backwards and drop exact
  matches under mem0's 0.1 threshold; the cell's store returns ``1 - distance``. Chroma's store
  also writes mem0's vectors as given (``add_embeddings``) instead of embedding the text again.

Offline (``offline:memory``), the memory model recognises mem0's extraction prompt and answers
it by mem0's rule script, deterministically; the memory does not know which model answers.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Literal

from memory_lab.errors import ConfigError
from memory_lab.memories.builtin.lg_store import user_id
from memory_lab.memories.cell_ids import CellIds
from memory_lab.memories.chroma import STACK as CHROMA_STACK
from memory_lab.memories.lg_backends import (
    EMBEDDING_DIMS,
    POSTGRES_RESOURCE,
    connect_postgres,
    describe_url,
)
from memory_lab.memories.protocol import (
    Exchange,
    Item,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
)
from memory_lab.memories.registry import ParamDoc, register_memory
from memory_lab.memories.systems.mem0 import SYSTEM
from memory_lab.telemetry import switch_off_loaded

MEMORIES_HEADER = "Memories about the user:"
HISTORY_FILE = "mem0_history.db"

# ------------------------------------------------------------------ import, ids and dates

_IMPORT_LOCK = threading.Lock()
_NEXT_ID: contextvars.ContextVar[Any] = contextvars.ContextVar("mem0_next_id", default=None)
_DATE: contextvars.ContextVar[str | None] = contextvars.ContextVar("mem0_date", default=None)


def _import_mem0(folder: Path) -> Any:
    """``mem0.memory.main``, imported with telemetry off and ``MEM0_DIR`` out of HOME."""
    with _IMPORT_LOCK:
        os.environ["MEM0_TELEMETRY"] = "False"
        if not os.environ.get("MEM0_DIR"):
            folder.mkdir(parents=True, exist_ok=True)
            os.environ["MEM0_DIR"] = str(folder)
        from mem0.memory import main

        switch_off_loaded()  # mem0 imported before memory_lab read its switch then
        if not isinstance(main.uuid, CellIds):
            # once per cell mem0 warns that a LangChain store has no keyword search (it then
            # ranks by vectors alone, as documented): said once in the docs, not in every run
            logging.getLogger(main.__name__).addFilter(
                lambda record: "does not support keyword search" not in record.getMessage()
            )
            # without spaCy (mem0ai's nlp extra, which would download a model at run time)
            # mem0 matches keywords and entities on the text as it is, and says so at every
            # load as a warning naming a pip command: said in the docs instead
            logging.getLogger("mem0.utils.spacy_models").addFilter(
                lambda record: "spaCy is not installed" not in record.getMessage()
            )
            main.uuid = CellIds(_NEXT_ID)
            mem0_prompt = main.generate_additive_extraction_prompt

            def dated_prompt(*args: Any, **kwargs: Any) -> str:
                if _DATE.get() and kwargs.get("current_date") is None:
                    kwargs["current_date"] = _DATE.get()
                return mem0_prompt(*args, **kwargs)

            main.generate_additive_extraction_prompt = dated_prompt
        return main


# ---------------------------------------------------------------------------- vector store


def cell_store(res: MemoryResources) -> Any:
    """The cell's LangChain Chroma store, as mem0's ``langchain`` provider needs it (above)."""
    from memory_lab.memories.chroma import cell_vector_store

    store = cell_vector_store(res)
    collection = store._collection

    def add_embeddings(embeddings: list, metadatas: list | None = None, ids: list | None = None):
        metadatas = metadatas or [{} for _ in embeddings]
        documents = [str(m.get("data", "")) for m in metadatas]
        collection.upsert(ids=ids, embeddings=embeddings, metadatas=metadatas, documents=documents)
        return ids

    search = store.similarity_search_by_vector_with_relevance_scores

    def by_similarity(*args: Any, **kwargs: Any) -> list:
        return [(doc, 1.0 - float(distance)) for doc, distance in search(*args, **kwargs)]

    store.add_embeddings = add_embeddings
    store.similarity_search_by_vector_with_relevance_scores = by_similarity
    return store


# ------------------------------------------------------------------------------------ memory


class Mem0Memory:
    """``mem0.Memory`` adding each exchange; recall is its search by the user's message."""

    def __init__(self, memory: Any, user: str, *, k: int = 4, timestamps: bool = True):
        self.memory = memory
        self.user = user
        self.k = k
        self.timestamps = timestamps
        self.sources: dict[str, tuple[tuple[str, ...], str | None]] = {}  # id -> turns, date
        self._ids = 0

    def _next_id(self) -> uuid.UUID:
        """The cell's next id, skipping ids already stored: a vector store kept on a server
        outlives the process (``serve``), whose counter starts again at 1, and mem0's insert
        of an id it holds would fail."""
        while True:
            self._ids += 1
            key = uuid.uuid5(uuid.NAMESPACE_URL, f"memory-lab/mem0/{self._ids}")
            if self.memory.get(str(key)) is None:
                return key

    def observe(self, exchange: Exchange) -> None:
        messages = [{"role": "user", "content": exchange.user}] if exchange.user else []
        if exchange.assistant:
            messages.append({"role": "assistant", "content": exchange.assistant})
        if not messages:
            return
        metadata = {"session_date": exchange.session_date} if exchange.session_date else None
        ids, date = _NEXT_ID.set(self._next_id), _DATE.set(exchange.session_date)
        try:
            result = self.memory.add(messages, user_id=self.user, metadata=metadata)
        finally:
            _NEXT_ID.reset(ids)
            _DATE.reset(date)
        for event in result.get("results", []):
            key = str(event["id"])
            if event.get("event") == "DELETE":
                self.sources.pop(key, None)
                continue
            before = self.sources.get(key, ((), None))[0]
            turns = tuple(dict.fromkeys((*exchange.turn_ids, *before)))
            self.sources[key] = (turns, exchange.session_date)

    def items(self) -> list[dict[str, Any]]:
        """Every stored memory, by id."""
        found = self.memory.get_all(filters={"user_id": self.user}, top_k=100_000)
        return sorted(found.get("results", []), key=lambda m: m["id"])

    def memory_text(self, hit: dict[str, Any]) -> str:
        date = self.sources.get(hit["id"], ((), None))[1]
        date = date or (hit.get("metadata") or {}).get("session_date")
        text = hit["memory"]
        return f"- [{date}] {text}" if self.timestamps and date else f"- {text}"

    def recall(self, query: Query) -> Recall:
        if not query.text:
            return Recall((), ranking=())
        hits = self.memory.search(query.text, filters={"user_id": self.user}, top_k=self.k)
        found = [
            Item(self.memory_text(h), self.sources.get(h["id"], ((), None))[0], "fact")
            for h in hits.get("results", [])[: self.k]
        ]
        header = [Item(MEMORIES_HEADER, (), "other")] if found else []
        return Recall(tuple(header + found), ranking=tuple(f.turn_ids for f in found))

    def end_session(self, session: SessionInfo) -> None:
        """mem0's memories span sessions; nothing to do."""

    def snapshot(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "memories": {
                m["id"]: {
                    "memory": m["memory"],
                    "turn_ids": list(self.sources.get(m["id"], ((), None))[0]),
                }
                for m in self.items()
            },
        }

    def held_texts(self) -> list[str]:
        """The stored memories' texts."""
        return [m["memory"] for m in self.items()]

    def forget_stored(self) -> None:
        """Delete what it keeps on its server (the user's own pgvector table), whatever
        ``keep`` says."""
        if hasattr(self.memory.vector_store, "delete_col"):
            self.memory.vector_store.delete_col()

    def close(self) -> None:
        """The collection is dropped and the history database closed through ``on_close``."""


Backend = Literal["memory", "postgres"]


def pg_table(cell_id: str) -> str:
    """The cell's pgvector table: mem0 names it after its collection (an SQL identifier)."""
    return "mem0_" + hashlib.sha1(cell_id.encode("utf-8")).hexdigest()[:20]


def preflight_mem0(params: dict[str, Any], resource: Any) -> None:
    """Before a run, on Postgres: the server answers and offers pgvector (mem0 creates it)."""
    if params["store"] != "postgres":
        return
    url = resource(POSTGRES_RESOURCE)
    with connect_postgres(url, "mem0:store=postgres") as conn:
        row = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    if row is None:
        raise ConfigError(
            f"memory 'mem0:store=postgres': the PostgreSQL server at {describe_url(url)} lacks "
            "the pgvector extension mem0's pgvector store needs; install it there, or use "
            "store=memory"
        )


def vector_store_config(res: MemoryResources, store: str) -> dict[str, Any]:
    """mem0's vector store: the cell's Chroma collection, or mem0's own pgvector store on the
    ``postgres`` resource (a table of the cell's own; the run's embeddings, 384 dimensions)."""
    if store == "postgres":
        return {
            "provider": "pgvector",
            "config": {
                "connection_string": res.resource(POSTGRES_RESOURCE),
                "collection_name": pg_table(res.cell_id),
                "embedding_model_dims": EMBEDDING_DIMS,
                "minconn": 1,
                "maxconn": 2,
            },
        }
    return {
        "provider": "langchain",
        "config": {"client": cell_store(res), "collection_name": res.cell_id},
    }


@register_memory(
    "mem0",
    "mem0 (the mem0ai package's Memory) through its LangChain providers: each exchange "
    "added (the memory model extracts memories, JSON), the k memories mem0's search ranks "
    "best for the user's message (Chroma) as the context.",
    {
        "k": ParamDoc("memories in the context (mem0's search limit)", min=1, max=100),
        "store": ParamDoc(
            "where mem0 keeps its vectors: the cell's Chroma collection, or mem0's pgvector "
            "store on --resource postgres=URL (a table of the cell's own)"
        ),
        "keep": ParamDoc("keep the pgvector table when the cell ends (store=postgres)"),
    },
    roles=("memory",),
    preflight=preflight_mem0,
    stack=CHROMA_STACK,
    persistent={"store": ("postgres",)},
    system=SYSTEM,
)
def mem0(
    res: MemoryResources, k: int = 4, store: Backend = "memory", keep: bool = False
) -> Mem0Memory:
    if res.cell_dir is not None:
        folder = Path(res.cell_dir)
    else:  # no run folder (the inspector, a notebook): a private temporary one
        folder = Path(tempfile.mkdtemp(prefix="memory-lab-mem0-"))
        res.on_close(lambda: shutil.rmtree(folder, ignore_errors=True))
    folder.mkdir(parents=True, exist_ok=True)
    main = _import_mem0(folder / "mem0")
    from mem0.configs.base import MemoryConfig

    config = MemoryConfig(
        llm={"provider": "langchain", "config": {"model": res.memory_llm}},
        embedder={"provider": "langchain", "config": {"model": res.embeddings}},
        vector_store=vector_store_config(res, store),
        history_db_path=str(folder / HISTORY_FILE),
    )
    memory = main.Memory(config)
    res.on_close(memory.db.close)
    if store == "postgres":
        pool = memory.vector_store.connection_pool
        res.on_close(pool.close)  # last: the table is dropped first, unless kept
        if not keep:
            res.on_close(memory.vector_store.delete_col)
    return Mem0Memory(memory, user_id(res.cell_id), k=k, timestamps=res.timestamps)
