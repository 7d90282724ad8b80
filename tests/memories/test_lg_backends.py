"""LangGraph memories on a real PostgreSQL: threads and Store items persist, and are cleaned up.

The servers are private clusters started for the session (``postgres_url``: Debian's
PostgreSQL; ``pgvector_url``: pgserver's build with the vector extension), no mocks.
"""

from __future__ import annotations

import contextlib
import dataclasses

import psycopg
import pytest

from memory_lab import parse_memory_spec
from memory_lab.cli import main
from memory_lab.memories.lg_backends import checkpoint_serializer, lend_pool, open_pool
from memory_lab.memories.protocol import Query
from memory_lab.memories.registry import build_memory, preflight_memories
from memory_lab.run.cell import Cell
from memory_lab.run.exchanges import exchanges


def rows(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.fixture
def pg_models(run_models, postgres_url):
    return dataclasses.replace(run_models, resources={"postgres": postgres_url})


def test_a_postgres_thread_continues_after_its_graph_is_rebuilt(
    mini_dialogue, pg_models, postgres_url
):
    spec = parse_memory_spec("thread:saver=postgres,keep=true,policy=summarize,max_messages=6")
    exs = exchanges(mini_dialogue)
    cell = Cell(spec, mini_dialogue, pg_models)
    for ex in exs[:4]:
        cell.memory.observe(ex)
    before = cell.memory.recall(Query("?"))
    cell.close()  # keep=true: the thread stays on the server

    again = build_memory(spec, dataclasses.replace(cell.resources, closers=[]))
    assert again.recall(Query("?")) == before and before.items[0].kind == "summary"
    for ex in exs[4:]:
        again.observe(ex)
    assert str(again.recall(Query("?")).items[-1].text) == "AI: That sounds wonderful."
    again.persistence.keep = False  # now delete it, as a cell without keep does at close
    again.close()
    thread_id = cell.resources.cell_id
    with psycopg.connect(postgres_url) as conn:
        left = conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = %s", (thread_id,))
        assert left.fetchone()[0] == 0


def test_a_store_on_postgres_without_an_index_keeps_facts_per_user(
    mini_dialogue, pg_models, postgres_url
):
    cell = Cell(parse_memory_spec("store:backend=postgres,search=recent"), mini_dialogue, pg_models)
    for ex in exchanges(mini_dialogue):
        cell.memory.observe(ex)
    items = cell.memory.recall(Query("Where do I live now?", "s2")).items
    assert rows(postgres_url, "store") >= 4
    cell.close()
    assert "- [2026-03-09] Big news: I moved to Busan last weekend." in [i.text for i in items]
    assert rows(postgres_url, "store") == 0  # the cell's items deleted at close


def crowd_the_store(url: str, embeddings) -> int:
    """Another application's user on the same table, with an HNSW index, near our questions."""
    from langgraph.store.postgres import PostgresStore

    texts = [f"My neighbour's cat {i} is called Tiger and lives in Seoul." for i in range(60)]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE INDEX IF NOT EXISTS crowd_hnsw ON store_vectors "
            "USING hnsw (embedding vector_cosine_ops)"
        )
    with PostgresStore.from_conn_string(url, index={"dims": 384, "embed": embeddings}) as other:
        for i, text in enumerate(texts):
            other.put(("someone-else", "fact"), f"cat-{i}", {"value": text})
    return len(texts)


@pytest.mark.parametrize("pooled", [False, True], ids=["own-connection", "server-pool"])
def test_the_stores_semantic_search_on_postgres_ranks_as_in_memory(
    mini_dialogue, run_models, pgvector_url, pooled
):
    """Exact search with the query embedded as a query: Postgres finds what memory finds, even
    beside another user's vectors under an HNSW index (which alone would return fewer hits);
    also through a server's pool of one connection (``memory-lab serve``), where the search
    holds a pooled connection with index scans off."""
    models = dataclasses.replace(run_models, resources={"postgres": pgvector_url})
    spec = parse_memory_spec("store:backend=postgres")
    preflight_memories([spec], {"postgres": pgvector_url})  # creates the vector tables once
    crowd = crowd_the_store(pgvector_url, models.memory_embeddings(lambda n: None))
    questions = ("What is my cat called?", "Where do I live now?")
    recalls = []
    with contextlib.ExitStack() as stack:
        if pooled:
            pool = stack.enter_context(open_pool(pgvector_url, size=1, wait=5.0))
            stack.enter_context(lend_pool(pgvector_url, pool))
        for memory in (spec, parse_memory_spec("store")):
            cell = Cell(memory, mini_dialogue, models)
            for ex in exchanges(mini_dialogue):
                cell.memory.observe(ex)
            recalls.append([cell.memory.recall(Query(q, "s2")) for q in questions])
            cell.close()
    facts = [i.text for i in recalls[0][0].items if i.kind == "fact"]
    assert len(facts) == 4  # k hits, none lost to the crowd
    assert facts[0] == "- [2026-03-02] My cat is called Mochi and she hates the vacuum cleaner."
    assert recalls[0] == recalls[1]  # the same ranking as the in-memory Store
    assert rows(pgvector_url, "store_vectors") == crowd  # ours deleted at close


def test_a_missing_or_unreachable_server_is_one_line_before_the_run(
    tmp_path, capsys, monkeypatch, postgres_url
):
    monkeypatch.delenv("MEMORY_LAB_POSTGRES", raising=False)
    out = tmp_path / "never"
    base = ["run", "--memory", "thread:saver=postgres", "--out", str(out), "--quiet"]
    assert main(base) == 2
    assert "needs the resource 'postgres'" in capsys.readouterr().err
    secret = "postgresql://someone:pw-7c1e@127.0.0.1:1/memlab"
    assert main([*base, "--resource", f"postgres={secret}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach PostgreSQL at 127.0.0.1:1/memlab" in err
    assert "pw-7c1e" not in err and "someone" not in err
    store = ["run", "--memory", "store:backend=postgres", "--out", str(out), "--quiet"]
    assert main([*store, "--resource", f"postgres={postgres_url}"]) == 2  # Debian: no pgvector
    assert "lacks the pgvector extension" in capsys.readouterr().err
    assert not out.exists()


@dataclasses.dataclass
class Stranger:
    x: int


def test_checkpoints_load_langmems_summary_quietly_and_refuse_other_types(caplog):
    from langmem.short_term import RunningSummary

    serde = checkpoint_serializer()
    summary = RunningSummary("Human: I live in Busan.", {"s1.t1"}, "s1.t1")
    state = {"running_summary": summary}
    assert serde.loads_typed(serde.dumps_typed(state)) == state
    assert not caplog.records  # no "unregistered type" warning
    revived = serde.loads_typed(serde.dumps_typed({"other": Stranger(1)}))
    assert revived == {"other": {"x": 1}}  # plain data, never the class
    assert "Blocked deserialization" in caplog.text


def terminate_other_backends(url: str) -> int:
    """Drop every other client connection to the server (a restart or a network cut, as the
    cell sees it); the server stays up."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchone()[0]


@pytest.mark.parametrize(
    "memory", ["thread:saver=postgres", "store:backend=postgres,search=recent"]
)
def test_a_cell_whose_connection_dies_leaves_nothing_on_the_server(
    memory, mini_dialogue, pg_models, postgres_url
):
    """keep=false holds for a failed cell: its rows are deleted over a new connection, and no
    connection or Python thread of it stays behind."""
    import threading

    from memory_lab.run.cell import replay_dialogue

    preflight_memories([parse_memory_spec(memory)], pg_models.resources)
    before = {t.ident for t in threading.enumerate()}
    records: list[dict] = []
    exchanged = []

    def cut_after_two() -> None:
        exchanged.append(1)
        if len(exchanged) == 2:
            assert rows(postgres_url, "checkpoints") > 0  # the cell has written its thread
            assert terminate_other_backends(postgres_url) >= 1

    with pytest.raises(psycopg.OperationalError):
        replay_dialogue(
            parse_memory_spec(memory), mini_dialogue, pg_models, records.append, cut_after_two
        )
    assert len(exchanged) == 2 and records  # it failed after two exchanges
    with psycopg.connect(postgres_url) as conn:
        for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs", "store"):
            if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None:
                assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
        others = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchone()[0]
    assert others == 0  # the cell's connections are closed
    assert {t.ident for t in threading.enumerate()} - before == set()


def client_connections(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchone()[0]


def test_a_cell_that_cannot_be_built_closes_what_its_memory_opened(
    mini_dialogue, pg_models, postgres_url, monkeypatch
):
    from memory_lab.models import ProviderError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    models = dataclasses.replace(pg_models, config=pg_models.config.replace(llm="openai:gpt-x"))
    spec = parse_memory_spec("thread:saver=postgres")
    preflight_memories([spec], models.resources)
    with pytest.raises(ProviderError, match="OPENAI_API_KEY"):  # the reader, after the memory
        Cell(spec, mini_dialogue, models)
    assert client_connections(postgres_url) == 0
