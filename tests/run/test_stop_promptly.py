"""SIGTERM stops a ``--concurrency`` run within seconds, whatever its cell threads are doing.

Cell threads are daemons, but a library's worker threads need not be: a memory waiting on a
``concurrent.futures`` pool (as LangChain's batch calls do) kept the interpreter from exiting
until the pool's task ended, which Python joins at exit (12-24 s measured on real runs). The
memory here stalls in such a pool for a minute; the run must still exit 130 within 3 s, with
run.json ``interrupted``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from ..fault_runs import write_dialogues
from ..processes import CLI, wait_until

ROOT = Path(__file__).resolve().parents[2]

STALLING = '''\
"""A memory whose every exchange waits on a minute's task in a thread pool."""

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from memory_lab import Exchange, MemoryResources, Query, Recall
from memory_lab.memories import register_memory

POOL = ThreadPoolExecutor(2)


class Stalling:
    def __init__(self, marker: str):
        self.marker = marker

    def observe(self, ex: Exchange) -> None:
        Path(self.marker).touch()
        POOL.submit(time.sleep, 60).result()

    def end_session(self, session) -> None:
        pass

    def recall(self, query: Query) -> Recall:
        return Recall(())

    def snapshot(self) -> dict:
        return {}

    def close(self) -> None:
        pass


@register_memory("stalling", "waits on a pool")
def stalling(res: MemoryResources, marker: str = "") -> Stalling:
    return Stalling(marker)
'''


def test_sigterm_stops_a_concurrency_run_within_3_seconds(tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "stalling.py").write_text(STALLING, "utf-8")
    marker = tmp_path / "stalled"
    dialogues = write_dialogues(tmp_path / "dialogues")
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": f"{plugins}{os.pathsep}{ROOT}", "HF_HUB_OFFLINE": "1"}
    argv = [
        *CLI, "run", "--dialogues", dialogues, "--memory", f"stalling:stalling:marker={marker}",
        "window:k=1", "--concurrency", "4", "--out", str(out), "--quiet",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(marker.exists, proc)
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGTERM)
        sent = time.monotonic()
        code = proc.wait(60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert code == 130, err
    assert took < 3.0, f"exited {took:.1f} s after SIGTERM"
    assert err.splitlines()[-1].startswith("memory-lab: interrupted; completed cells are kept")
    assert json.loads((out / "run.json").read_text("utf-8"))["status"] == "interrupted"
