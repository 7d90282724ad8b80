"""The worker channel's waits are bounded: a hung or stopped worker fails its cell in one line
within the limit, instead of holding the run forever."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from memory_lab.errors import ConfigError, EnvironmentProblem
from memory_lab.memories.worker_channel import SILENCE_ENV, Worker, WorkerSystem, silence_limit

SCRIPT = """
import json, sys, time
for line in sys.stdin:
    op = json.loads(line)["op"]
    if op == "hang":
        time.sleep(3600)
    print(json.dumps({"done": op}), flush=True)
"""


class Failure(EnvironmentProblem):
    pass


@pytest.fixture
def worker(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(SCRIPT)
    system = WorkerSystem("Fake", "fake", Failure, script, lambda: [], "a test")
    made = Worker(system, sys.executable, tmp_path / "cell", answer=lambda message: None)
    yield made
    made.proc.kill()
    made.close()


def test_a_silent_worker_fails_its_request_within_the_limit(worker, monkeypatch):
    monkeypatch.setenv(SILENCE_ENV, "1.5")
    assert worker.request("ok") == "ok"
    started = time.monotonic()
    with pytest.raises(Failure, match=r"Fake's worker sent nothing for 1.5 s during 'hang'"):
        worker.request("hang")
    assert time.monotonic() - started < 10
    assert worker.proc.poll() is not None  # killed, not left behind


def test_a_stopped_worker_fails_its_request_within_the_limit(worker, monkeypatch):
    monkeypatch.setenv(SILENCE_ENV, "1")
    os.kill(worker.proc.pid, signal.SIGSTOP)
    with pytest.raises(Failure, match="hung or stopped"):
        worker.request("ok")
    assert worker.proc.wait(5) == -signal.SIGKILL


@pytest.mark.parametrize("raw", ["0", "-1", "soon", "inf", "nan"])
def test_the_limit_is_a_positive_number(raw, monkeypatch):
    monkeypatch.setenv(SILENCE_ENV, raw)
    with pytest.raises(ConfigError, match=SILENCE_ENV):
        silence_limit()


def test_an_environment_python_that_never_answers_is_one_error(tmp_path, monkeypatch):
    """A hindsight_python that sleeps had ended in a TimeoutExpired traceback."""
    from memory_lab.memories import worker_channel

    monkeypatch.setattr(worker_channel, "CHECK_TIMEOUT", 1.0)
    sleeper = tmp_path / "python"
    sleeper.write_text("#!/bin/sh\nsleep 30\n")
    sleeper.chmod(0o755)
    script = tmp_path / "worker.py"
    script.write_text(SCRIPT)
    system = WorkerSystem("Fake", "fake", Failure, script, lambda: [], "a test")
    monkeypatch.setattr(worker_channel.shutil, "which", lambda name: "/usr/bin/unshare")
    with pytest.raises(Failure, match="did not answer a start-up check within 1 s"):
        worker_channel.check_private(system, sleeper)
