"""API-bound throughput: requests per second at ``--concurrency 1`` and ``--concurrency N``.

Starts the loopback OpenAI mock (``tests/models/openai_mock.py``) with a fixed latency per
request (200 ms by default, like a real provider), then runs the five classic memories over
``builtin:classic`` with ``--llm openai:<model> --embeddings openai:<embedding model>
--base-url <mock>`` (memory models offline, no call cache) once per concurrency, and prints the
requests the mock answered, the wall time, requests per second and the ratio to the first.
Target: ``--concurrency 8`` at least 6x the requests per second of ``--concurrency 1``.
``--embeddings offline`` keeps the vector memory's embeddings on this machine's CPU instead:
then that CPU work, done in one process, bounds the speed-up.

    python benchmarks/api_concurrency.py [--concurrency 1 8] [--delay 0.2] [--embeddings offline]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.models.openai_mock

from benchmarks.classic import CLASSIC_FIVE  # noqa: E402
from memory_lab import load_dialogues, resolve_memories, run_benchmark  # noqa: E402
from tests.models.openai_mock import OpenAIMock  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--delay", type=float, default=0.2, help="seconds per request")
    parser.add_argument("--memory", nargs="+", default=CLASSIC_FIVE)
    parser.add_argument("--dialogues", nargs="+", default=["builtin:classic"])
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument(
        "--embeddings",
        default="openai:text-embedding-3-small",
        help="the memories' embeddings: a provider model (through the mock) or offline",
    )
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-loopback-mock")  # the mock checks no key
    memories = resolve_memories(args.memory)
    dialogues = load_dialogues(*args.dialogues)
    probes = sum(len(d.probes) for d in dialogues) * len(memories)
    print(
        f"{len(memories)} memories x {len(dialogues)} dialogues, {probes} probes; "
        f"mock latency {args.delay * 1000:.0f} ms per request; embeddings {args.embeddings}"
    )
    rates = []
    with tempfile.TemporaryDirectory(prefix="api-concurrency-") as tmp:
        for concurrency in args.concurrency:
            with OpenAIMock(delay=args.delay) as mock:
                started = time.perf_counter()
                outcome = run_benchmark(
                    memories,
                    dialogues,
                    Path(tmp) / f"c{concurrency}",
                    llm=f"openai:{args.model}",
                    embeddings=args.embeddings,
                    base_url=mock.base_url,
                    cache=False,
                    concurrency=concurrency,
                    progress=False,
                )
                wall = time.perf_counter() - started
                chat, requests = mock.calls("chat"), len(mock.requests)
                overlap = mock.max_in_flight
            if outcome.failed_cells:
                print(f"--concurrency {concurrency}: {outcome.failed_cells} cell(s) failed")
                return 1
            rates.append(requests / wall)
            print(
                f"--concurrency {concurrency:>2}: {requests} requests ({chat} chat) in "
                f"{wall:6.1f} s = "
                f"{rates[-1]:5.2f} req/s, at most {overlap} in flight, "
                f"{rates[-1] / rates[0]:.2f}x the first"
            )
    if len(rates) > 1:
        print(
            f"ratio --concurrency {args.concurrency[-1]} / {args.concurrency[0]}: "
            f"{rates[-1] / rates[0]:.2f}x (target >= 6x for 8 / 1)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
