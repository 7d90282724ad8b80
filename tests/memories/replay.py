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
