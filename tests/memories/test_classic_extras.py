"""Token buffer, entity and knowledge-graph memories: the LangChain classes as they are, offline."""

from __future__ import annotations

import pytest

from memory_lab import inspect_memory, load_dialogues, replay_dialogue
from memory_lab.memories import Query, build_memory, parse_memory_spec
from memory_lab.run.exchanges import exchanges

from ..conftest import FIXTURES


@pytest.fixture(scope="module")
def trip():
    """The longest built-in dialogue (134 turns, facts that change)."""
    return next(d for d in load_dialogues("builtin:classic") if d.id == "trip-portugal-changes")


def replay(spec, dialogue, models):
    records = []
    replay_dialogue(parse_memory_spec(spec), dialogue, models, records.append)
    return records


def test_token_buffer_never_exceeds_its_budget_in_our_tokenizer(trip, run_models):
    records = replay("token_buffer:max_token_limit=150", trip, run_models)
    turns = [r for r in records if r["type"] == "turn"]
    contexts = [r["context_tokens"] for r in turns]  # counted with the bundled tokenizer
    assert len(turns) == 67 and max(contexts) <= 150 and contexts[-1] > 100  # full, never over
    assert trip.turns[0].text not in turns[-1]["prompt"]  # the oldest went first
    assert all(r["memory_tokens"] == 0 for r in turns)  # it calls no model


@pytest.fixture(scope="module")
def hana():
    """A sister whose job changes from nurse to teacher (tests/fixtures/memories)."""
    return load_dialogues(FIXTURES / "memories" / "sister-hana.yaml")[0]


def test_entity_memory_rewrites_an_entity_summary_when_a_fact_about_it_changes(hana, run_models):
    before = inspect_memory("entity", hana, "hiking", query="What does Hana do?", models=run_models)
    after = inspect_memory("entity", hana, "hana-v2", query="What does Hana do?", models=run_models)
    first, then = before.snapshot["entities"]["Hana"], after.snapshot["entities"]["Hana"]
    assert "nurse" in first and "hiking" in first
    assert "teacher" in then and "nurse" not in then and "hiking" in then
    assert after.context.startswith(f"Hana: {then}\nHuman: [2026-03-02]")  # summary, then turns
    assert after.memory_tokens > 0  # extraction and summaries are memory model calls


def test_entity_recall_for_a_probe_changes_nothing_the_memory_saves(hana):
    def replay_with(question):
        memory = build_memory(parse_memory_spec("entity"), offline_resources())
        for ex in exchanges(hana):
            memory.recall(Query(ex.user))  # the prompt for the user turn, as in a run
            memory.observe(ex)
            if question:
                memory.recall(Query(question))  # a probe about another entity in between
        return memory.snapshot()

    assert replay_with("Did Minho call Daejeon?") == replay_with(None)


def offline_resources(**kwargs):
    from memory_lab.memories import MemoryResources
    from memory_lab.models import OfflineMemoryModel

    return MemoryResources(
        models={"memory": OfflineMemoryModel()}, embeddings=None, cell_id="test", **kwargs
    )


def test_kg_holds_the_triples_extracted_from_each_turn_and_recalls_them_by_entity(hana, run_models):
    question = "What does Hana do for a living?"
    view = inspect_memory("kg", hana, "hana-v2", query=question, models=run_models)
    assert view.snapshot["triples"] == [  # [subject, predicate, object], in turn order
        ["Hana", "is a", "nurse in Daejeon"],
        ["Hana", "is Human's", "sister"],
        ["Hana", "loves", "hiking on weekends"],
        ["Hana", "is a", "teacher in Daejeon now"],  # the old job stays: a graph only adds
    ]
    assert view.context.startswith("On Hana: Hana is a nurse in Daejeon.")
    assert "Hana is a teacher in Daejeon now" in view.context
    unnamed = inspect_memory("kg", hana, "hana-v2", query="What is my job?", models=run_models)
    assert unnamed.context == ""  # the class recalls only what the input's entities know


def test_a_run_of_all_four_offline_in_english_and_korean(hana, tmp_path):
    import sqlite3

    from memory_lab import read_results, resolve_memories, run_benchmark

    from ..small_run import KOREAN_DIALOGUE

    (tmp_path / "ko.yaml").write_text(KOREAN_DIALOGUE, "utf-8")
    specs = ["token_buffer", "entity:store=sqlite", "kg", "combined:parts=window+vector"]
    outcome = run_benchmark(
        resolve_memories(specs),
        [hana, *load_dialogues(tmp_path / "ko.yaml")],
        tmp_path / "run",
        progress=False,
    )
    assert outcome.failed_cells == 0
    results = read_results(outcome.path)
    assert set(results.probes["memory"]) == set(specs)
    spent = results.turns.groupby("memory")["memory_tokens"].sum()
    assert spent["token_buffer"] == 0 and spent["entity:store=sqlite"] > 0 and spent["kg"] > 0
    parts = results.usage[results.usage["memory"] == "combined:parts=window+vector"]
    assert set(parts["part"]) == {"vector"}  # window costs nothing; vector embeds every exchange
    databases = sorted((outcome.path / "cells").glob("*/entities.db"))
    assert len(databases) == 2  # one per entity cell, in the cell's folder
    rows = []
    for db in databases:
        with sqlite3.connect(db) as conn:
            rows += conn.execute('SELECT key, value FROM "memory_store_default"').fetchall()
    assert any(key == "Hana" and "teacher" in value for key, value in rows)
    assert any(key == "민지" for key, _ in rows)  # Korean proper nouns by Kiwi's tags
