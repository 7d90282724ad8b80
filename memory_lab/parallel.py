"""Cells in parallel processes, with records identical to a sequential run.

Each worker process replays whole cells and writes each cell's records to its own part file
(flushed as they happen); the parent appends finished parts to ``records.jsonl`` in cell order,
so lines from parallel cells never interleave and ``--jobs N`` gives the same file as
``--jobs 1`` apart from timings.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_lab.config import RunConfig
from memory_lab.dialogue import Dialogue
from memory_lab.memories.registry import MemorySpec
from memory_lab.records import CellRecord
from memory_lab.results import RecordWriter
from memory_lab.runner import RunModels, replay_dialogue


@dataclass(frozen=True)
class CellOutcome:
    """How one cell ended; ``record`` is its closing ``cell`` record."""

    record: dict[str, Any]
    traceback: str | None


def run_cell(
    spec: MemorySpec,
    dialogue: Dialogue,
    models: RunModels,
    write: Callable[[dict[str, Any]], None],
    on_exchange: Callable[[], None] | None = None,
) -> CellOutcome:
    """Replay one cell; an exception is caught and recorded, never raised."""
    started = time.perf_counter()
    status, error, tb = "ok", None, None
    try:
        replay_dialogue(spec, dialogue, models, write, on_exchange=on_exchange)
    except Exception as exc:  # noqa: BLE001 - a failed cell is recorded, the run goes on
        status, error, tb = "failed", f"{type(exc).__name__}: {exc}", traceback.format_exc()
    record = CellRecord(
        memory=spec.label,
        memory_name=spec.name,
        dialogue=dialogue.id,
        status=status,
        error=error,
        seconds=time.perf_counter() - started,
    ).to_dict()
    write(record)
    return CellOutcome(record, tb)


_WORKER_MODELS: RunModels | None = None


def _init_worker(runtime: dict[str, Any], threads: int) -> None:
    global _WORKER_MODELS
    import torch

    torch.set_num_threads(threads)  # jobs x threads stays within the machine's cores
    _WORKER_MODELS = RunModels.create(
        RunConfig.from_json(runtime["config"]),
        cache_dir=runtime["cache_dir"],
        resources=runtime["resources"],
        work_dir=runtime["work_dir"],
    )


def _worker(spec: MemorySpec, dialogue: Dialogue, part: str) -> CellOutcome:
    assert _WORKER_MODELS is not None
    writer = RecordWriter(Path(part), fresh=True)
    try:
        return run_cell(spec, dialogue, _WORKER_MODELS, writer.write)
    finally:
        writer.close()


def _in_cell_order(
    futures: dict[Future, int],
    parts_dir: Path,
    write: Callable[[dict[str, Any]], None],
    on_cell: Callable[[int], None],
) -> Iterator[CellOutcome]:
    """As cells finish, append their part files to the records in cell order."""
    done: dict[int, CellOutcome] = {}
    next_index = 0
    for future in as_completed(futures):
        i = futures[future]
        done[i] = future.result()
        on_cell(i)
        while next_index in done:
            part = parts_dir / f"cell-{next_index:05d}.jsonl"
            with open(part, encoding="utf-8") as fh:
                for line in fh:
                    write(json.loads(line))
            part.unlink()
            yield done.pop(next_index)
            next_index += 1


def fresh_parts(parts_dir: Path) -> None:
    """An empty parts folder. Parts left by an interrupted run belong to cells that are either
    complete in records.jsonl already or are being redone now; appending them would duplicate
    records, so they are discarded."""
    if parts_dir.exists():
        for stale in parts_dir.iterdir():
            stale.unlink()
    parts_dir.mkdir(exist_ok=True)


def run_cells_parallel(
    cells: list[tuple[MemorySpec, Dialogue]],
    models: RunModels,
    jobs: int,
    parts_dir: Path,
    write: Callable[[dict[str, Any]], None],
    on_cell: Callable[[int], None],
) -> Iterator[CellOutcome]:
    """Run cells in ``jobs`` processes (CPU-bound runs); records are written in cell order.

    Workers rebuild ``models`` from its config (resources are handed over in memory, never
    written); memories named ``module:factory`` are imported there by their spec's source.
    """
    runtime = {
        "config": models.config.to_json(),
        "cache_dir": models.cache_dir,
        "resources": dict(models.resources),
        "work_dir": models.work_dir,
    }
    fresh_parts(parts_dir)
    threads = max(1, (os.cpu_count() or 1) // jobs)
    # spawn, not fork: the parent may hold torch/OpenMP threads that a forked child would inherit
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        jobs, mp_context=ctx, initializer=_init_worker, initargs=(runtime, threads)
    ) as pool:
        futures = {
            pool.submit(_worker, spec, dialogue, str(parts_dir / f"cell-{i:05d}.jsonl")): i
            for i, (spec, dialogue) in enumerate(cells)
        }
        yield from _in_cell_order(futures, parts_dir, write, on_cell)
    parts_dir.rmdir()


def run_cells_threaded(
    cells: list[tuple[MemorySpec, Dialogue]],
    models: RunModels,
    concurrency: int,
    parts_dir: Path,
    write: Callable[[dict[str, Any]], None],
    on_cell: Callable[[int], None],
) -> Iterator[CellOutcome]:
    """Run ``concurrency`` cells at a time in threads (API-bound runs waiting on providers)."""
    fresh_parts(parts_dir)

    def task(spec: MemorySpec, dialogue: Dialogue, part: Path) -> CellOutcome:
        writer = RecordWriter(part, fresh=True)
        try:
            return run_cell(spec, dialogue, models, writer.write)
        finally:
            writer.close()

    with ThreadPoolExecutor(concurrency) as pool:
        futures = {
            pool.submit(task, spec, dialogue, parts_dir / f"cell-{i:05d}.jsonl"): i
            for i, (spec, dialogue) in enumerate(cells)
        }
        yield from _in_cell_order(futures, parts_dir, write, on_cell)
    parts_dir.rmdir()
