"""Where the LangGraph memories keep their state: checkpointers and Stores, per cell.

``memory`` keeps it in the process (``InMemorySaver``, ``InMemoryStore``); ``sqlite`` in one
database file per cell under the run folder (``SqliteSaver``), removed at close unless kept;
``postgres`` on the server named by the run-wide resource ``postgres`` (``PostgresSaver``,
``PostgresStore``), where a cell's threads and Store items are deleted at close unless kept. No
Store on SQLite: ``SqliteStore``'s index loads the sqlite-vec extension, which many Python builds
(this project's reference machine among them) cannot load. The URL (or keyword DSN) is used,
never written: errors name only its host, port and database, and their reasons are redacted.

A benchmark cell on PostgreSQL opens a connection of its own. A server (``memory-lab serve``)
opens one bounded connection pool per URL in its lifespan (``open_pool``) and lends it with
``lend_pool``: every cell on that URL then checkpoints and keeps its Store through the pool
(LangGraph's ``PostgresSaver`` and ``PostgresStore`` take a pool), so however many users it
holds, the server uses at most the pool's connections. A request that finds none free within
the pool's wait raises ``PoolBusy``, which names the pool and says whether it is busy or the
server does not answer.

Checkpoints are written and read with a serializer pinned to the types these memories put in a
thread (messages, plain values, langmem's ``RunningSummary``), so a reopened checkpointer loads
them without LangGraph's "unregistered type" warning, and refuses any other type.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from memory_lab.errors import ConfigError, EnvironmentProblem
from memory_lab.memories.protocol import MemoryResources
from memory_lab.text.redact import redact, secrets_in

BACKENDS = ("memory", "sqlite", "postgres")
POSTGRES_RESOURCE = "postgres"
POSTGRES_EXTRA = "postgres"  # pip install 'memory-lab[postgres]': psycopg and the LangGraph classes
SQLITE_FILE = "langgraph.sqlite"
# the msgpack types a checkpoint of these memories may hold beyond LangGraph's safe list
CHECKPOINT_TYPES = (("langmem.short_term.summarization", "RunningSummary"),)
_LENT: dict[str, Any] = {}  # PostgreSQL URL -> the connection pool a server opened for every cell


class PoolBusy(Exception):
    """No connection of a shared pool came free within its wait: retry later."""


@contextmanager
def lend_pool(url: str, pool: Any) -> Iterator[None]:
    """While inside, cells on ``url`` use ``pool``'s connections (never closed here)."""
    if url in _LENT:
        raise ValueError(f"a connection pool is already lent for {describe_url(url)}")
    _LENT[url] = pool
    try:
        yield
    finally:
        _LENT.pop(url, None)


@contextmanager
def open_pool(url: str, size: int, wait: float) -> Iterator[Any]:
    """A pool of at most ``size`` connections to ``url`` (autocommit, as the LangGraph Postgres
    classes want them), checked before each use (a restarted server's dead ones are replaced);
    a request waits up to ``wait`` seconds for one, then ``PoolBusy``. ConfigError when the
    server gives no first connection; closed at the end."""
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool, PoolTimeout

    class SharedPool(ConnectionPool):
        def getconn(self, timeout: float | None = None) -> Any:
            try:
                return super().getconn(timeout)
            except PoolTimeout:
                raise PoolBusy(_pool_refusal(self, url, wait)) from None

    pool = SharedPool(
        url,
        min_size=1,
        max_size=size,
        timeout=wait,
        open=False,
        check=ConnectionPool.check_connection,
        kwargs=dict(autocommit=True, prepare_threshold=0, row_factory=dict_row, connect_timeout=5),
        name=f"memory-lab {describe_url(url)}",
    )
    try:
        pool.open(wait=True, timeout=max(wait, 5.0))
    except PoolTimeout:
        pool.close()
        raise ConfigError(
            f"cannot reach PostgreSQL at {describe_url(url)} (resource '{POSTGRES_RESOURCE}'): "
            f"no connection within {max(wait, 5.0):g} s"
        ) from None
    with pool:
        yield pool


def _pool_refusal(pool: Any, url: str, wait: float) -> str:
    """Why a pool gave no connection: all of them in use, or the server makes none."""
    stats = pool.get_stats()
    size = stats["pool_max"]
    plural = "connection" if size == 1 else "connections"
    if stats["pool_size"] >= size:
        return (
            f"the PostgreSQL pool of {size} {plural} to {describe_url(url)} is busy (none came "
            f"free within {wait:g} s); retry (see --postgres-pool)"
        )
    return (
        f"cannot reach PostgreSQL at {describe_url(url)}: the pool of {size} {plural} made no "
        f"new one within {wait:g} s; retry"
    )


def checkpoint_serializer() -> Any:
    """The serializer every checkpointer here uses: LangGraph's, with the allowlist pinned."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    return JsonPlusSerializer(allowed_msgpack_modules=CHECKPOINT_TYPES)


def describe_url(url: str) -> str:
    """``host:port/database`` of a PostgreSQL URL or keyword DSN (``host=... dbname=...``):
    what errors may show (never the password, nor the user)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - unparsable: shown redacted
        return redact(url, extra=secrets_in(url))
    host = str(parts.get("host") or "localhost")
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"{host}{port}/{parts.get('dbname') or ''}"


def connect_postgres(url: str, memory: str) -> Any:
    """An autocommit connection as the LangGraph Postgres classes want it; ConfigError if not."""
    import psycopg
    from psycopg.rows import dict_row

    try:
        return psycopg.connect(
            url, autocommit=True, prepare_threshold=0, row_factory=dict_row, connect_timeout=5
        )
    except (psycopg.Error, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        reason = redact(reason, extra=secrets_in(url))
        raise ConfigError(
            f"memory '{memory}': cannot reach PostgreSQL at {describe_url(url)} "
            f"(resource '{POSTGRES_RESOURCE}'): {reason}"
        ) from None


def check_postgres(
    resource: Callable[[str], str], memory: str, *, store: bool = False, vector: bool = False
) -> None:
    """Before a run: the server answers, the tables exist (created once, here), pgvector if asked.

    Creating the tables here, in one process, keeps ``--jobs`` workers from racing to migrate.
    Without the PostgreSQL drivers (an extra), EnvironmentProblem naming the install command.
    """
    try:
        import psycopg  # noqa: F401
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError as exc:
        raise EnvironmentProblem(
            f"memory '{memory}' keeps its state in PostgreSQL, and this install lacks its "
            f"drivers ({exc.name}): pip install 'memory-lab[{POSTGRES_EXTRA}]'"
        ) from None

    url = resource(POSTGRES_RESOURCE)
    with connect_postgres(url, memory) as conn:
        PostgresSaver(conn).setup()
        if not store:
            return
        if vector:
            row = conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
            if row is None:
                raise ConfigError(
                    f"memory '{memory}': the PostgreSQL server at {describe_url(url)} lacks the "
                    "pgvector extension the Store's semantic index needs; install it there, or "
                    "use search=recent"
                )
        _postgres_store(conn, None, vector).setup()


def store_index(embeddings: Any, fields: tuple[str, ...] | None = None) -> dict[str, Any] | None:
    """The Store's semantic index over ``fields`` of an item (a fact's ``value`` by default),
    embedded with ``embeddings``."""
    if embeddings is None:
        return None
    return {"dims": EMBEDDING_DIMS, "embed": embeddings, "fields": list(fields or (INDEXED_FIELD,))}


EMBEDDING_DIMS = 384  # multilingual-e5-small and all-MiniLM-L6-v2 (the bundled models)
INDEXED_FIELD = "value"


class StoreEmbeddings(Embeddings):
    """The run's embeddings as a Store sees them: inside ``searching()``, texts are queries.

    ``PostgresStore`` embeds a search's query with ``embed_documents`` (so does ``SqliteStore``:
    langgraph issue #9007), ``InMemoryStore`` with ``embed_query``. For models with query and
    passage prefixes (e5) the two rank differently, so a backend would change the figures; the
    memory searches inside ``searching()`` and every backend embeds the query as a query.
    """

    def __init__(self, inner: Any):
        self.inner = inner
        self.queries = False

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.queries:
            return [self.inner.embed_query(t) for t in texts]
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    @contextmanager
    def searching(self) -> Iterator[None]:
        self.queries = True
        try:
            yield
        finally:
            self.queries = False


def _postgres_store(
    conn: Any, embeddings: Any, vector: bool, fields: tuple[str, ...] | None = None
) -> Any:
    """A PostgresStore whose semantic search is exact (see ``Persistence.searching``)."""
    from langgraph.store.postgres import PostgresStore

    index = None
    if vector:
        index = {
            **store_index(embeddings or _no_embeddings, fields),
            "ann_index_config": {"kind": "flat"},
        }
    return PostgresStore(conn, index=index)


def _no_embeddings(texts: list[str]) -> list[list[float]]:
    """Stands in for embeddings where a Store is set up by a preflight, never searched."""
    raise RuntimeError("no embeddings while checking the server")


def _delete(
    checkpointer: Any, store: Any, thread_ids: list[str], namespaces: list[tuple[str, ...]]
) -> None:
    for thread_id in thread_ids:
        checkpointer.delete_thread(thread_id)
    if store is not None:
        for prefix in namespaces:
            while items := store.search(prefix, limit=1000):
                for item in items:
                    store.delete(item.namespace, item.key)


@contextmanager
def _index_scans_off(conn: Any) -> Iterator[None]:
    conn.execute("SET enable_indexscan = off")
    try:
        yield
    finally:
        conn.execute("RESET enable_indexscan")


class Persistence:
    """One cell's checkpointer (and Store, when asked): opened by backend, released at close.

    ``index_fields``: what of a Store item the semantic index embeds (a fact's ``value`` by
    default). ``forget(thread_ids, namespaces)`` deletes what the cell wrote from a shared
    server unless ``keep``; ``close()`` releases connections and removes the cell's SQLite
    file unless ``keep``.
    """

    def __init__(
        self,
        backend: str,
        res: MemoryResources,
        *,
        keep: bool = False,
        store: bool = False,
        embeddings: Any = None,
        index_fields: tuple[str, ...] | None = None,
    ):
        from langgraph.checkpoint.memory import InMemorySaver

        self.backend = backend
        self.keep = keep
        self.path: Path | None = None
        self._conn: Any = None
        self._pool: Any = None
        self._own_dir: Path | None = None
        self.store: Any = None
        serde = checkpoint_serializer()
        self.embeddings = StoreEmbeddings(embeddings) if embeddings is not None else None
        self.index_fields = index_fields
        index = store_index(self.embeddings, index_fields)
        if backend == "memory":
            self.checkpointer: Any = InMemorySaver(serde=serde)
            if store:
                from langgraph.store.memory import InMemoryStore

                self.store = InMemoryStore(index=index)
        elif backend == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            self.path = self._sqlite_path(res)
            self._conn = sqlite3.connect(self.path, check_same_thread=False)
            self.checkpointer = SqliteSaver(self._conn, serde=serde)
            self.checkpointer.setup()
            if store:
                raise ConfigError("no Store on SQLite here (its index needs sqlite-vec loaded)")
        elif backend == "postgres":
            from langgraph.checkpoint.postgres import PostgresSaver

            self._url, self._memory = res.resource(POSTGRES_RESOURCE), res.memory_name
            self._vector = embeddings is not None
            self._pool = _LENT.get(self._url)  # tables made when the server started
            if self._pool is None:
                self._conn = connect_postgres(self._url, self._memory)
            conn = self._pool if self._pool is not None else self._conn
            try:
                self.checkpointer = PostgresSaver(conn, serde=serde)
                if store:
                    self.store = _postgres_store(conn, self.embeddings, self._vector, index_fields)
                if self._pool is None:  # no-ops after the run's preflight
                    self.checkpointer.setup()
                    if store:
                        self.store.setup()
            except BaseException:
                self.close()
                raise
        else:
            raise ConfigError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")

    def _sqlite_path(self, res: MemoryResources) -> Path:
        if res.cell_dir is not None:
            folder = Path(res.cell_dir)
            folder.mkdir(parents=True, exist_ok=True)
        else:  # no run folder (the inspector, a notebook): a private temporary one
            folder = self._own_dir = Path(tempfile.mkdtemp(prefix="memory-lab-lg-"))
        return folder / SQLITE_FILE

    @contextmanager
    def searching(self) -> Iterator[None]:
        """Around a Store search: the query embedded as a query, the search exact everywhere.

        On PostgreSQL an HNSW index (the Store's default, or one another application made on the
        same database) is searched first and filtered by namespace after, which returns fewer
        than ``k`` hits when other users' vectors crowd the candidates, and different hits
        depending on what else the table holds. The Store here makes no ANN index, and its
        searches run with index scans off on the cell's own connection: exact, like in memory.
        """
        if self.embeddings is None:
            yield
            return
        with self.embeddings.searching():
            if self.backend != "postgres":
                yield
                return
            if self._pool is None:
                with _index_scans_off(self._conn):
                    yield
                return
            with self._pool.connection() as conn, _index_scans_off(conn):
                self.store.conn = conn  # the search runs on this connection, then back
                try:
                    yield
                finally:
                    self.store.conn = self._pool

    def forget(self, thread_ids: list[str], namespaces: list[tuple[str, ...]] = ()) -> None:
        """Delete the cell's threads and Store namespaces from a server (unless ``keep``).

        Also after a failure: when the cell's connection died (a server restart, a network cut,
        the cause of many failed cells), they are deleted over a new connection.
        """
        if self.keep or self.backend != "postgres":
            return
        if self._pool is not None:  # a pooled connection is checked before it is lent
            _delete(self.checkpointer, self.store, thread_ids, namespaces)
            return
        if self._conn is None:  # closed
            return
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver

        if not (self._conn.broken or self._conn.closed):
            try:
                _delete(self.checkpointer, self.store, thread_ids, namespaces)
                return
            except psycopg.OperationalError:
                pass  # the connection died: once more on a new one
        with connect_postgres(self._url, self._memory) as conn:
            saver = PostgresSaver(conn, serde=checkpoint_serializer())
            store = None
            if self.store is not None:
                store = _postgres_store(conn, self.embeddings, self._vector, self.index_fields)
            _delete(saver, store, thread_ids, namespaces)

    def close(self) -> None:
        """Release connections; remove the SQLite file (and a private folder) unless ``keep``."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self.keep or self.path is None:
            return
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
        else:
            try:
                self.path.parent.rmdir()  # the cell's folder, when nothing else is in it
            except OSError:
                pass
