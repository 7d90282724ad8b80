"""Which memory? Evidence recall, tokens and seconds per exchange, measured by history length.

Runs ``memory-lab run`` (offline, ``--jobs 2``) over four sources of growing history, the
built-in dialogues, LoCoMo, BEAM at 100K and at 1M tokens, through the same memories, then
writes ``docs/which-memory.md`` from the finished runs: for each source the history's length and
per memory the evidence recall (the share of a probe's evidence turns its context carried:
what a memory can be judged on with the offline stand-in models), the tokens each exchange puts
in the prompt, the memory's own maintenance tokens per exchange (the memory LLM's, and the
embedded tokens), and the memory's own seconds per exchange (its turns and reads; the answering
model's calls and model loading are not in them). The answers at the top of the page are
computed from those figures by the rule stated there, not written by hand.

A finished run is reused (``--resume`` on its folder); ``--only`` runs and reports a subset.

    python benchmarks/which_memory.py --locomo data/locomo10.json --beam BEAM/chats
    python benchmarks/which_memory.py --only builtin --page /tmp/which.md
    python benchmarks/which_memory.py --locomo locomo10.json --beam BEAM/chats --beam-100k 1-5
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memory_lab import load_dialogues, read_results, summarize  # noqa: E402
from memory_lab.models.tokens import count_tokens  # noqa: E402
from memory_lab.results.read import Results  # noqa: E402

MEMORIES = ["buffer", "window", "summary", "summary_buffer", "vector", "hybrid", "rag"]
# a memory within this many points of the best evidence recall counts as "as good", and the
# cheapest of those (tokens per exchange, then seconds) is the pick at that length
TIE_POINTS = 5.0
# what a memory that does not carry the whole history may put in the prompt at most, against
# buffer's prompt tokens per exchange
BUDGET = 0.25


@dataclass(frozen=True)
class Source:
    key: str
    title: str
    spec: str
    shown: str = ""  # the spec as the page shows it: the data's path as the dataset names it


@dataclass(frozen=True)
class Row:
    memory: str
    evidence_recall: float
    prompt_tokens: float
    maintenance_tokens: float
    seconds: float

    @property
    def tokens(self) -> float:
        return self.prompt_tokens + self.maintenance_tokens


def sources(args: argparse.Namespace) -> list[Source]:
    found = [Source("builtin", "Built-in dialogues", "builtin:classic")]
    if args.locomo:
        found.append(
            Source("locomo", "LoCoMo", f"locomo:{args.locomo}", "locomo:data/locomo10.json")
        )
    for key, title, scale, which in (
        ("beam100k", "BEAM 100K", "100K", args.beam_100k),
        ("beam1m", "BEAM 1M", "1M", args.beam_1m),
    ):
        if args.beam:
            options = f"#scale={scale},conversations={which}"
            found.append(
                Source(key, title, f"beam:{args.beam}{options}", f"beam:BEAM/chats{options}")
            )
    if args.only:
        unknown = set(args.only) - {s.key for s in found}
        if unknown:
            raise SystemExit(
                f"--only: no source {sorted(unknown)} (give --locomo / --beam for them)"
            )
        found = [s for s in found if s.key in args.only]
    return found


def run(source: Source, memories: list[str], out: Path, jobs: int) -> Path:
    folder = out / source.key
    command = [sys.executable, "-m", "memory_lab.cli", "run", "--quiet", "--jobs", str(jobs)]
    if (folder / "run.json").is_file():
        command += ["--resume", str(folder)]
    else:
        command += ["--no-prompts", "--dialogues", source.spec, "--memory", *memories]
        command += ["--out", str(folder)]
    print(f"{source.title}: {' '.join(command[2:])}", flush=True)
    subprocess.run(command, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return folder


def history(spec: str) -> tuple[int, float, float, int]:
    """Dialogues, mean tokens of one dialogue's history, mean exchanges per dialogue, and the
    probes with evidence turns (what evidence recall is a mean over)."""
    dialogues = load_dialogues(spec)
    tokens = [sum(count_tokens(t.text) for t in d.turns) for d in dialogues]
    exchanges = [sum(t.role == "user" for t in d.turns) for d in dialogues]
    probes = sum(1 for d in dialogues for p in d.probes if p.evidence)
    return len(dialogues), sum(tokens) / len(tokens), sum(exchanges) / len(exchanges), probes


def rows(folder: Path) -> list[Row]:
    return rows_of(read_results(folder, prompts="dropped"))


def rows_of(results: Results) -> list[Row]:
    """Each memory's figures over ``results``, in summary order: evidence recall, and prompt
    tokens, maintenance tokens and the memory's own seconds per exchange."""
    found = []
    for _, s in summarize(results).iterrows():
        turns = results.turns[results.turns["memory"] == s["memory"]]
        n = max(len(turns), 1)
        found.append(
            Row(
                memory=s["memory"],
                evidence_recall=float(s["evidence_recall"]),
                prompt_tokens=float(turns["prompt_tokens"].sum()) / n,
                maintenance_tokens=float(s["memory_tokens"]) / n,
                seconds=float(s["seconds"]) / n,
            )
        )
    return found


def pick(found: list[Row]) -> tuple[Row, Row, Row | None]:
    """The best evidence recall; the cheapest memory within TIE_POINTS of it; the best of those
    putting at most BUDGET of buffer's prompt tokens per exchange in the prompt (None when no
    buffer was measured or none fits)."""
    scored = [r for r in found if not math.isnan(r.evidence_recall)]
    best = max(scored, key=lambda r: r.evidence_recall)
    near = [r for r in scored if 100 * (best.evidence_recall - r.evidence_recall) <= TIE_POINTS]
    buffer = next((r for r in scored if r.memory == "buffer"), None)
    limit = BUDGET * buffer.prompt_tokens if buffer else -1.0
    within = [r for r in scored if r is not buffer and r.prompt_tokens <= limit]
    frugal = max(within, key=lambda r: (r.evidence_recall, -r.tokens)) if within else None
    return best, min(near, key=lambda r: (r.tokens, r.seconds)), frugal


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.1f}%"


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.1f}"


def page(measured: list[tuple[Source, tuple[int, float, float], list[Row]]], command: str) -> str:
    lines = [
        "# Which memory?",
        "",
        "Measured, not argued: the same memories replayed through the same runner over histories",
        "of growing length, offline. Every figure below comes from the runs of",
        f"`benchmarks/which_memory.py`, which wrote this page ({date.today().isoformat()}, "
        f"{os.cpu_count()} cores, {platform.machine()}):",
        "",
        "```bash",
        command,
        "```",
        "",
        "Offline the answering model is a stand-in (see [the offline instrument](offline.md)), so",
        "the memories are compared on **evidence recall**: the share of each probe's evidence",
        "turns that the memory put in the prompt. A memory cannot answer from what it did not",
        "carry; whether a real model then answers well is measured with `--llm` and a judge",
        "([real models](real-models.md)). Tokens per exchange are what each exchange puts in the",
        "prompt plus the memory's own maintenance (its LLM calls and embedded tokens); seconds",
        "per exchange are the memory's own work on this machine, without model loading.",
        "",
        "## The answer at each length",
        "",
        "The rule: the highest evidence recall; the cheapest memory (tokens per exchange) within",
        f"{TIE_POINTS:.0f} points of it; and, for a prompt that cannot hold the whole history, the",
        f"highest evidence recall among the memories whose prompt is at most {BUDGET:.0%} of",
        "buffer's (tokens per exchange: prompt plus maintenance).",
        "",
        "| history | dialogues | tokens each | best evidence recall | cheapest within "
        f"{TIE_POINTS:.0f} points | best at ≤ {BUDGET:.0%} of buffer's prompt |",
        "|---|---:|---:|---|---|---|",
    ]
    for source, (n, tokens, *_), found in measured:
        best, cheap, frugal = pick(found)
        frugal_cell = (
            f"{frugal.memory} ({_pct(frugal.evidence_recall)}, {_num(frugal.tokens)} tokens "
            "per exchange)"
            if frugal
            else "-"
        )
        lines.append(
            f"| {source.title} | {n} | {_num(tokens)} | {best.memory} "
            f"({_pct(best.evidence_recall)}) | {cheap.memory} ({_pct(cheap.evidence_recall)}, "
            f"{_num(cheap.tokens)} tokens per exchange) | {frugal_cell} |"
        )
    memories = [r.memory for r in measured[0][2]]
    by = {(s.key, r.memory): r for s, _, found in measured for r in found}
    lines += ["", "## Evidence recall by history length", ""]
    head = "| memory | " + " | ".join(f"{s.title} ({_num(h[1])} tokens)" for s, h, _ in measured)
    lines += [head + " |", "|---|" + "---:|" * len(measured)]
    for m in memories:
        cells = [
            _pct(by[(s.key, m)].evidence_recall) if (s.key, m) in by else "-"
            for s, _, _ in measured
        ]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    for source, (n, tokens, exchanges, probes), found in measured:
        lines += [
            "",
            f"## {source.title}",
            "",
            f"`{source.shown or source.spec}`: {n} dialogue(s), {_num(tokens)} tokens and "
            f"{_num(exchanges)} exchanges each on average; {probes} probes with evidence turns.",
            "",
            "| memory | evidence recall | prompt tokens / exchange | maintenance tokens / "
            "exchange | seconds / exchange |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in found:
            lines.append(
                f"| {r.memory} | {_pct(r.evidence_recall)} | {_num(r.prompt_tokens)} | "
                f"{_num(r.maintenance_tokens)} | {r.seconds:.3f} |"
            )
    lines += [
        "",
        "## Reading the figures",
        "",
        "- `buffer` carries every exchange until the answering model's window is full (the",
        "  offline reader emulates 128K tokens, and the oldest text is cut beyond it): its",
        "  evidence recall is 100% while the history fits, and its prompt grows with the history.",
        "- `vector` and `hybrid` embed the same texts, once per process: the first of them a",
        "  process runs pays for the embedding, so their seconds depend on the order of the cells",
        "  (their tokens and evidence recall do not).",
        "- Seconds are this machine's, with other work running; tokens and evidence recall are",
        "  the same on any machine.",
        "- The summaries of `summary` and `summary_buffer` are the offline summariser's, a",
        "  stand-in: with a real memory LLM (`--memory-llm`) they keep other facts.",
        "- The field's graph and LLM memories (`graphiti`, `hindsight`, `cognee`, `mem0`,",
        "  `langmem`) are not in these runs: each spends thousands of its model's tokens on every",
        "  exchange, hours at BEAM's lengths. Their figures from 100K to 1M tokens are on the",
        "  memories page ([at BEAM's scale](memories/index.md#at-beams-scale)), from",
        "  `benchmarks/graph_scale.py`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--locomo",
        help="the released locomo10.json, or its per-conversation files (a folder or a zip)",
    )
    parser.add_argument("--beam", help="BEAM's chats/ folder")
    parser.add_argument("--beam-100k", default="1-3", help="BEAM-100K conversations (default 1-3)")
    parser.add_argument("--beam-1m", default="10", help="BEAM-1M conversations (default 10)")
    parser.add_argument("--memory", nargs="+", default=MEMORIES)
    parser.add_argument("--only", nargs="+", choices=["builtin", "locomo", "beam100k", "beam1m"])
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "which-memory")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "which-memory.md")
    args = parser.parse_args(argv)
    measured = []
    for source in sources(args):
        folder = run(source, args.memory, args.out, args.jobs)
        measured.append((source, history(source.spec), rows(folder)))
    command = (
        "python benchmarks/which_memory.py"
        + (" --locomo data/locomo10.json" if args.locomo else "")
        + (
            f" --beam BEAM/chats --beam-100k {args.beam_100k} --beam-1m {args.beam_1m}"
            if args.beam
            else ""
        )
    )
    text = page(measured, command)
    args.page.write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
