"""Fault injection, the slow variant of ``tests/log/test_faults.py``: many more kill points.

Runs the two small Korean dialogues through buffer, window:k=1 and summary under each executor
(one process, ``--concurrency 4``, ``--jobs 2``, ``--executor ray`` on a local Ray),
kills each run (SIGKILL of the whole run, workers included) at reproducible points
(``MEMORY_LAB_FAULT``: mid-cell, part complete but not appended, mid-append, appended but part
not deleted), kills some resumes again, resumes to the end and compares with an uninterrupted
run. Prints one row per executor: runs, kills, records lost and duplicated, runs whose records
or summary differ from the uninterrupted run, orphan processes (for Ray also its processes and
temp folder left 10 s after a run ended: Ray starts them in sessions of their own), seconds.

    python benchmarks/fault_injection.py [--runs 40 40 8 6] [--seed 1]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fault_runs import (  # noqa: E402
    Launcher,
    kill_and_resume,
    plan,
    run_argv,
    run_size,
    write_dialogues,
)

EXECUTORS = ["sequential", "concurrency4", "jobs2", "ray"]


def ray_folders() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("mlray-*"))


def ray_leftovers(before: set[Path], seconds: float = 10) -> list[str]:
    """Local-Ray folders made since ``before`` and processes naming them, still there after
    up to ``seconds`` (the run's watchdog removes both within a second or two)."""
    deadline = time.monotonic() + seconds
    while True:
        folders = ray_folders() - before
        procs = [
            f"{p.parent.name} {p.read_bytes()[:60]!r}"
            for p in Path("/proc").glob("[0-9]*/cmdline")
            if _names(p, folders)
        ]
        if not (folders or procs) or time.monotonic() > deadline:
            return [str(f) for f in folders] + procs
        time.sleep(0.2)


def _names(cmdline: Path, folders: set[Path]) -> bool:
    try:
        text = cmdline.read_bytes()
    except OSError:
        return False
    return any(str(f).encode() in text for f in folders)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs",
        type=int,
        nargs=4,
        default=[40, 40, 8, 6],
        metavar=("SEQUENTIAL", "THREADS", "JOBS", "RAY"),
        help="killed runs per executor (a --jobs run is killed twice)",
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="fault-injection-"))
    failures = 0
    with Launcher() as launcher:
        dialogues = write_dialogues(base / "dialogues")
        reference = base / "reference"
        finished = launcher.run(run_argv(dialogues, reference, "sequential"))
        if finished.code != 0:
            print(finished.stderr, file=sys.stderr)
            return 1
        size = run_size(reference)
        print(
            f"uninterrupted run: {size['record']} records in {size['part']} cells, appended in "
            f"{size['append']} chunks\n"
        )
        header = (
            f"{'executor':<14}{'runs':>5}{'kills':>7}{'lost':>6}{'duplicated':>12}"
            f"{'differ':>8}{'orphans':>9}{'seconds':>9}"
        )
        print(header)
        print("-" * len(header))
        totals = [0, 0, 0, 0, 0, 0, 0.0]
        for executor, runs in zip(EXECUTORS, args.runs, strict=True):
            row = [runs, 0, 0, 0, 0, 0, 0.0]
            for n, (points, resume_with) in enumerate(plan(executor, runs, args.seed, size)):
                out = base / f"{executor}-{n}"
                before = ray_folders()
                trial = kill_and_resume(
                    launcher, dialogues, reference, out, executor, points, resume_with
                )
                if executor == "ray":
                    trial.orphans += ray_leftovers(before)
                damage = trial.damage
                bad = not (damage.same_records and damage.same_summary) or trial.codes[-1] != 0
                row[1] += trial.kills
                row[2] += damage.lost
                row[3] += damage.duplicated
                row[4] += bad or bool(trial.errors) or trial.parts_left
                row[5] += len(trial.orphans)
                row[6] += trial.seconds
                if bad or trial.errors:
                    print(f"  {executor} killed at {points}: {trial.codes} {trial.errors}")
            totals = [a + b for a, b in zip(totals, row, strict=True)]
            failures += row[2] + row[3] + row[4] + row[5]
            print(
                f"{executor:<14}{row[0]:>5}{row[1]:>7}{row[2]:>6}{row[3]:>12}{row[4]:>8}"
                f"{row[5]:>9}{row[6]:>9.1f}"
            )
        print("-" * len(header))
        print(
            f"{'all':<14}{totals[0]:>5}{totals[1]:>7}{totals[2]:>6}{totals[3]:>12}"
            f"{totals[4]:>8}{totals[5]:>9}{totals[6]:>9.1f}"
        )
    if failures:
        print(f"\n{time.monotonic() - started:.0f} s in all; failed runs kept under {base}")
        return 1
    shutil.rmtree(base)
    print(f"\n{time.monotonic() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
