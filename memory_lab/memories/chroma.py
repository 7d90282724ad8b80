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

_CHROMA_LOCK = threading.Lock()
_CHROMA: Any = None


def chroma_client() -> Any:
    """The process's one in-memory Chroma client; cells keep apart by collection name.

    Creating and releasing clients concurrently breaks Chroma's shared in-process system
    (``--concurrency``), and one client is also cheaper. In memory and telemetry off: nothing
    persists between runs and nothing leaves the machine.
    """
    global _CHROMA
    with _CHROMA_LOCK:
        if _CHROMA is None:
            import chromadb
            from chromadb.config import Settings

            _CHROMA = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        return _CHROMA


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
    client = chroma_client()
    name = collection_name(res.cell_id, suffix) if suffix else res.cell_id
    collection = client.get_or_create_collection(
        name=name, embedding_function=None, metadata={"hnsw:space": "cosine"}
    )
    res.on_close(lambda: client.delete_collection(name))
    return collection


def cell_vector_store(res: MemoryResources) -> Any:
    """A LangChain ``Chroma`` store over the cell's own collection, embedding with the run's
    metered embeddings (always ours), dropped when the cell closes."""
    from langchain_chroma import Chroma

    client = chroma_client()
    store = Chroma(
        collection_name=res.cell_id,
        embedding_function=res.embeddings,
        client=client,
        collection_metadata={"hnsw:space": "cosine"},
    )
    res.on_close(lambda: client.delete_collection(res.cell_id))
    return store
