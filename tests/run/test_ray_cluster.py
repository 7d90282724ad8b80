"""A sweep on a Ray cluster of two nodes loses no record when a node dies: started again, it
ends it.

The cluster is started as a user would (``ray start --head``, then ``ray start --address`` for a
second node; both on loopback, one CPU each, token authentication, HOME in a temporary folder
so nothing lands in the user's ``~/.ray``). ``memory-lab sweep`` runs a spec that names the
cluster (``options: {executor: ray, ray_address: ...}``); once a cell is running on the second
node, that node's raylet is killed (its workers die with it). The cell fails, the others finish
on the head node, the sweep says so, and the sweep started again resumes the run (``--resume``
on the cluster), which redoes it: the records are the records of one uninterrupted job, none
lost, none twice.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from ..fault_runs import MEMORIES, record_key, records_of, reference_run

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).parent / "ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every live process."""
    found = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        found[int(entry.name)] = (parent, cmdline)
    return found


def descendants(pid: int, table: dict[int, tuple[int, str]]) -> list[int]:
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, (pp, _) in table.items() if pp == parent]
        out += children
        todo += children
    return out


class Cluster:
    """Two Ray nodes on loopback, started and stopped by their own ``ray start`` processes."""

    def __init__(self, folder: Path):
        self.port = free_port()
        self.node_port = free_port()
        self.temp = tempfile.mkdtemp(prefix="mlray-cl-", dir="/tmp")
        home = folder / "home"
        home.mkdir()
        self.env = {
            **os.environ,
            "HOME": str(home),
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONPATH": str(ROOT),
        }
        common = ["--num-cpus=1", "--disable-usage-stats", f"--temp-dir={self.temp}"]
        self._start(["--head", f"--port={self.port}", "--include-dashboard=false", *common])
        self._start(
            [f"--address=127.0.0.1:{self.port}", f"--node-manager-port={self.node_port}", *common]
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _start(self, args: list[str]) -> None:
        subprocess.run(
            [RAY, "start", *args], env=self.env, check=True, capture_output=True, timeout=120
        )

    def second_raylet(self) -> int | None:
        for pid, (_, cmd) in processes().items():
            if "raylet" in cmd and f"--node_manager_port={self.node_port}" in cmd:
                return pid
        return None

    def busy_on_second_node(self) -> bool:
        raylet = self.second_raylet()
        table = processes()
        return raylet is not None and any(
            table[p][1].startswith("ray::_ray_cell") for p in descendants(raylet, table)
        )

    def kill_second_node(self) -> None:
        raylet = self.second_raylet()
        assert raylet is not None
        for pid in [raylet, *descendants(raylet, processes())]:
            with _gone():
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        table = processes()
        mine = [p for p, (_, cmd) in table.items() if self.temp in cmd or self.address in cmd]
        for pid in {q for p in mine for q in [p, *descendants(p, table)]}:
            with _gone():
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.temp, ignore_errors=True)


class _gone:
    """Ignore a process that ended meanwhile."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, *rest) -> bool:
        return kind is ProcessLookupError


@pytest.fixture
def cluster(tmp_path):
    made = Cluster(tmp_path)
    try:
        yield made
    finally:
        made.stop()


SPEC = """\
name: on-a-cluster
memories: [{memories}]
sources: [{{key: both, dialogues: '{dialogues}'}}]
options: {{executor: ray, ray_address: '{address}', no_cache: true}}
"""


def test_a_node_dying_mid_sweep_loses_no_record_after_resume(cluster, tmp_path):
    dialogues, one_job = reference_run(tmp_path / "data")
    spec = tmp_path / "cluster.yaml"
    spec.write_text(
        SPEC.format(memories=", ".join(MEMORIES), dialogues=dialogues, address=cluster.address)
    )
    sweep = [sys.executable, "-m", "memory_lab.cli", "sweep", str(spec), "--out", str(tmp_path)]
    out = tmp_path / "both"
    run = subprocess.Popen(
        sweep,
        env=cluster.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not cluster.busy_on_second_node():
            assert run.poll() is None and time.monotonic() < deadline, "no cell on node 2"
            time.sleep(0.05)
        cluster.kill_second_node()
        code = run.wait(240)
    finally:
        if run.poll() is None:
            run.kill()
    stderr = run.stderr.read()
    assert code == 1 and "both: exit 1" in stderr, stderr  # the node's cell failed, said so
    assert "ray task failed" in stderr, stderr
    resumed = subprocess.run(sweep, env=cluster.env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"--resume {out} --executor ray --ray-address {cluster.address}" in resumed.stderr
    got, want = records_of(out), records_of(one_job)
    assert Counter(map(record_key, got)) == Counter(map(record_key, want))  # none lost or twice
    assert sorted(got, key=repr) == sorted(want, key=repr)  # and the same records
