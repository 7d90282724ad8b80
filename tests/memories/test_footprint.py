"""Memory footprint: the texts every memory holds (``held_texts``) and their tokens."""

from __future__ import annotations

import dataclasses

import pytest

from memory_lab.memories import memory_factories
from memory_lab.memories.protocol import HoldsTexts, Query, held_texts, tokens_held
from memory_lab.models.tokens import count_tokens
from memory_lab.run.exchanges import exchanges

from ..thirdparty import installed_memories
from .replay import replayed


def spoken(dialogue, upto=None):
    """The dated user lines and the replies of the first ``upto`` exchanges, in order."""
    return [t for ex in exchanges(dialogue)[:upto] for t in (ex.dated_user(), ex.assistant) if t]


def footprints(spec, dialogue, models):
    """The memory's tokens held after each exchange."""
    n = len(exchanges(dialogue))
    out = []
    for upto in range(1, n + 1):
        cell = replayed(spec, dialogue, models, upto)
        try:
            out.append(cell.tokens_held())
        finally:
            cell.close()
    return out


BUILTIN = installed_memories(sorted(  # a system not installed here is left out
    name
    for name, f in memory_factories().items()
    if f.build.__module__.startswith("memory_lab.memories.")
))  # fmt: skip


def test_the_builtin_list_is_every_memory_of_memory_lab_list():
    assert {"buffer", "window", "summary", "vector", "memgpt", "combined", "thread"} <= set(BUILTIN)
    assert len(BUILTIN) >= 15


@pytest.mark.parametrize("name", BUILTIN)
def test_every_registered_memory_says_what_it_holds(name, nurse, run_models):
    cell = replayed(name, nurse, run_models, recall=True)
    try:
        assert isinstance(cell.memory, HoldsTexts), f"{name} has no held_texts()"
        query = Query("Where do I live?", "s2", "2026-04-10")
        before = cell.memory.recall(query)
        texts = held_texts(cell.memory)
        assert texts and all(isinstance(t, str) and t for t in texts), name
        held = cell.tokens_held()
        assert held == sum(count_tokens(t) for t in texts) > 0
        # held_texts is a read: asking again gives the same texts, and recall is unchanged
        assert held_texts(cell.memory) == texts
        assert cell.memory.recall(query) == before
        # what a memory holds covers at least what it shows (the headings aside)
        shown = sum(count_tokens(i.text) for i in before.items if i.kind != "other")
        # entity and kg recall through text they render themselves; Cognee's search context
        # renders its graph's triplets and shows a chunk again in each section that finds it
        # (on this dialogue, 999 tokens shown of the 345 it holds)
        if name not in ("entity", "kg", "cognee"):
            assert held >= 0.5 * shown, (name, held, shown)
    finally:
        cell.close()


def test_buffer_holds_every_turn(nurse, run_models):
    cell = replayed("buffer", nurse, run_models)
    try:
        assert held_texts(cell.memory) == spoken(nurse)
        assert cell.tokens_held() == sum(count_tokens(t) for t in spoken(nurse))
    finally:
        cell.close()
    grown = footprints("buffer", nurse, run_models)
    assert all(a < b for a, b in zip(grown, grown[1:], strict=False))


def test_window_holds_its_last_k_exchanges_only(nurse, run_models):
    cell = replayed("window:k=2", nurse, run_models)
    try:
        assert held_texts(cell.memory) == spoken(nurse)[-4:]
    finally:
        cell.close()
    held = footprints("window:k=2", nurse, run_models)
    buffer = footprints("buffer", nurse, run_models)
    assert held[:2] == buffer[:2]  # until the window is full it holds what the buffer holds
    longest_two = max(
        sum(count_tokens(t) for t in spoken(nurse)[i : i + 4]) for i in range(0, 12, 2)
    )
    assert max(held) <= longest_two < buffer[-1]


def test_summary_holds_its_summary_and_nothing_else(nurse, run_models):
    cell = replayed("summary", nurse, run_models)
    try:
        summary = cell.memory.inner.buffer
        assert summary and held_texts(cell.memory) == [summary]
        assert cell.tokens_held() == count_tokens(summary)
        # LangChain's class keeps the messages too, but never reads them again: not held
        assert len(cell.memory.inner.chat_memory.messages) == len(spoken(nurse))
    finally:
        cell.close()


def test_vector_holds_one_stored_document_per_exchange(nurse, run_models):
    cell = replayed("vector", nurse, run_models)
    try:
        docs = held_texts(cell.memory)
        assert len(docs) == len(exchanges(nurse))
        assert sorted(docs) == sorted(
            d for d in cell.memory.inner.retriever.vectorstore.get()["documents"]
        )
        assert any("Busan" in d for d in docs) and any("Seoul" in d for d in docs)
    finally:
        cell.close()
    grown = footprints("vector", nurse, run_models)
    assert all(a < b for a, b in zip(grown, grown[1:], strict=False))


def test_combined_holds_what_its_parts_hold(nurse, run_models):
    parts = [replayed(spec, nurse, run_models) for spec in ("window:k=2", "vector")]
    cell = replayed("combined:parts=window:k=2+vector", nurse, run_models)
    try:
        assert cell.tokens_held() == sum(p.tokens_held() for p in parts)
    finally:
        for c in (cell, *parts):
            c.close()


def test_thread_per_session_holds_every_sessions_thread(nurse, run_models):
    one = replayed("thread", nurse, run_models)
    per_session = replayed("thread:thread_per=session", nurse, run_models)
    try:
        assert held_texts(one.memory) == [t for t in spoken(nurse)]
        assert sorted(held_texts(per_session.memory)) == sorted(spoken(nurse))
        # a recall sees one session's thread; the memory holds both
        recalled = per_session.memory.recall(Query("hi", "s2", "2026-04-10"))
        assert sum(count_tokens(i.text) for i in recalled.items) < per_session.tokens_held()
    finally:
        one.close()
        per_session.close()


def test_store_holds_its_facts_beside_its_threads(nurse, run_models):
    cell = replayed("store", nurse, run_models)
    try:
        facts = cell.memory.facts()
        texts = held_texts(cell.memory)
        assert facts and texts[: len(facts)] == list(facts.values())
        assert cell.tokens_held() > sum(count_tokens(t) for t in spoken(nurse)) - 1
    finally:
        cell.close()


def test_a_memory_without_held_texts_is_counted_by_its_snapshot():
    class Notes:
        def snapshot(self):
            return {"notes": ["Mirae lives in Busan.", ""], "count": 1, "meta": {"by": "me"}}

    assert held_texts(Notes()) == ["Mirae lives in Busan.", "me"]
    assert tokens_held(Notes()) == count_tokens("Mirae lives in Busan.") + count_tokens("me")


@pytest.mark.parametrize("saver", ["sqlite", "postgres"])
def test_a_thread_holds_the_same_texts_on_every_saver(saver, nurse, run_models, request):
    models = run_models
    if saver == "postgres":
        url = request.getfixturevalue("postgres_url")
        models = dataclasses.replace(run_models, resources={"postgres": url})
    here = replayed("thread:thread_per=session", nurse, run_models)
    there = replayed(f"thread:saver={saver},thread_per=session", nurse, models)
    try:
        assert held_texts(there.memory) == held_texts(here.memory)
        assert there.tokens_held() == here.tokens_held() > 0
    finally:
        here.close()
        there.close()
