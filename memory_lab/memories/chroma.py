"""The process's one in-memory Chroma client and each cell's own collections on it.

Used by every memory that keeps vectors in Chroma (vector, hybrid, hierarchical, memgpt, …):
one client per process, a collection per cell (named by the cell id, Chroma-safe), dropped when
the cell closes; the run's metered embeddings always embed, never Chroma's default model.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from memory_lab.memories.protocol import MemoryResources

# What a Chroma-backed memory imports on first use (chromadb imports httpx, whose half-imported
# module openai's client reads from sys.modules): its registration's ``stack``.
STACK = ("httpx", "chromadb", "chromadb.config", "chromadb.api.rust", "langchain_chroma")

# Chroma keeps a dropped collection's HNSW index in its Rust bindings' cache (about 2.5 MB each,
# chroma-core/chroma#3296): a long run or a server whose users come and go would grow by that
# per cell. The client is closed, which frees its system and that cache, once it holds no live
# collection and has dropped RECYCLE_AFTER of them; the next cell makes a fresh one.
RECYCLE_AFTER = 16

_CHROMA_LOCK = threading.Lock()
_CHROMA: Any = None
_LIVE = 0  # the cells' collections on the client now
_DROPPED = 0  # collections the client has dropped since it was made


def chroma_client() -> Any:
    """The process's one in-memory Chroma client; cells keep apart by collection name.

    Creating and releasing clients concurrently breaks Chroma's shared in-process system
    (``--concurrency``), and one client is also cheaper. In memory and telemetry off: nothing
    persists between runs and nothing leaves the machine. Cells take it through ``_lease``, so
    it is never closed under a live collection.
    """
    with _CHROMA_LOCK:
        return _client()


def _client() -> Any:
    global _CHROMA
    if _CHROMA is None:
        import chromadb
        from chromadb.config import Settings

        _CHROMA = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    return _CHROMA


def _lease() -> Any:
    """The client, counted as holding one more live collection until ``_drop``."""
    global _LIVE
    with _CHROMA_LOCK:
        _LIVE += 1
        return _client()


def _drop(client: Any, name: str) -> None:
    """Delete a cell's collection; close the client once idle and ``RECYCLE_AFTER`` are gone."""
    global _CHROMA, _LIVE, _DROPPED
    with _CHROMA_LOCK:
        from chromadb.errors import NotFoundError

        try:
            client.delete_collection(name)
        except NotFoundError:  # its creation failed: nothing to delete
            pass
        finally:
            if client is _CHROMA:
                _LIVE -= 1
                _DROPPED += 1
            if client is _CHROMA and _LIVE == 0 and _DROPPED >= RECYCLE_AFTER:
                _CHROMA, _DROPPED = None, 0
                client.close()  # stops its system: the bindings and their index cache go


def collection_name(cell_id: str, suffix: str) -> str:
    """A Chroma collection name: 3-512 characters of [a-zA-Z0-9._-], alphanumeric at both ends."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{cell_id}-{suffix}")
    name = re.sub(r"\.{2,}", ".", name).strip("._-")[:512].strip("._-")
    return name if len(name) >= 3 else f"ml-{name or 'cell'}"


def cell_collection(res: MemoryResources, suffix: str = "") -> Any:
    """The cell's own Chroma collection (cosine space), dropped when the cell closes.

    It embeds nothing itself (no embedding function: Chroma's default would download a model);
    callers add and query with vectors from the run's metered embeddings.
    """
    client = _lease()
    name = collection_name(res.cell_id, suffix) if suffix else res.cell_id
    res.on_close(lambda: _drop(client, name))
    return client.get_or_create_collection(
        name=name, embedding_function=None, metadata={"hnsw:space": "cosine"}
    )  # (made or not, _drop deletes it if it is there)


def cell_vector_store(res: MemoryResources) -> Any:
    """A LangChain ``Chroma`` store over the cell's own collection, embedding with the run's
    metered embeddings (always ours), dropped when the cell closes."""
    from langchain_chroma import Chroma

    client = _lease()
    res.on_close(lambda: _drop(client, res.cell_id))
    return Chroma(
        collection_name=res.cell_id,
        embedding_function=res.embeddings,
        client=client,
        collection_metadata={"hnsw:space": "cosine"},
    )
