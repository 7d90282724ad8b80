"""``memory-lab report`` on a large results folder: peak memory and time.

Builds a results folder of ``--records`` records (10^6 by default), then runs ``memory-lab
report`` on it in a child process and prints the child's wall time and peak resident memory
(the target: under 500 MB for 10^6 tiny records, the report streaming its records rather than
holding them). ``--shape tiny`` (the default): turn records of seven fields, 100 to a cell
(135 MB of records.jsonl). ``--shape real``: a small real run's records (the built-in suite
through ``buffer`` and ``window``, run first into a scratch folder) repeated as further
dialogues (``<id>-copy<n>``), prompts dropped: about 0.8 KB a record, what a long sweep leaves.

    python benchmarks/report_scale.py [--records 1000000] [--shape tiny|real] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {
    **os.environ,
    "PYTHONPATH": str(ROOT),
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "ANONYMIZED_TELEMETRY": "False",
}


def memory_lab(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "memory_lab.cli", *args], env=ENV, check=True)


def build_tiny(folder: Path, records: int) -> int:
    """``records`` tiny records: 99 turns and the closing cell record per dialogue."""
    folder.mkdir()
    written = 0
    with open(folder / "records.jsonl", "w", encoding="utf-8") as out:
        out.write(json.dumps({"stream": "records", "type": "format", "version": 2}) + "\n")
        for d in range(-(-records // 100)):
            base = {"memory": "buffer", "dialogue": f"d{d}"}
            for i in range(99):
                turn = {"type": "turn", **base, "exchange": i, "prompt_tokens": 10}
                out.write(json.dumps({**turn, "completion_tokens": 5, "seconds": 0.01}) + "\n")
            out.write(json.dumps({"type": "cell", **base, "status": "ok", "seconds": 1.0}) + "\n")
            written += 100
    return written


def build(folder: Path, records: int) -> int:
    """A results folder of about ``records`` records from a small real run; the count."""
    seed = folder.parent / "seed"
    memory_lab("run", "--memory", "buffer", "--memory", "window", "--out", str(seed), "--quiet")
    lines = (seed / "records.jsonl").read_text(encoding="utf-8").splitlines()
    header, body = lines[0], [json.loads(line) for line in lines[1:]]
    for record in body:
        record.pop("prompt_delta", None)
        if "prompt" in record:
            record["prompt"] = None
    folder.mkdir()
    run = json.loads((seed / "run.json").read_text(encoding="utf-8"))
    (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")
    written = 0
    with open(folder / "records.jsonl", "w", encoding="utf-8") as out:
        out.write(header + "\n")
        copy = 0
        while written < records:
            for record in body:
                if "dialogue" in record and copy:
                    record = {**record, "dialogue": f"{record['dialogue']}-copy{copy}"}
                out.write(json.dumps(record, sort_keys=True) + "\n")
            written += len(body)
            copy += 1
    return written


# Run in a child of its own, so its peak is the report's alone (not the seed run's)
MEASURE = """
import resource, subprocess, sys, time
started = time.perf_counter()
subprocess.run([sys.executable, "-m", "memory_lab.cli", *sys.argv[1:]], check=True)
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def measured(*args: str) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of ``memory-lab ARGS``."""
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, *args], env=ENV, check=True, capture_output=True, text=True
    ).stdout.split()
    return float(out[-2]), int(out[-1]) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--shape", choices=("tiny", "real"), default="tiny")
    parser.add_argument("--keep", help="build the folder here and keep it (default: scratch)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="report-scale-") as scratch:
        base = Path(args.keep) if args.keep else Path(scratch)
        base.mkdir(parents=True, exist_ok=True)
        folder = base / "run"
        n = (build_tiny if args.shape == "tiny" else build)(folder, args.records)
        size = (folder / "records.jsonl").stat().st_size
        print(f"{n:,} records, {size / 1e6:.0f} MB of records.jsonl")
        wall, peak = measured("report", str(folder))
        print(f"memory-lab report: {wall:.1f} s, peak RSS {peak:.0f} MB (target: under 500 MB)")
    return 0 if peak < 500 else 1


if __name__ == "__main__":
    sys.exit(main())
