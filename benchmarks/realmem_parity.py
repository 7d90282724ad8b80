"""RealMem's retrieval metrics against the authors' own script, run unchanged from the user's
copy of AvatarMemory/RealMemBench (never vendored).

Scores a memory-lab run over RealMem (``memory_lab.benchmarks.realmem``: ``RUN/realmem_scores.csv``)
with its rankings exported in the authors' input format, runs their
``eval/compute_auto_metrics_for_realmem.py --process_retrieval_results`` on each memory's export
(in a subprocess, on the checkout's ``dataset/`` files), and compares every metric of every
(memory, persona) with the CSV's, and the number of questions it evaluated with the CSV's
``questions``. Prints the number of differences (0: parity) and exits 1 when there is any.

Their script calls ``np.asfarray``, which numpy 2 removed: when the interpreter's numpy lacks
it, it is given as ``np.asarray(a, dtype=float)`` (what it was) before their file runs; the file
itself is run as it is. ``--python`` runs it with another interpreter (one with numpy < 2 and
tqdm) instead.

    PYTHONPATH=. python benchmarks/realmem_parity.py RUN --realmem /work/data/RealMem
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from memory_lab.benchmarks.declaration import ScoreRequest
from memory_lab.benchmarks.realmem import score
from memory_lab.benchmarks.realmem.export import folder_name
from memory_lab.benchmarks.realmem.scores import METRICS, SCORES_FILE, read_csv

SCRIPT = "eval/compute_auto_metrics_for_realmem.py"
SHIM = (
    "import numpy as np, runpy, sys\n"
    "np.asfarray = getattr(np, 'asfarray', None) or (lambda a: np.asarray(a, dtype=float))\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def run_authors(python: str, checkout: Path, folder: Path) -> dict[str, int]:
    """Their batch mode on one memory's export; the questions each persona evaluated."""
    args = [str(checkout / SCRIPT), "--process_retrieval_results"]
    args += ["--retrieval_result_dir", str(folder), "--input_data_dir", str(checkout / "dataset")]
    done = subprocess.run(
        [python, "-c", SHIM, *args], capture_output=True, text=True, check=True, cwd=checkout
    )
    counts, current = {}, None
    for line in done.stdout.splitlines():
        m = re.search(r"Processing (\S+)\.\.\.", line)
        if m:
            current = m.group(1)
        m = re.match(r"Evaluated (\d+) queries\.", line)
        if m and current:
            counts[current] = int(m.group(1))
    if "Error processing" in done.stdout or "Traceback" in done.stderr:
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a memory-lab run over realmem:...")
    parser.add_argument("--realmem", type=Path, default=Path("/work/data/RealMem"))
    parser.add_argument("--export", type=Path, help="where to export (default: a temporary folder)")
    parser.add_argument("--python", default=sys.executable, help="interpreter for their script")
    args = parser.parse_args()
    export = args.export or Path(tempfile.mkdtemp(prefix="realmem-export-"))
    if any(export.rglob("metrics_results.json")):
        sys.exit(f"{export}: holds metrics_results.json from before (their script skips those)")
    print(score(ScoreRequest(args.run, export_retrieval=export)).text)
    ours = read_csv(args.run / SCORES_FILE)
    differences = compared = 0
    for memory in dict.fromkeys(r["memory"] for r in ours):
        folder = export / folder_name(memory)
        if not folder.is_dir():
            continue
        counts = run_authors(args.python, args.realmem, folder)
        for row in (r for r in ours if r["memory"] == memory and r["persona"] != "all"):
            file = folder / row["persona"] / "metrics_results.json"
            theirs = json.loads(file.read_text()) if file.is_file() else {}
            for m in METRICS:
                compared += 1
                if theirs.get(m) != row[m]:
                    differences += 1
                    print(
                        f"differs: {memory} {row['persona']} {m}: "
                        f"ours {row[m]} theirs {theirs.get(m)}"
                    )
            compared += 1
            if counts.get(row["persona"]) != int(row["questions"]):
                differences += 1
                print(
                    f"differs: {memory} {row['persona']} questions: ours {row['questions']} "
                    f"theirs {counts.get(row['persona'])}"
                )
    print(f"compared {compared} figure(s) with {SCRIPT}; differences: {differences}")
    return 1 if differences or not compared else 0


if __name__ == "__main__":
    sys.exit(main())
