"""Token buffer, entity and knowledge-graph memories: the LangChain classes as they are, offline."""

from __future__ import annotations

import pytest

from memory_lab import load_dialogues, replay_dialogue
from memory_lab.memories import parse_memory_spec


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
