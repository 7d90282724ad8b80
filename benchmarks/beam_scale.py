"""A whole BEAM scale folder through a memory set in one run: time, CPU against the floor, PSS.

Runs ``memory-lab run`` once over every selected conversation of one BEAM scale (issue 47;
``beam:CHATS#scale=100K,conversations=1-20``) through the memories, offline, with ``--jobs 2``
by default and a cold cache (a fresh ``--cache-dir``, shared by the workers as a run shares it,
deleted afterwards), as a child process whose whole process tree is sampled twice a second.
Then it prints:

- **wall** seconds of the run, start-up and model loading included;
- **CPU** seconds of the run: user plus system time of the run and every process it started
  and waited for (``getrusage(RUSAGE_CHILDREN)``), and CPU ÷ wall, the cores kept busy;
- the **floor**: the CPU seconds the run's embeddings cannot take less than, as
  ``benchmarks/embedding_floor.py`` defines it (its functions, imported): every text the memories
  and the offline reader must embed, counted per kind, times one text's CPU time on this machine
  measured on a random sample of that kind (one thread, one text per call, as a replay calls the
  engines). Which kinds count depends on the memories: ``vector`` and ``hybrid`` embed each exchange
  once between them (the run's cache shares the vectors) and the user turns as searches (``rag``
  too); ``rag`` its chunks, each time one changes (replayed here with its own chunker,
  ``memory_lab/memories/builtin/rag.py``); the reader every question, in e5 and MiniLM, and, when
  ``buffer`` is in the set, every sentence of every exchange (its probes show the whole history at
  100K; at 1M its 128K window cuts it, so this over-counts there). Sentences of the other memories'
  contexts are left out, which keeps it a lower bound without ``buffer``. CPU ÷ floor is how far the
  run is from it: what is not embedding (Chroma, the reader's scoring, BM25, records, model loading,
  the second worker's start-up) is the rest;
- the **peak PSS** summed over the run's processes (``/proc/PID/smaps_rollup``: a shared page
  counts once, split among its sharers, so the sum is the memory the run really holds), with
  the peak summed RSS beside it (``locomo_scale.py``'s sampler: shared pages counted in each
  process, as the performance page's earlier figures are);
- per conversation and memory, then per memory over all: evidence recall (the share of each
  answerable probe's evidence turns the context carried), prompt tokens per exchange and the
  memory's own seconds per exchange (its turns and probe reads, as ``which_memory.py`` computes
  them: the answering model's calls and model loading are not in them), and per memory the
  cells' wall seconds (each cell's run in its worker, probes included).

Seconds vary with the machine's load (printed before and after); tokens and recall do not.
With ``--out`` the results folder is kept (``memory-lab report`` / ``view`` it). The full
100K run (20 conversations, six memories) takes about 40 minutes on 2 cores.

    python benchmarks/beam_scale.py --beam BEAM/chats                    # 100K, 1-20, six memories
    python benchmarks/beam_scale.py --beam BEAM/chats --conversations 1-2 --memory window vector
    python benchmarks/beam_scale.py --beam BEAM/chats --out results/beam100k --markdown
    python benchmarks/beam_scale.py --beam BEAM/chats --scale 1M --conversations 10 --jobs 2
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.locomo_scale import _tree_rss  # noqa: E402
from benchmarks.which_memory import Row, rows_of  # noqa: E402
from memory_lab import read_results  # noqa: E402
from memory_lab.results.read import Results  # noqa: E402

MEMORIES = ["window", "vector", "rag", "hybrid", "summary_buffer", "buffer"]
SAMPLE_SECONDS = 0.5

# embedding_floor.texts_of's kinds -> the memories that make a run embed them ("*": any run,
# the offline reader answering the probes)
KIND_MEMORIES = {
    "vector: exchanges as passages (e5)": {"vector", "hybrid"},
    "vector: user turns as queries (e5)": {"vector", "hybrid", "rag"},
    "reader: sentences as passages (e5)": {"buffer"},
    "reader: questions as queries (e5)": {"*"},
    "reader: sentences (MiniLM, batches of 32)": {"buffer"},
    "reader: questions (MiniLM, one by one)": {"*"},
}


# ------------------------------------------------------------------------------ pure helpers
def source_spec(beam: str, scale: str, conversations: str) -> str:
    """The ``beam:`` source of one scale's conversations (``1-20``, ``1-5+9``; commas too)."""
    which = "+".join(p.strip() for p in re.split(r"[,+]", conversations) if p.strip())
    return f"beam:{beam}#scale={scale},conversations={which}"


def conversation_of(dialogue: str) -> str:
    """A BEAM dialogue id's conversation number (``beam-100k-7`` -> ``7``), else the id."""
    found = re.fullmatch(r"beam-[0-9a-z]+-(.+)", dialogue)
    return found.group(1) if found else dialogue


def conversation_order(label: str) -> tuple[float, str]:
    return (float(label) if label.isdigit() else math.inf, label)


def pss_kib(smaps_rollup: str) -> int:
    """The ``Pss:`` figure (KiB) of a ``/proc/PID/smaps_rollup`` text; 0 when it has none."""
    found = re.search(r"^Pss:\s+(\d+)\s+kB", smaps_rollup, re.MULTILINE)
    return int(found.group(1)) if found else 0


def floor_kinds(memories: set[str]) -> list[str]:
    """``embedding_floor.texts_of``'s kinds that a run of ``memories`` embeds."""
    return [k for k, need in KIND_MEMORIES.items() if "*" in need or need & memories]


def floor_total(kinds: dict[str, tuple[int, float]]) -> float:
    """The floor in CPU seconds: the sum over kinds of (texts, CPU seconds per text)."""
    return sum(texts * per for texts, per in kinds.values())


# ----------------------------------------------------------------------------- the run itself
@dataclasses.dataclass
class Measured:
    wall: float
    cpu: float
    peak_pss: int  # bytes, summed over the process tree
    peak_rss: int
    processes: int  # most processes seen at once
    load: tuple[float, float]
    exit_code: int = 0


def tree_pids(root: int) -> list[int]:
    """``root`` and its live descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parent = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def tree_pss(root: int) -> tuple[int, int]:
    """(PSS bytes summed over ``root``'s process tree, processes read)."""
    total, count = 0, 0
    for pid in tree_pids(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                total += pss_kib(fh.read()) * 1024
            count += 1
        except OSError:  # gone, or not ours to read
            continue
    return total, count


def measure(command: list[str], env: dict[str, str], check: bool = True) -> Measured:
    """Run ``command`` to its end, sampling its process tree's PSS and RSS; with ``check``, a
    run that exits non-zero (a failed cell: ``EXIT_CELL_FAILED``) stops the script."""
    load_before = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    peak = {"pss": 0, "rss": 0, "processes": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            pss, count = tree_pss(child.pid)
            peak["pss"] = max(peak["pss"], pss)
            peak["processes"] = max(peak["processes"], count)
            peak["rss"] = max(peak["rss"], _tree_rss(child.pid))
            done.wait(SAMPLE_SECONDS)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = child.wait()
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0 and check:
        raise SystemExit(f"memory-lab run failed (exit {code}): {' '.join(command)}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Measured(
        wall,
        cpu,
        peak["pss"],
        peak["rss"],
        peak["processes"],
        (load_before, os.getloadavg()[0]),
        code,
    )


# ----------------------------------------------------------------------------------- the floor
def rag_chunk_texts(source: str, chunk_tokens: int, timestamps: bool = True) -> list[str]:
    """Every text ``rag`` embeds as a passage over ``source``: its chunks each time one changes
    (the open chunk again after each exchange that adds to it), replayed with its own chunker."""
    from memory_lab.dialogue.sources import load_dialogues
    from memory_lab.memories.builtin.rag import RagMemory
    from memory_lab.run.exchanges import exchanges

    class _Collection:
        def upsert(self, **_: Any) -> None:
            pass

    texts: list[str] = []

    def embed(batch: list[str]) -> list[list[float]]:
        texts.extend(batch)
        return [[0.0] for _ in batch]

    for dialogue in load_dialogues(source):
        rag = RagMemory(
            _Collection(),
            embed,
            lambda _: [0.0],
            chunk_tokens=chunk_tokens,
            timestamps=timestamps,
        )
        for exchange in exchanges(dialogue):
            rag.observe(exchange)
    return list(dict.fromkeys(texts))  # a text embedded twice comes from the run's cache


@contextmanager
def _cpu_clock(module: types.ModuleType) -> Iterator[None]:
    """While inside, ``module``'s ``time.perf_counter`` reads this process's CPU time, so
    ``embedding_floor.seconds_per_text`` measures CPU seconds per text, not wall seconds."""
    saved = module.time
    module.time = types.SimpleNamespace(perf_counter=time.process_time)
    try:
        yield
    finally:
        module.time = saved


def floor(source: str, specs: list[Any], sample: int, seed: int) -> dict[str, tuple[int, float]]:
    """Kind -> (texts, CPU seconds per text) of what a run of ``specs`` over ``source`` embeds.

    Imported here, after the run: ``embedding_floor`` sets OMP_NUM_THREADS=1 when imported (as
    a run's workers use the engines), which the run's own environment must not inherit."""
    import random

    from benchmarks import embedding_floor
    from memory_lab.models.embeddings import resolve_embedding_model

    e5 = resolve_embedding_model("multilingual-e5-small")  # --embeddings offline
    names = {s.name for s in specs}
    every = embedding_floor.texts_of(source)
    kinds = {k: every[k] for k in floor_kinds(names)}
    for size in sorted({int(s.params.get("chunk_tokens", 512)) for s in specs if s.name == "rag"}):
        kinds[f"rag: {size}-token chunks as passages (e5)"] = (
            rag_chunk_texts(source, size),
            "e5-passage",
        )
    rng = random.Random(seed)
    measured = {}
    with _cpu_clock(embedding_floor):
        for kind, (texts, engine) in kinds.items():
            per = embedding_floor.seconds_per_text(texts, engine, sample, rng, e5)
            measured[kind] = (len(texts), per)
    return measured


# -------------------------------------------------------------------------------- the figures
def rows(results: Results) -> dict[str, Row]:
    """Memory -> its figures over ``results``, as ``which_memory.rows_of`` computes them."""
    return {row.memory: row for row in rows_of(results)}


def of_dialogue(results: Results, dialogue: str) -> Results:
    """``results`` restricted to one dialogue's records."""
    frames = {}
    for name in ("turns", "probes", "cells", "usage"):
        frame = getattr(results, name)
        frames[name] = frame[frame["dialogue"] == dialogue] if "dialogue" in frame else frame
    return dataclasses.replace(results, **frames)


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f}"


def _num(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:,.0f}"


def table(head: list[str], body: list[list[str]], markdown: bool) -> str:
    """Rows as a markdown table, or as aligned text (the first column left, the rest right)."""
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    out = []
    for r in [head, *body]:
        cells = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
        ]
        out.append("  ".join(cells))
    return "\n".join(out)


def conversation_tables(results: Results, markdown: bool) -> str:
    """Evidence recall, prompt tokens and seconds per exchange, one row per conversation, one
    column per memory, the figure over all conversations last."""
    memories = results.memory_order()
    dialogues = sorted(
        dict.fromkeys(results.turns["dialogue"]),
        key=lambda d: conversation_order(conversation_of(d)),
    )
    per = {d: rows(of_dialogue(results, d)) for d in dialogues}
    per["all"] = rows(results)
    first = results.turns[results.turns["memory"] == memories[0]]
    answerable = results.probes[
        (results.probes["memory"] == memories[0]) & (results.probes["category"] != "abstention")
    ]
    counts = {
        d: (int((first["dialogue"] == d).sum()), int((answerable["dialogue"] == d).sum()))
        for d in dialogues
    }
    counts["all"] = (len(first), len(answerable))
    out = []
    for title, cell in (
        ("evidence recall (%)", lambda r: _pct(r.evidence_recall)),
        ("prompt tokens / exchange", lambda r: _num(r.prompt_tokens)),
        ("memory's own seconds / exchange", lambda r: f"{r.seconds:.3f}"),
    ):
        body = []
        for d, figures in per.items():
            label = "all" if d == "all" else conversation_of(d)
            extra = [str(x) for x in counts[d]] if title.startswith("evidence") else []
            got = [cell(figures[m]) if m in figures else "-" for m in memories]
            body.append([label, *extra, *got])
        head = ["conversation"] + (
            ["exchanges", "answerable probes"] if title.startswith("evidence") else []
        )
        out.append(f"{title}\n\n{table(head + memories, body, markdown)}")
    return "\n\n".join(out)


def memory_table(results: Results, markdown: bool) -> str:
    """Per memory over every conversation: the figures, embedded tokens and cells' seconds."""
    body = []
    cells, turns, probes = results.cells, results.turns, results.probes
    for memory, r in rows(results).items():
        embedded = (
            turns.loc[turns["memory"] == memory, "embedding_tokens"].sum()
            + probes.loc[probes["memory"] == memory, "embedding_tokens"].sum()
        )
        mine = cells[cells["memory"] == memory]
        body.append(
            [
                memory,
                _pct(r.evidence_recall),
                _num(r.prompt_tokens),
                _num(r.maintenance_tokens),
                f"{r.seconds:.3f}",
                f"{float(mine['seconds'].sum()):,.0f}",
                f"{int(embedded):,}",
            ]
        )
    head = [
        "memory",
        "evidence recall (%)",
        "prompt tokens / exchange",
        "maintenance tokens / exchange",
        "own seconds / exchange",
        "cells' seconds",
        "embedded tokens (metered)",
    ]
    return table(head, body, markdown)


def floor_table(kinds: dict[str, tuple[int, float]], markdown: bool) -> str:
    body = [[k, f"{n:,}", f"{per * 1000:.1f}", f"{n * per:,.0f}"] for k, (n, per) in kinds.items()]
    body.append(["floor", "", "", f"{floor_total(kinds):,.0f}"])
    return table(["what is embedded", "texts", "CPU ms / text", "CPU-s"], body, markdown)


# ----------------------------------------------------------------------------------------- main
def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beam", required=True, help="BEAM's chats/ folder")
    parser.add_argument("--scale", default="100K", help="the scale folder (default 100K)")
    parser.add_argument("--conversations", default="1-20", help="e.g. 1-20, 1-5+9 (default 1-20)")
    parser.add_argument("--memory", nargs="+", default=MEMORIES, help="memory specs")
    parser.add_argument("--jobs", type=int, default=2, help="cells in N processes (default 2)")
    parser.add_argument("--out", type=Path, help="keep the results folder here (a new folder)")
    parser.add_argument("--prompts", action="store_true", help="record prompts (run's default)")
    parser.add_argument("--markdown", action="store_true", help="tables as markdown")
    parser.add_argument("--sample", type=int, default=40, help="texts timed per kind (floor)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the floor's samples")
    parser.add_argument("--no-floor", action="store_true", help="skip measuring the floor")
    args = parser.parse_args(argv)
    if args.out and args.out.exists() and any(args.out.iterdir()):
        parser.error(f"--out {args.out}: not empty (give a new folder)")
    return args


def command_of(args: argparse.Namespace, source: str, out: Path, cache: Path) -> list[str]:
    command = [sys.executable, "-m", "memory_lab.cli", "run", "--quiet", "--dialogues", source]
    command += ["--memory", *args.memory, "--jobs", str(args.jobs), "--out", str(out)]
    command += ["--cache-dir", str(cache)] + ([] if args.prompts else ["--no-prompts"])
    return command


def report(args, source, run: Measured, kinds, results: Results) -> str:
    mib = 2**20
    lines = [
        f"{source}, memories {' '.join(args.memory)}, --jobs {args.jobs}, cold cache, "
        f"{os.cpu_count()} cores, load average {run.load[0]:.1f} before, {run.load[1]:.1f} after",
        f"wall {run.wall:,.1f} s, CPU {run.cpu:,.1f} s ({run.cpu / run.wall:.2f} cores busy)",
    ]
    if kinds is not None:
        total = floor_total(kinds)
        cores = min(args.jobs, os.cpu_count() or 1)
        lines.append(
            f"floor {total:,.1f} CPU-s ({total / cores:,.1f} s wall on {cores} cores); "
            f"CPU / floor {run.cpu / total:.2f}, wall / floor's wall {run.wall * cores / total:.2f}"
        )
    lines.append(
        f"peak PSS summed over the run's processes {run.peak_pss / mib:,.0f} MiB (peak summed "
        f"RSS {run.peak_rss / mib:,.0f} MiB; at most {run.processes} processes at once)"
    )
    parts = ["\n".join(lines)]
    if kinds is not None:
        parts.append(
            "the floor (one thread, one text per call)\n\n" + floor_table(kinds, args.markdown)
        )
    parts.append(conversation_tables(results, args.markdown))
    parts.append("per memory, all conversations\n\n" + memory_table(results, args.markdown))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from memory_lab.run.prepare import resolve_memories

    specs = resolve_memories(args.memory)
    source = source_spec(args.beam, args.scale, args.conversations)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="beam-scale-") as tmp:
        out = args.out or Path(tmp) / "run"
        command = command_of(args, source, out, Path(tmp) / "cache")
        print("running: memory-lab " + " ".join(command[3:]), file=sys.stderr, flush=True)
        run = measure(command, env)
        results = read_results(out, prompts="dropped")
        kinds = None
        if not args.no_floor:
            print("measuring the floor ...", file=sys.stderr, flush=True)
            kinds = floor(source, specs, args.sample, args.seed)
        print(report(args, source, run, kinds, results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
