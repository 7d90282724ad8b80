"""Do a memory's seconds depend on the order its cells run in? Two runs, two orders.

Runs the same dialogues twice through the same memories, offline, one job, each run with a
cold cache of its own (a fresh ``--cache-dir``): once with the memories in the order given,
once reversed. ``vector`` and ``hybrid`` embed the same texts, and the run's cache shares the
vectors: whichever runs first computes them. Each memory's seconds (the summary's ``seconds``:
its turns and probe reads, ``memory_lab/work_clock.py`` charging the vectors it was served from
the cache what they cost to compute) are printed for both orders with their ratio, and the
offline reader's seconds (answering, the instrument's time, in no memory's seconds) beside them.

    python benchmarks/cell_order.py --dialogues "beam:BEAM/chats#scale=100K,conversations=1"
    python benchmarks/cell_order.py --dialogues builtin:classic --memory vector hybrid

Seconds vary with the machine's load; the ratio between the orders is what this measures.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd


def run(dialogues: str, memories: list[str], out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One cold run of ``memories`` in this order: its summary and its probes' answer seconds
    per memory."""
    cmd = [sys.executable, "-m", "memory_lab.cli", "run", "--dialogues", dialogues]
    cmd += ["--memory", *memories, "--out", str(out / "run"), "--cache-dir", str(out / "cache")]
    subprocess.run([*cmd, "--quiet"], check=True, stdout=subprocess.DEVNULL)
    from memory_lab import read_results

    results = read_results(out / "run", prompts=False)
    answer = results.probes.groupby("memory")["answer_seconds"].sum()
    return pd.read_csv(out / "run" / "summary.csv").set_index("memory"), answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dialogues", required=True, help="a dialogue source, as for run")
    parser.add_argument("--memory", nargs="+", default=["vector", "hybrid"])
    parser.add_argument("--keep", type=Path, help="keep the two results folders here")
    args = parser.parse_args(argv)
    orders = [args.memory, args.memory[::-1]]
    seen = []
    with tempfile.TemporaryDirectory(prefix="cell-order-") as tmp:
        for n, order in enumerate(orders):
            print(f"run {n + 1}: --memory {' '.join(order)}", flush=True)
            folder = (args.keep or Path(tmp)) / f"order{n + 1}"
            seen.append(run(args.dialogues, order, folder))
    print()
    print(f"{'memory':<12} {'sec (given)':>12} {'sec (reversed)':>15} {'ratio':>6}"
          f" {'reader sec (given)':>19} {'reader sec (reversed)':>22}")  # fmt: skip
    worst = 1.0
    for memory in args.memory:
        a, b = (s.loc[memory, "seconds"] for s, _ in seen)
        ra, rb = (r.get(memory, float("nan")) for _, r in seen)
        ratio = max(a, b) / min(a, b) if min(a, b) > 0 else float("inf")
        worst = max(worst, ratio)
        print(f"{memory:<12} {a:>12.1f} {b:>15.1f} {ratio:>6.2f} {ra:>19.1f} {rb:>22.1f}")
    print(f"\nlargest ratio between the orders: {worst:.2f} (1.00: the order does not matter)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
