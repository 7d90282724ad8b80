"""``--executor ray``: cells as Ray tasks, the local Ray a run starts (its per-run token and
its watchdog, ``watch.py``) and the task itself.

The task function (``_ray_cell``) stays a module-level function of this module: Ray pickles it
by reference, and workers import it from here.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_lab.errors import EnvironmentProblem
from memory_lab.log.run_spec import RunSpec
from memory_lab.models.rate_limit import start_actor, stop_actor
from memory_lab.run.context import RunModels
from memory_lab.run.executors.cells import (
    CellOutcome,
    CellTask,
    OnExchange,
    cell_record,
    longest_first,
    record_failure,
    run_cell,
    write_part,
)
from memory_lab.text.redact import redact

RAY_MISSING = "--executor ray needs the ray package: pip install 'memory-lab[ray]' (or 'ray>=2.60')"


def import_ray() -> Any:
    """The ``ray`` module, or a ValueError naming the option and how to install it."""
    try:
        import ray
    except ImportError:
        raise EnvironmentProblem(RAY_MISSING) from None
    return ray


@dataclass
class RayTasks:
    """Cells as Ray tasks, one CPU each, on the cluster at ``ray_address`` or a local one.

    A task returns its cell's records; the driver writes them as the cell's part (nodes need no
    shared filesystem) and appends parts in cell order like every executor. Without an address
    the run starts a local Ray sized to the machine (or to ``--jobs``), without dashboard, its
    files in a temporary folder removed afterwards (and by ``watch.py`` with Ray's processes
    should the driver die); SIGTERM keeps the run's handler. A Ray already initialised in this
    process (a notebook, a test) is used as it is. On a cluster the tasks get this driver's
    ``memory_lab`` package (``runtime_env`` ``py_modules``), so every node runs the same code.
    ``at_once`` caps cells in flight (``--jobs``); closing the run cancels the tasks. A task
    whose worker dies fails its cell, recorded like any failed cell (no retries: ``--resume``
    redoes it). Under ``--rpm``/``--tpm`` the run's bucket is a named actor started here, which
    every task finds by name (``models/rate_limit.py``); its counts go to the run folder's bucket
    file when the run leaves Ray.
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
        limits, bucket = self.spec.client.limits, None
        try:
            bucket = start_actor(ray, limits)  # --rpm/--tpm: the bucket every task shares
            runtime = ray.put(self.spec.for_workers())
            gpus = 1 if self.spec.run_config.device == "cuda" else 0  # placed where a GPU is
            remote = ray.remote(_ray_cell).options(num_cpus=1, num_gpus=gpus, max_retries=0)
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
            if bucket is not None and limits is not None:
                try:
                    stop_actor(ray, bucket, limits)  # its counts into the run folder's file
                except Exception:  # noqa: BLE001, S110 - counts lost, the records are not
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
        the temporary folder and watchdog (``watch.py``) of a Ray it started."""
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
            package = str(Path(__file__).resolve().parents[2])  # memory_lab/, for the cluster
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
    """``watch.py`` for the local Ray in ``temp``: it outlives a ``kill -9`` of this driver
    (own session, stdin a pipe from here) and then takes Ray's processes and folder with it."""
    script = Path(__file__).with_name("watch.py")
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
