"""Per-exchange cost of one long dialogue replayed at 100K, 200K, 400K and 800K tokens.

One BEAM-shaped dialogue (issue 31): short user turns (about 30-80 tokens: statements and
questions about a software project, facts such as owners, dates, ports and budgets planted in
about half of them) and long assistant replies (about 1,400 tokens on average, log-normal, several
paragraphs with headings and bullets), in dated sessions of 8-12 exchanges. The text is
generated from word lists, deterministic per ``--seed``; no BEAM text is used. A probe every
``--probe-every`` exchanges asks for a fact planted earlier (its evidence is the user turn that
stated it), so the replay asks probes at a steady rate whatever the length. Sizes are counted
with ``memory_lab.models.tokens.count_tokens``; each size is the shortest run of whole
exchanges from the start that reaches it (so each size is a prefix of the next).

``--data SOURCE`` measures a real conversation instead (any ``load_dialogues`` source holding
one dialogue, e.g. ``beam:BEAM/chats/1M#conversations=1``), cut by exchanges the same way: a
probe asked after a kept turn stays, and one asked at the conversation's end (all of BEAM's)
stays when its evidence turns are all kept, asked at the cut's end. A conversation shorter
than a size is replayed whole, and the larger sizes are skipped.

For each (memory, size) it prints: the tokens replayed, exchanges, probes asked, harness
seconds per exchange (the replay with its probes, models already loaded), tokens per exchange
(each turn's prompt plus the memory's own maintenance tokens, as ``scaling.py``), with
``--records`` the bytes of the records per exchange (each record as the run writes it into
``records.jsonl``, prompts included as a run records them by default: each as a delta against
the cell's previous prompt, ``memory_lab/log/prompt_store.py``; summed), and the peak
resident memory. Each ``x prev`` is the ratio to the previous size, scaled to one doubling
(``r ** (1 / log2(tokens / previous tokens))``) when the sizes do not double. Targets (issue
31): seconds, tokens and record bytes per exchange within 1.5x per doubling, peak RSS within
2 GiB at 800K; the last lines give the highest peak RSS and the worst ratio against them.

Every (memory, size) runs in a fresh child process (``spawn``) that loads the models, the
dialogue and replays it: its peak RSS (``ru_maxrss``) is that one replay's, models included,
not a process's peak so far. ``--timeout`` stops a child that takes longer and skips that
memory's larger sizes.

    python benchmarks/history_scale.py          # 100K-800K tokens, the six memories
    python benchmarks/history_scale.py --tokens 25000 50000 100000 --memory window buffer
    python benchmarks/history_scale.py --records --memory buffer --timeout 600
    python benchmarks/history_scale.py --data "beam:BEAM/chats/1M#conversations=1" --memory rag
    python benchmarks/history_scale.py --memory mem0 langmem
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing
import random
import resource
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.scaling import NAMES, PLACES, turn_tokens, verdict  # noqa: E402
from memory_lab.dialogue.model import Dialogue, Session  # noqa: E402
from memory_lab.models.tokens import count_tokens  # noqa: E402
from memory_lab.run.exchanges import exchanges  # noqa: E402
from memory_lab.sweep.growth import step_per_doubling  # noqa: E402

MEMORIES = ["window", "vector", "rag", "hybrid", "summary_buffer", "buffer"]
SIZES = [100_000, 200_000, 400_000, 800_000]
TARGET_RATIO = 1.5
TARGET_RSS = 2 * 1024**3  # at 800K tokens

# ------------------------------------------------------------------ the BEAM-shaped generator

USER_TOKENS = (30, 80)  # uniform
REPLY_TOKENS = 1400  # mean of a log-normal, clipped to REPLY_RANGE
REPLY_SIGMA = 0.35
REPLY_RANGE = (400, 3200)
SESSION_EXCHANGES = (8, 12)

LAST_NAMES = ["Okafor", "Lindqvist", "Tanaka", "Moreau", "Haddad", "Novak", "Reyes", "Byrne"]
STORES = ["PostgreSQL", "Redis", "SQLite", "MongoDB", "ClickHouse", "Cassandra", "MySQL"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August"]
NOUNS = (
    "service endpoint schema migration queue worker cache index dashboard pipeline deployment "
    "cluster token session request response payload handler config release branch test fixture "
    "dependency container image volume backup replica shard metric alert log trace sprint "
    "ticket review invoice customer report template form field table column query transaction "
    "lock retry timeout latency throughput buffer batch job scheduler webhook gateway proxy "
    "certificate key secret role permission account profile feature flag rollout rollback "
    "incident patch library framework component layout widget chart export upload thumbnail "
    "notification email message channel topic event stream snapshot checkpoint dataset prompt "
    "embedding ranking filter search"
).split()
VERBS = (
    "validate cache retry log index deploy test profile refactor document monitor batch "
    "throttle encrypt compress serialize parse render schedule migrate version audit review "
    "benchmark mock isolate split merge rotate archive paginate stream normalize sanitize "
    "measure tune lock queue notify"
).split()
ADJECTIVES = (
    "stable slow fast flaky shared private public nested stale fresh large small async "
    "idempotent atomic legacy modular strict lazy eager secure verbose minimal robust brittle "
    "partial complete optional required temporary"
).split()
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
SENTENCES = [
    "To keep the {a} {n} {a2}, {v} the {n2} before every {n3}.",
    "A common approach is to {v} each {n} in one {a} {n2}, which keeps the {n3} easy to {v2}.",
    "If the {n} gets {a} under load, check whether the {n2} is {a2} and whether you can still "
    "{v} the {n3}.",
    "In practice the {a} {n} is easier to {v} than the {a2} one, especially once the {n2} grows "
    "past {k} {n3}s.",
    "The next step is to {v} the {n}, then {v2} the {n2}, and finally {v3} the {n3}.",
    "For {m} in particular, the {n} should stay {a} so that the {n2} can {v} without any "
    "{a2} {n3}.",
    "You can measure this with one {a} {n} that records the {n2} every {k} seconds.",
    "A helper such as `{v}_{n}_{w}()` keeps the {n2} logic in one place and makes the {n3} "
    "simpler to {v2}.",
    "Avoid letting the {n} {v} the {n2} directly; one {a} {n3} between them is cheaper to {v2}.",
    "Once the {n} is {a}, the {n2} rarely needs more than {k} retries.",
]
REQUESTS = [
    "Can you walk me through how to {v} the {n} for {m} without breaking the {n2}?",
    "What is the cleanest way to {v} the {a} {n} in {m}?",
    "How should I {v} the {n2} so that the {n} stays {a}?",
    "Could you review my plan to {v} the {n} and {v2} the {n2} this sprint?",
]
CHATTER = [
    "I'm still working on the {m} part of the project.",
    "We had a long meeting about the {n} today.",
    "The {a} {n} keeps surprising us in {m}.",
    "Right now we {v} the {n} by hand, which is slow.",
    "Last week the {n2} in {m} broke twice because of the {n}.",
    "My teammate thinks we should {v} the {n} first.",
    "We already {v} the {n2}, but the {n3} is still {a}.",
    "The deadline is close, so I want to keep the {n} {a}.",
    "Our {n} has about {k} entries at the moment.",
    "I tried to {v} the {n2} yesterday and got lost in the {n3}.",
]
# (statement, question, answer) of the facts planted in user turns
FACTS = [
    ("The {m} module is owned by {person}.", "Who owns the {m} module?", "{person}"),
    ("We set the {m} release for {day}.", "What date did we set for the {m} release?", "{day}"),
    ("The {m} service runs on port {port}.", "Which port does the {m} service run on?", "{port}"),
    ("The budget for {m} is {amount} euros.", "What is the budget for {m}?", "{amount} euros"),
    (
        "The {m} tests take {minutes} minutes on CI.",
        "How long do the {m} tests take?",
        "{minutes} minutes",
    ),  # fmt: skip
    ("We keep the {m} data in {store}.", "Where do we keep the {m} data?", "{store}"),
    (
        "The {m} team meets in the {place} office.",
        "Which office does the {m} team meet in?",
        "{place}",
    ),  # fmt: skip
]


class _Words:
    """Word choices of one generator, deterministic per seed."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.modules: list[str] = []
        self._taken: set[str] = set()

    def ident(self) -> str:
        return "".join(self.rng.choice(_SYLLABLES) for _ in range(self.rng.randint(2, 3)))

    def module(self) -> str:
        """A new project module name (each fact gets its own, so its question has one answer)."""
        while True:
            name = self.ident().capitalize() + self.rng.choice(_SYLLABLES)
            if name not in self._taken and name.lower() not in NOUNS:
                self._taken.add(name)
                self.modules.append(name)
                return name

    def fill(self, template: str, module: str) -> str:
        r = self.rng
        return template.format(
            a=r.choice(ADJECTIVES),
            a2=r.choice(ADJECTIVES),
            n=r.choice(NOUNS),
            n2=r.choice(NOUNS),
            n3=r.choice(NOUNS),
            v=r.choice(VERBS),
            v2=r.choice(VERBS),
            v3=r.choice(VERBS),
            k=r.randint(2, 500),
            w=self.ident(),
            m=module,
        )


def _fact(words: _Words) -> tuple[str, str, str]:
    """A new fact about a new module: its statement, a question for it and the answer."""
    r = words.rng
    values = {
        "m": words.module(),
        "person": f"{r.choice(NAMES)} {r.choice(LAST_NAMES)}",
        "day": f"{r.choice(MONTHS)} {r.randint(1, 28)}",
        "port": str(r.randint(2000, 9999)),
        "amount": str(r.randint(10, 990) * 100),
        "minutes": str(r.randint(3, 95)),
        "store": r.choice(STORES),
        "place": r.choice(PLACES),
    }
    statement, question, answer = (t.format(**values) for t in r.choice(FACTS))
    return statement, question, answer


def _user_turn(words: _Words, fact: str | None) -> str:
    """A user message of 30-80 tokens: the fact (if any), chatter, then a request."""
    r = words.rng
    target = r.randint(*USER_TOKENS)
    module = r.choice(words.modules) if words.modules else "the backend"
    request = words.fill(r.choice(REQUESTS), module)
    parts = [fact] if fact else []
    while count_tokens(" ".join([*parts, request])) < target:
        parts.append(words.fill(r.choice(CHATTER), r.choice(words.modules or ["the backend"])))
    return " ".join([*parts, request])


def _reply(words: _Words, module: str) -> str:
    """An assistant reply of about REPLY_TOKENS tokens: paragraphs, some headings and bullets."""
    r = words.rng
    mu = math.log(REPLY_TOKENS) - REPLY_SIGMA**2 / 2
    target = min(max(int(r.lognormvariate(mu, REPLY_SIGMA)), REPLY_RANGE[0]), REPLY_RANGE[1])
    blocks = [f"Let's look at the {module} work step by step."]
    size = count_tokens(blocks[0])
    step = 0
    while size < target:
        if r.random() < 0.3:
            step += 1
            block = f"### Step {step}: {r.choice(VERBS).capitalize()} the {r.choice(NOUNS)}"
        elif r.random() < 0.3:
            items = [words.fill(r.choice(SENTENCES), module) for _ in range(r.randint(3, 5))]
            block = "\n".join(f"- {item}" for item in items)
        else:
            count = r.randint(3, 7)
            block = " ".join(words.fill(r.choice(SENTENCES), module) for _ in range(count))
        blocks.append(block)
        size += count_tokens(block) + 1
    return "\n\n".join(blocks)


def beam_shaped_dialogue(tokens: int, seed: int = 31, probe_every: int = 10) -> dict[str, Any]:
    """A dialogue document of at least ``tokens`` tokens, deterministic per ``seed``."""
    rng = random.Random(seed)
    words = _Words(rng)
    sessions: list[dict[str, Any]] = []
    facts: list[tuple[str, str, str]] = []  # (turn id, question, answer)
    probes: list[dict[str, Any]] = []
    day = date(2024, 3, 1)
    total = exchange = 0
    while total < tokens:
        turns: list[dict[str, str]] = []
        for _ in range(rng.randint(*SESSION_EXCHANGES)):
            fact = _fact(words) if rng.random() < 0.5 or not facts else None
            user = _user_turn(words, fact[0] if fact else None)
            reply = _reply(words, rng.choice(words.modules))
            uid, aid = f"u{exchange}", f"a{exchange}"
            turns += [{"user": user, "id": uid}, {"assistant": reply, "id": aid}]
            total += count_tokens(user) + count_tokens(reply)
            if fact:
                facts.append((uid, fact[1], fact[2]))
            if exchange % probe_every == probe_every - 1 and total < tokens:
                at = rng.randrange(len(facts))
                uid_, question, answer = facts[at]
                far = exchange - int(uid_[1:]) > 2 * probe_every
                probes.append(
                    {
                        "id": f"p{len(probes) + 1}",
                        "after": aid,
                        "question": question,
                        "answers": [answer],
                        "evidence": [uid_],
                        "category": "long-range" if far else "single-hop",
                    }
                )
            exchange += 1
            if total >= tokens:
                break
        sessions.append({"id": f"b{len(sessions) + 1}", "date": day.isoformat(), "turns": turns})
        day += timedelta(days=rng.randint(1, 10))
    return {
        "format": "memory-lab/dialogue@1",
        "id": f"beam-shaped-{seed}",
        "title": f"BEAM-shaped synthetic dialogue (seed {seed})",
        "language": "en",
        "sessions": sessions,
        "probes": probes,
    }


# ------------------------------------------------------------------ cutting and measuring


def cut(dialogue: Dialogue, tokens: int) -> tuple[Dialogue, int, bool]:
    """The shortest run of whole exchanges from the start holding at least ``tokens`` tokens,
    with its probes; its token count, and whether it is the whole dialogue."""
    kept: set[str] = set()
    total = 0
    exs = exchanges(dialogue)
    for ex in exs:
        if total >= tokens:
            break
        kept.update(ex.turn_ids)
        total += count_tokens(ex.user) + count_tokens(ex.assistant)
    whole = len(kept) == len(dialogue.turns)
    sessions = [
        Session(s.id, s.date, tuple(t for t in s.turns if t.id in kept)) for s in dialogue.sessions
    ]
    sessions = [s for s in sessions if s.turns]
    end, last = sessions[-1].turns[-1].id, dialogue.turns[-1].id
    probes = [
        p if p.after in kept else dataclasses.replace(p, after=end)
        for p in dialogue.probes
        if p.after in kept or (p.after == last and all(e in kept for e in p.evidence))
    ]
    kept_dialogue = dataclasses.replace(dialogue, sessions=tuple(sessions), probes=tuple(probes))
    return kept_dialogue, total, whole


def measure(source: str, tokens: int, memory: str, records: bool) -> dict[str, Any]:
    """Replay ``source`` cut to ``tokens`` through ``memory`` in this process: its figures."""
    from memory_lab import RunModels, load_dialogues, parse_memory_spec, replay_dialogue
    from memory_lab.log.prompt_store import PromptEncoder
    from memory_lab.log.record_log import dump_record

    dialogues = load_dialogues(source)
    if len(dialogues) != 1:
        raise SystemExit(f"{source} holds {len(dialogues)} dialogues: select one")
    dialogue, total, whole = cut(dialogues[0], tokens)
    del dialogues
    models = RunModels.create(record_prompts=records)
    models.shared_embeddings().embed_query("warm up the model")
    if models.reader_retrieval is not None:
        models.reader_retrieval.embed_query("warm up the model")
    turns: list[dict] = []
    counts = {"bytes": 0, "probes": 0}
    encoder = PromptEncoder()  # as a run's cell stores its records (run_cell)

    def emit(record: dict) -> None:
        if records:
            counts["bytes"] += len(dump_record(encoder.encode(record)).encode("utf-8"))
        if record["type"] == "turn":
            turns.append({k: record[k] for k in ("type", "prompt_tokens", "memory_tokens")})
        counts["probes"] += record["type"] == "probe"

    started = time.perf_counter()
    replay_dialogue(parse_memory_spec(memory), dialogue, models, emit)
    seconds = time.perf_counter() - started
    n = len(exchanges(dialogue))
    return {
        "tokens": total,
        "whole": whole,
        "exchanges": n,
        "probes": counts["probes"],
        "seconds": seconds / n,
        "exchange_tokens": turn_tokens(turns),
        "record_bytes": counts["bytes"] / n if records else None,
        "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # KiB on Linux
    }


def _child(conn: Any, *args: Any) -> None:
    try:
        conn.send(("ok", measure(*args)))
    except BaseException as exc:  # noqa: BLE001 - reported by the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def in_child(timeout: float | None, *args: Any) -> tuple[str, Any]:
    """``measure(*args)`` in a fresh process: ("ok", figures), ("error", message) or
    ("timeout", seconds)."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(send, *args))
    process.start()
    send.close()
    try:
        if not receive.poll(timeout):
            process.terminate()
            return "timeout", timeout
        return receive.recv()
    except EOFError:
        return "error", f"the child process ended with status {process.exitcode}"
    finally:
        process.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", nargs="+", type=int, default=SIZES)
    parser.add_argument("--memory", nargs="+", default=MEMORIES)
    parser.add_argument("--data", help="a source holding one dialogue (beam:PATH#...)")
    parser.add_argument("--records", action="store_true", help="measure record bytes")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--probe-every", type=int, default=10, help="exchanges between probes")
    parser.add_argument("--timeout", type=float, help="seconds one (memory, size) may take")
    args = parser.parse_args()
    sizes = sorted(args.tokens)
    with tempfile.TemporaryDirectory() as tmp:
        source = args.data
        if source is None:
            document = beam_shaped_dialogue(sizes[-1], args.seed, args.probe_every)
            Path(tmp, "history.json").write_text(json.dumps(document), "utf-8")
            source = tmp
        return _table(args, sizes, source)


def _table(args: argparse.Namespace, sizes: list[int], source: str) -> int:
    width = max(14, *(len(m) for m in args.memory))
    print(f"{'memory':<{width}} {'tokens':>8} {'exch':>5} {'probes':>6} {'s/exch':>7} "
          f"{'x prev':>6} {'tok/exch':>9} {'x prev':>6} {'rec B/exch':>11} {'x prev':>6} "
          f"{'peak RSS':>9}")  # fmt: skip
    worst, peak = 0.0, 0
    for memory in args.memory:
        previous: dict[str, tuple[float, float]] = {}
        for size in sizes:
            started = time.perf_counter()
            status, got = in_child(args.timeout, source, size, memory, args.records)
            if status != "ok":
                what = f"timed out after {got:.0f} s" if status == "timeout" else got
                print(f"{memory:<{width}} {size:>8} {what} (larger sizes skipped)", flush=True)
                break
            cells = []
            for key in ("seconds", "exchange_tokens", "record_bytes"):
                value = got[key]
                if value is None:
                    cells.append(f"{'-':>{11 if key == 'record_bytes' else 9}} {'':>6}")
                    continue
                ratio = step_per_doubling(value, previous.get(key), got["tokens"])
                previous[key] = (value, got["tokens"])
                if ratio is not None:
                    worst = max(worst, ratio)
                shown = f"{ratio:>6.2f}" if ratio is not None else f"{'':>6}"
                number = {
                    "seconds": f"{value:>7.3f}",
                    "exchange_tokens": f"{value:>9.0f}",
                    "record_bytes": f"{value:>11.0f}",
                }[key]
                cells.append(f"{number} {shown}")
            peak = max(peak, got["rss"])
            whole = " (whole dialogue)" if got["whole"] and args.data else ""
            print(
                f"{memory:<{width}} {got['tokens']:>8} {got['exchanges']:>5} {got['probes']:>6} "
                f"{' '.join(cells)} {got['rss'] / 2**20:>5.0f} MiB"
                f"  [{time.perf_counter() - started:.0f} s]{whole}",
                flush=True,
            )
            if got["whole"]:
                break
    rss_ok = peak <= TARGET_RSS
    print(
        f"\nhighest peak RSS: {peak / 2**20:.0f} MiB (target <= {TARGET_RSS / 2**30:.0f} GiB at "
        f"800K tokens): {'OK' if rss_ok else 'OVER TARGET'}"
    )
    return verdict(worst, TARGET_RATIO) or (0 if rss_ok else 1)


if __name__ == "__main__":
    sys.exit(main())
