"""The ``amem`` memory: A-Mem's ``AgenticMemorySystem`` (its authors' code), offline.

Each exchange becomes an A-Mem note (construction and evolution answered by A-Mem's rule
script), recall is A-Mem's ``search_agentic``; nothing leaves the machine.
"""

# ruff: noqa: E402  (A-Mem is installed from its wheel, by require, before the imports below)
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..thirdparty import require

require(
    "agentic_memory.memory_system",
    "agentic_memory-0.0.1-py3-none-any.whl",
    "pip install 'memory-lab[amem]' "
    "'agentic-memory @ git+https://github.com/agiresearch/A-mem@ceffb86'",
)

from langchain_core.messages import HumanMessage, SystemMessage

from memory_lab import load_dialogues, parse_memory_spec
from memory_lab.memories import MemorySpecError
from memory_lab.memories.protocol import MemoryResources, Query
from memory_lab.memories.systems.amem import adapter
from memory_lab.memories.systems.amem.rules import AMemScript
from memory_lab.models.offline_rules import Request, recognised
from memory_lab.run.cell import Cell
from memory_lab.run.conformance import check_memory
from memory_lab.run.exchanges import exchanges

SPEC = "amem"
# apart from dialogues/, which other tests read whole
FIXTURES = Path(__file__).parents[1] / "fixtures" / "amem"


@pytest.fixture(scope="module")
def bakery():
    return load_dialogues(FIXTURES / "bakery.yaml")[0]


@pytest.fixture(scope="module")
def run_models():
    from memory_lab import RunModels

    return RunModels.create()


def replayed(spec: str, dialogue, models) -> Cell:
    """A cell of ``spec`` after every exchange of ``dialogue`` was observed, as a run does."""
    cell = Cell(parse_memory_spec(spec), dialogue, models)
    for ex in exchanges(dialogue):
        cell.at(ex)
        cell.memory.observe(ex)
    return cell


@pytest.fixture(scope="module")
def prompts(bakery, run_models):
    """Every (prompt, response_format, reply) A-Mem sent its model over the bakery dialogue."""
    seen = []
    answer = adapter.MemoryModelController.get_completion

    def spy(self, prompt, response_format=None, temperature=0.7):
        reply = answer(self, prompt, response_format, temperature)
        seen.append((prompt, response_format, reply))
        return reply

    adapter.MemoryModelController.get_completion = spy
    try:
        replayed(SPEC, bakery, run_models).close()
    finally:
        adapter.MemoryModelController.get_completion = answer
    return seen


def test_parameters_keep_amems_defaults_and_are_checked():
    assert parse_memory_spec(SPEC).params == {"k": 5, "evo_threshold": 100, "link_ids": False}
    with pytest.raises(MemorySpecError, match="'k' must be at least 1"):
        parse_memory_spec("amem:k=0")
    with pytest.raises(MemorySpecError, match="'evo_threshold' must be at least 1"):
        parse_memory_spec("amem:evo_threshold=0")


def test_each_exchange_becomes_a_note_built_and_evolved_by_the_memory_model(bakery, run_models):
    cell = replayed(SPEC, bakery, run_models)
    snapshot = cell.memory.snapshot()
    notes = list(snapshot["notes"].values())
    assert [n["turn_ids"] for n in notes] == [
        ["bakery", "s1.t2"],
        ["flour-v1", "s1.t4"],
        ["sister", "s1.t6"],
        ["flour-v2", "s2.t2"],
        ["sourdough", "s2.t4"],
    ]
    assert notes[1]["content"].startswith("Human: Our bread flour comes from Hartwell Mills")
    assert notes[1]["content"].endswith("\nAI: Noted: Hartwell Mills for bread flour.")
    assert all(n["keywords"] and n["context"] != "General" and n["tags"] for n in notes)
    assert "hartwell" in notes[1]["keywords"]
    assert [n["timestamp"] for n in notes] == ["202603020000"] * 3 + ["202603200000"] * 2
    # one construction call per note, one evolution call per note after the first; none fell
    # back to A-Mem's defaults; what A-Mem asked for is recorded
    assert snapshot["llm_calls"] == {"analyze": 5, "evolve": 4}
    assert snapshot["fallbacks"] == {}
    assert snapshot["asked"] == {
        "llm_backend": "openai",
        "llm_model": "gpt-4o-mini",
        "embedding_model": ["all-MiniLM-L6-v2"],
    }
    usage, by_role = cell.maintenance()
    assert [r for r, _, _ in by_role] == ["memory"]
    cell.close()


def test_links_and_evolution_happen_offline(bakery, run_models):
    cell = replayed(SPEC, bakery, run_models)
    snapshot = cell.memory.snapshot()
    notes = list(snapshot["notes"].values())
    assert snapshot["evolutions"] >= 2
    bakery_note, flour_v1, _, flour_v2, sourdough = notes
    # the new flour note shares 'bread' and 'flour' with the old one, shown as memory index 2:
    # linked by that index (A-Mem's prompt shows no ids), its tags strengthened
    assert flour_v2["links"] == ["2"]
    assert sourdough["links"] == ["0", "1", "3"] and "bread" in sourdough["tags"]
    # update_neighbor as A-Mem writes it: the i-th neighbour's new tags and context go to the
    # note at position indices[i] in insertion order (memory_system.py:707-716), so the old
    # flour note (position 1) now holds the new flour note's (neighbour 1) context and tags
    assert flour_v1["context"] == "A conversation about switched, bread and flour."
    assert "switched" in flour_v1["tags"] and "bakery" in bakery_note["tags"]
    cell.close()
    # link_ids: the prompt's 'memory index' becomes the neighbour's note id
    cell = replayed(f"{SPEC}:link_ids=true", bakery, run_models)
    notes = cell.memory.snapshot()["notes"]
    linked = [notes[i]["turn_ids"][0] for i in notes[list(notes)[3]]["links"]]
    assert "flour-v1" in linked
    cell.close()


def test_recall_is_amems_search_dated_and_naming_real_turns(bakery, run_models):
    cell = replayed(f"{SPEC}:k=2", bakery, run_models)
    recall = cell.memory.recall(Query("Where does our bread flour come from now?", "s2"))
    header, *notes = recall.items
    assert header.text == adapter.NOTES_HEADER and len(notes) == 2
    assert {n.turn_ids[0] for n in notes} == {"flour-v1", "flour-v2"}
    new = next(n for n in notes if n.turn_ids[0] == "flour-v2")
    assert new.text.startswith("- [2026-03-20] Human: I switched our bread flour to Northfield")
    assert "\n  Context: " in new.text and new.kind == "retrieved"
    assert recall.ranking == tuple(n.turn_ids for n in notes)
    assert cell.memory.recall(Query("")).items == ()
    cell.close()


def test_two_replays_hold_and_recall_the_same(bakery, run_models):
    def replay():
        cell = replayed(SPEC, bakery, run_models)
        recall = cell.memory.recall(Query("What does my sister Hana do?", "s2"))
        held = cell.memory.snapshot(), [i.text for i in recall.items], recall.turn_ids
        cell.close()
        return held

    first, second = replay(), replay()
    assert first == second
    assert "sister" in first[2]


def test_the_rule_script_answers_amems_own_prompts(prompts):
    kinds = [adapter.MemoryModelController.kind(fmt) for _, fmt, _ in prompts]
    assert kinds.count("analyze") == 5 and kinds.count("evolve") == 4
    for prompt, response_format, reply in prompts:
        request = Request([SystemMessage(adapter.JSON_SYSTEM), HumanMessage(prompt)])
        assert isinstance(recognised(request), AMemScript)
        schema = response_format["json_schema"]["schema"]
        assert set(json.loads(reply)) == set(schema["properties"])
    evolve = [json.loads(r) for _, f, r in prompts if "should_evolve" in str(f)]
    assert any(e["should_evolve"] for e in evolve)
    for e in evolve:  # A-Mem's rule: one new context and tag list per neighbour shown
        assert len(e["new_context_neighborhood"]) == len(e["new_tags_neighborhood"])


def test_a_provider_error_is_raised_not_swallowed_by_amem(run_models, bakery, tmp_path):
    class Down:
        def invoke(self, messages, **kwargs):
            raise ConnectionError("provider down")

    embeddings = run_models.memory_offline_embeddings or run_models.embeddings
    res = MemoryResources(
        {"memory": Down()}, embeddings, "amem-provider-down", cell_dir=str(tmp_path)
    )
    memory = adapter.amem(res)
    with pytest.raises(ConnectionError, match="provider down"):
        memory.observe(exchanges(bakery)[0])
    res.close()


def test_the_conformance_check_passes_offline(bakery):
    report = check_memory(SPEC, [bakery])
    assert report.ok, report.lines()


def _amem_model(body: dict) -> str:
    """A 'model' behind the mock: A-Mem's JSON for either of its two requests."""
    schema = body.get("response_format", {}).get("json_schema", {}).get("schema", {})
    if "should_evolve" in schema.get("properties", {}):
        return json.dumps({
            "should_evolve": False, "actions": [], "suggested_connections": [],
            "tags_to_update": [], "new_context_neighborhood": [], "new_tags_neighborhood": [],
        })  # fmt: skip
    first = body["messages"][1]["content"].rsplit("Content for analysis:", 1)[-1].split()[:3]
    return json.dumps({"keywords": first, "context": " ".join(first), "tags": ["mock"]})


def test_amems_prompts_reach_the_provider_with_its_schema_and_a_rerun_is_cached(
    bakery, tmp_path, monkeypatch
):
    from .replay import run_twice_on_mock

    runs = run_twice_on_mock(SPEC, bakery, tmp_path, monkeypatch, reply=_amem_model)
    assert runs.failed_cells == [0, 0]
    requests = runs.requests
    kinds = [adapter.MemoryModelController.kind(r.get("response_format")) for r in requests]
    assert kinds.count("analyze") == 5 and kinds.count("evolve") == 4  # one note an exchange
    assert {r["messages"][0]["content"] for r in requests} == {adapter.JSON_SYSTEM}
    assert all(r["response_format"]["type"] == "json_schema" for r in requests)
    assert (runs.turns["memory_output_tokens"] > 0).all()
    assert runs.again_calls == 0  # the rerun's calls all came from the cache
