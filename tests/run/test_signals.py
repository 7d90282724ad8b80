"""Ctrl-C, SIGTERM and kill -9 of parallel runs: prompt stop, one line, no orphans, resumable.

Each run is the real command line in a session of its own (as a shell starts a command), held
mid-way by ``MEMORY_LAB_FAULT=record:N:hang``: the process (or thread) that writes its N-th
record stalls there like a provider call that never answers, so the signal surely lands
while cells are running and completed cells wait to be kept.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from memory_lab.cli import main
from memory_lab.results.read import RECORDS_FILE

from ..fault_runs import (
    compare,
    reference_run,
    run_argv,
    wait_for_empty_group,
)
from ..processes import CLI, session_processes, wait_until


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The dialogues, and the records of an uninterrupted run of them."""
    return reference_run(tmp_path_factory.mktemp("signals"))


@pytest.fixture
def start():
    """Start the CLI in a session of its own, held at its N-th record; whatever the test
    asserts, nothing of the run's process group outlives the test."""
    with session_processes() as start_process:

        def start(argv: list[str], hang_at: int) -> subprocess.Popen:
            fault = {"MEMORY_LAB_FAULT": f"record:{hang_at}:hang"}
            return start_process(
                [*CLI, *argv], env=fault, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )

        yield start


def committed_cells(out: Path) -> int:
    path = out / RECORDS_FILE
    return path.read_text("utf-8").count('"type": "cell"') if path.exists() else 0


def running_parts(out: Path) -> int:
    parts = out / "parts"
    return len(list(parts.glob("*.partial"))) if parts.exists() else 0


def interrupt(proc: subprocess.Popen, sig: int, group: bool) -> tuple[int, str, float]:
    """Send ``sig`` (to the whole group, as a terminal's Ctrl-C does); exit code, stderr, secs."""
    started = time.monotonic()
    if group:
        os.killpg(proc.pid, sig)
    else:
        os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err, time.monotonic() - started


def assert_resumes_to_the_reference(out: Path, reference: Path, monkeypatch) -> None:
    monkeypatch.delenv("MEMORY_LAB_FAULT", raising=False)
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    damage = compare(out, reference)
    assert (damage.lost, damage.duplicated) == (0, 0)
    assert damage.same_records and damage.same_summary
    assert not (out / "parts").exists()


def test_ctrl_c_stops_a_jobs_run_at_once_keeps_its_cells_and_resume_completes_it(
    reference, start, tmp_path, monkeypatch
):
    dialogues, ref = reference
    out = tmp_path / "run"
    # each worker completes its first cell (at most 11 records) and stalls in its second
    proc = start(run_argv(dialogues, out, "jobs2"), hang_at=12)
    wait_until(lambda: committed_cells(out) == 2 and running_parts(out) == 2, proc)
    code, err, seconds = interrupt(proc, signal.SIGINT, group=True)
    assert code == 130 and seconds < 10
    assert err == (
        "memory-lab: interrupted; completed cells are kept; continue with: "
        f"memory-lab run --resume {out}\n"
    )
    assert wait_for_empty_group(proc.pid, 5) == []  # no orphan worker
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "interrupted" and committed_cells(out) == 2
    assert_resumes_to_the_reference(out, ref, monkeypatch)
    assert json.loads((out / "run.json").read_text())["resumed"][0]["cells_kept"] == 2


def test_kill_9_of_the_driver_takes_its_workers_with_it_and_resume_works(
    reference, start, tmp_path, monkeypatch
):
    dialogues, ref = reference
    out = tmp_path / "run"
    proc = start(run_argv(dialogues, out, "jobs2"), hang_at=12)
    wait_until(lambda: running_parts(out) == 2, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert wait_for_empty_group(proc.pid, 5) == []  # the workers died with their parent
    assert json.loads((out / "run.json").read_text())["status"] == "running"
    assert_resumes_to_the_reference(out, ref, monkeypatch)


def test_sigterm_stops_a_concurrency_run_and_resume_completes_it(
    reference, start, tmp_path, monkeypatch
):
    dialogues, ref = reference
    out = tmp_path / "run"
    # one thread stalls at the run's 12th record; the others finish their cells
    proc = start(run_argv(dialogues, out, "concurrency4"), hang_at=12)
    ended = lambda: committed_cells(out) + len(list(out.glob("parts/cell-*.jsonl")))  # noqa: E731
    wait_until(lambda: running_parts(out) == 1 and ended() == 5, proc)
    code, err, seconds = interrupt(proc, signal.SIGTERM, group=False)
    assert code == 130 and seconds < 10 and len(err.splitlines()) == 1
    assert f"continue with: memory-lab run --resume {out}" in err and "Traceback" not in err
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    assert_resumes_to_the_reference(out, ref, monkeypatch)
