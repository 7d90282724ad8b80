"""Replaying a dialogue into one memory cell, as a run does, for the memories' tests."""

from __future__ import annotations

from memory_lab import parse_memory_spec
from memory_lab.memories.protocol import Query
from memory_lab.runner import Cell, exchanges


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
