"""One cell of a run, as every executor runs it: the cell (``CellTask``), how it ended
(``CellOutcome``), running it into its part file (``record_log`` owns the files and the
exactly-once protocol), the part of a cell run elsewhere or that could not run, the order cells
start in, and the run's models in a worker process or Ray task.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_lab.dialogue.model import Dialogue
from memory_lab.log.prompt_store import PromptEncoder
from memory_lab.log.record_log import PartWriter
from memory_lab.log.records import CellRecord
from memory_lab.memories.registry import MemorySpec, prepare_memories
from memory_lab.models.providers import prepare_clients
from memory_lab.run.cell import replay_dialogue
from memory_lab.run.context import RunModels
from memory_lab.text.redact import redact

OnExchange = Callable[[int], None]  # called with the cell index after each exchange


@dataclass(frozen=True)
class CellTask:
    """One (memory, dialogue) cell; ``index``, its place in the run's grid, names its part."""

    index: int
    spec: MemorySpec
    dialogue: Dialogue


@dataclass(frozen=True)
class CellOutcome:
    """How one cell ended; ``record`` is its closing ``cell`` record."""

    index: int
    record: dict[str, Any]
    traceback: str | None


class CellCancelled(BaseException):
    """Raised in a cell between exchanges when the run is stopping; never recorded."""


def cell_record(
    spec: MemorySpec,
    dialogue: Dialogue,
    error: str | None = None,
    seconds: float = 0.0,
    held: int | None = None,
    startup: float | None = None,
) -> dict[str, Any]:
    """A cell's closing record: ``ok`` without an error, else ``failed`` with it, redacted;
    ``startup``: the process's loading before its first cell (``RunModels.startup_once``)."""
    return CellRecord(
        memory=spec.label,
        memory_name=spec.name,
        dialogue=dialogue.id,
        status="ok" if error is None else "failed",
        error=None if error is None else redact(error),
        seconds=seconds,
        memory_tokens_held=held,
        startup_seconds=startup,
    ).to_dict()


def prepare_stack(models: RunModels, specs: list[MemorySpec]) -> None:
    """Import, in this thread, what the run's clients and these memories import on first use:
    the provider and vector-store stack (openai, httpx, chromadb), before cells run in threads."""
    prepare_clients(models.config.model_specs(), models.config.base_url)
    prepare_memories(specs)


def run_cell(
    spec: MemorySpec,
    dialogue: Dialogue,
    models: RunModels,
    write: Callable[[dict[str, Any]], None],
    on_exchange: Callable[[], None] | None = None,
) -> tuple[dict[str, Any], str | None]:
    """Replay one cell and write its closing record; an exception is recorded (redacted: no
    password, key or token of the run), never raised. Records are written as stored: each
    prompt after the cell's first as a delta against the one before (``log/prompt_store.py``).
    """
    startup = models.warm_once()  # the process's first cell: loading, before its clock starts
    started = time.perf_counter()
    prepare_stack(models, [spec])  # imports once per process, before threads ask probes
    encoder = PromptEncoder()  # one per execution of the cell: its first prompt is whole

    def stored(record: dict[str, Any]) -> None:
        write(encoder.encode(record))

    error, tb, held = None, None, None
    try:
        held = replay_dialogue(spec, dialogue, models, stored, on_exchange=on_exchange)
    except Exception as exc:  # noqa: BLE001 - a failed cell is recorded, the run goes on
        error, tb = f"{type(exc).__name__}: {exc}", redact(traceback.format_exc())
    seconds = time.perf_counter() - started
    record = cell_record(spec, dialogue, error, seconds, held, startup)
    write(record)
    return record, tb


def run_cell_to_part(
    task: CellTask,
    models: RunModels,
    parts_dir: Path,
    attempt: str,
    on_exchange: Callable[[], None] | None = None,
) -> CellOutcome:
    """Run a cell into its part file and complete the part; a cancelled cell leaves none."""
    writer = PartWriter(parts_dir, task.index, attempt)
    try:
        record, tb = run_cell(task.spec, task.dialogue, models, writer.write, on_exchange)
    except BaseException:
        writer.discard()
        raise
    writer.finish()
    return CellOutcome(task.index, record, tb)


def write_part(
    task: CellTask, records: list[dict[str, Any]], parts_dir: Path, attempt: str
) -> Path:
    """A cell's records, run elsewhere, as its complete part (the driver writes it)."""
    writer = PartWriter(parts_dir, task.index, attempt)
    try:
        for record in records:
            writer.write(record)
    except BaseException:
        writer.discard()
        raise
    return writer.finish()


def record_failure(
    task: CellTask, parts_dir: Path, attempt: str, error: str, tb: str | None = None
) -> CellOutcome:
    """A cell that could not run at all: a complete part holding only its failed cell record
    (error and traceback redacted)."""
    record = cell_record(task.spec, task.dialogue, error)
    tb = redact(tb) if tb else tb
    writer = PartWriter(parts_dir, task.index, attempt)
    writer.write(record)
    writer.finish()
    return CellOutcome(task.index, record, tb)


def longest_first(tasks: list[CellTask]) -> list[CellTask]:
    """Cells in the order to start them when several run at once: longest dialogues first
    (exchanges plus probes), so no long cell is left to run alone at the end. Records are
    appended in cell order whatever the order cells end in."""
    return sorted(tasks, key=lambda t: -(len(t.dialogue.turns) + len(t.dialogue.probes)))
