"""The ``graphiti`` memory: Graphiti's temporal knowledge graph on an embedded Kuzu database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.memories import MemorySpecError, parse_memory_spec, tokens_held
from memory_lab.memories.protocol import Query
from memory_lab.memories.systems.graphiti.rules import RULES, schema_title
from memory_lab.models.offline_rules import RuleSettings

from ..conftest import FIXTURES
from .replay import exchange, replayed, run_twice_on_mock


@pytest.fixture(scope="module")
def coffee():
    """A favourite coffee shop that changes a month later; a marathon said once."""
    return load_dialogues(FIXTURES / "memories" / "coffee-change.yaml")[0]


def test_parameters_are_checked_when_the_spec_is_parsed():
    assert parse_memory_spec("graphiti").params == {
        "k": 5,
        "entities": 5,
        "rerank": "rrf",
        "keep": False,
    }
    with pytest.raises(MemorySpecError, match="'rerank' must be one of rrf, mmr"):
        parse_memory_spec("graphiti:rerank=cross_encoder")
    with pytest.raises(MemorySpecError, match="'k' must be at least 1"):
        parse_memory_spec("graphiti:k=0")
    with pytest.raises(MemorySpecError, match="'entities' must be int"):
        parse_memory_spec("graphiti:entities=all")


def test_each_exchange_becomes_dated_facts_naming_their_turns(nurse, run_models):
    cell = replayed("graphiti", nurse, run_models, upto=0)
    memory = cell.memory
    memory.observe(exchange(0, "I prefer aisle seats on flights.", date="2026-03-02"))
    memory.observe(exchange(1, "The weather is nice today."))  # no fact: no edge
    facts = memory.snapshot()["facts"]
    assert [(f["fact"], f["valid_at"], f["invalid_at"], f["turn_ids"]) for f in facts] == [
        ("I prefer aisle seats on flights.", "2026-03-02", None, ["u0", "a0"])
    ]
    usage, by_role = cell.maintenance()
    assert [r for r, _, _ in by_role] == ["memory"]
    # the fact's exchange: entities, facts, the fact's dates; the other: entities (only User,
    # so no fact to extract)
    assert usage.llm_calls == 4 and usage.input_tokens > 2000 and usage.embedding_tokens > 0
    assert "User" in memory.snapshot()["entities"] and tokens_held(memory) > 0
    cell.close()


def test_a_graph_without_facts_holds_nothing_and_recalls_nothing(nurse, run_models):
    cell = replayed("graphiti", nurse, run_models, upto=0)
    cell.memory.observe(exchange(0, "The weather is nice today."))
    assert cell.memory.snapshot()["facts"] == [] and cell.memory.held_texts() == []
    assert cell.memory.recall(Query("What is the weather like?")).items == ()
    cell.close()


def test_recall_is_graphitis_search_facts_dated_and_entities(nurse, run_models):
    cell = replayed("graphiti:k=2,entities=1", nurse, run_models)
    recall = cell.memory.recall(Query("What is my job?", "s2", "2026-04-10"))
    texts = [i.text for i in recall.items]
    assert texts[0].startswith("FACTS and ENTITIES represent relevant context")
    facts = [i for i in recall.items if i.kind == "fact"]
    entities = [i for i in recall.items if i.kind == "summary"]
    assert len(facts) == 2 and len(entities) == 1
    assert any("teacher at Haeundae Middle School" in f.text for f in facts)
    assert all("(Date range: 2026-0" in f.text and f.text.endswith(")") for f in facts)
    job = next(f for f in facts if "teacher" in f.text)
    assert job.turn_ids == ("job-v2", "s2.t6")  # the exchange's user turn and reply
    assert recall.ranking == tuple(i.turn_ids for i in facts + entities)
    assert "</FACTS>" in texts and texts[-1] == "</ENTITIES>"
    assert cell.memory.recall(Query("")).items == ()
    snapshot = cell.memory.snapshot()
    cell.close()
    again = replayed("graphiti:k=2,entities=1", nurse, run_models)  # ids from the cell's counter
    assert again.memory.snapshot() == snapshot
    again.close()


def test_a_changed_fact_invalidates_the_old_edge_and_is_answered_new(coffee, tmp_path):
    outcome = run_benchmark(
        resolve_memories(["graphiti:keep=true"]), [coffee], tmp_path / "run", progress=False
    )
    assert outcome.failed_cells == 0
    probes = read_results(outcome.path).probes.set_index("probe_id")
    assert (
        probes.loc["q-coffee", "correct"] and "Ritual Roasters" in probes.loc["q-coffee", "reply"]
    )
    assert probes.loc["q-coffee", "evidence_recall"] == 1.0
    prompt = probes.loc["q-coffee", "prompt"]
    assert "Blue Bottle. (Date range: 2026-01-10 - 2026-02-20)" in prompt  # invalidated
    assert "Ritual Roasters. (Date range: 2026-02-20 - present)" in prompt
    # keep=true: the cell's Kuzu database stays in its folder
    kept = list((tmp_path / "run" / "cells").glob("*/graphiti/graph.kuzu"))
    assert len(kept) == 1


def test_without_keep_the_graph_folder_is_dropped(coffee, tmp_path):
    outcome = run_benchmark(
        resolve_memories(["graphiti"]), [coffee], tmp_path / "run", progress=False
    )
    assert outcome.failed_cells == 0
    assert list((tmp_path / "run").rglob("graphiti")) == []


def _graphiti_model(body: dict) -> str:
    """A 'model' behind the mock: Graphiti's calls answered by the offline rules, as JSON."""
    prompt = "\n".join(m["content"] for m in body["messages"])
    title = schema_title(body["messages"][-1]["content"])
    return json.dumps(RULES[title](prompt, RuleSettings()))


def test_graphitis_prompts_reach_the_provider_metered_and_a_rerun_is_cached(
    tmp_path, monkeypatch, coffee
):
    runs = run_twice_on_mock("graphiti", coffee, tmp_path, monkeypatch, reply=_graphiti_model)
    assert runs.failed_cells == [0, 0]
    requests, turns = runs.requests, runs.turns
    graphiti_requests = [r for r in requests if schema_title(r["messages"][-1]["content"])]
    # Graphiti's own prompts, in JSON mode, as its OpenAI-compatible client sends them
    assert graphiti_requests[0]["messages"][0]["content"].startswith(
        "You are an entity extraction specialist"
    )
    assert all(r["response_format"] == {"type": "json_object"} for r in graphiti_requests)
    titles = {schema_title(r["messages"][-1]["content"]) for r in graphiti_requests}
    assert {"ExtractedEntities", "ExtractedEdges", "EdgeDuplicate"} <= titles
    assert turns["memory_llm_calls"].sum() == len(graphiti_requests)  # every call metered
    assert (turns.loc[turns["memory_llm_calls"] > 0, "memory_output_tokens"] > 0).all()
    assert runs.again_calls == 0  # the rerun's calls all came from the cache
    assert list(runs.rerun_turns["memory_llm_calls"]) == list(turns["memory_llm_calls"])


def test_an_unknown_graphiti_schema_fails_naming_it():
    from memory_lab.memories.systems.graphiti.rules import SCHEMA_MARK, GraphitiRuleError
    from memory_lab.models.offline_memory import OfflineMemoryModel

    prompt = f"Summarise the saga.\n\n{SCHEMA_MARK}\n\n" + json.dumps(
        {"title": "SagaSummary", "type": "object", "properties": {}}
    )
    with pytest.raises(GraphitiRuleError, match="no rule for Graphiti's response schema 'Saga"):
        OfflineMemoryModel().invoke(prompt)


def test_the_kuzu_folder_is_inside_the_cell(coffee, tmp_path, run_models):
    import dataclasses

    models = dataclasses.replace(run_models, work_dir=str(tmp_path))
    cell = replayed("graphiti", coffee, models, upto=1)
    folders = [Path(p) for p in (tmp_path / "cells").glob("*/graphiti")]
    assert len(folders) == 1 and (folders[0] / "graph.kuzu").exists()
    cell.close()
    assert not folders[0].exists()


def test_each_kuzu_query_runs_on_one_thread(nurse, run_models, monkeypatch):
    """Kuzu's parallel execution spun forever in a full-text query, and segfaulted, on a
    BEAM-1M replay: the memory's connections run each query on one thread."""
    import kuzu

    limits: list[int] = []
    original = kuzu.Connection.set_max_threads_for_exec

    def record(self, num_threads):
        limits.append(num_threads)
        return original(self, num_threads)

    monkeypatch.setattr(kuzu.Connection, "set_max_threads_for_exec", record)
    cell = replayed("graphiti", nurse, run_models, upto=0)
    connections = cell.memory.graphiti.driver.client.connections
    assert len(connections) >= 1 and limits[-len(connections) :] == [1] * len(connections)
    cell.close()
