"""The sweep's one sampler: a process tree's PSS, what a command cost, what the sampler
itself cost, and a measured command that dies with the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from memory_lab.sweep.sampler import measure, pss_kib, tree_memory, tree_pids

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/self/smaps_rollup"), reason="Linux /proc only"
)

# a parent that starts a child holding ~300 MB for a second
TREE = (
    "import subprocess, sys; subprocess.run([sys.executable, '-c', "
    '\'import time; b = bytearray(300 * 2**20); b[::4096] = b"x" * len(b[::4096]); '
    "time.sleep(1.5)']); sys.exit(3)"
)


def test_pss_is_read_from_smaps_rollup():
    text = "Rss:  2048 kB\nPss:  1536 kB\nPss_Anon: 1000 kB\n"
    assert pss_kib(text) == 1536
    assert pss_kib(b"Rss: 1 kB\n") == 0


def test_the_tree_of_this_process():
    pss, rss, processes = tree_memory(os.getpid())
    assert processes >= 1 and 1 << 20 < pss <= rss < 64 << 30
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert child.pid in tree_pids(os.getpid())
    finally:
        child.kill()
        child.wait()


def test_measure_counts_the_whole_tree_and_its_own_cost():
    measured = measure([sys.executable, "-c", TREE], interval=0.2)
    assert measured.exit_code == 3
    assert measured.processes == 2
    assert measured.peak_pss > 250 * 2**20  # the grandchild's 300 MB, summed over the tree
    assert measured.peak_rss >= measured.peak_pss
    assert 1.4 < measured.wall < 60 and measured.cpu > 0
    assert measured.samples >= 3
    assert measured.sampler_share < 0.05  # at 5 looks a second; at 1 a second it is 1/5


def test_a_measured_command_dies_with_its_parent(tmp_path):
    pid_file = tmp_path / "pid"
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from memory_lab.sweep.sampler import measure; "
            f"measure([sys.executable, {str(sleeper)!r}])",
        ],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.is_file() and pid_file.read_text()):
            assert time.monotonic() < deadline and parent.poll() is None
            time.sleep(0.05)
        child = int(pid_file.read_text())
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{child}") and "Z" not in _state(child):
            assert time.monotonic() < deadline, "the measured command outlived its parent"
            time.sleep(0.05)
    finally:
        os.killpg(parent.pid, signal.SIGKILL) if parent.poll() is None else None


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
