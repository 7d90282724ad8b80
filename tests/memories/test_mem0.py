"""The ``mem0`` memory: mem0ai's ``Memory`` through its LangChain providers, searched per turn."""

from __future__ import annotations

import dataclasses
import json

import psycopg
import pytest

from memory_lab import parse_memory_spec
from memory_lab.memories import MemorySpecError, tokens_held
from memory_lab.memories.protocol import Query
from memory_lab.memories.registry import preflight_memories
from memory_lab.memories.systems.mem0.adapter import pg_table

from .replay import exchange, replayed, run_twice_on_mock


def test_parameters_are_checked_when_the_spec_is_parsed():
    assert parse_memory_spec("mem0").params == {"k": 4, "store": "memory", "keep": False}
    with pytest.raises(MemorySpecError, match="'store' must be one of memory, postgres"):
        parse_memory_spec("mem0:store=sqlite")
    with pytest.raises(MemorySpecError, match="'k' must be at least 1"):
        parse_memory_spec("mem0:k=0")
    with pytest.raises(MemorySpecError, match="'k' must be int"):
        parse_memory_spec("mem0:k=many")


def test_each_exchange_adds_the_facts_mem0_extracts(nurse, run_models):
    cell = replayed("mem0", nurse, run_models, upto=0)
    memory = cell.memory
    memory.observe(exchange(0, "I prefer aisle seats on flights."))
    memory.observe(exchange(1, "The weather is nice today."))  # nothing to remember
    assert memory.held_texts() == ["I prefer aisle seats on flights."]
    usage, by_role = cell.maintenance()
    assert [r for r, _, _ in by_role] == ["memory"] and usage.llm_calls == 2
    assert usage.output_tokens > 0 and usage.embedding_tokens > 0
    memory.observe(exchange(2, "I prefer aisle seats on flights."))  # held: not added twice
    memory.observe(
        exchange(3, "My sister Hana lives in Daejeon with her two cats.", date="2026-02-01")
    )
    snapshot = memory.snapshot()["memories"]
    assert sorted(m["memory"] for m in snapshot.values()) == [
        "I prefer aisle seats on flights.",
        "My sister Hana lives in Daejeon with her two cats.",
    ]
    assert sorted(m["turn_ids"] for m in snapshot.values()) == [["u0", "a0"], ["u3", "a3"]]
    assert tokens_held(memory) > 0
    cell.close()


def test_recall_is_mem0s_search_ranked_dated_and_naming_turns(nurse, run_models):
    cell = replayed("mem0:k=2", nurse, run_models)
    recall = cell.memory.recall(Query("Where do I teach these days?", "s2", "2026-04-10"))
    header, *facts = recall.items
    assert header.text == "Memories about the user:" and len(facts) == 2
    assert "teacher at Haeundae Middle School" in facts[0].text
    assert facts[0].text.startswith("- [2026-04-10] ")
    assert facts[0].turn_ids[0] == "job-v2" and facts[0].kind == "fact"
    assert recall.ranking == tuple(f.turn_ids for f in facts)
    assert cell.memory.recall(Query("")).items == ()
    snapshot = cell.memory.snapshot()
    cell.close()
    again = replayed("mem0:k=2", nurse, run_models)  # the same ids: uuid4 from the cell's counter
    assert again.memory.snapshot() == snapshot
    again.close()


def _remember_first_line(body: dict) -> str:
    """A 'model' behind the mock: each exchange's first user line as one memory (mem0's JSON)."""
    prompt = body["messages"][1]["content"]
    line = prompt.split("## New Messages\n", 1)[1].splitlines()[0].removeprefix("user: ")
    return json.dumps({"memory": [{"id": "0", "text": line}]})


def test_mem0_prompts_reach_the_provider_metered_and_a_rerun_is_cached(
    tmp_path, monkeypatch, seat_change
):
    runs = run_twice_on_mock("mem0", seat_change, tmp_path, monkeypatch, reply=_remember_first_line)
    assert runs.failed_cells == [0, 0]
    requests, turns = runs.requests, runs.turns
    memory_requests = [r for r in requests if "Memory Extractor" in r["messages"][0]["content"]]
    assert len(memory_requests) == len(turns) == (turns["memory_llm_calls"] == 1).sum()
    # mem0's own prompts, unchanged but for the session's date
    assert memory_requests[0]["messages"][0]["content"].strip().startswith("# ROLE")
    assert "## Existing Memories\n[]" in memory_requests[0]["messages"][1]["content"]
    assert '"text": ' in memory_requests[1]["messages"][1]["content"]  # the first memory shown
    assert "## Current Date\n2026-04-01" in memory_requests[0]["messages"][1]["content"]
    assert "## Current Date\n2026-05-10" in memory_requests[-1]["messages"][1]["content"]
    assert (turns["memory_output_tokens"] > 0).all()
    assert runs.again_calls == 0  # the rerun's calls all came from the cache
    assert list(runs.rerun_turns["memory_output_tokens"]) == list(turns["memory_output_tokens"])


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'mem0_%'")
        return {r[0] for r in rows.fetchall()}


def test_on_postgres_mem0_holds_and_recalls_what_it_holds_in_chroma(
    nurse, run_models, pgvector_url
):
    """store=postgres: mem0's own pgvector store on the private cluster, a table per cell,
    dropped at close unless keep=true; the same memories and the same recall as on Chroma."""
    models = dataclasses.replace(run_models, resources={"postgres": pgvector_url})
    results = []
    for text in ("mem0:store=postgres", "mem0", "mem0:store=postgres,keep=true"):
        preflight_memories([parse_memory_spec(text)], {"postgres": pgvector_url})
        cell = replayed(text, nurse, models)
        recall = cell.memory.recall(Query("Which city do I live in?", "s2"))
        results.append((sorted(cell.memory.held_texts()), [i.text for i in recall.items]))
        if "postgres" in text:
            assert len(_tables(pgvector_url)) == 1
        cell.close()
        if text == "mem0:store=postgres":
            assert _tables(pgvector_url) == set()  # dropped with the cell
    assert results[0] == results[1] == results[2] and results[0][0]
    kept = _tables(pgvector_url)
    assert len(kept) == 1 and kept.pop() == pg_table(cell.resources.cell_id)
    with psycopg.connect(pgvector_url) as conn:  # keep=true left its table: drop it here
        conn.execute(f"DROP TABLE {pg_table(cell.resources.cell_id)}")


def test_mem0_s_spacy_warnings_do_not_reach_the_user(tmp_path, caplog, monkeypatch):
    """Without spaCy (mem0ai's nlp extra) mem0 warns at every load with a pip command, which
    read as an error: the docs say it once instead. Its other warnings still pass."""
    import logging

    from memory_lab.memories.systems.mem0.adapter import _import_mem0

    monkeypatch.setenv("MEM0_DIR", str(tmp_path))  # as a run sets it, restored after
    _import_mem0(tmp_path)
    spacy_log = logging.getLogger("mem0.utils.spacy_models")
    with caplog.at_level(logging.WARNING, logger="mem0.utils.spacy_models"):
        spacy_log.warning(
            "Failed to load spaCy full model: spaCy is not installed. Install it with: "
            "pip install mem0ai[nlp]"
        )
        spacy_log.warning("Failed to load spaCy full model: something else")
    assert [r.getMessage() for r in caplog.records] == [
        "Failed to load spaCy full model: something else"
    ]
