"""Executors in this process: the ``Executor`` protocol every executor follows, one cell after
another (``InProcess``) and ``--concurrency`` cells at a time in threads (``Threads``)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from memory_lab.run.context import RunModels
from memory_lab.run.executors.cells import (
    CellCancelled,
    CellOutcome,
    CellTask,
    OnExchange,
    longest_first,
    prepare_stack,
    run_cell_to_part,
)


class Executor(Protocol):
    description: str

    def run(self, tasks: list[CellTask], on_exchange: OnExchange) -> Iterator[CellOutcome]:
        """Run every task; yield outcomes as cells end. Closing stops the rest promptly."""
        ...


@dataclass
class InProcess:
    """One cell after another in this process (Ctrl-C interrupts the cell where it is)."""

    models: RunModels
    parts_dir: Path
    attempt: str
    description: str = ""

    def run(self, tasks: list[CellTask], on_exchange: OnExchange) -> Iterator[CellOutcome]:
        for task in tasks:
            yield run_cell_to_part(
                task, self.models, self.parts_dir, self.attempt, lambda i=task.index: on_exchange(i)
            )


@dataclass
class Threads:
    """``concurrency`` cells at a time in threads (API-bound runs waiting on providers).

    The threads are daemons: when the run stops, queued cells never start, running ones stop
    after their current exchange, and a provider call that hangs cannot hold up the exit.
    """

    models: RunModels
    parts_dir: Path
    attempt: str
    concurrency: int
    description: str = ""

    def run(self, tasks: list[CellTask], on_exchange: OnExchange) -> Iterator[CellOutcome]:
        stop = threading.Event()
        todo: queue.SimpleQueue[CellTask] = queue.SimpleQueue()
        ended: queue.SimpleQueue[CellOutcome | BaseException] = queue.SimpleQueue()
        for task in longest_first(tasks):
            todo.put(task)

        def between_exchanges() -> None:
            if stop.is_set():
                raise CellCancelled

        def work() -> None:
            while not stop.is_set():
                try:
                    task = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    ended.put(
                        run_cell_to_part(
                            task, self.models, self.parts_dir, self.attempt, between_exchanges
                        )
                    )
                except CellCancelled:
                    return
                except BaseException as exc:  # noqa: BLE001 - e.g. a part that cannot be written
                    ended.put(exc)
                    return

        # imports made by building a client or a memory happen here, not in several threads
        prepare_stack(self.models, [task.spec for task in tasks])
        for n in range(min(self.concurrency, len(tasks))):
            threading.Thread(target=work, name=f"memory-lab-cell-{n}", daemon=True).start()
        try:
            for _ in tasks:
                while True:
                    try:
                        outcome = ended.get(timeout=0.5)
                        break
                    except queue.Empty:
                        continue
                if isinstance(outcome, BaseException):
                    raise outcome
                yield outcome
        finally:
            stop.set()
