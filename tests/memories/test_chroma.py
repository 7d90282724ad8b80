"""The process's Chroma client: cells' collections dropped on close, and the client made afresh
once idle (a dropped collection's index stays in Chroma's cache until its client closes)."""

from __future__ import annotations

from langchain_core.embeddings import FakeEmbeddings

from memory_lab.memories import chroma
from memory_lab.memories.protocol import MemoryResources


def _resources(cell_id: str) -> MemoryResources:
    return MemoryResources(models={}, embeddings=FakeEmbeddings(size=8), cell_id=cell_id)


def _open(cell_id: str) -> tuple[MemoryResources, object]:
    res = _resources(cell_id)
    collection = chroma.cell_collection(res)
    collection.add(ids=["a"], embeddings=[[0.1] * 8], documents=["kept"])
    return res, collection


def _fresh(monkeypatch) -> None:
    """A client of the test's own (what other tests left open stays on theirs)."""
    for name, value in (("_CHROMA", None), ("_LIVE", 0), ("_DROPPED", 0)):
        monkeypatch.setattr(chroma, name, value)


def test_the_client_is_made_afresh_once_idle_never_under_a_live_collection(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setattr(chroma, "RECYCLE_AFTER", 3)
    live, live_collection = _open("chroma-test-live")
    first = chroma.chroma_client()
    for n in range(5):  # more than RECYCLE_AFTER dropped, but one collection is live
        res, _ = _open(f"chroma-test-{n}")
        res.close()
    assert chroma.chroma_client() is first
    assert live_collection.get(ids=["a"])["documents"] == ["kept"]
    live.close()  # the last live collection goes: the client is closed
    assert chroma.chroma_client() is not first
    res, collection = _open("chroma-test-after")
    assert collection.get(ids=["a"])["documents"] == ["kept"]
    assert [c.name for c in chroma.chroma_client().list_collections()] == ["chroma-test-after"]
    res.close()


def test_a_collection_never_made_is_dropped_without_an_error(monkeypatch):
    _fresh(monkeypatch)
    res = _resources("chroma-test-unmade")
    client = chroma._lease()
    res.on_close(lambda: chroma._drop(client, "chroma-test-unmade"))
    res.close()  # no "collection does not exist"
    assert chroma._LIVE == 0
