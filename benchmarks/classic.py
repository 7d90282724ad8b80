"""The default comparison: the five classic memories over builtin:classic, offline.

Writes a results folder (run.json, records.jsonl, summary.csv, charts/, report.html), prints what
``memory-lab run`` prints of a run (the tables, their notes and the answer), the wall time and the
chart and report paths (docs/performance.md has the
figures measured on a 2-core machine).

    python benchmarks/classic.py [--out DIR] [--memory SPEC ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime
from pathlib import Path

from memory_lab import load_dialogues, resolve_memories, run_benchmark
from memory_lab.results.read import read_results
from memory_lab.run.prepare import CLASSIC_MEMORIES
from memory_lab.views.charts import save_charts
from memory_lab.views.finished_run import finished_run_text
from memory_lab.views.report import write_report

# The default comparison stays these five as more memories are registered (``--memory all``
# runs every registered memory).
CLASSIC_FIVE = list(CLASSIC_MEMORIES)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--memory", nargs="+", default=CLASSIC_FIVE)
    parser.add_argument("--dialogues", nargs="+", default=["builtin:classic"])
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="cells run in this many processes (default: 2, or 1 on a one-core machine)",
    )
    args = parser.parse_args()
    out = args.out or Path("results") / datetime.now().strftime("classic-%Y%m%d-%H%M%S")
    started = time.perf_counter()
    outcome = run_benchmark(
        resolve_memories(args.memory),
        load_dialogues(*args.dialogues),
        out,
        sources=args.dialogues,
        jobs=args.jobs,
    )
    wall = time.perf_counter() - started
    results = read_results(outcome.path)
    print(finished_run_text(outcome.path, outcome.summary))  # as `memory-lab run` prints it
    print(f"\nwall time: {wall:.1f} s")
    print(f"results:   {outcome.path}/run.json, records.jsonl, summary.csv")
    charts = save_charts(results)
    print(f"charts:    {', '.join(str(p) for p in charts if p.suffix == '.png')} (+ .svg)")
    print(f"report:    {write_report(outcome.path)}")
    return 1 if outcome.failed_cells else 0


if __name__ == "__main__":
    sys.exit(main())
