"""``graphiti``: Zep's open-source engine (``graphiti-core``), a temporal knowledge graph.

After each exchange the exchange is added to the graph as one episode (``add_episode``, source
``message``, the lines ``User: ...`` and ``Assistant: ...``), its reference time the session's
date, so Graphiti dates what it learns and invalidates what a later episode contradicts. Graphiti
then runs its own pipeline with the run's memory model: entity extraction, entity resolution
against the graph, fact (edge) extraction, edge deduplication and invalidation, and entity
summaries, each a structured call of its own prompt. Each turn's context is Graphiti's search
for the user's message (``search_``: BM25 and cosine similarity over facts and entities, fused by
RRF, or MMR): the top ``k`` facts with their valid/invalid dates and the top ``entities``
entities with their summaries, in the layout of Zep's own context block. Each fact names the
turns of the episodes it came from (Graphiti keeps them on the edge); each entity names the
turns of the facts its summary holds word for word (Graphiti appends new facts to the summaries
of their entities until they grow long, then has the model rewrite them: a rewritten summary
names no turns, its provenance being unknown), so evidence recall credits what is shown, no
more.

The graph lives in an embedded Kuzu database in a folder of the cell's own (``graphiti/``),
dropped when the cell ends unless ``keep=true``.

The run's models drive it: Graphiti's ``LLMClient`` is the run's memory model (each structured
call asks for a JSON object, as Graphiti's OpenAI-compatible client does, and is metered and
cached as any call of the run), its embedder the run's metered embeddings, its cross-encoder a
ranking by those embeddings' cosine (used only by search recipes that rerank with one; the
default RRF does not). Nothing defaults to a hosted model. Telemetry is off
(``GRAPHITI_TELEMETRY_ENABLED=false``), and the ids Graphiti draws with ``uuid4`` come from the
cell's counter, so reruns build the same graph and send the same prompts.

Offline (``offline:memory``), the memory model recognises Graphiti's calls by their response
schema and answers them by Graphiti's rule script, deterministically; the memory does not know
which model answers.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import re
import shutil
import tempfile
import threading
import uuid
import warnings
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar

from memory_lab.errors import ConfigError
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
from memory_lab.memories.systems.graphiti import SYSTEM
from memory_lab.models.providers import json_mode
from memory_lab.models.tasks import parse_json_reply

GRAPH_FOLDER = "graphiti"
FACTS_HEADER = (
    "FACTS and ENTITIES represent relevant context to the current conversation.\n"
    "# These are the most relevant facts and their valid date ranges\n"
    "# format: FACT (Date range: from - to)"
)
ENTITIES_HEADER = "# These are the most relevant entities\n# ENTITY_NAME: entity summary"
SPEAKERS = ("User", "Assistant")

T = TypeVar("T")

# ------------------------------------------------------------------ import and ids

_IMPORT_LOCK = threading.Lock()
_NEXT_ID: contextvars.ContextVar[Callable[[], uuid.UUID] | None] = contextvars.ContextVar(
    "graphiti_next_id", default=None
)


def _cell_uuid4() -> uuid.UUID:
    draw = _NEXT_ID.get()
    return draw() if draw is not None else uuid.uuid4()


def _import_graphiti() -> Any:
    """``graphiti_core``, imported with telemetry off and its ``uuid4`` drawn per cell."""
    with _IMPORT_LOCK:
        os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"
        import graphiti_core
        from graphiti_core import edges, graphiti, nodes

        for module in (edges, nodes, graphiti):
            module.uuid4 = _cell_uuid4
        return graphiti_core


@cache
def _clients() -> tuple[type, type, type]:
    """Graphiti's three client classes over the run's models (defined once graphiti is
    imported: their bases are Graphiti's)."""
    from graphiti_core.cross_encoder.client import CrossEncoderClient
    from graphiti_core.embedder.client import EmbedderClient
    from graphiti_core.llm_client.client import LLMClient
    from graphiti_core.llm_client.config import LLMConfig
    from langchain_core.messages import HumanMessage, SystemMessage

    class RunLLMClient(LLMClient):
        """Graphiti's structured calls through the run's chat model: Graphiti's messages as
        they are (its prompt, the JSON schema it appends), a JSON object back."""

        def __init__(self, chat: Any, model_name: str):
            super().__init__(LLMConfig(model=model_name, small_model=model_name), cache=False)
            self.chat = chat
            self.json_chat = json_mode(chat)

        async def _generate_response(
            self,
            messages: list[Any],
            response_model: Any = None,
            max_tokens: int = 0,
            model_size: Any = None,
            **_: Any,
        ) -> dict[str, Any]:
            converted = [
                SystemMessage(m.content) if m.role == "system" else HumanMessage(m.content)
                for m in messages
            ]
            model = self.json_chat if response_model is not None else self.chat
            reply = await model.ainvoke(converted)
            return parse_json_object(str(reply.content))

    class RunEmbedder(EmbedderClient):
        """The run's metered embeddings."""

        def __init__(self, embeddings: Any):
            self.embeddings = embeddings

        async def create(self, input_data: Any) -> list[float]:
            text = input_data if isinstance(input_data, str) else " ".join(map(str, input_data))
            return list(await asyncio.to_thread(self.embeddings.embed_query, text))

        async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
            vectors = await asyncio.to_thread(self.embeddings.embed_documents, input_data_list)
            return [list(v) for v in vectors]

    class EmbeddingRanker(CrossEncoderClient):
        """Passages ranked by the cosine of the run's embeddings with the query."""

        def __init__(self, embeddings: Any):
            self.embeddings = embeddings

        async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
            if not passages:
                return []
            q = await asyncio.to_thread(self.embeddings.embed_query, query)
            docs = await asyncio.to_thread(self.embeddings.embed_documents, passages)
            scored = [(p, _cosine(q, d)) for p, d in zip(passages, docs, strict=True)]
            return sorted(scored, key=lambda pair: -pair[1])

    return RunLLMClient, RunEmbedder, EmbeddingRanker


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = sum(x * x for x in a) ** 0.5 or 1.0
    nb = sum(y * y for y in b) ** 0.5 or 1.0
    return dot / (na * nb)


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object of a reply (the project's ``parse_json_reply``: code fences and text
    around it tolerated), else ValueError."""
    value = parse_json_reply(text)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object from the memory model, got {text[:80]!r}")
    return value


# ------------------------------------------------------------------------------ dates


def reference_time(date: str | None, fallback: datetime) -> datetime:
    """A session date as Graphiti's reference time (UTC), else ``fallback``."""
    when = session_datetime(date)
    return fallback if when is None else when.replace(tzinfo=UTC)


def _day(when: datetime | None) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d") if when else "present"


# ------------------------------------------------------------------------------ the loop


class _Loop:
    """A private event loop for Graphiti's coroutines, run from the memory's synchronous
    methods (on a thread of its own when the caller's thread already runs a loop)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, make: Callable[[], Awaitable[T]]) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self.loop.run_until_complete(make())
        out: list[Any] = []
        ctx = contextvars.copy_context()

        def target() -> None:
            try:
                out.append((True, ctx.run(self.loop.run_until_complete, make())))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                out.append((False, exc))

        thread = threading.Thread(target=target, name="graphiti-loop")
        thread.start()
        thread.join()
        ok, value = out[0]
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """The loop's default executor shut down (its ``asyncio_N`` threads, which
        ``run_in_executor`` starts, e.g. for LangChain's async calls of the run's models,
        joined: else they linger until collected, which ``memory-lab check`` saw as a thread a
        closed cell left), then the loop closed."""
        if not self.loop.is_closed():
            self.run(self.loop.shutdown_default_executor)
        self.loop.close()


# ------------------------------------------------------------------------------ memory


class GraphitiMemory:
    """Graphiti adding each exchange as an episode; recall is its search by the user's
    message (facts with their dates, entities with their summaries)."""

    def __init__(
        self,
        graphiti: Any,
        loop: _Loop,
        group: str,
        *,
        k: int = 5,
        entities: int = 5,
        rerank: str = "rrf",
    ):
        self.graphiti = graphiti
        self.loop = loop
        self.group = group
        self.k = k
        self.entities = entities
        self.rerank = rerank
        self.episode_turns: dict[str, tuple[str, ...]] = {}  # episode uuid -> turn ids
        self.fact_turns: dict[str, tuple[str, ...]] = {}  # fact text -> its episodes' turns
        self._ids = 0
        self._last_time = datetime(1970, 1, 1, tzinfo=UTC)

    def _next_id(self) -> uuid.UUID:
        self._ids += 1
        return uuid.uuid5(uuid.NAMESPACE_URL, f"memory-lab/graphiti/{self.group}/{self._ids}")

    def observe(self, exchange: Exchange) -> None:
        lines = [f"{SPEAKERS[0]}: {exchange.user}"] if exchange.user else []
        if exchange.assistant:
            lines.append(f"{SPEAKERS[1]}: {exchange.assistant}")
        if not lines:
            return
        when = reference_time(exchange.session_date, self._last_time)
        self._last_time = when

        async def add() -> Any:
            token = _NEXT_ID.set(self._next_id)
            try:
                return await self.graphiti.add_episode(
                    name=f"exchange {exchange.index}",
                    episode_body="\n".join(lines),
                    source_description=f"conversation, session {exchange.session_id}",
                    reference_time=when,
                    group_id=self.group,
                )
            finally:
                _NEXT_ID.reset(token)

        result = self.loop.run(add)
        episode = result.episode.uuid
        self.episode_turns[episode] = exchange.turn_ids
        for edge in result.edges:
            self.fact_turns[edge.fact] = self.turns_of(edge.episodes)

    def turns_of(self, episodes: list[str]) -> tuple[str, ...]:
        """The turns of ``episodes``, in order, each once."""
        return tuple(dict.fromkeys(t for e in episodes for t in self.episode_turns.get(e, ())))

    def summary_turns(self, summary: str) -> tuple[str, ...]:
        """The turns of the facts an entity's summary holds word for word (Graphiti appends a
        fact to the summaries of its two entities; a summary the model rewrote names none)."""
        return tuple(
            dict.fromkeys(
                t for fact, turns in self.fact_turns.items() if fact in summary for t in turns
            )
        )

    def _config(self) -> Any:
        from graphiti_core.search.search_config_recipes import (
            COMBINED_HYBRID_SEARCH_MMR,
            COMBINED_HYBRID_SEARCH_RRF,
        )

        recipe = COMBINED_HYBRID_SEARCH_MMR if self.rerank == "mmr" else COMBINED_HYBRID_SEARCH_RRF
        config = recipe.model_copy(deep=True)
        config.episode_config = None
        config.community_config = None
        config.limit = max(self.k, self.entities)
        if self.entities == 0:
            config.node_config = None
        return config

    def search(self, text: str) -> Any:
        async def run() -> Any:
            return await self.graphiti.search_(text, config=self._config(), group_ids=[self.group])

        return self.loop.run(run)

    def recall(self, query: Query) -> Recall:
        if not query.text or not self.episode_turns:
            return Recall((), ranking=())
        found = self.search(query.text)
        facts = [
            Item(
                f"  - {e.fact} (Date range: {_day(e.valid_at)} - {_day(e.invalid_at)})",
                self.turns_of(e.episodes),
                "fact",
            )
            for e in found.edges[: self.k]
        ]
        nodes = [
            Item(
                f"  - {n.name}: {' '.join((n.summary or '').split())}".rstrip(": "),
                self.summary_turns(n.summary or ""),
                "summary",
            )
            for n in [n for n in found.nodes if n.summary][: self.entities]
        ]
        if not facts and not nodes:
            return Recall((), ranking=())
        items = [
            Item(FACTS_HEADER + "\n<FACTS>", (), "other"),
            *facts,
            Item("</FACTS>", (), "other"),
        ]
        if nodes:
            items += [Item(ENTITIES_HEADER + "\n<ENTITIES>", (), "other"), *nodes]
            items.append(Item("</ENTITIES>", (), "other"))
        return Recall(tuple(items), ranking=tuple(i.turn_ids for i in facts + nodes))

    def end_session(self, session: SessionInfo) -> None:
        """Graphiti's graph spans sessions; nothing to do."""

    def graph(self) -> tuple[list[Any], list[Any]]:
        """Every entity and every fact (edge) of the cell's group, in creation order."""
        from graphiti_core.edges import EntityEdge
        from graphiti_core.errors import GroupsEdgesNotFoundError, GroupsNodesNotFoundError
        from graphiti_core.nodes import EntityNode

        async def read() -> tuple[list[Any], list[Any]]:
            driver = self.graphiti.driver
            try:  # Graphiti raises for a group without entities or facts: an empty graph
                nodes = await EntityNode.get_by_group_ids(driver, [self.group])
            except GroupsNodesNotFoundError:
                nodes = []
            try:
                edges = await EntityEdge.get_by_group_ids(driver, [self.group])
            except GroupsEdgesNotFoundError:
                edges = []
            return nodes, edges

        nodes, edges = self.loop.run(read)
        return (
            sorted(nodes, key=lambda n: (n.created_at, n.uuid)),
            sorted(edges, key=lambda e: (e.created_at, e.uuid)),
        )

    def snapshot(self) -> dict[str, Any]:
        nodes, edges = self.graph()
        return {
            "k": self.k,
            "entities": {n.name: n.summary for n in nodes},
            "facts": [
                {
                    "fact": e.fact,
                    "relation": e.name,
                    "valid_at": _day(e.valid_at) if e.valid_at else None,
                    "invalid_at": _day(e.invalid_at) if e.invalid_at else None,
                    "turn_ids": list(self.turns_of(e.episodes)),
                }
                for e in edges
            ],
        }

    def held_texts(self) -> list[str]:
        """The facts and the entity summaries the graph holds."""
        nodes, edges = self.graph()
        return [e.fact for e in edges] + [f"{n.name}: {n.summary}" for n in nodes if n.summary]

    def close(self) -> None:
        """The driver, the loop and the folder go through ``on_close``."""


# ------------------------------------------------------------------------------ factory

Rerank = Literal["rrf", "mmr"]


def preflight_graphiti(params: dict[str, Any], resource: Any) -> None:
    """Before a run: Graphiti and its embedded database import."""
    try:
        import graphiti_core  # noqa: F401
        import kuzu  # noqa: F401
    except ImportError as exc:  # pragma: no cover - both are dependencies
        raise ConfigError(f"memory 'graphiti': {exc.name} is not installed ({exc})") from None


async def _full_text_indices(driver: Any) -> None:
    """Graphiti's full-text indices on the Kuzu database (its Kuzu driver's
    ``build_indices_and_constraints`` creates none; Kuzu links its FTS extension in)."""
    from graphiti_core.driver.driver import GraphProvider
    from graphiti_core.graph_queries import get_fulltext_indices

    for query in get_fulltext_indices(GraphProvider.KUZU):
        await driver.execute_query(query)


def _model_name(chat: Any) -> str:
    return str(getattr(chat, "model_name", None) or getattr(chat, "model", None) or "run-model")


@register_memory(
    "graphiti",
    "Graphiti (Zep's temporal knowledge graph, graphiti-core) on an embedded Kuzu database: "
    "each exchange an episode dated by its session, the memory model extracting entities and "
    "dated facts and invalidating contradicted ones; the context is Graphiti's search (facts "
    "with their date ranges, entity summaries) for the user's message.",
    {
        "k": ParamDoc("facts (edges) in the context", min=1, max=100),
        "entities": ParamDoc("entities (with their summaries) in the context", min=0, max=100),
        "rerank": ParamDoc("how Graphiti fuses BM25 and cosine results: rrf or mmr"),
        "keep": ParamDoc("keep the graph's Kuzu database (the cell's graphiti/ folder)"),
    },
    roles=("memory",),
    preflight=preflight_graphiti,
    system=SYSTEM,
)
def graphiti(
    res: MemoryResources,
    k: int = 5,
    entities: int = 5,
    rerank: Rerank = "rrf",
    keep: bool = False,
) -> GraphitiMemory:
    core = _import_graphiti()
    RunLLMClient, RunEmbedder, EmbeddingRanker = _clients()
    group = re.sub(r"[^A-Za-z0-9_-]", "-", res.cell_id) or "cell"
    loop = _Loop()
    res.on_close(loop.close)  # last: after the driver has closed on it
    from graphiti_core.driver.kuzu_driver import KuzuDriver

    if res.cell_dir is not None:
        folder = Path(res.cell_dir) / GRAPH_FOLDER
    else:  # no run folder (the inspector, a notebook): a private temporary one
        folder = Path(tempfile.mkdtemp(prefix="memory-lab-graphiti-"))
        keep = False
    if not keep:
        res.on_close(lambda: shutil.rmtree(folder, ignore_errors=True))
    shutil.rmtree(folder, ignore_errors=True)  # a cell replays from its start: a new graph
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # Graphiti deprecates Kuzu (upstream is unmaintained)
        warnings.simplefilter("ignore", DeprecationWarning)
        driver = KuzuDriver(db=str(folder / "graph.kuzu"))
    # One thread per Kuzu query (its default is every core): with Kuzu's parallel execution a
    # BEAM-1M replay spun forever in a full-text query at exchange 510 (in the frontier of
    # Kuzu's query_fts_index) in one run and segfaulted at exchange 808 in another. The
    # records match but for one context in 808 (a tie); a cell is one of --jobs processes, so
    # the cores are in use anyway.
    for connection in driver.client.connections:
        connection.set_max_threads_for_exec(1)
    # Graphiti's close leaves Kuzu to the garbage collector: its query thread and the database
    # file stayed open after the cell (``memory-lab check``: close-releases). Closed here, after
    # the engine (closers run last registered first), before the folder goes.
    res.on_close(driver.db.close)
    res.on_close(driver.client.close)
    # One database per cell, named for its group: Graphiti then keeps to this driver (it
    # clones a driver for any other group id, and its Kuzu driver names no database)
    driver._database = group
    chat = res.memory_llm
    engine = core.Graphiti(
        graph_driver=driver,
        llm_client=RunLLMClient(chat, _model_name(chat)),
        embedder=RunEmbedder(res.embeddings),
        cross_encoder=EmbeddingRanker(res.embeddings),
        max_coroutines=4,
    )
    res.on_close(lambda: loop.run(engine.close))
    loop.run(lambda: _full_text_indices(driver))
    return GraphitiMemory(engine, loop, group, k=k, entities=entities, rerank=rerank)
