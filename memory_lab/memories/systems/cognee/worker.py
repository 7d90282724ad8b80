"""The ``cognee`` memory's worker: Cognee's pipelines in Cognee's own environment.

Run by the ``cognee`` memory (``adapter.py`` beside it) with the Python of a separate
virtual environment that holds ``cognee`` (pinned by ``constraints-cognee.txt``: its pins
want pandas 2, onnxruntime 1.23 and its own filelock, which the project's environment does not
hold). It imports nothing of memory-lab, only the standard library, Cognee, and the JSON-lines
channel of the hindsight worker (standard library only).

Cognee runs on its embedded stores, all in the folder it is given: SQLite (its relational
metadata), Ladybug (the embedded graph database, Kuzu's successor, that Cognee 1.6 ships as
its default) and LanceDB (vectors). Its LLM and its embeddings are not its own: Cognee's
structured-output client (``get_native_client``) and its embedding engine
(``create_embedding_engine``) are replaced by ones that send every call back to the memory over
this process's stdin/stdout, so the run's models answer them and the run meters and caches
them. A structured call is sent as Cognee's ``litellm_native`` adapter sends it on its JSON
path: the response schema appended to the system prompt, a JSON object asked for, the reply
validated into the response model (retried with the error, as Cognee retries).

The memory starts the worker in a network namespace of its own with no interface up: nothing
Cognee (or a library under it) tries can leave the machine.

The protocol is the hindsight worker's: the memory sends one request at a time,
``{"op": ...}``; while serving it the worker may send ``{"call": "llm" | "embed_query" |
"embed_documents", ...}`` and reads ``{"result": ...}`` (or ``{"error": ...}``); each request
ends with ``{"done": ...}`` or ``{"failed": "...traceback"}``.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

NETWORK_CHECK = "--network-check"
DATASET = "memory_lab"
RETRIES = 3  # Cognee's litellm_native JSON path validates a reply at most this many times


HERE = Path(__file__).resolve().parent


def _load(name: str, folder: Path = HERE) -> Any:
    """The module ``name`` in ``folder``, by default this file's, by its file (the worker runs
    with ``python -P``)."""
    spec = importlib.util.spec_from_file_location(f"cognee_worker_{name}", folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _log(text: str) -> None:
    print(f"[memory-lab cognee worker] {text}", file=sys.stderr, flush=True)


def cognee_env(folder: Path, dimension: int) -> dict[str, str]:
    """Cognee's settings (read when it is first imported): its stores in ``folder``, no
    telemetry, no connection test, no model cost map fetched, tiktoken's encodings from the
    copy litellm bundles; the provider names only satisfy Cognee's checks (the worker hands
    it its own LLM client and embedding engine)."""
    litellm = importlib.util.find_spec("litellm")
    assert litellm is not None and litellm.origin is not None
    encodings = Path(litellm.origin).parent / "litellm_core_utils" / "tokenizers"
    return {
        "DATA_ROOT_DIRECTORY": str(folder / "data"),
        "SYSTEM_ROOT_DIRECTORY": str(folder / "system"),
        "CACHE_ROOT_DIRECTORY": str(folder / "cache"),
        "TELEMETRY_DISABLED": "1",
        "COGNEE_SKIP_CONNECTION_TEST": "true",
        "ENABLE_BACKEND_ACCESS_CONTROL": "false",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TIKTOKEN_CACHE_DIR": str(encodings),
        "STRUCTURED_OUTPUT_FRAMEWORK": "litellm_native",
        "LLM_PROVIDER": "openai",
        "LLM_MODEL": "gpt-4o-mini",
        "LLM_API_KEY": "memory-lab",
        "EMBEDDING_PROVIDER": "openai",
        "EMBEDDING_MODEL": "memory-lab-run-embeddings",
        "EMBEDDING_DIMENSIONS": str(dimension),
        "HF_HUB_OFFLINE": "1",
    }


# ------------------------------------------------------------------------- models


def run_llm(channel: Any) -> Any:
    """Cognee's structured-output client, each call answered by the memory over ``channel``
    on the event loop's thread, which waits for the answer (so are the embeddings): Cognee
    extracts a cognify's chunks and summaries as concurrent tasks, and calls answered in threads
    of their own finished in whichever order the threads took the channel, so the graph and the
    vectors were written in an order that varied from run to run (BEAM-100K conversation 1's
    contexts differed from exchange 60 on, its evidence recall 74.2% in one run, 75.6% in
    another). Answered in place, the loop runs the tasks in one order."""
    from cognee.infrastructure.llm.structured_output_framework.litellm_native import (
        native_adapter,
    )
    from pydantic import ValidationError

    class RunLLM:
        """The calls of Cognee's ``litellm_native`` adapter on its JSON path."""

        name = "memory-lab"
        supports_answer_streaming = False

        async def acreate_structured_output(
            self, text_input: str, system_prompt: str, response_model: Any, **_: Any
        ) -> Any:
            if response_model is str:
                messages = [
                    {"role": "system", "content": system_prompt},
                    {"role": "user", "content": text_input},
                ]
                reply = channel.call("llm", messages=messages)
                return reply["text"]
            schema = json.dumps(response_model.model_json_schema(), indent=2)
            system = (
                f"{system_prompt}\n\n"
                f"You MUST respond with valid JSON conforming to this schema:\n"
                f"```json\n{schema}\n```\n"
                f"Do not include any text outside the JSON object."
            )
            error: Exception | None = None
            for _attempt in range(RETRIES):
                user = text_input
                if error is not None:
                    user = (
                        f"{text_input}\n\nYour previous response failed validation with this "
                        f"error:\n{error}\n\nPlease fix the JSON and try again."
                    )
                messages = [
                    {"role": "system", "content": system},
                    {"role": "user", "content": user},
                ]
                reply = channel.call("llm", messages=messages, json=True)
                try:
                    raw = native_adapter._strip_json_fence(reply["text"] or "{}")
                    return response_model.model_validate_json(raw)
                except (ValidationError, json.JSONDecodeError) as exc:
                    error = exc
                    _log(f"a reply failed {response_model.__name__}'s validation: {exc}")
            assert error is not None
            raise error

    return RunLLM()


def run_embeddings(channel: Any, dimension: int, querying: list[bool]) -> Any:
    """Cognee's embedding engine: the memory's embeddings, queries as queries (while a search
    runs, ``querying[0]``), stored texts as documents."""
    from cognee.infrastructure.databases.vector.embeddings.EmbeddingEngine import EmbeddingResult
    from cognee.infrastructure.llm.tokenizer.TikToken.adapter import TikTokenTokenizer

    class RunEmbeddings:
        model = "memory-lab-run-embeddings"
        dimensions = dimension
        max_completion_tokens = 8191
        model_input_limit: int | None = None
        batch_size = 64

        def __init__(self) -> None:
            self.tokenizer = TikTokenTokenizer(model=None, max_completion_tokens=8191)

        async def embed_text(self, text: list[str]) -> Any:
            if not text:
                return EmbeddingResult([], tokens=0)
            kind = "embed_query" if querying[0] else "embed_documents"
            vectors = channel.call(kind, texts=list(text))  # in place: see ``run_llm``
            tokens = sum(self.tokenizer.count_tokens(t) for t in text)
            return EmbeddingResult(vectors, tokens=tokens)

        def get_vector_size(self) -> int:
            return dimension

        def get_batch_size(self) -> int:
            return self.batch_size

        async def input_limit(self) -> int | None:
            return None

    return RunEmbeddings()


def ordered_neighborhood() -> None:
    """Ladybug's one-hop neighbourhood (``get_neighborhood``) with its edges in one order.

    The hybrid search shows an entity's edges as bullets ranked by its fact search, and those
    the search did not rank "in graph order" (``_edge_sort_key``,
    cognee/modules/retrieval/hybrid/entities.py:349, a stable sort): the order of the edges
    ``get_neighborhood`` returns (cognee/infrastructure/databases/graph/ladybug/adapter.py:
    3033, ``list(set(node_ids) | set(neighbor_ids))`` fed to an ``UNWIND`` query with no
    ``ORDER BY``; the neighbours come from a ``RETURN DISTINCT``). That order varied between
    two replays of the same graph: ``builtin:classic``'s bakery dialogue at s2.t23 showed an
    entity's chunk edge ("Document chunk mentions ...") and its user edge in either order.
    Here the edges come back grouped by source as Cognee groups them, the sources in one
    order (the seeds as given, the entities in their search rank, then the neighbours by id)
    and, within a source, by target and relationship. The ranked bullets keep Cognee's rank;
    only the order among the unranked ones is now the same from run to run."""
    ladybug = importlib.import_module("cognee.infrastructure.databases.graph.ladybug.adapter")
    unordered = ladybug.LadybugAdapter.get_neighborhood

    async def get_neighborhood(self: Any, node_ids: list[str], *args: Any, **kwargs: Any) -> Any:
        nodes, edges = await unordered(self, node_ids, *args, **kwargs)
        seeds = {str(n): i for i, n in enumerate(dict.fromkeys(node_ids or []))}

        def place(node_id: str) -> tuple[int, str]:
            return (seeds.get(node_id, len(seeds)), node_id)

        nodes = sorted(nodes, key=lambda n: place(str(n[0])))
        edges = sorted(edges, key=lambda e: (place(str(e[0])), str(e[1]), str(e[2])))
        return nodes, edges

    ladybug.LadybugAdapter.get_neighborhood = get_neighborhood


# ------------------------------------------------------------------------- the worker


class Worker:
    """One cell's Cognee: its stores, and the requests."""

    def __init__(self, channel: Any):
        self.channel = channel
        self.loop = asyncio.new_event_loop()
        self.querying = [False]
        self.cognify: dict[str, Any] = {}

    async def start(self, folder: str, dimension: int, cognify: dict[str, Any]) -> dict[str, Any]:
        began = time.perf_counter()
        os.environ.update(cognee_env(Path(folder), dimension))
        self.cognify = cognify
        import cognee

        client = run_llm(self.channel)
        native = importlib.import_module(
            "cognee.infrastructure.llm.structured_output_framework.litellm_native.get_native_client"
        )
        native.get_native_client = lambda *a, **k: client
        legacy = importlib.import_module(
            "cognee.infrastructure.llm.structured_output_framework.litellm_instructor.llm."
            "get_llm_client"
        )
        legacy.get_llm_client = lambda *a, **k: client
        engine = run_embeddings(self.channel, dimension, self.querying)
        factory = importlib.import_module(
            "cognee.infrastructure.databases.vector.embeddings.get_embedding_engine"
        )
        factory.create_embedding_engine = lambda *a, **k: engine
        ordered_neighborhood()
        version = importlib.import_module("cognee.version").get_cognee_version()
        _log(f"Cognee {version} imported in {time.perf_counter() - began:.1f} s")
        self.cognee = cognee
        return {"version": version}

    async def remember(self, text: str, tag: str) -> dict[str, Any]:
        """Add ``text`` to the dataset, tagged ``tag`` (its node set), and cognify it.

        The document's id is pinned (``DataItem.data_id``, Cognee's own way to pin one), drawn
        from its text: given a plain string, Cognee mints a new document a random id
        (``uuid4()``, cognee/tasks/ingestion/ingest_data.py:326), its chunks' ids derive from it
        (cognee/modules/chunking/chunk_id.py:22), and the hybrid search breaks ties between
        equally ranked passages by chunk id (``rank_chunk_summary_pairs``,
        cognee/modules/retrieval/hybrid/ranking.py:55: reciprocal-rank fusion of the chunk and
        the summary ranks, so a passage 3rd by vector and 4th by summary ties with one 4th and
        3rd). So two replays showed tied passages in either order (``builtin:classic``'s
        bakery dialogue at s1.t9). Cognee's ranking is unchanged; only its last tie-break is
        now the same from run to run. The id depends on the text alone, as Cognee's own
        de-duplication by content hash does: the same text added again is the same
        document."""
        from uuid import NAMESPACE_OID, uuid5

        from cognee.tasks.ingestion.data_item import DataItem

        began = time.perf_counter()
        item = DataItem(text, data_id=uuid5(NAMESPACE_OID, f"memory-lab:{DATASET}:{text}"))
        await self.cognee.add(item, dataset_name=DATASET, node_set=[tag])
        added = time.perf_counter()
        await self.cognee.cognify(datasets=[DATASET], **self.cognify)
        done = time.perf_counter()
        _log(f"{tag}: added in {added - began:.1f} s, cognified in {done - added:.1f} s")
        return {}

    async def search(self, query: str, search_type: str, top_k: int) -> dict[str, Any]:
        """Cognee's context for ``query`` (``only_context``: no answer is generated)."""
        from cognee.modules.search.types import SearchType

        self.querying[0] = True
        try:
            found = await self.cognee.search(
                query,
                query_type=SearchType[search_type],
                datasets=[DATASET],
                top_k=top_k,
                only_context=True,
                verbose=True,
            )
        finally:
            self.querying[0] = False
        contexts = []
        for result in found or []:
            context = result.get("context_result") if isinstance(result, dict) else result
            if isinstance(context, list):
                contexts.extend(str(c) for c in context)
            elif context:
                contexts.append(str(context))
        return {"contexts": contexts}

    async def graph(self) -> dict[str, Any]:
        """The knowledge graph's nodes (id, type, name, text) and edges, as Cognee stores them."""
        from cognee.infrastructure.databases.graph import get_graph_engine

        nodes, edges = await (await get_graph_engine()).get_graph_data()
        return {
            "nodes": [
                {
                    "id": str(node_id),
                    "type": str(props.get("type", "")),
                    "name": str(props.get("name", "") or ""),
                    "text": str(props.get("description") or props.get("text") or ""),
                    "sets": [str(s) for s in props.get("belongs_to_set") or []],
                }
                for node_id, props in nodes
            ],
            "edges": [[str(s), str(t), str(r)] for s, t, r, *_ in edges],
        }

    async def close(self) -> dict[str, Any]:
        return {}

    def serve(self) -> None:
        while (request := self.channel.receive()) is not None:
            op = request.pop("op")
            try:
                value = self.loop.run_until_complete(getattr(self, op)(**request))
                self.channel.send({"done": value})
            except Exception:  # noqa: BLE001 - reported to the memory, which raises
                self.channel.send({"failed": traceback.format_exc()})
            if op == "close":
                break


def offline() -> bool:
    """Whether this process has no network interface up (its namespace's loopback is down)."""
    import fcntl
    import struct

    names = [name for _, name in socket.if_nameindex()]
    if names != ["lo"]:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, request))[1]
    return not flags & 0x1


if __name__ == "__main__":
    if not offline():
        sys.exit("Cognee's worker must run in a network namespace of its own, no interface up")
    if sys.argv[1:] == [NETWORK_CHECK]:
        print("private")
    else:
        Worker(_load("worker_stdio", HERE.parents[1]).Channel()).serve()
