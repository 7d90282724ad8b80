"""Executors: a worker process that dies mid-cell fails that cell only; the run never hangs."""

from __future__ import annotations

import sys

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.memories import unregister_memory

from ..small_run import KOREAN_DIALOGUE

# A memory that takes its worker process down with it, as the OOM killer would.
CRASHING = """\
import os
import signal

from memory_lab import MemoryResources
from memory_lab.memories import register_memory
from memory_lab.memories.base import TextMemory


class Crashing(TextMemory):
    def context(self, query):
        return ""

    def remember(self, user, assistant):
        os.kill(os.getpid(), signal.SIGKILL)


@register_memory("crashing", "kills its own process on the first exchange")
def crashing(res: MemoryResources) -> Crashing:
    return Crashing()
"""


def test_a_worker_killed_mid_cell_fails_that_cell_and_the_run_goes_on(tmp_path, monkeypatch):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "crashing.py").write_text(CRASHING, "utf-8")
    monkeypatch.syspath_prepend(str(plugins))
    monkeypatch.setenv("PYTHONPATH", str(plugins))  # for the workers
    try:
        dialogues = tmp_path / "dialogues"  # Korean: the workers load no English model
        dialogues.mkdir()
        for n in (1, 2):
            text = KOREAN_DIALOGUE.replace("id: ko-mini", f"id: ko-{n}")
            (dialogues / f"ko-{n}.yaml").write_text(text, "utf-8")
        # both workers die on the first two cells; new workers run the buffer cells
        outcome = run_benchmark(
            resolve_memories(["crashing:crashing", "buffer"]),
            load_dialogues(dialogues),
            tmp_path / "run",
            jobs=2,
            progress=False,
        )
    finally:
        unregister_memory("crashing")
        sys.modules.pop("crashing", None)
    cells = read_results(outcome.path).cells.set_index(["memory", "dialogue"])
    assert outcome.failed_cells == 2
    crashed = cells.loc["crashing"]
    assert (crashed["error"] == "worker process died (killed by SIGKILL)").all()
    assert (crashed["status"] == "failed").all() and (cells.loc["buffer", "status"] == "ok").all()
