"""Does a pool worker's memory stay flat as it runs cell after cell?

Runs ``memory-lab run --jobs N`` over many cells (by default the built-in suite through fourteen
offline memories: 126 cells, about 63 per worker) and, once a second, reads each process of the
run's tree (``memory_lab.sweep.sampler.tree_pids``): its RSS (``statm``) and PSS
(``smaps_rollup``), and how many cells the run has finished (the ``cell`` records appended to
``records.jsonl``). A worker is a child of the run that runs cells; the cells a worker has done
is taken as the finished cells over the workers (the pool hands the next cell to whichever
worker is free, so they share them about evenly). Prints each worker's RSS from its 5th cell
and the largest over its last tenth of cells (the target: within 1.2x), and writes the series
as CSV (``OUT/worker-memory.csv``; ``--report-only`` reads it again) and, with ``--chart``, a
PNG.

    python benchmarks/worker_memory.py --out /tmp/wm --chart docs/images/worker-rss.png
    python benchmarks/worker_memory.py --dialogues 'beam:BEAM/chats#scale=100K,conversations=1-20'
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_lab.sweep.sampler import measure, pss_kib, tree_pids  # noqa: E402

OFFLINE = [
    "buffer",
    "window",
    "summary",
    "summary_buffer",
    "vector",
    "token_buffer",
    "entity",
    "kg",
    "hierarchical",
    "hybrid",
    "store",
    "memgpt",
    "profile",
    "rag",
]
PAGE = os.sysconf("SC_PAGE_SIZE")


def cells_done(records: Path) -> int:
    try:
        with records.open("rb") as fh:
            return sum(1 for line in fh if b'"type": "cell"' in line)
    except OSError:
        return 0


def memory_of(pid: int) -> tuple[int, int]:
    """(RSS, PSS) bytes of one process; (0, 0) when it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            rss = int(fh.read().split()[1]) * PAGE
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            pss = pss_kib(fh.read()) * 1024
        return rss, pss
    except (OSError, IndexError, ValueError):
        return 0, 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogues", default="builtin:classic")
    parser.add_argument("--memory", nargs="+", default=OFFLINE)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True, help="the run's results folder")
    parser.add_argument("--chart", type=Path, help="write a PNG of RSS by cells done")
    parser.add_argument(
        "--report-only", action="store_true", help="read OUT/worker-memory.csv; run nothing"
    )
    args = parser.parse_args(argv)
    if args.report_only:
        with (args.out / "worker-memory.csv").open() as fh:
            rows = list(csv.reader(fh))[1:]
        report([(float(t), int(c), int(p), int(r), int(s)) for t, c, p, r, s in rows], args)
        return 0
    command = [sys.executable, "-m", "memory_lab.cli", "run", "--quiet", "--no-prompts"]
    command += ["--dialogues", args.dialogues, "--memory", *args.memory]
    command += ["--jobs", str(args.jobs), "--out", str(args.out)]
    series: list[tuple[float, int, int, int, int]] = []  # t, cells, pid, rss, pss
    done = threading.Event()
    started = time.monotonic()
    holder: dict[str, int] = {}

    def watch() -> None:
        while not done.is_set():
            root = holder.get("pid")
            if root:
                cells = cells_done(args.out / "records.jsonl")
                for pid in tree_pids(root)[1:]:  # the run's children: its workers
                    rss, pss = memory_of(pid)
                    if rss:
                        series.append((time.monotonic() - started, cells, pid, rss, pss))
            done.wait(1.0)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        measured = measure(
            command,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            stdout=subprocess.DEVNULL,
            on_start=lambda pid: holder.update(pid=pid),
        )
    finally:
        done.set()
        watcher.join()
    total = cells_done(args.out / "records.jsonl")
    with (args.out / "worker-memory.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["seconds", "cells_done", "pid", "rss_bytes", "pss_bytes"])
        writer.writerows(series)
    print(
        f"{args.dialogues} x {len(args.memory)} memories, --jobs {args.jobs}: {total} cells, "
        f"exit {measured.exit_code}, {measured.wall:,.0f} s wall, peak PSS summed "
        f"{measured.peak_pss / 2**20:,.0f} MiB"
    )
    report(series, args)
    return 0


def report(series: list[tuple[float, int, int, int, int]], args: argparse.Namespace) -> None:
    """Each worker's RSS after its 5th cell and after its last, and the chart."""
    pids = sorted({pid for _, _, pid, _, _ in series})
    seen = {pid: [s for s in series if s[2] == pid] for pid in pids}
    largest = max(max(r[3] for r in rows) for rows in seen.values())
    # the workers: the run's children that hold models (not multiprocessing's resource
    # tracker, a few MiB), seen over most of the run
    workers = [
        pid
        for pid in pids
        if max(r[3] for r in seen[pid]) > largest / 10 and len(seen[pid]) > len(series) / 8
    ]
    per = max(len(workers), 1)
    print(f"{'worker':>8} {'RSS from 5th cell':>20} {'RSS at the end':>16} {'ratio':>7}")
    for pid in workers:
        rows = seen[pid]
        fifth = next((r for r in rows if r[1] / per >= 5), rows[0])
        final = rows[-1][1] / per
        # the largest RSS over its last tenth of cells (its very last sample may be the exit)
        late = max(r[3] for r in rows if r[1] / per >= 0.9 * final)
        print(
            f"{pid:>8} {fifth[3] / 2**20:>16,.0f} MiB {late / 2**20:>12,.0f} MiB "
            f"{late / fifth[3]:>7.2f}  (cells {fifth[1] / per:.0f} -> {final:.0f})"
        )
    if args.chart:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 3.2), dpi=110)
        for i, pid in enumerate(workers, 1):
            rows = seen[pid]
            ax.plot([r[1] / per for r in rows], [r[3] / 2**20 for r in rows], label=f"worker {i}")
        ax.set_xlabel("cells done per worker")
        ax.set_ylabel("RSS (MiB)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"Pool workers' RSS, {args.dialogues} x {len(args.memory)} memories")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.chart)
        print(f"wrote {args.chart}")


if __name__ == "__main__":
    raise SystemExit(main())
