"""The ``memgpt`` memory: core, recall and archival memory kept by a tool-calling agent."""

from __future__ import annotations

import json

from memory_lab import (
    parse_memory_spec,
    read_results,
    resolve_memories,
    run_benchmark,
)
from memory_lab.cli import main
from memory_lab.memories.builtin.memgpt import ConversationLog, CoreMemory, Message
from memory_lab.memories.protocol import Query
from memory_lab.run.cell import Cell
from memory_lab.run.exchanges import exchanges

from ..conftest import FIXTURES
from ..models.openai_mock import CHAT_USAGE, TOOL_CALL_USAGE, OpenAIMock
from .replay import exchange, replayed


def tool(cell: Cell, name: str, **args) -> str:
    return str(cell.memory.by_name[name].invoke(args))


def test_core_memory_refuses_an_edit_past_max_chars_and_keeps_its_content(seat_change, run_models):
    core = CoreMemory(max_chars=60)
    assert core.append("human", "My name is Hana Park.").startswith("OK")
    before = dict(core.blocks)
    error = core.append("human", "I work as a pediatric nurse at Haeundae Paik Hospital.")
    assert error.startswith("Error: core memory section 'human' is full: 21 of 60 characters")
    assert core.blocks == before and core.refused == 1
    assert core.replace("human", "Hana Park", "Hana Park " + "x" * 60).startswith("Error")
    assert core.blocks == before
    assert core.append("nope", "x").startswith("Error: core memory has no section 'nope'")
    # through the agent's tool, in a memory whose blocks hold 80 characters: the text comes back
    cell = replayed("memgpt:max_chars=80", seat_change, run_models)
    human = cell.memory.core.blocks["human"]
    reply = tool(cell, "core_memory_append", label="human", content="A" * 81)
    snapshot = cell.memory.snapshot()
    cell.close()
    assert reply.startswith("Error: core memory section 'human' is full")
    assert cell.memory.core.blocks["human"] == human and len(human) <= 80
    assert snapshot["core_refusals"] >= 2  # the agent hit the limit while replaying, too
    refused = [
        c for e in snapshot["tool_calls"] for c in e["calls"] if c["result"].startswith("Error")
    ]
    assert refused and refused[0]["name"] == "core_memory_append"


def test_core_memory_replace_replaces_the_stale_value(seat_change, run_models):
    cell = replayed("memgpt", seat_change, run_models)
    human = cell.memory.core.blocks["human"]
    calls = [c for e in cell.memory.snapshot()["tool_calls"] for c in e["calls"]]
    recall = cell.memory.recall(Query("Which seats do I want on long flights?", "s2"))
    missing = tool(cell, "core_memory_replace", label="human", old_content="x" * 5, new_content="y")
    cell.close()
    assert "These days I prefer window seats on long flights." in human
    assert "aisle" not in human  # replaced, not appended beside
    replace = [c for c in calls if c["name"] == "core_memory_replace"]
    assert replace[0]["args"] == {
        "label": "human",
        "old_content": "I prefer aisle seats on long flights.",
        "new_content": "These days I prefer window seats on long flights.",
    }
    core = [i for i in recall.items if i.kind == "core" and "(human)" in i.text][0]
    assert "window seats" in core.text and "window" in core.turn_ids
    assert missing.startswith("Error: old_content not found")


def test_a_bad_tool_call_comes_back_to_the_agent_as_an_error(seat_change, run_models):
    cell = Cell(parse_memory_spec("memgpt"), seat_change, run_models)
    unknown = cell.memory.call_tool({"name": "forget_everything", "args": {}, "id": "c1"})
    bad = cell.memory.call_tool(
        {"name": "core_memory_append", "args": {"label": "boss", "content": "x"}, "id": "c2"}
    )
    cell.close()
    assert unknown.content.startswith("Error: no tool 'forget_everything'")
    assert unknown.tool_call_id == "c1" and bad.tool_call_id == "c2"
    assert bad.content.startswith("Error: invalid arguments: label: Input should be")
    assert cell.memory.core.blocks["human"] == ""


def test_an_archival_insert_is_found_by_a_later_search(run_models, seat_change):
    cell = Cell(parse_memory_spec("memgpt"), seat_change, run_models)
    memory = cell.memory
    cell.maintenance()
    facts = [
        "Dentist appointment moved to Thursday 10 March at 4 pm.",
        "The user's cat Mochi is allergic to chicken-based food.",
        "Invoice 7734 for the kitchen tiles was paid on 2 February.",
        "Sister Hana's wedding is in Jeju on 14 June.",
    ]
    for i, fact in enumerate(facts):
        memory.current = exchange(i, fact)
        assert tool(cell, "archival_memory_insert", content=fact).startswith("OK")
    memory.current = None
    inserted = cell.maintenance()[0].embedding_tokens
    found = tool(cell, "archival_memory_search", query="What food can my cat not eat?")
    searched = cell.maintenance()[0].embedding_tokens
    second = tool(cell, "archival_memory_search", query="What food can my cat not eat?", page=1)
    items = memory.recall(Query("When is my sister getting married?")).items
    cell.close()
    assert found.splitlines()[0] == "- [2026-01-05] " + facts[1]
    assert facts[1] not in second  # the next page holds the others
    assert inserted > 0 and searched > 0  # inserts and searches embed, metered
    passages = [i for i in items if i.kind == "retrieved"]
    assert "Jeju" in passages[0].text and passages[0].turn_ids == ("u3", "a3")


def test_conversation_search_finds_an_old_turn_among_many():
    log = ConversationLog(scan=50)
    log.add(Message("Human", "My storage locker number is 4711 at Oakfield.", "old", "s1", None, 0))
    for i in range(1, 600):
        log.add(
            Message(
                "Human", f"The weather at the storage place was fine ({i}).", f"t{i}", "s1", None, i
            )
        )
    hits = log.search("Which locker number did I say, at Oakfield?", k=3)
    assert hits[0].turn_id == "old"  # the rare words win, however old the turn
    # a common word alone: only the newest `scan` messages of it are examined (bounded cost)
    assert {m.turn_id for m in log.search("weather", k=100)} == {f"t{i}" for i in range(550, 600)}
    ko = ConversationLog()
    ko.add(Message("Human", "저는 작년에 부산으로 이사했어요.", "busan", "s1", None, 0))
    ko.add(Message("Human", "오늘은 날씨가 좋네요.", "w", "s1", None, 1))
    assert ko.search("부산에서 얼마나 살았죠?", k=1)[0].turn_id == "busan"


SEARCH_EVERY_TURN = """
import json
from memory_lab import load_dialogues
from memory_lab.memories.builtin.memgpt import ConversationLog, Message
dialogue = next(d for d in load_dialogues("builtin:classic") if d.id == "family-palsun-party-ko")
users = [t for t in dialogue.turns if t.role == "user"]
log = ConversationLog()
for i, turn in enumerate(users):
    log.add(Message("Human", turn.text, turn.id, "s", None, i))
print(json.dumps([[m.turn_id for m in log.search(turn.text, 4)] for turn in users]))
"""


def test_conversation_search_ranks_alike_in_every_process():
    """Scores are summed in one order, so near ties rank alike whatever the hash seed (summing
    a set's terms in its iteration order made two processes rank them apart)."""
    import os
    import subprocess
    import sys

    found = {
        subprocess.run(
            [sys.executable, "-c", SEARCH_EVERY_TURN],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (1, 2, 3)
    }
    assert len(found) == 1 and len(json.loads(found.pop())) > 20


def test_conversation_search_tool_and_recall_report_source_turns(mini_dialogue, run_models):
    cell = replayed("memgpt:k=1", mini_dialogue, run_models)
    first = exchanges(mini_dialogue)[1]
    found = tool(cell, "conversation_search", query=first.user)
    recall = cell.memory.recall(Query(first.user))
    cell.close()
    assert first.user in found.splitlines()[0]
    assert first.user_turn_id in recall.turn_ids


def test_the_agent_loop_runs_offline_and_its_tool_calls_are_metered(seat_change, run_models):
    cell = Cell(parse_memory_spec("memgpt"), seat_change, run_models)
    spent = []
    for ex in exchanges(seat_change):
        cell.at(ex)
        cell.memory.observe(ex)
        spent.append(cell.maintenance())
    snapshot = cell.snapshot()
    cell.close()
    log = snapshot["tool_calls"]
    assert [e["steps"] for e in log] == [2] * 5  # tool calls, then a reply without any
    assert snapshot["tool_call_counts"] == {
        "archival_memory_insert": 5,
        "core_memory_append": 3,
        "core_memory_replace": 1,
    }
    assert [c["name"] for c in log[3]["calls"]] == ["archival_memory_insert"]  # small talk
    for (usage, by_role), entry in zip(spent, log, strict=True):
        assert [r for r, _, _ in by_role] == ["memory"] and usage.llm_calls == 2
        assert usage.output_tokens > sum(c["tokens"] for c in entry["calls"]) > 0
        assert usage.embedding_tokens > 0  # the archival insert
    json.dumps(snapshot)  # plain data for the inspector


def _memgpt_tool_calls(body: dict) -> list[tuple[str, dict]]:
    """A 'model' behind the mock: every user line to core memory and to archival memory."""
    user = body["messages"][-1]["content"]
    said = user.splitlines()[0].removeprefix("Human: ")
    return [
        ("core_memory_append", {"label": "human", "content": said}),
        ("archival_memory_insert", {"content": user}),
    ]


def test_the_agent_runs_against_a_provider_with_real_tool_calls(tmp_path, monkeypatch, seat_change):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    with OpenAIMock() as mock:
        mock.tool_calls = _memgpt_tool_calls
        outcome = run_benchmark(
            resolve_memories(["memgpt"]),
            [seat_change],
            tmp_path / "run",
            memory_llm="openai:gpt-4o-mini",
            base_url=mock.base_url,
            progress=False,
        )
        requests = [r["body"] for r in mock.requests if r["kind"] == "chat"]
    assert outcome.failed_cells == 0
    turns = read_results(outcome.path).turns
    # each exchange: tool calls, then the results sent back and a plain reply
    assert len(requests) == 2 * len(turns)
    offered = {t["function"]["name"] for t in requests[0]["tools"]}
    assert offered == {
        "core_memory_append",
        "core_memory_replace",
        "archival_memory_insert",
        "archival_memory_search",
        "conversation_search",
    }
    results = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"][:3] for m in results] == ["OK:", "OK:"]
    # the core memory the next exchange's agent sees holds what the first one appended
    assert (
        "Hello again, I'm planning my trips for the spring."
        in requests[2]["messages"][0]["content"]
    )
    # the provider's tool-call tokens are maintenance tokens of the turn
    out = TOOL_CALL_USAGE["completion_tokens"] + CHAT_USAGE["completion_tokens"]
    assert (turns["memory_output_tokens"] == out).all()
    assert (turns["memory_llm_calls"] == 2).all()
    assert (turns["embedding_tokens"] > 0).all()


def test_the_agent_loop_stops_at_max_steps(tmp_path, monkeypatch, seat_change, run_models):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    from memory_lab import RunModels

    with OpenAIMock() as mock:
        mock.tool_calls = lambda body: [("conversation_search", {"query": "seats"})]
        mock.tool_calls_after_results = True  # a model that never stops calling
        models = RunModels.create(memory_llm="openai:gpt-4o-mini", base_url=mock.base_url)
        cell = Cell(parse_memory_spec("memgpt:max_steps=3"), seat_change, models)
        ex = exchanges(seat_change)[0]
        cell.at(ex)
        cell.memory.observe(ex)
        usage, _ = cell.maintenance()
        snapshot = cell.snapshot()
        cell.close()
    assert mock.calls("chat") == 3 and usage.llm_calls == 3
    assert snapshot["step_limit_hits"] == 1 and snapshot["tool_calls"][0]["step_limit"]


def test_memory_lab_run_memgpt_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["run", "--memory", "memgpt", "buffer", "--dialogues"]
    code = main([*args, str(FIXTURES / "langgraph" / "seat-change.yaml"), "--out", str(out)])
    assert code == 0
    results = read_results(out)
    probes = results.probes
    memgpt = probes[probes["memory"] == "memgpt"].set_index("probe_id")
    assert memgpt.loc["q-seat", "context_hit"] and memgpt.loc["q-ffn", "context_hit"]
    assert memgpt.loc["q-seat", "evidence_recall"] == 1.0
    turns = results.turns
    assert (turns[turns["memory"] == "memgpt"]["memory_tokens"] > 0).all()
    assert "memgpt" in capsys.readouterr().out
