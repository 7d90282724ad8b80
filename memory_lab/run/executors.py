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
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Protocol

from memory_lab.dialogue.model import Dialogue
from memory_lab.log.faults import set_driver
from memory_lab.log.record_log import PartWriter
from memory_lab.log.records import CellRecord
from memory_lab.log.run_spec import RunSpec
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
) -> dict[str, Any]:
    """A cell's closing record: ``ok`` without an error, else ``failed`` with it, redacted."""
    return CellRecord(
        memory=spec.label,
        memory_name=spec.name,
        dialogue=dialogue.id,
        status="ok" if error is None else "failed",
        error=None if error is None else redact(error),
        seconds=seconds,
        memory_tokens_held=held,
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
    password, key or token of the run), never raised."""
    started = time.perf_counter()
    prepare_stack(models, [spec])  # imports once per process, before threads ask probes
    error, tb, held = None, None, None
    try:
        held = replay_dialogue(spec, dialogue, models, write, on_exchange=on_exchange)
    except Exception as exc:  # noqa: BLE001 - a failed cell is recorded, the run goes on
        error, tb = f"{type(exc).__name__}: {exc}", redact(traceback.format_exc())
    record = cell_record(spec, dialogue, error, time.perf_counter() - started, held)
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
                    outcome = self._collect(worker)
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

    def _collect(self, worker: _Worker) -> CellOutcome:
        """The worker's outcome, or a failed cell if it died without sending one."""
        task, worker.task = worker.task, None
        assert task is not None
        try:
            if worker.conn.poll():
                return worker.conn.recv()
        except (EOFError, OSError):
            pass
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
            outcome = run_cell_to_part(task, models, Path(parts_dir), attempt)
        conn.send(outcome)


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


RAY_MISSING = "--executor ray needs the ray package: pip install 'memory-lab[ray]' (or 'ray>=2.60')"


def import_ray() -> Any:
    """The ``ray`` module, or a ValueError naming the option and how to install it."""
    try:
        import ray
    except ImportError:
        raise ValueError(RAY_MISSING) from None
    return ray


@dataclass
class RayTasks:
    """Cells as Ray tasks, one CPU each, on the cluster at ``ray_address`` or a local one.

    A task returns its cell's records; the driver writes them as the cell's part (nodes need no
    shared filesystem) and appends parts in cell order like every executor. Without an address
    the run starts a local Ray sized to the machine (or to ``--jobs``), without dashboard, its
    files in a temporary folder removed afterwards (and by ``ray_watch.py`` with Ray's processes
    should the driver die); SIGTERM keeps the run's handler. A Ray already initialised in this
    process (a notebook, a test) is used as it is. On a cluster the tasks get this driver's
    ``memory_lab`` package (``runtime_env`` ``py_modules``), so every node runs the same code.
    ``at_once`` caps cells in flight (``--jobs``); closing the run cancels the tasks. A task
    whose worker dies fails its cell, recorded like any failed cell (no retries: ``--resume``
    redoes it).
    """

    spec: RunSpec
    parts_dir: Path
    attempt: str
    at_once: int | None = None
    description: str = ""
    _token_env: dict[str, str | None] = field(default_factory=dict, repr=False)

    def run(self, tasks: list[CellTask], on_exchange: OnExchange) -> Iterator[CellOutcome]:
        ray = import_ray()
        if not tasks:
            return
        joined, temp, watchdog = self._connect(ray)
        pending: dict[Any, CellTask] = {}
        try:
            runtime = ray.put(self.spec.for_workers())
            remote = ray.remote(_ray_cell).options(num_cpus=1, max_retries=0)
            todo = deque(longest_first(tasks))
            limit = self.at_once or len(tasks)
            while todo or pending:
                while todo and len(pending) < limit:
                    task = todo.popleft()
                    pending[remote.remote(runtime, task)] = task
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
                for ref in ready:
                    yield self._collect(ray, ref, pending.pop(ref))
        finally:
            for ref in pending:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - it ended meanwhile
                    pass
            if joined:
                ray.shutdown()
            restore_environ(self._token_env)
            if watchdog is not None:  # it kills what outlived the shutdown, removes the folder
                _stop_watchdog(watchdog)
            if temp is not None:
                shutil.rmtree(temp, ignore_errors=True)

    def _connect(self, ray: Any) -> tuple[bool, str | None, subprocess.Popen | None]:
        """Join the cluster or start a local Ray: whether the run must leave it when done, and
        the temporary folder and watchdog (``ray_watch.py``) of a Ray it started."""
        if ray.is_initialized():
            return False, None, None
        # ray.init makes SIGTERM exit at once (143); the run's own handler stops it like Ctrl-C
        on_main = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGTERM) if on_main else None
        try:
            return self._init(ray)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def _init(self, ray: Any) -> tuple[bool, str | None, subprocess.Popen | None]:
        settings: dict[str, Any] = {
            "include_dashboard": False,
            "logging_level": "ERROR",
            "log_to_driver": False,
        }
        address = self.spec.run_config.ray_address
        if address:
            package = str(Path(__file__).resolve().parents[1])  # memory_lab/, for the cluster
            ray.init(address=address, runtime_env={"py_modules": [package]}, **settings)
            return True, None, None
        # a short path: Ray's socket paths must fit in ~107 characters
        temp = tempfile.mkdtemp(prefix="mlray-", dir="/tmp" if os.path.isdir("/tmp") else None)
        cpus = self.at_once or os.cpu_count() or 1
        watchdog = _start_watchdog(temp)  # before Ray starts: it notes each process as it comes
        try:
            self._token_env = use_ray_token(temp)
            ray.init(num_cpus=cpus, _temp_dir=temp, **settings)
        except BaseException:
            _stop_watchdog(watchdog)
            restore_environ(self._token_env)
            shutil.rmtree(temp, ignore_errors=True)
            raise
        return True, temp, watchdog

    def _collect(self, ray: Any, ref: Any, task: CellTask) -> CellOutcome:
        """The task's cell as a complete part, or a failed cell if its task failed."""
        try:
            records, tb = ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - e.g. its worker or node died
            error = f"ray task failed: {type(exc).__name__}: {str(exc).splitlines()[0]}"
            return record_failure(task, self.parts_dir, self.attempt + "-lost", error)
        write_part(task, records, self.parts_dir, self.attempt)
        return CellOutcome(task.index, records[-1], tb)


def use_ray_token(temp: str) -> dict[str, str | None]:
    """Token authentication for the local Ray about to start in ``temp``: a fresh random token
    in ``temp/auth_token`` (mode 0600, removed with the folder), named in the environment that
    Ray's processes inherit. Ray's servers listen on every interface (its binaries bind the
    wildcard address and ``ray.init`` maps 127.0.0.1 to the node's IP); with the token, a
    connection without it is refused, and nothing is written to ``~/.ray`` (Ray's default
    token file). Returns the variables' previous values, for ``restore_environ``."""
    path = os.path.join(temp, "auth_token")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_hex(32).encode())
    finally:
        os.close(fd)
    wanted = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": path, "RAY_AUTH_TOKEN": None}
    previous = {name: os.environ.get(name) for name in wanted}
    restore_environ(wanted)
    return previous


def restore_environ(values: dict[str, str | None]) -> None:
    """Set these environment variables (None: unset), and have Ray in this process read its
    authentication settings again (it caches the mode and the token)."""
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if values and "ray" in sys.modules:
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def _start_watchdog(temp: str) -> subprocess.Popen:
    """``ray_watch.py`` for the local Ray in ``temp``: it outlives a ``kill -9`` of this driver
    (own session, stdin a pipe from here) and then takes Ray's processes and folder with it."""
    script = Path(__file__).with_name("ray_watch.py")
    return subprocess.Popen(
        [sys.executable, str(script), temp],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stop_watchdog(watchdog: subprocess.Popen) -> None:
    try:
        watchdog.stdin.close()  # type: ignore[union-attr]
        watchdog.wait(timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        watchdog.kill()


_ray_models: dict[str, RunModels] = {}


def _ray_cell(spec: RunSpec, task: CellTask) -> tuple[list[dict[str, Any]], str | None]:
    """A Ray task: one cell's records (closed by its cell record) and traceback if it failed.

    The run's models are built once per worker process and kept for its next cells.
    """
    import json

    key = json.dumps(
        [spec.effective.to_json(), spec.cache_dir, spec.resource_values, spec.folder, spec.client],
        default=str,
    )
    records: list[dict[str, Any]] = []
    models = _ray_models.get(key)
    if models is None:
        try:
            models = RunModels.for_spec(spec, 1)  # one CPU per task
        except Exception as exc:  # noqa: BLE001 - the cell fails with this error
            error = f"worker could not start: {type(exc).__name__}: {exc}"
            return [cell_record(task.spec, task.dialogue, error)], redact(traceback.format_exc())
        _ray_models.clear()  # one run's models at a time
        _ray_models[key] = models
    _, tb = run_cell(task.spec, task.dialogue, models, records.append)
    return records, tb
