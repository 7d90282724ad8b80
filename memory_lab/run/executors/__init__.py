"""Who runs the cells: this process, threads (``--concurrency``), processes (``--jobs``) or
Ray tasks (``--executor ray``).

Every executor runs ``run_cell_to_part`` for each cell, so a cell's records go to its own part
file (``record_log`` owns the files and the exactly-once protocol), and yields each
``CellOutcome`` as its cell ends, in any order; the driver appends parts in cell order.
Closing the iterator (Ctrl-C, SIGTERM, an error in the driver) cancels queued cells and stops
running ones promptly: worker processes are terminated, threads stop at their next exchange.
Worker processes ignore Ctrl-C (the driver stops them) and die with the driver, even when it is
killed with SIGKILL. ``choose_executor`` is the one place that picks an executor. Ray tasks
return a cell's records to the driver, which writes the part itself: nodes need no shared
filesystem, and the exactly-once protocol is the same as for the others.

A module per concern: ``cells`` (one cell into its part, what every executor shares),
``local`` (the ``Executor`` protocol, ``InProcess``, ``Threads``), ``processes`` (worker
processes, their signals and supervision), ``ray_tasks`` (Ray tasks and the local Ray a run
starts) and ``watch`` (that Ray's watchdog, run as a script by its file path, stdlib only;
``ray_tasks`` is not named ``ray``: the script's folder comes first on its ``sys.path``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from memory_lab.log.run_spec import RunSpec
from memory_lab.run.context import RunModels
from memory_lab.run.executors.cells import CellOutcome, CellTask, prepare_stack
from memory_lab.run.executors.local import Executor, InProcess, Threads
from memory_lab.run.executors.processes import Processes
from memory_lab.run.executors.ray_tasks import RayTasks, import_ray

__all__ = [
    "CellOutcome",
    "CellTask",
    "Executor",
    "InProcess",
    "Processes",
    "RayTasks",
    "Threads",
    "choose_executor",
    "import_ray",
    "prepare_stack",
]


def choose_executor(
    spec: RunSpec, models: RunModels, cells: int, parts_dir: Path, attempt: str
) -> InProcess | Threads | Processes | RayTasks:
    """The executor the run's spec asks for, ``--jobs`` and ``--concurrency`` clamped: this
    process's ``models`` in it or threads, or the spec handed to processes or Ray tasks."""
    config = spec.run_config
    jobs, concurrency = config.jobs, config.concurrency
    cap = max(1, cells)
    if config.executor == "ray":
        import_ray()  # a clear error before the run starts when ray is missing
        at_once = min(jobs, cap) if jobs > 1 else None
        where = config.ray_address or "a local Ray"
        return RayTasks(spec, parts_dir, attempt, at_once, f"{cells} cells as Ray tasks on {where}")
    if jobs > 1:  # one process per core is the most that helps a CPU-bound run
        limit = min(cap, os.cpu_count() or 1)
        if jobs > limit:
            print(f"note: --jobs {jobs} clamped to {limit} (cells, cores)", file=sys.stderr)
            jobs = max(1, limit)
    if concurrency > cap:
        print(f"note: --concurrency {concurrency} clamped to {cap} (cells)", file=sys.stderr)
        concurrency = cap
    if jobs > 1:
        return Processes(spec, parts_dir, attempt, jobs, f"{cells} cells on {jobs} processes")
    if concurrency > 1:
        return Threads(
            models, parts_dir, attempt, concurrency, f"{cells} cells, {concurrency} at a time"
        )
    return InProcess(models, parts_dir, attempt, f"{cells} cells")
