"""``amem``: A-Mem (``agentic_memory``, "A-MEM: Agentic Memory for LLM Agents", Xu et al.), its
authors' ``AgenticMemorySystem`` (agiresearch/A-mem at ceffb86), run as they wrote it.

After each exchange its two messages (``Human: ...`` / ``AI: ...``) become one A-Mem note:
``analyze_content`` (one memory-model call: keywords, context, tags, JSON) and then ``add_note``
with them, which runs A-Mem's evolution (``process_memory``: the 5 notes nearest the new one, one
call deciding ``strengthen`` links and ``update_neighbor`` tags and contexts, JSON) and, every
``evo_threshold`` evolutions, its ``consolidate_memories``. Each turn's context is A-Mem's
``search_agentic(user message, k)``: the nearest notes in Chroma, then notes they link to, each
dated and naming the turns of the exchange that wrote it. A-Mem's defaults are kept: ``k`` 5
(``search_agentic``), ``evo_threshold`` 100, the neighbours of evolution 5 (fixed in A-Mem).

What differs from a bare ``AgenticMemorySystem(...)``, and why:

- its LLM: A-Mem's ``LLMController("openai", "gpt-4o-mini")`` is replaced by a controller whose
  ``get_completion(prompt, response_format)`` sends the same two messages (A-Mem's system line
  ``You must respond with a JSON object.`` and the prompt) to the run's memory model
  (``res.memory_llm``: metered, cached) with A-Mem's JSON schema as ``response_format``, and hands
  back the reply's text for A-Mem to ``json.loads``. A-Mem's ``temperature=0.7`` and
  ``max_tokens=1000`` are not sent: the run's model keeps its own settings (reruns come from the
  cache). litellm is imported by A-Mem but never called. A provider error, which A-Mem would
  swallow into empty metadata or "no evolution" (memory_system.py:229-231, 720-727), is raised
  after ``add_note``; a reply that is not JSON is left to A-Mem's fallback and counted
  (``snapshot()["fallbacks"]``).
- its embeddings and store: A-Mem's ``ChromaRetriever`` (an in-memory ``chromadb.Client`` that
  ``__init__`` *resets*, process-wide, and a sentence-transformers model it would download) is
  replaced by the same class over the cell's own Chroma collection (``memory_lab.memories.chroma``:
  the process's client, dropped when the cell closes), whose documents and queries are embedded
  by the run's metered embeddings. A-Mem's ``add_document``, ``search`` and metadata conversion
  are its own. The collection is cosine (memory-lab's); A-Mem's default is L2, which ranks
  normalised vectors (MiniLM's) the same. A-Mem's two module-level look-ups of
  ``ChromaRetriever`` and ``LLMController`` (``__init__``, ``consolidate_memories``) see the
  cell's, under a lock, while those two methods run.
- ids and times: each note's id is drawn from the cell's counter and its ``timestamp`` and
  ``last_accessed`` are the session's date (A-Mem's ``YYYYMMDDHHMM``), instead of ``uuid4`` and
  ``datetime.now``, so two replays send the same prompts and recall the same notes.
- note construction: this version's ``add_note`` does not call ``analyze_content``
  (memory_system.py:233-238: a note gets its keywords, context and tags only when the caller
  passes them), though its README says the system generates them; the memory calls it first and
  passes its result, as the paper describes.

A-Mem's own behaviour kept as written (see the draft's report): the evolution prompt shows its
neighbours as ``memory index:i`` (memory_system.py:307) while ``search_agentic`` follows links by
note id (memory_system.py:561-571), so a link a model names by index is stored and never followed
(``link_ids=true`` maps an index to that neighbour's id; even then ``search_agentic`` appends
linked notes after its ``k`` hits and returns ``memories[:k]``, memory_system.py:585, so they show
only while fewer than ``k`` notes are stored); ``update_neighbor`` updates the notes at
those positions in insertion order, not the neighbours (memory_system.py:687-716), and only in
``memories``, not in Chroma; ``consolidate_memories`` re-adds every note to the same collection,
where Chroma ignores ids it holds (it re-embeds them, changing nothing).

Kept off the network: ``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set before A-Mem (and so litellm)
is imported, or litellm fetches its price map from GitHub at import; litellm's ``telemetry`` flag
is read by nothing outside its proxy, and is set off too.

Offline (``offline:memory``), the memory model recognises A-Mem's two prompts and answers them by
A-Mem's rule script (``rules.py`` beside this file), deterministically.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections import Counter
from contextlib import contextmanager
from typing import Any

from memory_lab.memories.chroma import STACK as CHROMA_STACK
from memory_lab.memories.chroma import cell_collection
from memory_lab.memories.protocol import (
    Exchange,
    Item,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
    session_datetime,
)
from memory_lab.memories.registry import ParamDoc, register_memory
from memory_lab.memories.systems.amem import SYSTEM

# litellm (imported by A-Mem's modules) fetches its model-price map from GitHub at import
# unless LITELLM_LOCAL_MODEL_COST_MAP is set: the declaration's switches, set by ``import
# memory_lab`` and again before any import of agentic_memory, whatever the user's environment.
OFFLINE_ENV = SYSTEM.telemetry

JSON_SYSTEM = "You must respond with a JSON object."  # A-Mem's system message (llm_controller.py)
NOTES_HEADER = "Notes from earlier conversations (A-Mem):"
STACK = (*CHROMA_STACK, "litellm", "agentic_memory.memory_system", "agentic_memory.retrievers")

_PATCH_LOCK = threading.RLock()  # A-Mem's module globals are the cell's only while it holds this


def _amem() -> Any:
    """``agentic_memory.memory_system``, imported with litellm kept offline and quiet."""
    os.environ.update(OFFLINE_ENV)
    import litellm
    from agentic_memory import memory_system

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return memory_system


# ------------------------------------------------------------------------------------ the LLM


class MemoryModelController:
    """A-Mem's ``LLMController`` answered by the run's memory model.

    A-Mem calls ``llm_controller.llm.get_completion(prompt, response_format=...)``; ``llm`` is
    this object itself. ``asked`` records what A-Mem asked for (backend, model name); ``calls``
    and ``fallbacks`` count calls by kind (``analyze``, ``evolve``) and replies that were not
    JSON; ``error`` keeps a provider error A-Mem would swallow, raised after ``add_note``.
    """

    def __init__(self, model: Any):
        self.model = model
        self.llm = self
        self.asked: dict[str, Any] = {}
        self.calls: Counter[str] = Counter()
        self.fallbacks: Counter[str] = Counter()
        self.error: BaseException | None = None

    def made_by(self, backend: str = "openai", model: str = "gpt-4", api_key: Any = None) -> Any:
        """Stands for ``LLMController(backend, model, api_key)`` in A-Mem's ``__init__``."""
        self.asked = {"llm_backend": backend, "llm_model": model}
        return self

    @staticmethod
    def kind(response_format: dict | None) -> str:
        schema = ((response_format or {}).get("json_schema") or {}).get("schema") or {}
        props = schema.get("properties") or {}
        return (
            "evolve" if "should_evolve" in props else "analyze" if "keywords" in props else "other"
        )

    def get_completion(
        self, prompt: str, response_format: dict | None = None, temperature: float = 0.7
    ) -> str:
        from langchain_core.messages import HumanMessage, SystemMessage

        kind = self.kind(response_format)
        self.calls[kind] += 1
        extra = {"response_format": response_format} if response_format else {}
        try:
            reply = self.model.invoke([SystemMessage(JSON_SYSTEM), HumanMessage(prompt)], **extra)
        except Exception as exc:
            self.error = self.error or exc
            raise
        text = reply.content if isinstance(reply.content, str) else str(reply.content)
        try:
            json.loads(text)
        except ValueError:
            self.fallbacks[kind] += 1  # A-Mem falls back (empty metadata, no evolution)
        return text


# ---------------------------------------------------------------------- embeddings and Chroma


class _Embedded:
    """The cell's Chroma collection, embedding what A-Mem adds and asks with the run's
    embeddings (A-Mem's collection would embed with its sentence-transformers function)."""

    def __init__(self, collection: Any, embeddings: Any):
        self._collection = collection
        self._embeddings = embeddings

    def add(self, documents: list[str], metadatas: list[dict], ids: list[str], **kw: Any) -> None:
        vectors = self._embeddings.embed_documents(list(documents))
        self._collection.add(
            ids=ids, documents=documents, metadatas=metadatas, embeddings=vectors, **kw
        )

    def query(self, query_texts: list[str], n_results: int = 10, **kw: Any) -> Any:
        vectors = [self._embeddings.embed_query(t) for t in query_texts]
        return self._collection.query(query_embeddings=vectors, n_results=n_results, **kw)

    def __getattr__(self, name: str) -> Any:  # delete, get, count: Chroma's own
        return getattr(self._collection, name)


class _CellClient:
    """What A-Mem's ``__init__`` resets (``temp_retriever.client.reset()``): the cell's
    collection emptied, not every collection of the process's client."""

    def __init__(self, collection: _Embedded):
        self.collection = collection

    def reset(self) -> bool:
        held = self.collection.get(include=[])["ids"]
        if held:
            self.collection.delete(ids=held)
        return True


def _retriever_class(memory_system: Any) -> type:
    base = memory_system.ChromaRetriever  # agentic_memory.retrievers.ChromaRetriever

    class CellRetriever(base):
        """A-Mem's ``ChromaRetriever`` on the cell's collection (its methods unchanged)."""

        def __init__(self, collection: _Embedded, model_name: str):
            self.client = _CellClient(collection)
            self.embedding_function = None  # the run's embeddings, in ``_Embedded``
            self.model_name = model_name
            self.collection = collection

    return CellRetriever


# ------------------------------------------------------------------------------------ memory


def _amem_time(date: str | None) -> str:
    """A session date in A-Mem's timestamp format (``YYYYMMDDHHMM``); as written when it does
    not parse; ``unknown`` without one (A-Mem would take ``datetime.now``)."""
    when = session_datetime(date)
    if when is not None:
        return when.strftime("%Y%m%d%H%M")
    return date or "unknown"


class AMemMemory:
    """A-Mem's ``AgenticMemorySystem``, one note per exchange; recall is ``search_agentic``."""

    def __init__(
        self,
        system: Any,
        controller: MemoryModelController,
        asked_embeddings: list[str],
        *,
        k: int = 5,
        link_ids: bool = False,
        timestamps: bool = True,
    ):
        self.system = system
        self.controller = controller
        self.asked_embeddings = asked_embeddings
        self.k = k
        self.link_ids = link_ids
        self.timestamps = timestamps
        self.sources: dict[str, tuple[tuple[str, ...], str | None]] = {}  # id -> turns, date
        self._ids = 0

    def _next_id(self) -> str:
        self._ids += 1
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memory-lab/amem/{self._ids}"))

    @staticmethod
    def note_text(exchange: Exchange) -> str:
        lines = [f"Human: {exchange.user}"] if exchange.user else []
        if exchange.assistant:
            lines.append(f"AI: {exchange.assistant}")
        return "\n".join(lines)

    def observe(self, exchange: Exchange) -> None:
        content = self.note_text(exchange)
        if not content:
            return
        when = _amem_time(exchange.session_date)
        system, controller = self.system, self.controller
        controller.error = None
        made = system.analyze_content(content)
        self._raise_model_error()
        neighbours = self._neighbour_ids(content) if self.link_ids else []
        note_id = system.add_note(
            content,
            time=when,
            id=self._next_id(),
            last_accessed=when,
            keywords=made.get("keywords") or [],
            context=made.get("context") or None,
            tags=made.get("tags") or [],
        )
        self._raise_model_error()
        self.sources[note_id] = (exchange.turn_ids, exchange.session_date)
        if neighbours:
            note = system.memories[note_id]
            note.links = [_by_index(link, neighbours) for link in note.links]

    def _neighbour_ids(self, content: str) -> list[str]:
        """The ids of the notes A-Mem's evolution will show as ``memory index:0..``: the same
        search (``find_related_memories``, k=5), run first."""
        if not self.system.memories:
            return []
        return list(self.system.retriever.search(content, 5)["ids"][0])

    def _raise_model_error(self) -> None:
        error, self.controller.error = self.controller.error, None
        if error is not None:
            raise error

    def note_line(self, hit: dict[str, Any]) -> str:
        date = self.sources.get(hit["id"], ((), None))[1]
        head = f"- [{date}] " if self.timestamps and date else "- "
        text = head + str(hit.get("content", "")).replace("\n", "\n  ")
        context = hit.get("context")
        tags = hit.get("tags") or []
        if context:
            text += f"\n  Context: {context}"
        if tags:
            text += f"\n  Tags: {', '.join(str(t) for t in tags)}"
        return text

    def recall(self, query: Query) -> Recall:
        if not query.text:
            return Recall((), ranking=())
        hits = self.system.search_agentic(query.text, k=self.k)
        found = [
            Item(
                self.note_line(h),
                self.sources.get(h["id"], ((), None))[0],
                "linked" if h.get("is_neighbor") else "retrieved",
            )
            for h in hits
        ]
        header = [Item(NOTES_HEADER, (), "other")] if found else []
        return Recall(tuple(header + found), ranking=tuple(f.turn_ids for f in found))

    def end_session(self, session: SessionInfo) -> None:
        """A-Mem's notes span sessions; nothing to do."""

    def snapshot(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "asked": {**self.controller.asked, "embedding_model": self.asked_embeddings},
            "llm_calls": dict(self.controller.calls),
            "fallbacks": dict(self.controller.fallbacks),
            "evolutions": self.system.evo_cnt,
            "notes": {
                note.id: {
                    "content": note.content,
                    "keywords": list(note.keywords),
                    "context": note.context,
                    "tags": list(note.tags),
                    "links": list(note.links),
                    "timestamp": note.timestamp,
                    "turn_ids": list(self.sources.get(note.id, ((), None))[0]),
                }
                for note in self.system.memories.values()
            },
        }

    def held_texts(self) -> list[str]:
        """Each note's content, context, keywords and tags."""
        texts = []
        for note in self.system.memories.values():
            texts += [note.content, note.context, " ".join(map(str, note.keywords))]
            texts.append(" ".join(map(str, note.tags)))
        return [t for t in texts if t]

    def close(self) -> None:
        """The collection is dropped through ``on_close``; the notes go with the object."""
        self.system.memories.clear()


def _by_index(link: Any, neighbours: list[str]) -> Any:
    """A link a model named by the prompt's ``memory index`` (``0``, ``memory index:0``), as
    that neighbour's id; any other link as it is."""
    text = str(link).strip().removeprefix("memory index:").strip()
    return neighbours[int(text)] if text.isdigit() and int(text) < len(neighbours) else link


def _system_class(memory_system: Any) -> type:
    base = memory_system.AgenticMemorySystem

    class CellAgenticMemorySystem(base):
        """A-Mem's system whose ``ChromaRetriever`` and ``LLMController`` are the cell's."""

        def __init__(self, make_retriever: Any, controller: MemoryModelController, **kw: Any):
            self._make_retriever, self._controller = make_retriever, controller
            with self._cells_own():
                super().__init__(**kw)

        @contextmanager
        def _cells_own(self):
            with _PATCH_LOCK:
                saved = memory_system.ChromaRetriever, memory_system.LLMController
                memory_system.ChromaRetriever = self._make_retriever
                memory_system.LLMController = self._controller.made_by
                try:
                    yield
                finally:
                    memory_system.ChromaRetriever, memory_system.LLMController = saved

        def consolidate_memories(self) -> None:
            with self._cells_own():
                super().consolidate_memories()

    return CellAgenticMemorySystem


@register_memory(
    "amem",
    "A-Mem (agentic_memory, its authors' AgenticMemorySystem): each exchange a note (the "
    "memory model writes keywords, context and tags, then decides links and neighbour updates, "
    "JSON), A-Mem's search_agentic for the user's message (the k nearest notes, then linked "
    "ones; Chroma) as the context.",
    {
        "k": ParamDoc("notes in the context (search_agentic's k)", min=1, max=100),
        "evo_threshold": ParamDoc(
            "evolutions between A-Mem's consolidations (its evo_threshold)", min=1
        ),
        "link_ids": ParamDoc(
            "map a link the evolution names by its prompt's 'memory index' to that note's id, "
            "so search_agentic follows it (A-Mem as written: off)"
        ),
    },
    roles=("memory",),
    stack=STACK,
    system=SYSTEM,
)
def amem(
    res: MemoryResources, k: int = 5, evo_threshold: int = 100, link_ids: bool = False
) -> AMemMemory:
    memory_system = _amem()
    collection = _Embedded(cell_collection(res, "amem"), res.embeddings)
    retriever_class = _retriever_class(memory_system)
    asked_embeddings: list[str] = []

    def make_retriever(collection_name: str = "memories", model_name: str = "all-MiniLM-L6-v2"):
        asked_embeddings.append(model_name)  # A-Mem asks by name; the run's embeddings answer
        return retriever_class(collection, model_name)

    controller = MemoryModelController(res.memory_llm)
    system = _system_class(memory_system)(make_retriever, controller, evo_threshold=evo_threshold)
    return AMemMemory(
        system,
        controller,
        sorted(set(asked_embeddings)),
        k=k,
        link_ids=link_ids,
        timestamps=res.timestamps,
    )
