"""The Mem0 paper's RAG grid: ``rag`` at chunk sizes 128 to 8192 tokens, k = 1 and 2.

Runs the 14 configurations (and ``buffer``, the full-context row, for reference) over the given
dialogues, offline by default, and prints the summary table (evidence recall, tokens per turn,
maintenance tokens, seconds). A results folder is written as for any run (``--out``, by default
under ``results/``).

    python benchmarks/rag_grid.py [--dialogues builtin:classic] [--chunk-tokens 128 256 ...]
        [--k 1 2] [--out DIR] [--jobs 2]
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
from memory_lab.views.tables import format_summary

PAPER_CHUNKS = [128, 256, 512, 1024, 2048, 4096, 8192]
PAPER_K = [1, 2]


def grid(chunks: list[int], ks: list[int]) -> list[str]:
    """The grid's memory specs, chunk size first, then k."""
    return [f"rag:chunk_tokens={c},k={k}" for c in chunks for k in ks]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogues", nargs="+", default=["builtin:classic"])
    parser.add_argument("--chunk-tokens", nargs="+", type=int, default=PAPER_CHUNKS)
    parser.add_argument("--k", nargs="+", type=int, default=PAPER_K)
    parser.add_argument("--no-buffer", action="store_true", help="leave out the buffer row")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    specs = grid(args.chunk_tokens, args.k) + ([] if args.no_buffer else ["buffer"])
    out = args.out or Path("results") / datetime.now().strftime("rag-grid-%Y%m%d-%H%M%S")
    started = time.perf_counter()
    outcome = run_benchmark(
        resolve_memories(specs),
        load_dialogues(*args.dialogues),
        out,
        sources=args.dialogues,
        jobs=args.jobs,
    )
    results = read_results(outcome.path)
    print(format_summary(outcome.summary, results.spec))
    print(f"\nwall time: {time.perf_counter() - started:.1f} s; results: {outcome.path}")
    return 1 if outcome.failed_cells else 0


if __name__ == "__main__":
    sys.exit(main())
