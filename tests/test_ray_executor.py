"""``--executor ray``: cells as Ray tasks give the records of one job, stop on Ctrl-C, resume.

One local Ray (2 CPUs, no dashboard, its files in a short temporary folder: Ray's socket paths
must fit in ~107 characters) serves the whole module; runs in this process use it as it is,
and (slow test) a run of the command line joins it with ``--ray-address`` as it would join a
cluster, its tasks getting the driver's ``memory_lab`` through ``runtime_env``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from memory_lab import faults, load_dialogues, resolve_memories, run_benchmark
from memory_lab.benchmark import resume_benchmark
from memory_lab.cli import main

from .fault_runs import MEMORIES, records_of, reference_run

ray = pytest.importorskip("ray")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cluster():
    """A local Ray with 2 CPUs for the module; its address, for runs that join it."""
    temp = tempfile.mkdtemp(prefix="mlray-test-", dir="/tmp" if os.path.isdir("/tmp") else None)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=temp,
        logging_level="ERROR",
        log_to_driver=False,
    )
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Two Korean dialogues, and the records of one job running them through 3 memories."""
    return reference_run(tmp_path_factory.mktemp("ray"))


def wait_for_a_lasting_part(parts: Path, alive, seconds: float = 120) -> None:
    """Wait until a complete part has been there for a second: the driver is stalled.

    ``alive()`` returns None while the run goes on."""
    first_seen: dict[str, float] = {}
    deadline = time.monotonic() + seconds
    while True:
        assert alive() is None, "the run ended before it stalled"
        assert time.monotonic() < deadline, "the run never stalled at a part"
        now = time.monotonic()
        names = {p.name for p in parts.glob("cell-*.jsonl")} if parts.exists() else set()
        first_seen = {n: first_seen.get(n, now) for n in names}
        if any(now - t > 1.0 for t in first_seen.values()):
            return
        time.sleep(0.1)


def test_ray_tasks_give_the_records_of_one_job(cluster, reference, tmp_path):
    dialogues, one_job = reference
    outcome = run_benchmark(
        resolve_memories(MEMORIES),
        load_dialogues(dialogues),
        tmp_path / "ray",
        sources=[dialogues],
        executor="ray",
        progress=False,
    )
    assert outcome.failed_cells == 0
    assert records_of(outcome.path) == records_of(one_job)
    info = json.loads((outcome.path / "run.json").read_text("utf-8"))
    assert info["config"]["executor"] == "ray" and info["status"] == "complete"
    assert not (outcome.path / "parts").exists()


def test_ctrl_c_stops_a_ray_run_with_130_and_resume_gives_the_same_records(
    cluster, reference, tmp_path, monkeypatch, capsys
):
    dialogues, one_job = reference
    out = tmp_path / "stopped"
    # the driver stalls once it has written its second part (complete, not yet appended), as on
    # a slow disk, so Ctrl-C surely lands mid-run with a part to adopt
    faults._counts.clear()
    monkeypatch.setenv("MEMORY_LAB_FAULT", "part:2:hang")
    stalled = threading.Event()

    def ctrl_c() -> None:
        try:
            wait_for_a_lasting_part(out / "parts", lambda: None)
        finally:
            stalled.set()
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c, daemon=True).start()
    argv = ["run", "--memory", *MEMORIES, "--dialogues", dialogues, "--out", str(out), "--quiet"]
    code = main([*argv, "--executor", "ray"])
    assert stalled.is_set()
    monkeypatch.delenv("MEMORY_LAB_FAULT")
    assert code == 130
    assert f"memory-lab run --resume {out}" in capsys.readouterr().err
    assert json.loads((out / "run.json").read_text("utf-8"))["status"] == "interrupted"
    assert len(records_of(out)) < len(records_of(one_job))

    resumed = resume_benchmark(out, executor="ray", progress=False)
    assert resumed.failed_cells == 0
    assert records_of(out) == records_of(one_job)
    assert json.loads((out / "run.json").read_text("utf-8"))["resumed"][-1]["cells_adopted"] >= 1


@pytest.mark.slow
def test_a_run_joining_a_cluster_by_address_stops_on_ctrl_c_and_resumes(
    cluster, reference, tmp_path
):
    dialogues, one_job = reference
    out = tmp_path / "stopped"
    # the driver stalls once it has written the second part (complete, not yet appended), as on
    # a slow disk: Ctrl-C surely lands mid-run with a part to adopt
    env = {**os.environ, "MEMORY_LAB_FAULT": "part:2:hang", "PYTHONPATH": str(ROOT)}
    argv = ["run", "--memory", *MEMORIES, "--dialogues", dialogues, "--out", str(out), "--quiet"]
    argv += ["--executor", "ray", "--ray-address", cluster]
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_lab.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        wait_for_a_lasting_part(out / "parts", proc.poll)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C
        code = proc.wait(60)
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert code == 130, stderr
    assert f"memory-lab run --resume {out}" in stderr
    assert json.loads((out / "run.json").read_text("utf-8"))["status"] == "interrupted"
    assert len(records_of(out)) < len(records_of(one_job))

    resumed = resume_benchmark(out, executor="ray", progress=False)
    assert resumed.failed_cells == 0
    assert records_of(out) == records_of(one_job)
    info = json.loads((out / "run.json").read_text("utf-8"))
    assert info["resumed"][-1]["cells_adopted"] >= 1


def test_without_ray_the_run_says_which_option_needs_it(reference, tmp_path, monkeypatch, capsys):
    dialogues, _ = reference
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    out = tmp_path / "no-ray"
    argv = ["run", "--memory", "buffer", "--dialogues", dialogues, "--out", str(out)]
    assert main([*argv, "--executor", "ray"]) == 2
    err = capsys.readouterr().err
    assert "--executor ray needs the ray package" in err and "memory-lab[ray]" in err
    assert not out.exists()
    assert main([*argv, "--ray-address", "auto"]) == 2
    assert "--ray-address needs --executor ray" in capsys.readouterr().err
