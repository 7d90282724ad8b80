"""What ``--executor ray`` costs against ``--jobs 2`` on the default comparison.

Runs the five classic memories over ``builtin:classic`` offline (``benchmarks/classic.py``'s
run) with ``--jobs 2`` and with ``--executor ray`` (a local Ray of 2 CPUs that the run starts
and stops itself, as ``memory-lab run --executor ray`` does), checks that both give the same
records apart from timings, and prints each wall time and the overhead of Ray (its start-up,
worker start-up and task round trips).

    python benchmarks/ray_overhead.py [--repeat 1] [--memory SPEC ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.classic import CLASSIC_FIVE  # noqa: E402
from memory_lab import load_dialogues, resolve_memories, run_benchmark  # noqa: E402
from memory_lab.log.records import without_timings  # noqa: E402


def records(folder: Path) -> list[dict]:
    rows = []
    for line in (folder / "records.jsonl").read_text("utf-8").splitlines():
        rows.append(without_timings(json.loads(line)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory", nargs="+", default=CLASSIC_FIVE)
    parser.add_argument("--dialogues", nargs="+", default=["builtin:classic"])
    parser.add_argument("--repeat", type=int, default=1, help="runs of each executor")
    args = parser.parse_args()
    memories = resolve_memories(args.memory)
    dialogues = load_dialogues(*args.dialogues)
    executors = {"--jobs 2": {"jobs": 2}, "--executor ray": {"executor": "ray", "jobs": 2}}
    walls: dict[str, list[float]] = {name: [] for name in executors}
    with tempfile.TemporaryDirectory(prefix="ray-overhead-") as tmp:
        for n in range(args.repeat):
            outs = {}
            for name, settings in executors.items():
                out = Path(tmp) / f"{name.strip('-').replace(' ', '-')}-{n}"
                started = time.perf_counter()
                outcome = run_benchmark(memories, dialogues, out, progress=False, **settings)
                walls[name].append(time.perf_counter() - started)
                if outcome.failed_cells:
                    print(f"{name}: {outcome.failed_cells} cell(s) failed")
                    return 1
                outs[name] = out
                print(f"{name:>15}: {walls[name][-1]:6.1f} s", flush=True)
            same = records(outs["--jobs 2"]) == records(outs["--executor ray"])
            print(f"records identical apart from timings: {same}")
            if not same:
                return 1
    jobs, ray = (min(walls[name]) for name in executors)
    cells = len(memories) * len(dialogues)
    print(
        f"\n{cells} cells; best of {args.repeat}: --jobs 2 {jobs:.1f} s, --executor ray "
        f"{ray:.1f} s: overhead {ray - jobs:+.1f} s ({ray / jobs:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
