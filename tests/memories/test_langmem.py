"""The ``langmem`` memory: LangMem's memory manager writing a LangGraph Store, searched per turn."""

from __future__ import annotations

import dataclasses

import psycopg
import pytest

from memory_lab import parse_memory_spec
from memory_lab.memories import MemorySpecError, tokens_held
from memory_lab.memories.protocol import Query
from memory_lab.memories.registry import preflight_memories

from ..models.openai_mock import TOOL_CALL_USAGE
from .replay import exchange, replayed, run_twice_on_mock


def test_parameters_are_checked_when_the_spec_is_parsed():
    assert parse_memory_spec("langmem").params == {
        "store": "memory",
        "k": 4,
        "query_limit": 5,
        "deletes": True,
        "keep": False,
    }
    with pytest.raises(MemorySpecError, match="'k' must be at least 1"):
        parse_memory_spec("langmem:k=0")
    with pytest.raises(MemorySpecError, match="'store' must be one of memory, postgres"):
        parse_memory_spec("langmem:store=sqlite")


def test_the_manager_inserts_updates_and_deletes_memories(nurse, run_models):
    cell = replayed("langmem", nurse, run_models, upto=0)
    memory = cell.memory
    memory.observe(exchange(0, "I prefer aisle seats on flights."))
    memory.observe(exchange(1, "The weather is nice today."))  # nothing to remember
    [first] = memory.items()
    assert memory.content(first) == "I prefer aisle seats on flights."
    usage, by_role = cell.maintenance()
    assert [r for r, _, _ in by_role] == ["memory"] and usage.llm_calls >= 1
    assert usage.output_tokens > 0 and usage.embedding_tokens > 0  # tool calls, the Store index
    memory.observe(exchange(2, "I now prefer window seats on flights."))  # PatchDoc
    [updated] = memory.items()
    assert updated.key == first.key
    assert memory.content(updated) == "I now prefer window seats on flights."
    assert memory.snapshot()["memories"][first.key]["turn_ids"] == ["u2", "a2", "u0", "a0"]
    memory.observe(exchange(3, "My sister Hana lives in Daejeon with her two cats."))
    assert len(memory.items()) == 2
    memory.observe(exchange(4, "I no longer prefer window seats on flights."))  # RemoveDoc
    assert [memory.content(i) for i in memory.items()] == [
        "My sister Hana lives in Daejeon with her two cats."
    ]
    assert memory.held_texts() == ["My sister Hana lives in Daejeon with her two cats."]
    assert tokens_held(memory) > 0
    cell.close()


def test_recall_is_a_store_search_by_the_message_dated_and_naming_turns(nurse, run_models):
    cell = replayed("langmem:k=2", nurse, run_models)
    recall = cell.memory.recall(Query("Where do I teach these days?", "s2", "2026-04-10"))
    header, *facts = recall.items
    assert header.text == "Memories about the user:" and len(facts) == 2
    assert facts[0].text == (
        "- [2026-04-10] And I work as a teacher at Haeundae Middle School these days."
    )
    assert facts[0].turn_ids[0] == "job-v2" and facts[0].kind == "fact"
    assert recall.ranking == tuple(f.turn_ids for f in facts)
    assert cell.memory.recall(Query("")).items == ()
    snapshot = cell.memory.snapshot()
    cell.close()
    # the same dialogue again: the same keys (LangMem's uuid4 draws come from the cell's counter)
    again = replayed("langmem:k=2", nurse, run_models)
    assert again.memory.snapshot() == snapshot
    again.close()


@pytest.mark.slow
def test_the_store_on_postgres_holds_what_the_memory_store_holds(nurse, run_models, pgvector_url):
    models = dataclasses.replace(run_models, resources={"postgres": pgvector_url})
    preflight_memories([parse_memory_spec("langmem:store=postgres")], {"postgres": pgvector_url})
    results = []
    for memory in ("langmem:store=postgres", "langmem"):
        cell = replayed(memory, nurse, models)
        results.append(
            (
                sorted(cell.memory.held_texts()),
                cell.memory.recall(Query("Which city do I live in?", "s2")),
            )
        )
        if memory == "langmem:store=postgres":
            with psycopg.connect(pgvector_url) as conn:
                held = conn.execute(
                    "SELECT count(*) FROM store WHERE prefix LIKE %s",
                    (f"memories.{cell.memory.user}%",),
                ).fetchone()[0]
            assert held == len(results[0][0]) > 0
        cell.close()
    assert results[0] == results[1]
    with psycopg.connect(pgvector_url) as conn:  # the cell's rows are gone after close
        left = conn.execute("SELECT count(*) FROM store WHERE prefix LIKE 'memories.%'")
        assert left.fetchone()[0] == 0


def _remember_first_line(body: dict) -> list[tuple[str, dict]]:
    """A 'model' behind the mock: each exchange's first user line as a new Memory."""
    prompt = "\n".join(str(m.get("content") or "") for m in body["messages"])
    line = prompt.split("Human Message =")[-1].split("\n\n", 2)[1].splitlines()[0]
    return [("Memory", {"content": line})]


def test_langmem_prompts_reach_the_provider_metered_and_a_rerun_is_cached(
    tmp_path, monkeypatch, seat_change
):
    runs = run_twice_on_mock(
        "langmem", seat_change, tmp_path, monkeypatch, tool_calls=_remember_first_line
    )
    assert runs.failed_cells == [0, 0]
    requests, turns = runs.requests, runs.turns
    assert len(requests) == len(turns) == runs.first_calls
    # LangMem's own prompt and trustcall's tools, unchanged
    assert requests[0]["messages"][0]["content"] == "You are a memory subroutine for an AI."
    assert "long-term memory manager" in requests[0]["messages"][1]["content"]
    assert {t["function"]["name"] for t in requests[0]["tools"]} == {"Memory"}
    assert {t["function"]["name"] for t in requests[1]["tools"]} == {
        "Memory",
        "PatchDoc",
        "RemoveDoc",
    }
    assert "<existing>" in requests[1]["messages"][0]["content"]
    assert (turns["memory_llm_calls"] == 1).all()
    assert (turns["memory_output_tokens"] == TOOL_CALL_USAGE["completion_tokens"]).all()
    assert runs.again_calls == 0  # the rerun's calls all came from the cache
    assert list(runs.rerun_turns["memory_output_tokens"]) == list(turns["memory_output_tokens"])
