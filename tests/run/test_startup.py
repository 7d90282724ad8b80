"""Loading models and engines is the process's startup, timed apart and charged to no memory:
the first memory to run used to be charged with it (34 s against 1-3 s for the others)."""

from __future__ import annotations

import pandas as pd

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.results.summary import summarize
from memory_lab.run.context import RunModels

from ..conftest import FIXTURES


def test_each_process_loads_its_engines_once_before_its_first_cell():
    models = RunModels.create()
    first = models.warm_once()
    assert first is not None and first > 0
    assert models.warm_once() is None  # the next cells: nothing to load, nothing recorded


def test_startup_is_recorded_apart_and_seconds_are_the_memory_s_own(tmp_path):
    dialogues = load_dialogues(FIXTURES / "dialogues" / "mini.yaml")
    outcome = run_benchmark(
        resolve_memories(["window", "buffer"]), dialogues, tmp_path / "run", progress=False
    )
    assert outcome.failed_cells == 0
    results = read_results(outcome.path, prompts=False)
    startup = results.cells["startup_seconds"]
    assert startup.notna().sum() == 1 and startup.iloc[0] > 0  # one process: its first cell
    summary = summarize(results).set_index("memory")
    for memory in ("window", "buffer"):
        turns = results.turns[results.turns["memory"] == memory]
        probes = results.probes[results.probes["memory"] == memory]
        own = turns["seconds"].sum() + pd.to_numeric(probes["recall_seconds"]).sum()
        assert abs(summary.loc[memory, "seconds"] - own) < 1e-9
        # the answering model's calls are not the memory's work
        assert summary.loc[memory, "seconds"] < turns["seconds"].sum() + probes["seconds"].sum()
