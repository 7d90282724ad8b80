"""One sampler for a command's whole process tree: wall, CPU seconds, peak summed PSS and RSS.

``measure(command)`` runs a command to its end while a thread looks at its process tree every
``interval`` seconds: the tree from ``/proc/PID/task/*/children`` (no scan of every process on
the machine), each process's ``/proc/PID/smaps_rollup`` for PSS (a shared page counts once,
split among its sharers, so the sum is the memory the tree really holds) and ``statm`` for RSS
(shared pages counted in each process). CPU seconds are the user plus system time of the command
and every process it started and waited for (``getrusage(RUSAGE_CHILDREN)``). The sampler's own
CPU time is measured too (``sampler_cpu``), so what it costs is a figure, not a guess, and it
keeps under ``BUDGET`` of a core: after each look it waits ``interval`` seconds, or longer when
the look cost more than ``BUDGET`` of that (a tree of many large processes: ``smaps_rollup``
walks every mapping of each).

The command is started so that it dies with the process that started it
(``PR_SET_PDEATHSIG``): a sweep killed with SIGKILL leaves no run behind that would still hold
its results folder when the sweep is started again.
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import IO

BUDGET = 0.01  # the share of one core the sampler may use
_PSS = re.compile(rb"^Pss:\s+(\d+)\s+kB", re.MULTILINE)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass
class Measured:
    """What one command cost: seconds, CPU seconds, peaks in bytes (summed over its tree)."""

    wall: float
    cpu: float
    peak_pss: int
    peak_rss: int
    processes: int  # the most processes seen at once
    samples: int
    sampler_cpu: float  # CPU seconds the sampler itself used
    exit_code: int = 0
    load: tuple[float, float] = (0.0, 0.0)  # the load average before and after
    started: float = field(default_factory=time.time)

    @property
    def sampler_share(self) -> float:
        """The share of one core the sampler used while the command ran."""
        return self.sampler_cpu / self.wall if self.wall > 0 else 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def pss_kib(smaps_rollup: bytes | str) -> int:
    """The ``Pss:`` figure (KiB) of a ``/proc/PID/smaps_rollup`` text; 0 when it has none."""
    if isinstance(smaps_rollup, str):
        smaps_rollup = smaps_rollup.encode()
    found = _PSS.search(smaps_rollup)
    return int(found.group(1)) if found else 0


def tree_pids(root: int) -> list[int]:
    """``root`` and its live descendants, from each task's ``children`` file."""
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children", "rb") as fh:
                    stack.extend(int(c) for c in fh.read().split())
            except (OSError, ValueError):
                continue
    return found


def tree_memory(root: int) -> tuple[int, int, int]:
    """(PSS bytes, RSS bytes, processes) summed over ``root``'s process tree."""
    pss = rss = count = 0
    for pid in tree_pids(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
                pss += pss_kib(fh.read()) * 1024
            with open(f"/proc/{pid}/statm", "rb") as fh:
                rss += int(fh.read().split()[1]) * _PAGE
            count += 1
        except (OSError, IndexError, ValueError):  # gone, or not ours to read
            continue
    return pss, rss, count


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def measure(
    command: list[str],
    env: Mapping[str, str] | None = None,
    interval: float = 1.0,
    stdout: IO | int | None = None,
    on_start: Callable[[int], None] | None = None,
) -> Measured:
    """Run ``command`` to its end, sampling its process tree every ``interval`` seconds;
    ``stdout`` is the command's (``subprocess.Popen``'s: a file, ``DEVNULL``, or None for this
    process's); ``on_start`` is given the command's process id once it has started."""
    load_before = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started_at = time.time()
    started = time.perf_counter()
    child = subprocess.Popen(
        command,
        env=dict(env) if env is not None else None,
        stdout=stdout,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    if on_start is not None:
        on_start(child.pid)
    peak = {"pss": 0, "rss": 0, "processes": 0, "samples": 0, "cpu": 0.0}
    done = threading.Event()

    def sample() -> None:
        clock = time.thread_time()
        while not done.is_set():
            look = time.thread_time()
            pss, rss, count = tree_memory(child.pid)
            if count:
                peak["pss"] = max(peak["pss"], pss)
                peak["rss"] = max(peak["rss"], rss)
                peak["processes"] = max(peak["processes"], count)
                peak["samples"] += 1
            peak["cpu"] = time.thread_time() - clock
            done.wait(max(interval, (time.thread_time() - look) / BUDGET))

    sampler = threading.Thread(target=sample, name="sweep-sampler", daemon=True)
    sampler.start()
    try:
        code = child.wait()
    except BaseException:
        child.kill()
        child.wait()
        raise
    finally:
        done.set()
        sampler.join()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Measured(
        wall=wall,
        cpu=cpu,
        peak_pss=peak["pss"],
        peak_rss=peak["rss"],
        processes=peak["processes"],
        samples=peak["samples"],
        sampler_cpu=peak["cpu"],
        exit_code=code,
        load=(load_before, os.getloadavg()[0]),
        started=started_at,
    )
