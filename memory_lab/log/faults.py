"""Reproducible kill points for fault-injection tests: ``MEMORY_LAB_FAULT=POINT:N[:hang]``.

The run is killed (SIGKILL, no cleanup, as by the OOM killer or ``kill -9``) the N-th time a
process passes POINT, or with ``:hang`` the process stalls there as on a provider call that
never answers (a thread stalls until the main thread ends), so a test can signal a run that is
certainly mid-way. Points:

- ``record``: a record was written to a cell's part file (a kill mid-cell);
- ``part``: a cell's part was completed, before the driver appends it to records.jsonl;
- ``append``: a chunk (4 KiB) of a part was written to records.jsonl (a kill mid-append: the
  file may end in a torn line);
- ``commit``: a part was appended and synced, before the part file is deleted.

Counts are per process (all threads together). When the run leads its own process group
(started in a new session, as the fault tests do) the whole group is killed at once, workers
included; otherwise only the run's driver and the process that reached the point. Unset, this
costs one dict lookup.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter

_counts: Counter[str] = Counter()
_lock = threading.Lock()
_driver_pid: int | None = None


def fault_point(point: str) -> None:
    """Kill the run here if ``MEMORY_LAB_FAULT`` names this point and its count is reached."""
    plan = os.environ.get("MEMORY_LAB_FAULT")
    if not plan:
        return
    name, _, rest = plan.partition(":")
    if name != point:
        return
    count, _, action = rest.partition(":")
    with _lock:
        _counts[point] += 1
        reached = _counts[point] == int(count or 1)
    if reached and action == "hang":
        _hang()
    elif reached:
        kill_run()


def _hang() -> None:
    main = threading.main_thread()
    while threading.current_thread() is main or main.is_alive():
        time.sleep(0.05)


def kill_run() -> None:
    """SIGKILL the run: its process group if the driver leads one, else driver and self."""
    driver = _driver_pid or os.getpid()
    if os.getpgrp() == driver:
        os.killpg(driver, signal.SIGKILL)
    if driver != os.getpid():
        os.kill(driver, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def set_driver(pid: int) -> None:
    """In a worker process: ``pid`` is the run's driver, killed with the worker."""
    global _driver_pid
    _driver_pid = pid
