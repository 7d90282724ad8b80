"""The ``hindsight`` memory's worker: Hindsight's engine in Hindsight's own environment.

Run by the ``hindsight`` memory (``adapter.py`` beside it) with the Python of a
separate virtual environment that holds ``hindsight-api-slim[embedded-db]`` (Hindsight needs
``protobuf>=7``, mem0 ``protobuf<7``: one environment cannot hold both). It imports nothing of
memory-lab, only the standard library and Hindsight.

The memory starts it in a user and a network namespace of its own (``unshare``; as root, as
``nobody``: PostgreSQL refuses root). It brings up that namespace's loopback, which no other
process shares, and starts the embedded PostgreSQL (pg0, PostgreSQL 18 with pgvector, bundled in
its wheel) on it, with its data, its Unix socket and pg0's temporary files in the folder it is
given (which the memory makes 0700) and a random password of the bank's; then Hindsight's
``MemoryEngine`` on it with tasks run inline, no reranking model (``rrf``), and models that are
not its own: every LLM call and every embedding goes back to the memory over this process's
stdin/stdout, so the run's models answer them and the run meters and caches them.

The protocol is JSON lines. The memory sends one request at a time, ``{"op": ...}``; while
serving it, the worker may send ``{"call": "llm" | "embed_query" | "embed_documents", ...}``
and reads the memory's ``{"result": ...}`` (or ``{"error": ...}``) before going on; it ends
each request with ``{"done": ...}`` or ``{"failed": "...traceback"}``. Anything Hindsight
prints goes to stderr (the memory's log file), never into the protocol.

Reproducible: ids Hindsight draws with ``uuid4`` and ids PostgreSQL mints with
``gen_random_uuid()`` come from counters of the bank's; the model calls are answered on the
event loop's thread, in the one order the loop runs Hindsight's concurrent tasks (see
``_models``); Hindsight's own log of model calls (written on a timer) is off. So reruns send the
same prompts. The replay's clock, not the wall clock, is "now" where Hindsight's retrieval
reads it (see ``ReplayClock``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
import traceback
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _sibling(name: str, folder: Path = HERE) -> Any:
    """The module ``name`` in ``folder``, by default this file's (run with ``python -P``, whose
    path does not hold it, so it is loaded by its file): standard library only."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"hindsight_worker_{name}", folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


db = _sibling("db")  # the private network and PostgreSQL
# the JSON-lines channel to the memory, shared by the workers (``memories/worker_stdio.py``)
Channel = _sibling("worker_stdio", HERE.parents[1]).Channel

# Hindsight reads its settings when first imported: no hosted model, no model download, no
# reranking model, nothing that phones home. The worker hands the engine its own LLM and
# embeddings, so the provider names below only silence Hindsight's checks.
HINDSIGHT_ENV = {
    "HINDSIGHT_API_LLM_PROVIDER": "openai",
    "HINDSIGHT_API_LLM_API_KEY": "memory-lab",
    "HINDSIGHT_API_LLM_MODEL": "run-model",
    "HINDSIGHT_API_SKIP_LLM_VERIFICATION": "true",
    "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "openai",
    "HINDSIGHT_API_RERANKER_PROVIDER": "rrf",
    "HINDSIGHT_API_OTEL_TRACES_ENABLED": "false",
    # its own record of every model call, written to PostgreSQL in batches on a timer: off (the
    # run meters the calls; the timer's writes would draw ids in an order that varies)
    "HINDSIGHT_API_LLM_TRACE_ENABLED": "false",
    "HF_HUB_OFFLINE": "1",
}


def _log(text: str) -> None:
    print(f"[memory-lab hindsight worker] {text}", file=sys.stderr, flush=True)


# -------------------------------------------------------------------------- ids


class Counter:
    """Deterministic ``uuid4`` draws for the worker's bank."""

    def __init__(self, seed: str):
        self.seed, self.n = seed, 0
        self.lock = threading.Lock()

    def __call__(self) -> uuid.UUID:
        with self.lock:
            self.n += 1
            return uuid.uuid5(uuid.NAMESPACE_URL, f"memory-lab/hindsight/{self.seed}/{self.n}")


class OwnDraws:
    """The ``uuid`` module as one module sees it: ``uuid4`` from its own counter."""

    def __init__(self, draw: Counter):
        self.uuid4 = draw

    def __getattr__(self, name: str) -> Any:
        return getattr(uuid, name)


def minted_ids_from_sequence(conn_url: str) -> str:
    """SQL making every ``gen_random_uuid()`` column default draw from one sequence instead
    (run after the migrations), so the ids PostgreSQL mints repeat from run to run."""
    return """
DO $$
DECLARE c record;
BEGIN
  CREATE SEQUENCE IF NOT EXISTS public.memory_lab_ids;
  FOR c IN
    SELECT table_schema, table_name, column_name FROM information_schema.columns
    WHERE column_default LIKE '%gen_random_uuid()%'
  LOOP
    EXECUTE format(
      'ALTER TABLE %I.%I ALTER COLUMN %I SET DEFAULT '
      '(lpad(to_hex(nextval(''public.memory_lab_ids'')), 32, ''0''))::uuid',
      c.table_schema, c.table_name, c.column_name);
  END LOOP;
END $$;
"""


# -------------------------------------------------------------------------- clock


class ReplayClock:
    """The replay's "now": the date of the exchange being retained or of the question
    being asked (None until a dated one comes, then Hindsight's own wall clock).

    Hindsight reads the wall clock where a recall is given no date: to resolve a relative
    expression in the query ("now", "yesterday": ``default_reference_date``) and to score
    recency (``_recall_scoring_now``). Its consolidation recalls each new fact's text so, and
    in a live deployment it runs right after the exchange: the exchange's date is its "now".
    Read from the wall clock, a replay of 2023's conversations would resolve them to the day
    the run happens, and a rerun on another day would send other prompts."""

    def __init__(self) -> None:
        self.today: datetime | None = None

    def install(self) -> None:
        import hindsight_api.engine.memory_engine as memory_engine
        import hindsight_api.engine.query_analyzer as query_analyzer

        wall_reference, wall_scoring = (
            query_analyzer.default_reference_date,
            memory_engine._recall_scoring_now,
        )

        def reference_date() -> datetime:
            if self.today is None:
                return wall_reference()
            return self.today.astimezone(UTC).replace(tzinfo=None)

        query_analyzer.default_reference_date = reference_date
        memory_engine._recall_scoring_now = lambda date: wall_scoring(
            date if date is not None else self.today
        )

    def set(self, date: str | None) -> datetime | None:
        """The request's date (ISO 8601 with its offset), now "now"; None leaves "now" as was."""
        when = datetime.fromisoformat(date) if date else None
        if when is not None:
            self.today = when
        return when


# ------------------------------------------------------------------------- models


def _models(channel: Channel, dimension: int) -> tuple[Any, Any]:
    """Hindsight's LLM (a class) and embeddings, answered by the memory over ``channel``.

    Each call is answered on the event loop's thread, which waits for the answer, never in a
    thread of its own: Hindsight extracts a long exchange's chunks as concurrent tasks and
    batches their embeddings as they come, so calls answered in threads finish in the order the
    threads happen to take the channel, and the chunks' facts reach the database, the id
    counters and the embedding batches in an order that varies from run to run (one BEAM
    conversation's evidence recall moved between 58.5% and 72.4% over seven runs). Answered
    in place, the loop runs the tasks in one order, and a rerun sends the same calls.
    """
    return _llm_class(channel), _embeddings(channel, dimension)


def _llm_class(channel: Channel) -> Any:
    """Hindsight's LLM interface, each call sent to the memory over ``channel``."""
    from hindsight_api.engine.llm_interface import LLMInterface
    from hindsight_api.engine.llm_wrapper import parse_llm_json
    from hindsight_api.engine.providers.openai_compatible_llm import (
        _ensure_json_word_in_user_message,
        _strip_code_fences,
        _strip_reasoning_tags,
    )
    from hindsight_api.engine.response_models import LLMCallResult, TokenUsage
    from hindsight_api.engine.structured_output import provider_json_schema

    class RunLLM(LLMInterface):
        """Hindsight's calls sent as its OpenAI-compatible provider sends them on its soft
        structured-output path: the response schema appended to the system message, a JSON
        object asked for; the reply parsed as that provider parses it."""

        async def verify_connection(self) -> None:
            """Nothing to verify: the memory's models answer."""

        async def cleanup(self) -> None:
            """Nothing held."""

        async def call(
            self,
            messages: list[dict[str, Any]],
            response_format: Any = None,
            max_completion_tokens: int | None = None,
            temperature: float | None = None,
            scope: str = "memory",
            skip_validation: bool = False,
            **_: Any,
        ) -> Any:
            sent = [dict(m) for m in messages]
            structured = response_format is not None and hasattr(
                response_format, "model_json_schema"
            )
            if structured:
                schema = provider_json_schema(response_format)
                note = "\n\nYou must respond with valid JSON matching this schema:\n" + json.dumps(
                    schema, indent=2, ensure_ascii=False
                )
                if sent and sent[0].get("role") == "system":
                    sent[0]["content"] = str(sent[0]["content"]) + note
                elif sent:
                    sent[0]["content"] = note + "\n\n" + str(sent[0]["content"])
                sent = _ensure_json_word_in_user_message(sent)
            # Answered on the event loop's thread, which waits: see ``_models``
            reply = channel.call("llm", messages=sent, json=structured, scope=scope)
            text, usage = (
                reply["text"],
                TokenUsage(
                    input_tokens=reply.get("input_tokens", 0),
                    output_tokens=reply.get("output_tokens", 0),
                    total_tokens=reply.get("input_tokens", 0) + reply.get("output_tokens", 0),
                ),
            )
            if not structured:
                return LLMCallResult(content=text, usage=usage)
            content = _strip_reasoning_tags(text)
            try:
                data = json.loads(_strip_code_fences(content))
            except json.JSONDecodeError:
                data = parse_llm_json(content)
            value = data if skip_validation else response_format.model_validate(data)
            return LLMCallResult(content=value, usage=usage)

        async def call_with_tools(self, *args: Any, **kwargs: Any) -> Any:
            # Only reflect (not used by the memory) calls tools
            raise NotImplementedError("the hindsight memory retains and recalls; no reflect")

    return RunLLM


def _embeddings(channel: Channel, dimension: int) -> Any:
    """Hindsight's embeddings, answered by the memory's over ``channel``."""
    from hindsight_api.engine.embeddings import Embeddings

    class RunEmbeddings(Embeddings):
        """The memory's embeddings: queries as queries, stored texts as documents."""

        @property
        def provider_name(self) -> str:
            return "memory-lab"

        @property
        def dimension(self) -> int:
            return dimension

        async def initialize(self) -> None:
            """Nothing to load."""

        async def encode(self, texts: list[str]) -> list[list[float]]:
            return await self.encode_documents(texts)

        async def encode_documents(self, texts: list[str]) -> list[list[float]]:
            if not texts:
                return []
            return channel.call("embed_documents", texts=list(texts))

        async def encode_query(self, texts: list[str]) -> list[list[float]]:
            if not texts:
                return []
            return channel.call("embed_query", texts=list(texts))

    return RunEmbeddings()


# ------------------------------------------------------------------------- engine


class Worker:
    """One bank of one cell: the server, the engine, and the requests."""

    def __init__(self, channel: Channel):
        self.channel = channel
        self.loop = asyncio.new_event_loop()
        self.server: Any = None
        self.engine: Any = None
        self.bank = ""
        self.context: Any = None
        self.clock = ReplayClock()

    async def start(self, folder: str, bank: str, dimension: int) -> dict[str, Any]:
        os.environ.update(HINDSIGHT_ENV)
        self.bank = bank
        uuid.uuid4 = Counter(bank)  # every module's uuid.uuid4() (they call it through uuid)
        began = time.perf_counter()
        self.server = db.Server(Path(folder))
        url = await self.server.start()
        _log(f"PostgreSQL up on port {self.server.port} in {time.perf_counter() - began:.1f} s")
        import hindsight_api.engine.llm_wrapper as llm_wrapper
        from hindsight_api.engine.consolidation import consolidator
        from hindsight_api.engine.memory_engine import MemoryEngine
        from hindsight_api.engine.task_backend import SyncTaskBackend
        from hindsight_api.models import RequestContext

        # Observation ids appear in consolidation prompts: drawn from a counter of their own,
        # in the order consolidation writes them (tracing, operation and audit ids elsewhere
        # are drawn by concurrent tasks, in an order that varies)
        consolidator.uuid = OwnDraws(Counter(f"{bank}/observations"))
        self.clock.install()
        run_llm, embeddings = _models(self.channel, dimension)
        llm_wrapper.create_llm_provider = lambda provider, api_key, base_url, model, *a, **k: (
            run_llm(provider, api_key, base_url, model)
        )
        self.engine = MemoryEngine(
            db_url=url,
            embeddings=embeddings,
            task_backend=SyncTaskBackend(),
            skip_llm_verification=True,
            pool_min_size=1,
            # one connection: Hindsight's concurrent tasks then write and read in one order,
            # so rows that rank equal come back in the same order and a rerun's prompts repeat
            pool_max_size=1,
        )
        await self.engine.initialize()
        _log(f"Hindsight's engine ready (migrations run) in {time.perf_counter() - began:.1f} s")
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            await conn.execute(minted_ids_from_sequence(url))
        finally:
            await conn.close()
        self.context = RequestContext(internal=True)
        import hindsight_api

        version = getattr(hindsight_api, "__version__", "?")
        return {"version": version, "data": str(self.server.data)}

    async def retain(
        self, content: str, context: str, date: str | None, document: str
    ) -> dict[str, Any]:
        when = self.clock.set(date)
        ids = await self.engine.retain_async(
            self.bank,
            content,
            context=context,
            event_date=when,
            document_id=document,
            request_context=self.context,
        )
        return {"ids": [str(i) for i in ids], "reconsolidated": await self.reconsolidate()}

    async def reconsolidate(self) -> int:
        """Consolidate the facts a failed consolidation stranded; how many consolidations it ran.

        Retain queues consolidation and logs, never raises, when it fails: its facts stay
        ``consolidated_at IS NULL`` until Hindsight's maintenance loop re-queues them (every
        five minutes in its server; the replay runs no loop). Asked here, before the next
        exchange, as that loop asks: no learnt observation is left to chance of timing."""
        for attempt in range(3):
            rows = await self._fetch(
                "SELECT count(*) AS n FROM memory_units WHERE bank_id = $1 "
                "AND consolidated_at IS NULL AND consolidation_failed_at IS NULL "
                "AND fact_type IN ('experience', 'world')",
                self.bank,
            )
            stranded = int(rows[0]["n"])
            if not stranded:
                return attempt
            _log(f"{stranded} fact(s) left unconsolidated by retain: consolidating them")
            await self.engine.run_consolidation(self.bank, request_context=self.context)
        raise RuntimeError("facts stay unconsolidated after three consolidations (see the log)")

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        """Rows of one query on the bank's PostgreSQL, on a connection of its own."""
        import asyncpg

        assert self.server is not None
        conn = await asyncpg.connect(self.server.url())
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def recall(
        self,
        query: str,
        max_tokens: int,
        budget: str,
        types: list[str],
        date: str | None,
    ) -> dict[str, Any]:
        from hindsight_api.engine.memory_engine import Budget

        result = await self.engine.recall_async(
            self.bank,
            query,
            budget=Budget(budget),
            max_tokens=max_tokens,
            fact_type=types,
            question_date=self.clock.set(date),
            include_source_facts=True,
            max_source_facts_tokens=max_tokens,
            request_context=self.context,
            reranking="rrf",
            _quiet=True,
        )
        sources = result.source_facts or {}
        return {
            "results": [
                {
                    "id": r.id,
                    "text": r.text,
                    "type": r.fact_type,
                    "document": r.document_id,
                    "occurred_start": r.occurred_start,
                    "occurred_end": r.occurred_end,
                    "mentioned_at": r.mentioned_at,
                    "sources": [
                        getattr(sources.get(s), "document_id", None)
                        for s in (r.source_fact_ids or [])
                    ],
                }
                for r in result.results
            ]
        }

    async def units(self) -> dict[str, Any]:
        """Every memory unit of the bank (facts and observations), oldest first."""
        rows = await self._fetch(
            "SELECT id::text, text, fact_type, document_id, mentioned_at "
            "FROM memory_units WHERE bank_id = $1 ORDER BY created_at, id",
            self.bank,
        )
        return {
            "units": [
                {
                    "id": r["id"],
                    "text": r["text"],
                    "type": r["fact_type"],
                    "document": r["document_id"],
                    "mentioned_at": r["mentioned_at"].isoformat() if r["mentioned_at"] else None,
                }
                for r in rows
            ]
        }

    async def close(self) -> dict[str, Any]:
        if self.engine is not None:
            await self.engine.close()
        return {}

    def serve(self) -> None:
        try:
            while (request := self.channel.receive()) is not None:
                op = request.pop("op")
                try:
                    value = self.loop.run_until_complete(getattr(self, op)(**request))
                    self.channel.send({"done": value})
                except Exception:  # noqa: BLE001 - reported to the memory, which raises
                    failed = traceback.format_exc()
                    if self.server is not None:
                        failed = self.server.scrub(failed)
                    self.channel.send({"failed": failed})
                if op == "close":
                    break
        finally:
            if self.server is not None:
                self.server.stop()


if __name__ == "__main__":
    db.private_network()
    if sys.argv[1:] == [db.NETWORK_CHECK]:
        print("private")
    else:
        Worker(Channel()).serve()
