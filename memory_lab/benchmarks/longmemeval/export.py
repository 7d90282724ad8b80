"""LongMemEval's hypotheses file: ``{question_id, hypothesis}`` lines, one per question, which
its own judge (``src/evaluation/evaluate_qa.py``) grades (``memory-lab export longmemeval``)."""

from __future__ import annotations

import json
from pathlib import Path

from memory_lab.benchmarks.longmemeval.importer import QUESTION_ID_KEY
from memory_lab.errors import BadInput, ConfigError
from memory_lab.results.read import read_results


def export_hypotheses(results_dir: str | Path, out: str | Path, memory: str | None = None) -> int:
    """Write ``{question_id, hypothesis}`` lines for LongMemEval's own judge; returns the count.

    With several memories in the run, ``memory`` selects one (required then).
    """
    probes = read_results(results_dir).probes
    if probes.empty or "probe_metadata" not in probes:
        raise BadInput(f"{results_dir}: no LongMemEval probes in this run")
    memories = sorted(probes["memory"].unique())
    if memory is None:
        if len(memories) > 1:
            raise ConfigError(f"run has several memories; choose one with --memory: {memories}")
        memory = memories[0]
    if memory not in memories:
        raise ConfigError(f"memory {memory!r} not in this run (has: {', '.join(memories)})")
    rows = probes[probes["memory"] == memory]
    count = 0
    with open(out, "w", encoding="utf-8") as fh:
        for meta, reply in zip(rows["probe_metadata"], rows["reply"], strict=True):
            if isinstance(meta, dict) and meta.get(QUESTION_ID_KEY):
                fh.write(
                    json.dumps({QUESTION_ID_KEY: meta[QUESTION_ID_KEY], "hypothesis": reply}) + "\n"
                )
                count += 1
    if not count:
        raise BadInput(f"{results_dir}: no LongMemEval probes in this run")
    return count
