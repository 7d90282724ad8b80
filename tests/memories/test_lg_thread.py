"""The ``thread`` memory: a LangGraph checkpointer thread and the guides' policy nodes."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from memory_lab import parse_memory_spec, read_results
from memory_lab.cli import main
from memory_lab.memories.builtin.lg_thread import message_tokens
from memory_lab.memories.protocol import Query
from memory_lab.memories.registry import build_memory
from memory_lab.run.cell import Cell
from memory_lab.run.exchanges import exchanges

from ..conftest import FIXTURES


@pytest.fixture
def models(run_models, tmp_path):
    """The session's models with a run folder, so file-backed savers have a cell folder."""
    return dataclasses.replace(run_models, work_dir=str(tmp_path / "run"))


def test_a_sqlite_thread_continues_after_its_graph_is_rebuilt_on_the_same_file(
    mini_dialogue, models, caplog
):
    spec = parse_memory_spec(
        "thread:saver=sqlite,keep=true,policy=summarize,summarizer=langmem,max_tokens=120"
    )
    exs = exchanges(mini_dialogue)
    cell = Cell(spec, mini_dialogue, models)
    for ex in exs[:5]:
        cell.memory.observe(ex)
    before = cell.memory.recall(Query("?"))
    assert before.items[0].kind == "summary"  # langmem's RunningSummary is in the checkpoint
    cell.close()
    database = Path(cell.resources.cell_dir) / "langgraph.sqlite"
    assert database.exists()  # keep=true

    caplog.set_level(logging.WARNING)
    again = build_memory(spec, dataclasses.replace(cell.resources, closers=[]))
    assert again.recall(Query("?")) == before  # a new graph, a new saver, the same thread
    for ex in exs[5:]:
        again.observe(ex)
    texts = [item.text for item in again.recall(Query("?")).items]
    assert texts[-1] == "AI: That sounds wonderful." and "Busan" in "\n".join(texts)
    again.close()
    assert "unregistered type" not in caplog.text and "Blocked" not in caplog.text

    spec = parse_memory_spec("thread:saver=sqlite")  # keep=false: the file goes at close
    cell = Cell(spec, mini_dialogue, models)
    cell.memory.observe(exs[0])
    assert (Path(cell.resources.cell_dir) / "langgraph.sqlite").exists()
    cell.close()
    assert not Path(cell.resources.cell_dir).exists()


def test_the_summarize_node_leaves_the_summary_and_the_last_keep_last(mini_dialogue, models):
    spec = parse_memory_spec("thread:policy=summarize,max_messages=6,keep_last=2")
    cell = Cell(spec, mini_dialogue, models)
    spent = []
    for ex in exchanges(mini_dialogue):
        cell.memory.observe(ex)
        usage, by_role = cell.maintenance()
        spent.append((usage.input_tokens + usage.output_tokens, [r for r, _, _ in by_role]))
        messages = cell.memory.state()["messages"]
        assert len(messages) <= 6
    # 4 exchanges make 8 messages: the node summarises 6 with the memory model, keeps 2
    assert spent[3][0] > 0 and spent[3][1] == ["memory"] and spent[0][0] == 0
    items = cell.memory.recall(Query("Where do I live?")).items
    cell.close()
    assert items[0].kind == "summary" and "FastAPI" in items[0].text
    kept = [item.text for item in items[1:]]
    assert kept == [
        "Human: [2026-03-09] The new office has a view of the harbour.",
        "AI: That sounds wonderful.",
    ]


def test_trim_keeps_the_thread_within_its_token_budget(mini_dialogue, models):
    cell = Cell(parse_memory_spec("thread:policy=trim,max_tokens=60"), mini_dialogue, models)
    for ex in exchanges(mini_dialogue):
        cell.memory.observe(ex)
        messages = cell.memory.state()["messages"]
        assert message_tokens(messages) <= 60
        assert messages[0].type == "human" and messages[-1].content == ex.assistant
    cell.close()


def test_filter_keeps_the_last_keep_last_messages(mini_dialogue, models):
    cell = Cell(parse_memory_spec("thread:policy=filter,keep_last=3"), mini_dialogue, models)
    for ex in exchanges(mini_dialogue):
        cell.memory.observe(ex)
    texts = [item.text for item in cell.memory.recall(Query("?")).items]
    cell.close()
    assert texts == [
        "AI: Congratulations on the move!",
        "Human: [2026-03-09] The new office has a view of the harbour.",
        "AI: That sounds wonderful.",
    ]


def test_a_thread_per_session_starts_empty_in_every_session(mini_dialogue, models):
    cell = Cell(parse_memory_spec("thread:thread_per=session"), mini_dialogue, models)
    for ex in exchanges(mini_dialogue):
        cell.memory.observe(ex)
    this_session = cell.memory.recall(Query("?", session_id="s2"))
    first = cell.memory.recall(Query("?", session_id="s1"))
    assert cell.memory.snapshot()["threads"] == 2
    cell.close()
    assert "Busan" in this_session.items[2].text and "FastAPI" not in str(this_session)
    assert "FastAPI" in str(first)  # the first session's thread is still there, apart


def test_thread_and_its_parameters_are_listed_and_checked(tmp_path, capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "thread\n" in out and "policy: none|summarize|trim|filter = 'none'" in out
    assert "saver: memory|sqlite|postgres = 'memory'" in out and "store\n" in out
    spec = "thread:policy=summarize,max_messages=4,keep_last=4"
    out_dir = tmp_path / "never"
    assert main(["run", "--memory", spec, "--out", str(out_dir), "--quiet"]) == 2
    assert "keep_last (4) must be below max_messages (4)" in capsys.readouterr().err
    assert not out_dir.exists()


def test_langgraph_memories_run_end_to_end_offline(tmp_path):
    """The issue's command, on a small suite: every memory runs, the policies cost what they do."""
    memories = [  # labels as tables show them: parameters in name order
        "buffer",
        "thread",
        "thread:keep_last=2,max_messages=4,policy=summarize",
        "thread:max_tokens=100,policy=summarize,summarizer=langmem",
        "thread:max_tokens=60,policy=trim",
        "thread:saver=sqlite",
        "thread:thread_per=session",
        "store",
    ]
    out = tmp_path / "run"
    argv = ["run", "--memory", *memories, "--out", str(out), "--quiet", "--dialogues"]
    argv += [str(FIXTURES / "dialogues" / "mini.yaml"), str(FIXTURES / "langgraph")]
    assert main(argv) == 0
    r = read_results(out)
    assert (r.cells["status"] == "ok").all() and set(r.cells["memory"]) == set(memories)
    # read back from the checkpointer every turn, a thread without policy is the whole talk
    prompts = r.turns.groupby("memory")["prompt"].apply(list)
    assert prompts["thread"] == prompts["buffer"] == prompts["thread:saver=sqlite"]
    assert r.probes[r.probes["memory"] == "thread"]["recalled_turns"].iloc[0][:2] == [
        "s1.t1",
        "s1.t2",
    ]
    by_memory = r.turns.groupby("memory")
    mem_tokens = by_memory["memory_tokens"].sum()
    assert mem_tokens["thread"] == 0 and mem_tokens["thread:saver=sqlite"] == 0
    for spec in memories[2:4]:  # summaries are the memory model's, charged as maintenance
        assert mem_tokens[spec] > 0
        assert set(r.usage[r.usage["memory"] == spec]["role"]) == {"memory"}
    assert by_memory["context_tokens"].max()["thread:max_tokens=60,policy=trim"] <= 60
    assert not [p for p in (out / "cells").rglob("*") if p.is_file()]  # SQLite files removed

    probes = r.probes.set_index(["memory", "probe_id"])
    # thread_per=session: the frequent flyer number, said in session 1, is gone in session 2
    assert not probes.loc[("thread:thread_per=session", "q-ffn"), "context_hit"]
    assert probes.loc[("store", "q-ffn"), "correct"]  # the Store carried it across
    assert probes.loc[("thread", "q-ffn"), "correct"]
