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

from memory_lab import load_dialogues, resolve_memories, run_benchmark
from memory_lab.cli import main
from memory_lab.log import faults
from memory_lab.run.benchmark import resume_benchmark

from ..fault_runs import MEMORIES, records_of, reference_run

ray = pytest.importorskip("ray")
ROOT = Path(__file__).resolve().parents[2]


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
    assert info["config"]["run"]["executor"] == "ray" and info["status"] == "complete"
    assert not (outcome.path / "parts").exists()


def test_ctrl_c_stops_a_ray_run_with_130_and_resume_gives_the_same_records(
    cluster, reference, tmp_path, monkeypatch, capsys
):
    dialogues, one_job = reference
    out = tmp_path / "stopped"
    # Ctrl-C as a terminal delivers it: in the whole suite something earlier left SIGINT
    # ignored in the pytest process (twice in CI: SigIgn set, the test waiting forever), which
    # neither this run nor the tests before it in this file do alone
    signal.signal(signal.SIGINT, signal.default_int_handler)
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
    assert main([*argv, "--executor", "ray"]) == 3  # the environment lacks a package
    err = capsys.readouterr().err
    assert "--executor ray needs the ray package" in err and "memory-lab[ray]" in err
    assert not out.exists()
    assert main([*argv, "--ray-address", "auto"]) == 2
    assert "--ray-address needs --executor ray" in capsys.readouterr().err


def ray_processes_of(temp: str) -> list[str]:
    """Live processes naming the run's Ray folder, or descended from one (``pid command``)."""
    from memory_lab.run.executors.watch import ray_processes

    found = []
    for pid in ray_processes(temp):
        try:
            found.append(f"{pid} {Path(f'/proc/{pid}/cmdline').read_bytes()[:120]!r}")
        except OSError:
            pass
    return found


def started_ray_folder(proc: subprocess.Popen) -> str:
    """The ``/tmp/mlray-*`` folder of the local Ray a CLI run started (named by its GCS)."""
    from memory_lab.run.executors.watch import ray_processes

    for _ in range(600):
        for entry in Path("/tmp").glob("mlray-*"):
            if not entry.name.startswith("mlray-test-") and any(
                _parent_chain_has(pid, proc.pid) for pid in ray_processes(str(entry))
            ):
                return str(entry)
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.1)
    raise AssertionError("the run started no Ray")


def _parent_chain_has(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(text[text.rindex(")") + 2 :].split()[1])
    return False


def gone_within(temp: str, seconds: float) -> list[str]:
    """What of the run's Ray is still there after up to ``seconds`` (empty: all gone)."""
    deadline = time.monotonic() + seconds
    while True:
        left = ray_processes_of(temp) + ([temp] if os.path.exists(temp) else [])
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


@pytest.fixture
def ray_cli_run(reference, tmp_path):
    """A CLI run with its own local Ray, stalled at its second part; yields (proc, out, folder),
    and kills what is left of it after the test."""
    dialogues, _ = reference
    out = tmp_path / "stopped"
    home = tmp_path / "home"  # the user's home, empty: nothing of the run may land there
    home.mkdir()
    env = {
        **os.environ,
        "MEMORY_LAB_FAULT": "part:2:hang",
        "PYTHONPATH": str(ROOT),
        "HOME": str(home),
    }
    argv = ["run", "--memory", *MEMORIES, "--dialogues", dialogues, "--out", str(out), "--quiet"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_lab.cli", *argv, "--executor", "ray", "--jobs", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    folder = None
    try:
        folder = started_ray_folder(proc)
        wait_for_a_lasting_part(out / "parts", proc.poll)
        yield proc, out, folder
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if folder is not None:
            from memory_lab.run.executors.watch import kill_all, ray_processes

            kill_all(ray_processes(folder))
            shutil.rmtree(folder, ignore_errors=True)


def test_sigterm_stops_a_ray_run_with_130_the_resume_line_and_no_ray_left(ray_cli_run):
    proc, out, folder = ray_cli_run
    os.kill(proc.pid, signal.SIGTERM)  # the driver only, as `kill PID` does
    code = proc.wait(60)
    err = proc.stderr.read()
    assert code == 130, err
    assert err.splitlines()[-1] == (
        "memory-lab: interrupted; completed cells are kept; continue with: "
        f"memory-lab run --resume {out}"
    )
    assert "Traceback" not in err and "SIGTERM" not in err
    assert json.loads((out / "run.json").read_text("utf-8"))["status"] == "interrupted"
    assert gone_within(folder, 10) == []  # Ray's processes and folder


def test_kill_9_of_a_ray_runs_driver_leaves_no_ray_process_or_folder(ray_cli_run):
    proc, _, folder = ray_cli_run
    assert ray_processes_of(folder)  # Ray is up
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert gone_within(folder, 10) == []  # within seconds, not Ray's minute


def gcs_address_of(folder: str) -> str:
    """``IP:PORT`` of the GCS server of the local Ray in ``folder`` (from its command line)."""
    from memory_lab.run.executors.watch import ray_processes

    for pid in ray_processes(folder):
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        if args and args[0].endswith("gcs_server"):
            given = dict(a.lstrip("-").split("=", 1) for a in args[1:] if "=" in a)
            port = next(Path(folder, "session_latest").glob("gcs_server_port_*")).read_text()
            return f"{given['node-ip-address']}:{port.strip()}"
    raise AssertionError("no GCS server in the run's Ray")


def test_the_local_ray_of_a_run_refuses_clients_without_its_token(ray_cli_run, tmp_path):
    """Ray's servers listen on every interface (its binaries bind the wildcard address), so the
    run's Ray requires a token of its own: in its folder (0600), never in ~/.ray."""
    _, _, folder = ray_cli_run
    token = Path(folder) / "auth_token"
    assert token.stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "home" / ".ray").exists()
    outsider_home = tmp_path / "outsider"
    outsider_home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["HOME"] = str(outsider_home)
    join = (
        f"import ray; ray.init(address={gcs_address_of(folder)!r}, logging_level='ERROR'); "
        "print('joined', ray.cluster_resources())"
    )
    done = subprocess.run(
        [sys.executable, "-c", join], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode != 0 and "joined" not in done.stdout
    assert "token" in done.stderr.lower() or "authentication" in done.stderr.lower()
