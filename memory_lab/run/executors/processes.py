"""``--jobs``: cells in worker processes, one at a time each, and their supervision.

Worker processes are spawned (a forked child would inherit torch threads), ignore Ctrl-C (the
driver stops them: asked to leave after a complete run, terminated otherwise) and die with the
driver, even when it is killed with SIGKILL (``watch_parent``).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from memory_lab.log.faults import set_driver
from memory_lab.log.run_spec import RunSpec
from memory_lab.run.context import RunModels
from memory_lab.run.executors.cells import (
    CellOutcome,
    CellTask,
    OnExchange,
    record_failure,
    run_cell_to_part,
)

# What a worker sends when its cell ends an exchange (the progress bar counts it), before the
# cell's outcome.
EXCHANGE_DONE = "exchange"


@dataclass
class _Worker:
    process: Any
    conn: Connection
    task: CellTask | None = None


@dataclass
class Processes:
    """``jobs`` worker processes, one cell at a time each (CPU-bound runs).

    Workers rebuild the run's models from its spec (resources are handed over in memory,
    never written); memories named ``module:factory`` are imported there by their spec's
    source. A worker that dies mid-cell (killed, out of memory) fails that cell, recorded like
    any failed cell, and is replaced.
    """

    spec: RunSpec
    parts_dir: Path
    attempt: str
    jobs: int
    description: str = ""

    def run(self, tasks: list[CellTask], on_exchange: OnExchange) -> Iterator[CellOutcome]:
        queue = deque(tasks)
        workers: list[_Worker] = []
        finished = False
        try:
            for _ in range(min(self.jobs, len(queue))):
                workers.append(self._start())
                self._give(workers[-1], queue)
            while busy := [n for n, w in enumerate(workers) if w.task is not None]:
                ready = wait(
                    [workers[n].conn for n in busy] + [workers[n].process.sentinel for n in busy]
                )
                for n in busy:
                    worker = workers[n]
                    if worker.conn not in ready and worker.process.sentinel not in ready:
                        continue
                    outcome = self._receive(worker, on_exchange)
                    if outcome is None:  # exchanges reported, the cell goes on
                        continue
                    if queue and not worker.process.is_alive():  # a fresh one takes its place
                        worker.conn.close()
                        workers[n] = worker = self._start()
                    self._give(worker, queue)  # before the driver commits: no idle wait
                    yield outcome
            finished = True
        finally:
            _stop(workers, graceful=finished)

    def _start(self) -> _Worker:
        ctx = multiprocessing.get_context("spawn")  # a forked child would inherit torch threads
        threads = max(1, (os.cpu_count() or 1) // self.jobs)
        conn, child_conn = ctx.Pipe()
        process = ctx.Process(
            target=_worker_main,
            args=(child_conn, self.spec.for_workers(), threads, os.getpid()),
            name="memory-lab-worker",
            daemon=True,
        )
        with _sigint_ignored():  # the worker starts ignoring Ctrl-C: the driver stops it
            process.start()
        child_conn.close()
        return _Worker(process, conn)

    def _give(self, worker: _Worker, queue: deque[CellTask]) -> None:
        if queue:
            worker.task = queue.popleft()
            try:
                worker.conn.send((worker.task, str(self.parts_dir), self.attempt))
            except OSError:  # it died just now: the sentinel reports it and the cell fails
                pass

    def _receive(self, worker: _Worker, on_exchange: OnExchange) -> CellOutcome | None:
        """What the worker sent: each exchange it reports goes to ``on_exchange``; then its
        outcome, a failed cell if it died without sending one, or None while its cell goes on."""
        task = worker.task
        assert task is not None
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                if message == EXCHANGE_DONE:
                    on_exchange(task.index)
                    continue
                worker.task = None
                return message
            if worker.process.is_alive():
                return None
        except (EOFError, OSError):  # its end of the pipe closed: it is dying
            pass
        worker.task = None
        worker.process.join(5)
        code = worker.process.exitcode
        how = f"killed by {signal.Signals(-code).name}" if code and code < 0 else f"exit {code}"
        (self.parts_dir / f"cell-{task.index:05d}.{self.attempt}.partial").unlink(missing_ok=True)
        return record_failure(
            task, self.parts_dir, self.attempt + "-lost", f"worker process died ({how})"
        )


def _stop(workers: list[_Worker], graceful: bool) -> None:
    """End the workers: asked to leave after a complete run, terminated otherwise."""
    for worker in workers:
        try:
            if graceful:
                worker.conn.send(None)
            else:
                worker.process.terminate()
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + (30 if graceful else 3)
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(1)
        worker.conn.close()


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT while a child starts, so it starts ignoring it too (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def watch_parent(parent: int) -> None:
    """Exit when ``parent`` dies, even by SIGKILL: the kernel's parent-death signal on Linux,
    and everywhere a thread that notices the process being re-parented."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            pr_set_pdeathsig = 1
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # it died before the watch began
        os._exit(1)

    def poll() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=poll, name="memory-lab-parent-watch", daemon=True).start()


def _worker_main(conn: Connection, spec: RunSpec, threads: int, driver: int) -> None:
    """A worker process: cells in, outcomes out, until the driver says stop or goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch_parent(driver)
    set_driver(driver)
    models, error = None, None
    try:
        models = RunModels.for_spec(spec, threads)
    except Exception as exc:  # noqa: BLE001 - every cell it is given fails with this error
        error = (f"worker could not start: {type(exc).__name__}: {exc}", traceback.format_exc())
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task, parts_dir, attempt = message
        if models is None:
            outcome = record_failure(task, Path(parts_dir), attempt, *error)
        else:
            outcome = run_cell_to_part(
                task, models, Path(parts_dir), attempt, lambda: conn.send(EXCHANGE_DONE)
            )
        conn.send(outcome)
