"""The on-disk model-call cache, built on LangChain's own cache hooks.

Chat models: a ``CallCache`` (a ``langchain_core.caches.BaseCache`` in one SQLite file) is set as
the model's ``cache``. LangChain's ``BaseChatModel._generate_with_cache`` then looks every call up
by the prompt (the serialized messages) and the model's ``llm_string`` (provider class, model
name, parameters, base URL without credentials, stop words; never secret values) before the
client runs, and stores the full generations after a miss. On a hit LangChain skips the client,
still fires ``on_llm_end`` with the cached generations, whose messages carry the original
``usage_metadata`` (LangChain adds ``total_cost: 0``). ``CallCache`` marks each returned hit with
``response_metadata["memory_lab_cache"] == "hit"`` (see ``is_cache_hit``) and counts hits and
misses (``take_stats``).

Embeddings: ``cached_embeddings`` wraps a model in LangChain's ``CacheBackedEmbeddings`` over a
SQLite ``ByteStore`` in the same file, caching documents and queries (apart) under a namespace
that always includes the model's identity.

The file may be shared by threads (one connection per process behind a lock) and by processes
(SQLite WAL, waiting or retrying up to ``timeout`` seconds on a locked database). A cache failure
never fails a call: a read that cannot be done is a miss, a write is dropped with one warning.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from langchain_classic.embeddings import CacheBackedEmbeddings
from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from langchain_core.outputs import ChatGeneration, Generation, LLMResult
from langchain_core.stores import ByteStore

from memory_lab.text.redact import is_secret_name, redact, redact_value

CACHE_FILE = "model-calls.sqlite"
# The largest reply the call cache keeps (characters of its JSON): a real reply is a few KB; a
# larger one is asked again rather than kept.
MAX_ENTRY_BYTES = 1024 * 1024
_LOG = logging.getLogger(__name__)
_T = TypeVar("_T")
CACHE_MARK = "memory_lab_cache"  # response_metadata / generation_info key set on cache hits
# Client settings that never change a model's reply, left out of cache keys.
IGNORED_PARAMS = frozenset({"max_retries", "request_timeout", "timeout"})
# Attributes naming an embedding model, folded into its namespace (URLs without credentials).
_EMBEDDING_IDENTITY = ("model", "model_name", "dimensions", "openai_api_base", "base_url")


def default_cache_dir() -> Path:
    """``$MEMORY_LAB_CACHE`` if set, else ``~/.cache/memory-lab``."""
    env = os.environ.get("MEMORY_LAB_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "memory-lab"


@dataclass(frozen=True)
class CacheStats:
    """Cache hits and misses counted since the last take."""

    hits: int = 0
    misses: int = 0

    def __add__(self, other: CacheStats) -> CacheStats:
        return CacheStats(self.hits + other.hits, self.misses + other.misses)


class _Counter:
    """Thread-safe hit/miss counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def add(self, hits: int = 0, misses: int = 0) -> None:
        with self._lock:
            self._hits += hits
            self._misses += misses

    def peek(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses)

    def take(self) -> CacheStats:
        with self._lock:
            stats = CacheStats(self._hits, self._misses)
            self._hits = self._misses = 0
            return stats

    def __getstate__(self) -> dict[str, Any]:
        return {"hits": self._hits, "misses": self._misses}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()
        self._hits, self._misses = state["hits"], state["misses"]


class _Database:
    """One SQLite file: a connection per process behind a lock, reopened after fork or pickle.

    Concurrent writers (threads, processes, Ray tasks) wait: SQLite's busy timeout covers most
    locks, and the statements that SQLite can fail at once with "database is locked" regardless
    of it (switching a fresh file to WAL, ``CREATE TABLE`` at connect time, a write racing a
    checkpoint) are retried with backoff for up to ``timeout`` seconds. The cache never fails a
    cell: a read that still fails is a miss, a write that still fails is lost with a warning.
    """

    def __init__(self, path: Path, timeout: float = 60.0):
        self.path = Path(path)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self.failures = 0  # reads and writes given up on in this process
        self._warned = False

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            self._conn = None
            if not self.path.parent.exists():  # the call cache is its owner's alone
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                os.chmod(self.path.parent, 0o700)
            conn = sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS generations"
                    " (key TEXT PRIMARY KEY, llm TEXT NOT NULL, value TEXT NOT NULL)"
                )
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS embeddings"
                    " (key TEXT PRIMARY KEY, value BLOB NOT NULL)"
                )
            except BaseException:
                conn.close()
                raise
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _retrying(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """``operation`` on this process's connection, retried while the file is locked."""
        deadline = time.monotonic() + self.timeout
        delay = 0.005
        while True:
            try:
                return operation(self._connection())
            except sqlite3.OperationalError as exc:
                message = str(exc).lower()
                if not ("locked" in message or "busy" in message):
                    raise
                if time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)

    def _given_up(self, what: str, exc: BaseException) -> None:
        self.failures += 1
        if not self._warned:  # once per process: a locked or broken file fails every call
            self._warned = True
            _LOG.warning(
                "memory-lab: run cache %s: %s failed (%s); the run goes on without it",
                self.path,
                what,
                exc,
            )

    def get(self, table: str, keys: Sequence[str]) -> list[Any]:
        """The values of ``keys`` (None where absent); an unreadable file reads as all misses."""
        if not keys:
            return []

        def read(conn: sqlite3.Connection) -> dict[str, Any]:
            found: dict[str, Any] = {}
            for start in range(0, len(keys), 500):  # stay under SQLite's variable limit
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT key, value FROM {table} WHERE key IN ({marks})"
                found.update(conn.execute(sql, chunk).fetchall())
            return found

        with self._lock:
            try:
                found = self._retrying(read)
            except sqlite3.Error as exc:
                self._given_up("a read", exc)
                found = {}
        return [found.get(k) for k in keys]

    def put(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Store ``rows`` in one transaction; if the file stays locked or broken they are lost."""
        if not rows:
            return
        marks = ",".join("?" * len(rows[0]))

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(f"INSERT OR REPLACE INTO {table} VALUES ({marks})", rows)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        with self._lock:
            try:
                self._retrying(write)
            except sqlite3.Error as exc:
                self._given_up("a write", exc)

    def run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One statement's rows (retried while locked; other errors raise)."""
        with self._lock:
            return self._retrying(lambda conn: conn.execute(sql, params).fetchall())

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_database, (self.path, self.timeout))


_DATABASES: dict[Path, _Database] = {}
_DATABASES_LOCK = threading.Lock()


def _database(path: Path, timeout: float = 60.0) -> _Database:
    """The process-wide handle on a cache file (shared by every cache on it)."""
    key = Path(path).resolve()
    with _DATABASES_LOCK:
        if key not in _DATABASES:
            _DATABASES[key] = _Database(key, timeout)
        return _DATABASES[key]


def _drop_params(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters that shape a reply: no client settings, no secrets, URLs without credentials
    (so runs with other passwords for the same server share their entries)."""
    kept = {
        k: v
        for k, v in params.items()
        if k not in IGNORED_PARAMS
        and not (isinstance(v, dict) and v.get("type") == "secret")
        and not is_secret_name(k)
    }
    return redact_value(kept, known=False)


def canonical_llm_string(llm_string: str) -> str:
    """LangChain's ``llm_string`` without retry/timeout settings, secrets or credentials."""
    head, sep, tail = llm_string.rpartition("---")
    if sep:
        try:
            serialized = json.loads(head)
            serialized["kwargs"] = _drop_params(serialized.get("kwargs") or {})
            return json.dumps(serialized, sort_keys=True) + sep + tail
        except (ValueError, AttributeError, TypeError):
            return llm_string
    try:  # non-serializable models: str(sorted(params.items()))
        params = dict(ast.literal_eval(llm_string))
    except (ValueError, SyntaxError, TypeError):
        return llm_string
    return str(sorted(_drop_params(params).items()))


def _generation_to_dict(generation: Generation) -> dict[str, Any]:
    data: dict[str, Any] = {"text": generation.text, "info": generation.generation_info}
    if isinstance(generation, ChatGeneration):
        data["message"] = message_to_dict(generation.message)  # keeps usage_metadata
    return data


def _generation_from_dict(data: dict[str, Any]) -> Generation:
    if "message" in data:
        (message,) = messages_from_dict([data["message"]])
        return ChatGeneration(message=message, generation_info=data["info"])
    return Generation(text=data["text"], generation_info=data["info"])


def _mark_hit(generation: Any) -> Any:
    generation.generation_info = {**(generation.generation_info or {}), CACHE_MARK: "hit"}
    message = getattr(generation, "message", None)
    if message is not None:
        message.response_metadata = {**message.response_metadata, CACHE_MARK: "hit"}
    return generation


def is_cache_hit(result: LLMResult | ChatGeneration | BaseMessage) -> bool:
    """Whether a reply (message, generation or a callback's ``LLMResult``) came from the cache."""
    if isinstance(result, LLMResult):
        gens = [g for batch in result.generations for g in batch]
        return bool(gens) and all(is_cache_hit(g) for g in gens)
    if isinstance(result, BaseMessage):
        return result.response_metadata.get(CACHE_MARK) == "hit"
    message = getattr(result, "message", None)
    if message is not None and is_cache_hit(message):
        return True
    return (getattr(result, "generation_info", None) or {}).get(CACHE_MARK) == "hit"


class CallCache(BaseCache):
    """LangChain chat-model cache in ``cache_dir/model-calls.sqlite`` that counts hits."""

    def __init__(self, cache_dir: str | Path | None = None, timeout: float = 60.0):
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.path = self.cache_dir / CACHE_FILE
        self.db = _database(self.path, timeout)
        self._counter = _Counter()

    @staticmethod
    def key(prompt: str, llm_string: str) -> str:
        """The row key of a prompt for a model."""
        text = canonical_llm_string(llm_string) + "\x00" + prompt
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        """The cached generations (marked as hits), or None (a miss)."""
        (value,) = self.db.get("generations", [self.key(prompt, llm_string)])
        generations = None
        if value is not None:
            try:
                generations = [_mark_hit(_generation_from_dict(d)) for d in json.loads(value)]
            except Exception:  # an unreadable row is a miss and gets overwritten
                generations = None
        self._counter.add(hits=int(generations is not None), misses=int(generations is None))
        return generations

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        """Store the full generations of a call; one over ``MAX_ENTRY_BYTES`` is not kept (a
        provider's 50 MB reply had been cached whole, 6.1 GB after 60 calls)."""
        value = json.dumps([_generation_to_dict(g) for g in return_val], default=str)
        if len(value) > MAX_ENTRY_BYTES:
            return
        row = (self.key(prompt, llm_string), canonical_llm_string(llm_string), value)
        self.db.put("generations", [row])

    def clear(self, **kwargs: Any) -> None:
        """Delete every cached chat reply."""
        self.db.run("DELETE FROM generations")

    @property
    def stats(self) -> CacheStats:
        """Hits and misses since the last ``take_stats``."""
        return self._counter.peek()

    def take_stats(self) -> CacheStats:
        """Hits and misses since the last take; resets the counts."""
        return self._counter.take()

    def close(self) -> None:
        """Close this process's connection (it reopens on next use)."""
        self.db.close()


class RunKeyedCache(BaseCache):
    """A ``CallCache`` seen by run ``index`` of a repeated call (``--judge-runs``).

    The same prompt to the same model is one row of the cache; N runs of it must be N rows, each
    found again by the same run of a rerun. This view keys every call under the prompt followed
    by ``\\x00memory_lab_run=<index>`` (a serialized prompt never holds a raw NUL), and shares the
    file, the hit marks and the counts of the cache it wraps.
    """

    def __init__(self, cache: CallCache, index: int):
        self.cache = cache
        self.index = index

    def _prompt(self, prompt: str) -> str:
        return f"{prompt}\x00memory_lab_run={self.index}"

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        return self.cache.lookup(self._prompt(prompt), llm_string)

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        self.cache.update(self._prompt(prompt), llm_string, return_val)

    def clear(self, **kwargs: Any) -> None:
        self.cache.clear(**kwargs)


def cached_chat_model(model: BaseChatModel, cache: BaseCache | None) -> BaseChatModel:
    """Attach ``cache`` to ``model`` in place (None leaves it uncached) and return it."""
    value: BaseCache | bool = cache if cache is not None else False
    try:
        model.cache = value
    except (TypeError, ValueError, AttributeError):
        object.__setattr__(model, "cache", value)
    return model


class SQLiteByteStore(ByteStore):
    """A ``ByteStore`` over the cache file's embeddings table, counting hits per key."""

    def __init__(self, db: _Database, prefix: str = "", counter: _Counter | None = None):
        self.db = db
        self.prefix = prefix
        self.counter = counter or _Counter()

    def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        values = self.db.get("embeddings", [self.prefix + k for k in keys])
        hits = sum(v is not None for v in values)
        self.counter.add(hits=hits, misses=len(values) - hits)
        return [bytes(v) if v is not None else None for v in values]

    def mset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        rows = [(self.prefix + k, sqlite3.Binary(v)) for k, v in key_value_pairs]
        self.db.put("embeddings", rows)

    def mdelete(self, keys: Sequence[str]) -> None:
        for key in keys:
            self.db.run("DELETE FROM embeddings WHERE key = ?", (self.prefix + key,))

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        start = self.prefix + (prefix or "")
        rows = self.db.run(
            "SELECT key FROM embeddings WHERE substr(key, 1, ?) = ?", (len(start), start)
        )
        for (key,) in rows:
            yield key[len(self.prefix) :]


class CachedEmbeddings(CacheBackedEmbeddings):
    """``CacheBackedEmbeddings`` whose embedding hits and misses (per text) can be taken."""

    counter: _Counter

    @property
    def stats(self) -> CacheStats:
        """Texts found and not found since the last ``take_stats``."""
        return self.counter.peek()

    def take_stats(self) -> CacheStats:
        """Texts found and not found since the last take; resets the counts."""
        return self.counter.take()


def embeddings_identity(embeddings: Embeddings) -> str:
    """The class and model attributes of an embeddings object, for namespaces: no secrets, a
    base URL without its credentials (the same namespace whatever the password)."""
    parts = [type(embeddings).__name__]
    for name in _EMBEDDING_IDENTITY:
        value = getattr(embeddings, name, None)
        if value is not None:
            parts.append(f"{name}={redact(str(value), known=False)}")
    return ",".join(parts)


def cached_embeddings(embeddings: Embeddings, cache_dir: Path, namespace: str) -> CachedEmbeddings:
    """``embeddings`` behind the on-disk cache, keyed by ``namespace`` (the spec) and identity."""
    db = _database(Path(cache_dir) / CACHE_FILE)
    counter = _Counter()
    space = f"{namespace}|{embeddings_identity(embeddings)}|"
    wrapped = CachedEmbeddings.from_bytes_store(
        embeddings,
        SQLiteByteStore(db, "doc:", counter),
        namespace=space,
        query_embedding_cache=SQLiteByteStore(db, "query:", counter),
        key_encoder="sha256",
    )
    wrapped.counter = counter
    return wrapped


def offline_embedding_store(cache_dir: str | Path) -> SQLiteByteStore:
    """The cache file's store for offline embedding vectors (keys name the model)."""
    return SQLiteByteStore(_database(Path(cache_dir) / CACHE_FILE), "offline:")
