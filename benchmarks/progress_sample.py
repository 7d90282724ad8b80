"""What a user watching ``memory-lab run`` sees: its progress line sampled every N seconds.

Runs ``memory-lab run`` with the arguments given (after ``--``), reads its progress bar from
stderr and prints, every ``--every`` seconds, the elapsed time, the bar's count and its ETA.
At the end it prints the longest time the count stood still, and for every sample with an ETA
the error of the finish it predicted against the actual one (how far off, as a share of the
run's time then left).

    python benchmarks/progress_sample.py --every 30 -- \\
        --dialogues "beam:BEAM/chats#scale=1M,conversations=10" --memory buffer vector --jobs 2
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import threading
import time

FRAME = re.compile(r"\|\s*([\d.]+[kMG]?)/([\d.]+[kMG]?) tokens \[([^\],]+)(?:, (.*))?\]")
UNITS = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}


def number(text: str) -> float:
    """``1.23M`` -> 1230000.0 (tqdm's scaled counts)."""
    value, unit = re.fullmatch(r"([\d.]+)([kMG]?)", text).groups()
    return float(value) * UNITS[unit]


def seconds(clock: str) -> float:
    parts = [int(p) for p in clock.split(":")]
    total = 0
    for p in parts:
        total = total * 60 + p
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("run", nargs=argparse.REMAINDER, help="-- then memory-lab run's options")
    args = parser.parse_args(argv)
    options = args.run[1:] if args.run[:1] == ["--"] else args.run
    latest = {"frame": ""}
    changes: list[tuple[float, float]] = []  # (when, count) each time the count moved
    with tempfile.TemporaryDirectory(prefix="progress-") as tmp:
        cmd = [sys.executable, "-m", "memory_lab.cli", "run", *options, "--out", f"{tmp}/run"]
        cmd += ["--cache-dir", f"{tmp}/cache"]
        started = time.monotonic()
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)

        def read() -> None:
            buffer = b""
            assert proc.stderr is not None
            while chunk := proc.stderr.read1(4096):
                buffer += chunk
                *frames, buffer = re.split(rb"[\r\n]", buffer)
                for frame in frames:
                    text = frame.decode("utf-8", "replace")
                    match = FRAME.search(text)
                    if match:
                        latest["frame"] = text.strip()
                        count = number(match[1])
                        if not changes or changes[-1][1] != count:
                            changes.append((time.monotonic() - started, count))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        samples: list[tuple[float, str]] = []
        while proc.poll() is None:
            time.sleep(min(args.every, 1.0))
            now = time.monotonic() - started
            if not samples or now - samples[-1][0] >= args.every:
                samples.append((now, latest["frame"]))
                print(f"{now:7.0f} s  {latest['frame']}", flush=True)
        reader.join(5)
        finished = time.monotonic() - started
    print(f"\nexit {proc.returncode}, {finished:.0f} s")
    moves = [0.0] + [t for t, _ in changes] + [finished]
    still = max(b - a for a, b in zip(moves, moves[1:], strict=False))
    print(f"longest time the count stood still: {still:.0f} s (start-up included)")
    for when, frame in samples:
        match = FRAME.search(frame)
        eta = re.search(r"ETA (\d+(?::\d+)+)", frame)
        if not match or not eta:
            continue
        predicted = when + seconds(eta[1])
        left = finished - when
        error = (predicted - finished) / left if left > 0 else 0.0
        print(f"at {when:5.0f} s: ETA predicts the end at {predicted:5.0f} s ({error:+.0%} of "
              f"the {left:.0f} s left)")  # fmt: skip
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
