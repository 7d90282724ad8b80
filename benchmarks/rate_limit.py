"""Provider limits (``run --rpm``): requests a minute over time against a provider that enforces
its limit, with and without ``--rpm``.

Starts the loopback OpenAI mock (``tests/models/openai_mock.py``) as a provider with a limit
(600 requests a minute by default, a token bucket of one second's worth, 429 with
``Retry-After`` beyond it) and a latency per request (300 ms), then runs, as a user would::

    memory-lab run --dialogues locomo:SUBSET --memory mem0 langmem \\
        --llm openai:gpt-4o-mini --memory-llm openai:gpt-4o-mini --base-url MOCK \\
        --concurrency 16 --rpm 600

and prints the requests the mock served per window (10 s; as a rate a minute), the 429s it
answered, the run's own counts (run.json's ``rate_limits``) and the cells that failed; then the
same run without ``--rpm`` (``--no-limit``: that one alone; ``--limit-only``: without it).

LoCoMo is not shipped: ``--locomo`` is your ``locomo10.json`` or the repository's
``data/locomo10.zip`` (by default read from the snap-research/locomo git mirror, if there). The
subset run is the first ``--conversations`` conversations cut to their first ``--sessions``
sessions, with the questions whose evidence lies in them. The mock answers mem0's extraction
prompt with its JSON (the exchange's first user line as a memory) and LangMem's with a
``Memory`` tool call, as ``tests/memories/test_mem0.py`` and ``test_langmem.py`` do.

    python benchmarks/rate_limit.py [--rpm 600] [--delay 0.3] [--sessions 4] [--no-limit]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.models.openai_mock

from tests.models.openai_mock import OpenAIMock  # noqa: E402

MIRROR = Path("/work/.mirror/snap-research+locomo/repo")
WINDOW = 10.0  # seconds per line of the table


def _conversations(path: Path | None) -> list[dict]:
    """LoCoMo's samples as ``locomo10.json`` holds them, from a JSON file or the repository's
    zip (one conversation per JSON file, its keys at the top level)."""
    if path is None:
        data = subprocess.run(
            ["git", "--git-dir", str(MIRROR), "show", "HEAD:data/locomo10.zip"],
            capture_output=True,
            check=True,
        ).stdout
        path = Path(tempfile.mkdtemp(prefix="locomo-")) / "locomo10.zip"
        path.write_bytes(data)
    if path.suffix != ".zip":
        return json.loads(path.read_text("utf-8"))
    samples = []
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.endswith(".json")]
        for name in sorted(names, key=lambda n: int(re.sub(r"\D", "", Path(n).stem) or 0)):
            record = json.loads(archive.read(name))
            qa = record.pop("qa", [])
            conversation = {
                k: v for k, v in record.items() if k.startswith(("speaker_", "session_"))
            }
            samples.append({"sample_id": f"conv-{Path(name).stem}", "conversation": conversation})
            samples[-1]["qa"] = qa
    return samples


def subset(samples: list[dict], conversations: int, sessions: int) -> list[dict]:
    """The first ``conversations`` samples cut to their first ``sessions`` sessions, with the
    questions whose evidence lies in them."""
    out = []
    for sample in samples[:conversations]:
        conv = sample["conversation"]
        keep = {f"session_{n}" for n in range(1, sessions + 1)}
        cut = {
            k: v
            for k, v in conv.items()
            if not k.startswith("session_") or re.sub(r"_date_time$", "", k) in keep
        }
        ids = {t["dia_id"] for k in keep for t in conv.get(k, [])}
        qa = [q for q in sample["qa"] if q.get("evidence") and set(q["evidence"]) <= ids]
        out.append({**sample, "conversation": cut, "qa": qa})
    return out


def mem0_reply(body: dict) -> str:
    """mem0's extraction answered with the exchange's first user line as one memory; any other
    request (the answering model) with a short reply."""
    messages = body.get("messages") or [{}]
    system = str(messages[0].get("content") or "")
    if "Memory Extractor" in system and len(messages) > 1:
        prompt = str(messages[1].get("content") or "")
        line = prompt.split("## New Messages\n", 1)[-1].splitlines()[0]
        return json.dumps({"memory": [{"id": "0", "text": line.removeprefix("user: ")}]})
    return "Mock reply."


def langmem_tools(body: dict) -> list[tuple[str, dict]]:
    """LangMem's manager answered with one ``Memory`` insert (the exchange's first line)."""
    prompt = "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])
    try:
        line = prompt.split("Human Message =")[-1].split("\n\n", 2)[1].splitlines()[0]
    except IndexError:
        line = prompt.strip().splitlines()[-1] if prompt.strip() else "nothing"
    return [("Memory", {"content": line})]


def run_once(args: argparse.Namespace, source: str, out: Path, limit: bool) -> dict:
    """One run against a fresh mock; its figures."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-loopback-mock", "HF_HUB_OFFLINE": "1"}
    env.update(TRANSFORMERS_OFFLINE="1", ANONYMIZED_TELEMETRY="False")
    with OpenAIMock(delay=args.delay, rpm=args.mock_rpm) as mock:
        mock.reply, mock.tool_calls = mem0_reply, langmem_tools
        cmd = [sys.executable, "-m", "memory_lab.cli", "run", "--dialogues", source]
        cmd += ["--memory", *args.memory, "--llm", args.model, "--memory-llm", args.model]
        cmd += ["--base-url", mock.base_url, "--concurrency", str(args.concurrency)]
        cmd += ["--no-cache", "--quiet", "--out", str(out)]
        cmd += ["--rpm", f"{args.rpm:g}"] if limit else []
        started = time.monotonic()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
        seconds = time.monotonic() - started
        served = mock.served()
        refused = sorted(r["at"] for r in list(mock.requests) if r.get("status") == 429)
    info = json.loads((out / "run.json").read_text("utf-8")) if (out / "run.json").exists() else {}
    if proc.returncode not in (0, 1):
        print(proc.stderr[-2000:], file=sys.stderr)
    return {
        "limit": limit,
        "seconds": seconds,
        "served": served,
        "refused": refused,
        "exit": proc.returncode,
        "failed_cells": info.get("failed_cells"),
        "rate_limits": info.get("rate_limits"),
    }


def busiest(times: list[float], seconds: float) -> int:
    """The most requests in any window of ``seconds`` (sliding, from each request)."""
    j, most = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - seconds:
            j += 1
        most = max(most, i - j + 1)
    return most


def show(result: dict, rpm: float) -> None:
    served, refused = result["served"], result["refused"]
    title = f"--rpm {rpm:g}" if result["limit"] else "no --rpm"
    print(f"\n{title}: exit {result['exit']}, {result['seconds']:.0f} s")
    if not served:
        print("  no request served")
        return
    start, end = min(served + refused), max(served + refused)
    print(f"  {'window':>11}  {'served':>6}  {'429s':>5}  {'per minute':>10}")
    low = start
    while low <= end:
        high = low + WINDOW
        n = sum(low <= t < high for t in served)
        r = sum(low <= t < high for t in refused)
        length = min(high, end) - low if high > end else WINDOW  # the last window: cut short
        rate = n * 60 / length if length > 0 else 0.0
        when = f"{low - start:>4.0f}-{min(high, end) - start:<4.0f} s"
        print(f"  {when}  {n:>6}  {r:>5}  {rate:>10.0f}")
        low = high
    span = max(served) - start
    mean = (len(served) - 1) * 60 / span if span > 0 else 0.0
    print(
        f"  served {len(served)} requests, 429s {len(refused)}, cells failed "
        f"{result['failed_cells']}; mean {mean:.0f} a minute over {span:.0f} s; busiest "
        f"10 s: {busiest(served, 10) * 6} a minute, busiest second: {busiest(served, 1)} "
        f"(the limit: {rpm / 60:g} a second)"
    )
    if result["rate_limits"]:
        print(f"  run.json rate_limits: {json.dumps(result['rate_limits'])}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=float, default=600, help="the run's --rpm")
    parser.add_argument("--mock-rpm", type=float, help="the mock's limit (default: --rpm)")
    parser.add_argument("--delay", type=float, default=0.3, help="seconds per request")
    parser.add_argument("--locomo", type=Path, help="locomo10.json or data/locomo10.zip")
    parser.add_argument("--conversations", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=4, help="sessions kept of each")
    parser.add_argument("--memory", nargs="+", default=["mem0", "langmem"])
    parser.add_argument("--model", default="openai:gpt-4o-mini")
    parser.add_argument("--concurrency", type=int, default=16)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--no-limit", action="store_true", help="only the run without --rpm")
    which.add_argument("--limit-only", action="store_true", help="only the run with --rpm")
    args = parser.parse_args()
    args.mock_rpm = args.mock_rpm or args.rpm
    with tempfile.TemporaryDirectory(prefix="rate-limit-") as tmp:
        data = subset(_conversations(args.locomo), args.conversations, args.sessions)
        source_file = Path(tmp) / "locomo-subset.json"
        source_file.write_text(json.dumps(data), "utf-8")
        turns = sum(
            len(v) for s in data for k, v in s["conversation"].items() if isinstance(v, list)
        )
        print(
            f"LoCoMo {', '.join(s['sample_id'] for s in data)}: first {args.sessions} sessions, "
            f"{turns} turns, {sum(len(s['qa']) for s in data)} questions; memories "
            f"{' '.join(args.memory)}; mock: {args.mock_rpm:g} requests a minute, "
            f"{args.delay * 1000:.0f} ms each; --concurrency {args.concurrency}"
        )
        modes = [False] if args.no_limit else [True] if args.limit_only else [True, False]
        for limit in modes:
            out = Path(tmp) / ("limited" if limit else "unlimited")
            show(run_once(args, f"locomo:{source_file}", out, limit), args.rpm)
    return 0


if __name__ == "__main__":
    sys.exit(main())
