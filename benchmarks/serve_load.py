"""Concurrent users against ``memory-lab serve``: no cross-talk, latency p50/p95.

Starts ``memory-lab serve --port 0`` (offline models, loopback) itself, then ``--users`` users
(20) each send ``--messages`` messages (10) one after another, all users at once. Every user's
first message states a fact only that user has (a code word); every later message carries the
user's tag. Afterwards each user's ``GET /memory`` context and every reply must hold that user's
own code word and tag and no other user's (no cross-talk). Before the load, one user alone
sends ``--first`` messages (4) to the fresh server, one at a time, a question from the second
on (so the answering model reads a context): their latencies, message by message, show whether
anything still loads on a user's first messages after serve's warm-up (the second message used
to take 5-8 s while the offline reader's engines loaded). Prints those, the load's chat latency
p50/p95/max and p50 by message position, the wall time and the requests per second, then stops
the server. Exit 1 on any failure.

With ``--waves N`` the load is repeated N times, each wave with new users who are all deleted
(``DELETE /memory/{user}``) when it ends, and the server's resident memory (RSS, from
``/proc``) is printed after each wave: what a deleted user held must be given back, so the RSS
after the last wave stays within 10% of the RSS after the first (exit 1 otherwise).

    python benchmarks/serve_load.py [--users 20] [--messages 10] [--first 4] [--memory buffer]
        [--waves 14]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
FIRST = [
    "Hi, my name is Ada and I live in Lisbon.",
    "Where do I live?",
    "I have a cat called Tom.",
    "What is my cat called?",
    "What is my name?",
]
WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "heron", "iris", "jade"]


def code_word(n: int) -> str:
    return f"{WORDS[n % len(WORDS)]}{n:02d}zq"


def start_server(memory: str, users: int, messages: int) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    env.update(TRANSFORMERS_OFFLINE="1", ANONYMIZED_TELEMETRY="False")
    cmd = [sys.executable, "-m", "memory_lab.cli", "serve", "--port", "0", "--memory", memory]
    cmd += ["--rate", str(messages + 10), "--max-users", str(users)]
    server = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    line = server.stdout.readline()  # the first line names the URL
    found = re.search(r"http://127\.0\.0\.1:\d+", line)
    if not found:
        server.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    url = found.group()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/memories", timeout=5).raise_for_status()
            return server, url
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("the server did not answer within 120 s")


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for process {pid}")


def waves(http: httpx.Client, pid: int, args: argparse.Namespace, problems: list[str]) -> list:
    """``args.waves`` waves of ``args.users`` new users, ``args.messages`` messages each, every
    user deleted at its wave's end; the server's RSS (MB) after each wave."""
    rss: list[float] = []
    for wave in range(args.waves):

        def talk(n: int, wave: int = wave) -> None:
            user = f"wave-{wave:02d}-user-{n:02d}"
            for i in range(args.messages):
                text = f"Wave {wave} message {i}: my code word is {code_word(n)}, tag{n:02d}tag."
                response = http.post(f"/chat/{user}", json={"message": text})
                if response.status_code != 200:
                    problems.append(f"{user}: {response.status_code} {response.text[:200]}")
            if http.delete(f"/memory/{user}").status_code != 200:
                problems.append(f"{user}: DELETE failed")

        with ThreadPoolExecutor(args.users) as pool:
            list(pool.map(talk, range(args.users)))
        rss.append(rss_mb(pid))
        print(f"wave {wave + 1}/{args.waves}: RSS {rss[-1]:.0f} MB", file=sys.stderr, flush=True)
    return rss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument(
        "--first", type=int, default=4, help="messages the fresh server's first user sends alone"
    )
    parser.add_argument("--memory", default="buffer", help="the memory spec served")
    parser.add_argument(
        "--waves", type=int, default=0, help="waves of new users, each deleted after (RSS)"
    )
    args = parser.parse_args()
    server, url = start_server(args.memory, args.users, args.messages)
    users = [f"load-user-{n:02d}" for n in range(args.users)]
    latencies: list[float] = []
    by_position: list[list[float]] = [[] for _ in range(args.messages)]
    first: list[float] = []
    problems: list[str] = []
    rss: list[float] = []
    try:
        with httpx.Client(base_url=url, timeout=120) as http:
            for i in range(args.first):  # the fresh server's first user, alone
                text = FIRST[i % len(FIRST)]
                started = time.perf_counter()
                http.post("/chat/first", json={"message": text}).raise_for_status()
                first.append(time.perf_counter() - started)
            http.delete("/memory/first").raise_for_status()

            def talk(n: int) -> list[str]:
                user, replies = users[n], []
                for i in range(args.messages):
                    if i == 0:
                        text = f"Remember this: my code word is {code_word(n)}."
                    else:
                        text = f"Message {i} from tag{n:02d}tag about my day."
                    started = time.perf_counter()
                    response = http.post(f"/chat/{user}", json={"message": text})
                    latencies.append(time.perf_counter() - started)
                    by_position[i].append(latencies[-1])
                    if response.status_code != 200:
                        problems.append(f"{user}: {response.status_code} {response.text[:200]}")
                        continue
                    replies.append(response.json()["reply"])
                return replies

            wall = time.perf_counter()
            with ThreadPoolExecutor(args.users) as pool:
                replies = list(pool.map(talk, range(args.users)))
            wall = time.perf_counter() - wall

            for n, user in enumerate(users):
                context = http.get(f"/memory/{user}").json()["memories"][0]["context"]
                # the tag is in every message from the second on; the code word only in the
                # first, which a retrieving memory need not recall for the last message
                own = [f"tag{n:02d}tag"] + ([code_word(n)] if args.memory == "buffer" else [])
                missing = [w for w in own if w not in context]
                if args.messages > 1 and missing:
                    problems.append(f"{user}: own words missing from context: {missing}")
                for m in range(args.users):
                    if m == n:
                        continue
                    theirs = [code_word(m), f"tag{m:02d}tag"]
                    leaked = [w for w in theirs if w in context or any(w in r for r in replies[n])]
                    if leaked:
                        problems.append(f"{user}: holds {users[m]}'s {leaked}")
            for user in users:
                http.delete(f"/memory/{user}").raise_for_status()
            rss = waves(http, server.pid, args, problems)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
    total = len(latencies)
    ms = sorted(1000 * s for s in latencies)
    p95 = ms[max(0, int(round(0.95 * total)) - 1)]
    if first:
        each = "  ".join(f"#{i + 1} {1000 * s:.1f}" for i, s in enumerate(first))
        print(f"first user alone, latency ms by message: {each}")
    print(f"memory {args.memory}: {args.users} users x {args.messages} messages = {total} chats")
    print(
        f"latency ms: p50 {statistics.median(ms):.1f}  p95 {p95:.1f}  max {ms[-1]:.1f}  "
        f"| wall {wall:.2f} s, {total / wall:.1f} chats/s"
    )
    positions = [
        f"#{i + 1} {statistics.median(1000 * s for s in got):.1f}"
        for i, got in enumerate(by_position)
        if got
    ]
    print(f"latency ms p50 by message: {'  '.join(positions)}")
    print(f"server exit code: {server.returncode}")
    if rss:
        each = "  ".join(f"{r:.0f}" for r in rss)
        print(f"server RSS MB after each wave (users deleted): {each}")
        growth = rss[-1] / rss[0] - 1
        print(f"RSS growth from wave 1 to wave {len(rss)}: {100 * growth:+.1f}% (bound: 10%)")
        if growth > 0.10:
            problems.append(f"RSS grew {100 * growth:.1f}% over {len(rss)} waves of deleted users")
    if problems:
        print(f"FAILED: {len(problems)} problem(s)")
        for problem in problems[:20]:
            print("  " + problem)
        return 1
    print(f"no cross-talk: each of {args.users} users' context holds only their own facts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
