"""The embedding floor of an offline comparison: the least CPU time its embeddings can take here.

What is embedded, and how each kind is timed, is ``memory_lab/sweep/floor.py``'s (the floor a
sweep measures with ``measure: {floor: true}``); this prints it for one source and memory set,
in CPU seconds and in wall seconds on ``--jobs`` cores. It is a lower bound: generated
summaries, repeated sentences of overlapping contexts and everything that is not embedding
come on top. Compare it with a target before trying to meet the target by tuning anything else.

    python benchmarks/embedding_floor.py builtin:classic
    python benchmarks/embedding_floor.py locomo:/path/to/locomo10.zip --jobs 2 --memory vector rag
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_lab.sweep.floor import floor, floor_total  # noqa: E402

SIX = ["window", "vector", "rag", "hybrid", "summary_buffer", "buffer"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="builtin:NAME, a folder/file, or FORMAT:PATH")
    parser.add_argument("--memory", nargs="+", default=SIX, help="memory specs (default: six)")
    parser.add_argument("--jobs", type=int, default=2, help="cores the run uses (default 2)")
    parser.add_argument("--sample", type=int, default=120, help="texts timed per kind")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    kinds = floor(args.source, args.memory, sample=args.sample, seed=args.seed)
    print(f"{args.source}: load average {os.getloadavg()[0]:.1f}, one thread per engine")
    print(f"{'what is embedded':44} {'texts':>7} {'ms/text':>8} {'core-s':>8}")
    for name, (texts, per) in kinds.items():
        print(f"{name:44} {texts:7d} {per * 1000:8.1f} {texts * per:8.0f}")
    total = floor_total(kinds)
    print(f"{'floor':44} {'':7} {'':8} {total:8.0f}")
    print(f"\nfloor on {args.jobs} cores: {total / args.jobs:.0f} s wall for the embeddings alone")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
