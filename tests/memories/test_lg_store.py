"""The ``store`` memory: facts in a LangGraph Store beside a thread per session."""

from __future__ import annotations

from memory_lab.memories.protocol import Query

from .replay import replayed


def test_a_preference_changed_later_replaces_the_old_one_in_the_store(seat_change, run_models):
    cell = replayed("store", seat_change, run_models)
    facts = cell.memory.snapshot()["facts"]
    recall = cell.memory.recall(Query("Which seats do I want on long flights?", "s2"))
    usage, by_role = cell.maintenance()
    cell.close()
    seats = [v for v in facts.values() if "seats" in v]
    assert seats == ["These days I prefer window seats on long flights."]  # one key, new value
    assert "window seats" in str(recall) and "aisle" not in str(recall)
    # extraction is the memory model's, the Store's index embeds with the run's embeddings
    assert [role for role, _, _ in by_role] == ["memory"] and usage.embedding_tokens > 0


def test_only_the_store_carries_a_fact_into_a_later_session(seat_change, run_models):
    cell = replayed("store", seat_change, run_models)
    items = cell.memory.recall(Query("What is my frequent flyer number?", "s2")).items
    cell.close()
    facts = [i for i in items if i.kind == "fact"]
    thread = [i for i in items if i.kind == "verbatim"]
    assert facts[0].text == "- [2026-04-01] My frequent flyer number is KX-48213."
    assert facts[0].turn_ids == ("ffn",)
    assert thread and all("KX-48213" not in i.text for i in thread)  # a new thread in s2
    assert all(i.turn_ids[0].startswith("s2") or i.turn_ids[0] == "window" for i in thread)


def test_without_an_index_the_store_shows_the_most_recent_facts(seat_change, run_models):
    cell = replayed("store:search=recent,k=2,thread_per=dialogue", seat_change, run_models)
    items = cell.memory.recall(Query("anything", "s2")).items
    usage, _ = cell.maintenance()
    cell.close()
    facts = [i.text for i in items if i.kind == "fact"]
    assert facts == [
        "- [2026-05-10] These days I prefer window seats on long flights.",
        "- [2026-04-01] My frequent flyer number is KX-48213.",
    ]
    assert usage.embedding_tokens == 0  # nothing embedded without the index
