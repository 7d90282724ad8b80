"""The watchdog of a local Ray started by a run: no Ray process outlives the run's driver.

``RayTasks`` starts it (``python watch.py TEMP_DIR``, in a session of its own, stdlib
only) with a pipe on its stdin, right before ``ray.init`` starts the local Ray with its files
in ``TEMP_DIR``. Every 0.2 s it notes Ray's processes: those whose command line names
``TEMP_DIR`` (GCS, raylet, monitors) and their descendants (the dashboard and runtime-env
agents, the workers, which rename themselves ``ray::...``). When its stdin closes (the driver
closed it after ``ray.shutdown()``, or the driver died, even by ``kill -9``) it kills the noted
processes still alive (SIGKILL; a process is matched by pid and start time, so a reused pid is
never hit), sweeps once more, removes ``TEMP_DIR`` and exits. Without it, after a ``kill -9``
of the driver Ray's agents linger for about a minute.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import sys
import time
from pathlib import Path

POLL = 0.2


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[19])


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def ray_processes(temp_dir: str) -> dict[int, int]:
    """pid -> start time of the processes naming ``temp_dir`` and their descendants."""
    stats: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            stats[int(entry)] = stat
    marker = temp_dir.encode()
    found = {pid for pid in stats if pid != os.getpid() and marker in _cmdline(pid)}
    grew = True
    while grew:
        children = {pid for pid, (ppid, _) in stats.items() if ppid in found} - found
        grew = bool(children)
        found |= children
    return {pid: stats[pid][1] for pid in found}


def kill_all(noted: dict[int, int]) -> None:
    for pid, started in noted.items():
        stat = _stat(pid)
        if stat is not None and stat[1] == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def watch(temp_dir: str) -> None:
    noted: dict[int, int] = {}
    while True:
        noted.update(ray_processes(temp_dir))
        ready, _, _ = select.select([sys.stdin], [], [], POLL)
        if ready and not os.read(sys.stdin.fileno(), 4096):
            break  # the driver closed the pipe or died
    for _ in range(3):  # processes started during a kill are caught by the next sweep
        noted.update(ray_processes(temp_dir))
        kill_all(noted)
        time.sleep(0.05)
    shutil.rmtree(temp_dir, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the driver, which closes us
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    watch(sys.argv[1])
