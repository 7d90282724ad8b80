"""Replaying a dialogue into one memory cell, as a run does, for the memories' tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_lab import parse_memory_spec
from memory_lab.memories.protocol import Exchange, Query
from memory_lab.run.cell import Cell
from memory_lab.run.exchanges import exchanges


def replayed(spec: str, dialogue, models, upto: int | None = None, recall: bool = False) -> Cell:
    """A cell of ``spec`` after the first ``upto`` exchanges (all by default) were observed.

    ``recall``: before each exchange, recall with its user turn, as a run builds the turn's
    prompt (a memory that counts accesses or moves its clock on recall needs it).
    """
    cell = Cell(parse_memory_spec(spec), dialogue, models)
    for ex in exchanges(dialogue)[:upto]:
        cell.at(ex)
        if recall:
            cell.memory.recall(Query(ex.user, ex.session_id, ex.session_date))
        cell.memory.observe(ex)
    return cell


def run_isolated(spec: str, dialogue, tmp_path, monkeypatch) -> tuple[list, list]:
    """Run ``spec`` over ``dialogue`` offline with HOME an empty folder and every socket
    connection recorded: (files written under HOME, non-loopback addresses connected to)."""
    import socket

    from memory_lab import resolve_memories, run_benchmark

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    targets: list = []
    connect = socket.socket.connect

    def recording(self, address):
        targets.append(address)
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", recording)
    outcome = run_benchmark(resolve_memories([spec]), [dialogue], tmp_path / "run", progress=False)
    assert outcome.failed_cells == 0
    remote = [
        a
        for a in targets
        if isinstance(a, tuple) and a and a[0] not in ("127.0.0.1", "::1", "localhost")
    ]
    return sorted(p for p in home.rglob("*")), remote


def exchange(index: int, user: str, assistant: str = "Noted.", date: str = "2026-01-05"):
    """Exchange ``index`` of session s1: one user line (turn u<index>) and one reply (a<index>)."""
    return Exchange(index, user, assistant, f"u{index}", (f"a{index}",), "s1", date)


@dataclass
class MockRuns:
    """One memory run twice against the OpenAI mock, the rerun over the first run's call cache."""

    failed_cells: list[int]  # of each run
    requests: list[dict]  # the first run's chat request bodies
    first_calls: int  # chat calls the first run made
    again_calls: int  # chat calls the rerun made
    turns: Any  # the first run's turn records (a DataFrame)
    rerun_turns: Any


def run_twice_on_mock(spec: str, dialogue, tmp_path, monkeypatch, **mock_settings) -> MockRuns:
    """Run ``spec`` over ``dialogue`` twice (folders ``first`` and ``again``) with its memory
    model ``openai:gpt-4o-mini`` served by the loopback OpenAI mock, no retries;
    ``mock_settings`` set the mock's ``reply`` or ``tool_calls`` (the 'model' behind it)."""
    from memory_lab import read_results, resolve_memories, run_benchmark

    from ..models.openai_mock import OpenAIMock

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    outcomes = []
    with OpenAIMock() as mock:
        for name, value in mock_settings.items():
            setattr(mock, name, value)
        for run in ("first", "again"):
            outcomes.append(
                run_benchmark(
                    resolve_memories([spec]),
                    [dialogue],
                    tmp_path / run,
                    memory_llm="openai:gpt-4o-mini",
                    base_url=mock.base_url,
                    progress=False,
                )
            )
            if run == "first":
                requests = [r["body"] for r in mock.requests if r["kind"] == "chat"]
                first_calls = mock.calls("chat")
        again_calls = mock.calls("chat") - first_calls
    return MockRuns(
        failed_cells=[o.failed_cells for o in outcomes],
        requests=requests,
        first_calls=first_calls,
        again_calls=again_calls,
        turns=read_results(outcomes[0].path).turns,
        rerun_turns=read_results(outcomes[1].path).turns,
    )
