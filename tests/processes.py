"""Real processes for the tests, each in a session of its own as a shell starts a command; none
outlives its test (its whole process group is killed at the end)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .fault_runs import wait_for_empty_group

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "memory_lab.cli"]  # the command line, as ``memory-lab``


@contextlib.contextmanager
def session_processes() -> Iterator[Callable[..., subprocess.Popen]]:
    """A ``start(argv, env=None, **popen_options)`` that runs ``argv`` in a new session with
    this checkout's ``memory_lab`` (``env`` added to the environment); on leaving, every
    process group started that still has a live member is killed."""
    started: list[subprocess.Popen] = []

    def start(argv: list[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(
            argv,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            start_new_session=True,
            text=True,
            **kwargs,
        )
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            if wait_for_empty_group(proc.pid, 0):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def wait_until(condition: Callable[[], object], proc: subprocess.Popen, seconds: float = 120):
    """Wait for ``condition()``; fail with the process's stderr if it ends first, or after
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the run never got there"
        time.sleep(0.05)


@contextlib.contextmanager
def serve_process(
    args: list[str], env: dict[str, str], log: Path, cwd: Path | None = None
) -> Iterator[tuple[subprocess.Popen, object]]:
    """``memory-lab serve ARGS`` as a user starts it (stderr into ``log``), once it accepts:
    yields the process and an ``httpx.Client`` on its URL; SIGTERM when the block ends (the
    exit code is then ``proc.returncode``)."""
    import re

    import httpx

    with log.open("w") as stderr:
        server = subprocess.Popen(
            [*CLI, "serve", "--port", "0", *args],
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        try:
            line = server.stdout.readline()
            url = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            assert url, line
            with httpx.Client(base_url=url.group(), timeout=120) as http:
                for _ in range(200):  # until uvicorn accepts
                    try:
                        http.get("/memories")
                        break
                    except httpx.ConnectError:
                        time.sleep(0.05)
                yield server, http
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
