"""Memories that keep their state on a server, as their registration declares
(``register_memory(..., persistent=...)``): ``memory-lab serve`` gives each user a fixed cell id
for them, keeps them when it stops and finds them again after a restart; the others live in the
process. Serve reads the declaration: nothing here is decided from a memory's name."""

from __future__ import annotations

import uuid

import httpx
import pytest

from memory_lab.memories.base import TextMemory
from memory_lab.memories.registry import (
    memory_factories,
    parse_memory_spec,
    register_memory,
    unregister_memory,
)
from memory_lab.serve.chat import cell_id, served_spec

# every built-in spec that keeps its state on the PostgreSQL server (its declaration)
ON_SERVER = [
    "thread:saver=postgres",
    "store:backend=postgres",
    "langmem:store=postgres",
    "mem0:store=postgres",
]
IN_PROCESS = ["buffer", "thread", "thread:saver=sqlite", "store", "langmem", "mem0", "vector"]


def client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=300)


def by_memory(body: dict) -> dict[str, dict]:
    return {m["memory"]: m for m in body["memories"]}


@pytest.mark.parametrize("text", ON_SERVER)
def test_a_memory_kept_on_a_server_has_one_cell_id_per_user_and_is_kept(text):
    spec = parse_memory_spec(text)
    assert cell_id(spec, "ada") == cell_id(spec, "ada") != cell_id(spec, "bob")
    assert served_spec(spec).params["keep"] is True  # the server keeps it when it stops
    given = parse_memory_spec(f"{text},keep=false")
    assert served_spec(given).params["keep"] is False  # unless the spec says


@pytest.mark.parametrize("text", IN_PROCESS)
def test_a_memory_in_the_process_gets_a_fresh_cell_id(text):
    spec = parse_memory_spec(text)
    assert cell_id(spec, "ada") != cell_id(spec, "ada")
    assert served_spec(spec) == spec


def test_serve_follows_the_declaration_not_the_name():
    """A memory of any name that declares a server-kept value is served as one, and one that
    declares nothing is not, whatever its parameters are called."""

    class Notes(TextMemory):
        def context(self, query: str) -> str:
            return ""

        def remember(self, user: str, assistant: str) -> None:
            pass

    @register_memory("remote_notes", "notes", persistent={"place": ("server",)})
    def remote_notes(res, place: str = "local", keep: bool = False) -> Notes:
        return Notes()

    @register_memory("plain_notes", "notes")
    def plain_notes(res, backend: str = "postgres", saver: str = "postgres") -> Notes:
        return Notes()

    try:
        remote = parse_memory_spec("remote_notes:place=server")
        assert cell_id(remote, "ada") == cell_id(remote, "ada")
        assert served_spec(remote).params["keep"] is True
        local = parse_memory_spec("remote_notes")
        assert cell_id(local, "ada") != cell_id(local, "ada")
        plain = parse_memory_spec("plain_notes")
        assert cell_id(plain, "ada") != cell_id(plain, "ada")
    finally:
        unregister_memory("remote_notes")
        unregister_memory("plain_notes")


def test_every_declared_memory_is_served_as_kept_on_its_server():
    """Every registered memory with a declaration: each declared value makes a fixed cell id."""
    declared = {n: f for n, f in memory_factories().items() if f.persistent}
    assert sorted(declared) == ["langmem", "mem0", "store", "thread"]
    for name, factory in declared.items():
        for param, values in factory.persistent:
            for value in values:
                spec = parse_memory_spec(f"{name}:{param}={value}")
                assert cell_id(spec, "ada") == cell_id(spec, "ada"), spec.label


def texts(view: dict) -> list[str]:
    """The memory texts a langmem or mem0 snapshot holds, sorted."""
    held = view["snapshot"]["memories"].values()
    return sorted(str(m.get("content", m.get("memory"))) for m in held)


def restart_keeps_the_users_memory(serve, spec: str, url: str) -> None:
    """Chat a fact, stop the server; a new one gives it back, takes more, forgets on DELETE."""
    user = f"pg-{uuid.uuid4().hex[:8]}"
    pg = {"postgres": url}
    with serve([spec], resources=pg) as base, client(base) as http:
        said = http.post(f"/chat/{user}", json={"message": "My sister is called Ingrid."})
        assert said.status_code == 200, said.text
        before = by_memory(http.get(f"/memory/{user}", params={"query": "sister"}).json())
    held = texts(before[spec])
    assert any("Ingrid" in text for text in held), held

    with serve([spec], resources=pg) as base, client(base) as http:  # a new server
        after = by_memory(http.get(f"/memory/{user}", params={"query": "sister"}).json())
        assert texts(after[spec]) == held  # the same memories, found again
        assert "Ingrid" in after[spec]["context"]
        turn = http.post(f"/chat/{user}", json={"message": "Who is my sister?"})
        assert turn.status_code == 200, turn.text
        assert "Ingrid" in by_memory(turn.json())[spec]["prompt_context"]
        assert http.delete(f"/memory/{user}").status_code == 200
        gone = by_memory(http.get(f"/memory/{user}", params={"query": "sister"}).json())
        assert gone[spec]["snapshot"]["memories"] == {}

    with serve([spec], resources=pg) as base, client(base) as http:  # and stays forgotten
        again = by_memory(http.get(f"/memory/{user}", params={"query": "sister"}).json())
        assert again[spec]["snapshot"]["memories"] == {} and again[spec]["context"] == ""


def test_langmem_on_postgres_survives_a_restart_until_deleted(serve, pgvector_url):
    restart_keeps_the_users_memory(serve, "langmem:store=postgres", pgvector_url)


def test_mem0_on_postgres_survives_a_restart_until_deleted(serve, pgvector_url):
    restart_keeps_the_users_memory(serve, "mem0:store=postgres", pgvector_url)


# After a restart a langmem or mem0 memory's id counter starts again at 1 (deterministic ids for
# reruns); it skips the ids its store already holds, so the first memory written after the
# restart neither replaces the user's old one (langmem) nor fails on a duplicate id (mem0).
@pytest.mark.parametrize("spec", ["langmem:store=postgres", "mem0:store=postgres"])
def test_a_new_memory_after_a_restart_is_kept_beside_the_old(serve, pgvector_url, spec):
    user = f"pg-{uuid.uuid4().hex[:8]}"
    pg = {"postgres": pgvector_url}
    with serve([spec], resources=pg) as base, client(base) as http:
        said = http.post(f"/chat/{user}", json={"message": "My sister is called Ingrid."})
        assert said.status_code == 200, said.text
    with serve([spec], resources=pg) as base, client(base) as http:
        try:
            more = http.post(f"/chat/{user}", json={"message": "My dog is named Rex."})
            assert more.status_code == 200, more.text
            now = texts(by_memory(more.json())[spec]["state"])
            assert any("Ingrid" in t for t in now) and any("Rex" in t for t in now), now
        finally:
            assert http.delete(f"/memory/{user}").status_code == 200
