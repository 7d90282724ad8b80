"""The field's graph and LLM memories through BEAM as the history grows: 100K, 500K, 1M tokens.

Runs ``memory-lab run`` (offline, ``--jobs 2``, ``--no-prompts``, a cache of its own in the
output folder) once per scale over BEAM's conversations through the memories (issue 46):
by default the 20 conversations of 100K, conversation 1 of 500K and conversation 10 of 1M,
through ``graphiti hindsight cognee mem0 langmem vector``. Each scale is a results folder
``OUT/<scale>``; a folder with a ``run.json`` is resumed (``--resume``: finished cells kept,
failed and unfinished ones redone), so the sweep can be stopped and started again and a report
(``--report-only``) written from whatever has finished. Each invocation's process tree is
sampled twice a second (``beam_scale.measure``) and its wall time, CPU time and peak PSS summed
over the processes are appended to ``OUT/<scale>/graph-scale.json``.

Then it prints, per scale and memory (cells that did not finish are named, not counted):

- evidence recall (the share of each answerable probe's evidence turns the context carried),
  and where a scale has several conversations, the lowest and highest of the conversations'
  own figures;
- maintenance tokens per exchange (the memory's own LLM prompts and replies, and its embedded
  tokens: what ``memory_tokens`` meters) and the memory's own seconds per exchange (its turns
  and reads, as ``which_memory.py`` computes them);
- what those metered tokens would cost at gpt-4o-mini's list prices (LLM tokens) and
  text-embedding-3-small's (embedded tokens), from ``memory_lab/data/prices.json``, per 1,000
  exchanges;

and, over all scales together, **growth**: each exchange's seconds and maintenance tokens by the
history before it (tokens of the exchanges replayed so far), in doubling bands (12.5K-25K,
25K-50K, ... 800K-1.6M), the ratio between successive bands, and the ratio per doubling that a
least-squares line through the bands' means on log-log axes gives. Flat is a ratio near 1;
a memory whose every exchange rereads the whole history would approach 2.

Seconds vary with the machine's load; tokens and recall do not. A full sweep takes many hours
on 2 cores (the LLM memories' maintenance is millions of tokens per 100K conversation).

    python benchmarks/graph_scale.py --beam BEAM/chats --out results/graph-scale
    python benchmarks/graph_scale.py --beam BEAM/chats --scales 1M:10 --memory graphiti vector
    python benchmarks/graph_scale.py --beam BEAM/chats --report-only --markdown
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.beam_scale import Measured, _pct, measure, source_spec, table  # noqa: E402
from benchmarks.which_memory import rows_of  # noqa: E402

MEMORIES = ["graphiti", "hindsight", "cognee", "mem0", "langmem", "vector"]
SCALES = ["100K:1-20", "500K:1", "1M:10"]
FIRST_BAND = 12_500  # tokens of history where the first doubling band starts
LLM_PRICE, EMBEDDING_PRICE = "gpt-4o-mini", "text-embedding-3-small"
LOG = "graph-scale.json"


# ------------------------------------------------------------------------------ pure helpers
def parse_scale(text: str) -> tuple[str, str]:
    """``1M:10`` -> (``1M``, ``10``); the scale folder and the conversations of it."""
    scale, sep, which = text.partition(":")
    if not sep or not scale or not which:
        raise argparse.ArgumentTypeError(f"{text!r}: give SCALE:CONVERSATIONS, e.g. 1M:10")
    return scale, which


def band_of(history: int, first: int = FIRST_BAND) -> int:
    """The doubling band of a history length: 0 for [12.5K, 25K), 1 for [25K, 50K), ...;
    -1 below 12.5K (too short to say anything about growth)."""
    if history < first:
        return -1
    return int(math.floor(math.log2(history / first)))


def band_label(band: int, first: int = FIRST_BAND) -> str:
    low, high = first * 2**band, first * 2 ** (band + 1)

    def k(x: float) -> str:
        return f"{x / 1e6:g}M" if x >= 1e6 else f"{x / 1e3:g}K" if x >= 1e3 else f"{x:g}"

    return f"{k(low)}-{k(high)}"


def per_doubling(means: dict[int, float]) -> float:
    """The ratio per doubling of history of a least-squares line through ``log2(mean)`` over
    the bands (consecutive bands are one doubling apart); NaN with fewer than two positive
    means."""
    points = [(b, math.log2(m)) for b, m in sorted(means.items()) if m > 0]
    if len(points) < 2:
        return math.nan
    xs, ys = zip(*points, strict=True)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return float(2**slope)


def history_before(texts_per_exchange: Iterable[int]) -> list[int]:
    """The history's tokens before each exchange, from each exchange's own tokens."""
    seen, found = 0, []
    for tokens in texts_per_exchange:
        found.append(seen)
        seen += tokens
    return found


def cost_per_thousand(llm_in: float, llm_out: float, embedded: float, exchanges: int) -> float:
    """US dollars per 1,000 exchanges of metered tokens at gpt-4o-mini's and
    text-embedding-3-small's list prices."""
    from memory_lab.models.accounting import load_prices

    prices = load_prices()
    llm, emb = prices[LLM_PRICE], prices[EMBEDDING_PRICE]
    usd = (
        llm_in * llm.input_per_mtok
        + llm_out * (llm.output_per_mtok or 0.0)
        + embedded * emb.input_per_mtok
    ) / 1e6
    return usd * 1000 / max(exchanges, 1)


# ----------------------------------------------------------------------------------- the runs
def command_of(folder: Path, source: str, memories: list[str], jobs: int) -> list[str]:
    command = [sys.executable, "-m", "memory_lab.cli", "run", "--quiet", "--jobs", str(jobs)]
    if (folder / "run.json").is_file():
        return command + ["--resume", str(folder)]
    command += ["--no-prompts", "--dialogues", source, "--memory", *memories]
    return command + ["--out", str(folder), "--cache-dir", str(folder.parent / "cache")]


def record(folder: Path, run: Measured, resumed: bool) -> None:
    """Append one invocation's measurements to ``folder/graph-scale.json``."""
    path = folder / LOG
    runs = json.loads(path.read_text()) if path.is_file() else []
    runs.append(
        {
            "resumed": resumed,
            "exit_code": run.exit_code,
            "wall_s": round(run.wall, 1),
            "cpu_s": round(run.cpu, 1),
            "peak_pss_mib": round(run.peak_pss / 2**20),
            "peak_rss_mib": round(run.peak_rss / 2**20),
            "processes": run.processes,
            "load": [round(x, 2) for x in run.load],
        }
    )
    path.write_text(json.dumps(runs, indent=1) + "\n")


def sweep(args: argparse.Namespace) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    for scale, which in args.scales:
        folder = args.out / scale
        folder.parent.mkdir(parents=True, exist_ok=True)
        resumed = (folder / "run.json").is_file()
        command = command_of(folder, source_spec(args.beam, scale, which), args.memory, args.jobs)
        print(f"{scale}: memory-lab {' '.join(command[3:])}", file=sys.stderr, flush=True)
        run = measure(command, env, check=False)
        record(folder, run, resumed)
        if run.exit_code:  # 1: a cell failed (named in the report); else the run itself did
            print(f"{scale}: memory-lab exited {run.exit_code}", file=sys.stderr, flush=True)


# -------------------------------------------------------------------------------- the figures
@dataclass(frozen=True)
class ScaleRow:
    memory: str
    cells: str  # "ok/all"
    evidence_recall: float
    prompt_tokens: float  # per exchange
    maintenance_tokens: float  # per exchange
    seconds: float  # per exchange
    cost: float  # USD per 1,000 exchanges
    recall_low: float = math.nan  # the lowest of its conversations' evidence recalls
    recall_high: float = math.nan  # and the highest (nan with fewer than two conversations)


METERED = ("memory_input_tokens", "memory_output_tokens", "embedding_tokens")


def _total(frames: tuple, column: str) -> float:
    """``column`` summed over the frames that have it (a missing figure counts 0)."""
    return float(sum(f[column].fillna(0).sum() for f in frames if column in f.columns))


def by_conversation(results, dialogue: str):
    """``results`` narrowed to one dialogue (every frame that names dialogues)."""

    def one(frame):
        return frame[frame["dialogue"] == dialogue] if "dialogue" in frame.columns else frame

    return replace(
        results,
        turns=one(results.turns),
        probes=one(results.probes),
        cells=one(results.cells),
        usage=one(results.usage),
    )


def recall_range(results) -> dict[str, tuple[float, float]]:
    """Each memory's lowest and highest evidence recall over the conversations it finished,
    each computed as the summary computes the whole (``rows_of``); only where it finished two
    or more: how far one conversation's figure can stray from the pooled one."""
    per: dict[str, list[float]] = {}
    for dialogue in results.cells["dialogue"].unique():
        for row in rows_of(by_conversation(results, dialogue)):
            if not math.isnan(row.evidence_recall):
                per.setdefault(row.memory, []).append(row.evidence_recall)
    return {m: (min(v), max(v)) for m, v in per.items() if len(v) > 1}


def scale_rows(folder: Path) -> list[ScaleRow]:
    """Each memory's figures over its finished cells in one scale's folder."""
    from memory_lab import read_results

    results = read_results(folder, prompts="dropped")
    cells = results.cells
    ok = cells[cells["status"] == "ok"]
    done = set(zip(ok["memory"], ok["dialogue"], strict=True))

    def finished(frame):
        if "memory" not in frame.columns:
            return frame
        keys = zip(frame["memory"], frame["dialogue"], strict=True)
        return frame.loc[[k in done for k in keys]] if len(frame) else frame

    kept = replace(
        results,
        turns=finished(results.turns),
        probes=finished(results.probes),
        cells=ok,
        usage=finished(results.usage),
    )
    figures = {r.memory: r for r in rows_of(kept)} if len(ok) else {}
    spread = recall_range(kept) if len(ok) else {}
    found = []
    for memory in results.memory_order():
        mine = cells[cells["memory"] == memory]
        turns = kept.turns[kept.turns["memory"] == memory]
        probes = kept.probes[kept.probes["memory"] == memory]
        r = figures.get(memory) if (mine["status"] == "ok").any() else None

        found.append(
            ScaleRow(
                memory,
                f"{int((mine['status'] == 'ok').sum())}/{len(mine)}",
                r.evidence_recall if r else math.nan,
                r.prompt_tokens if r else math.nan,
                r.maintenance_tokens if r else math.nan,
                r.seconds if r else math.nan,
                cost_per_thousand(
                    *(_total((turns, probes), c) for c in METERED),
                    len(turns),
                )
                if len(turns) and r
                else math.nan,
                *spread.get(memory, (math.nan, math.nan)),
            )
        )
    return found


def exchange_history(folder: Path) -> dict[tuple[str, int], int]:
    """(dialogue, exchange) -> the history's tokens before that exchange, for the dialogues
    the run in ``folder`` recorded (from their recorded sources)."""
    from memory_lab import load_dialogues
    from memory_lab.models.tokens import count_tokens
    from memory_lab.run.exchanges import exchanges

    recorded = json.loads((folder / "run.json").read_text())
    ids = {d["id"] for d in recorded["dialogues"]}
    found: dict[tuple[str, int], int] = {}
    for spec in dict.fromkeys(d["source"] for d in recorded["dialogues"]):
        for dialogue in load_dialogues(spec):
            if dialogue.id not in ids:
                continue
            seen = [count_tokens(e.user) + count_tokens(e.assistant) for e in exchanges(dialogue)]
            for i, before in enumerate(history_before(seen)):
                found[(dialogue.id, i)] = before
    return found


def turn_records(folder: Path) -> tuple[list[dict], dict[tuple[str, str], str]]:
    """Every turn record of ``folder``, its cells finished or not, and (memory, dialogue) ->
    how each cell that did not finish ended: the records of failed cells (``records.jsonl``
    keeps them) and of the part files of cells still running or that a run that died left
    behind (``parts/*.partial``; a resume deletes them), so a system that fails at some length
    still shows how its cost grew up to there."""
    from memory_lab.results.read import read_records

    turns, ended = [], {}
    records = read_records(folder, prompts="dropped")
    for r in records:
        if r.get("type") == "turn":
            turns.append(r)
        elif r.get("type") == "cell" and r.get("status") != "ok":
            ended[(r["memory"], r["dialogue"])] = f"failed: {str(r.get('error'))[:80]}"
    for part in sorted((folder / "parts").glob("*.partial")):
        with part.open(encoding="utf-8") as fh:
            found = [json.loads(line) for line in fh if line.strip().endswith("}")]
        found = [r for r in found if r.get("type") == "turn"]
        if found:
            turns.extend(found)
            key = (found[-1]["memory"], found[-1]["dialogue"])
            last = found[-1]["exchange"]
            ended[key] = f"unfinished (a part file of a run still going or one that died) at {last}"
    return turns, ended


def growth(
    folders: list[Path], first: int = FIRST_BAND
) -> tuple[dict[str, dict[int, tuple[int, float, float]]], dict[tuple[str, str], str]]:
    """memory -> band -> (exchanges, mean seconds, mean maintenance tokens) over every turn
    recorded in ``folders``; and the cells that did not finish, with how they ended."""
    bands: dict[str, dict[int, list[tuple[float, float]]]] = {}
    unfinished: dict[tuple[str, str], str] = {}
    for folder in folders:
        history = exchange_history(folder)
        turns, ended = turn_records(folder)
        unfinished.update(ended)
        for t in turns:
            band = band_of(history.get((t["dialogue"], int(t["exchange"])), 0), first)
            if band >= 0:
                seconds, tokens = float(t.get("seconds") or 0.0), float(t.get("memory_tokens") or 0)
                bands.setdefault(t["memory"], {}).setdefault(band, []).append((seconds, tokens))
    means = {
        memory: {
            b: (len(v), sum(s for s, _ in v) / len(v), sum(t for _, t in v) / len(v))
            for b, v in sorted(found.items())
        }
        for memory, found in bands.items()
    }
    return means, unfinished


def _num(x: float, digits: int = 0) -> str:
    return "-" if math.isnan(x) else f"{x:,.{digits}f}"


def scale_table(rows: list[ScaleRow], markdown: bool) -> str:
    head = [
        "memory",
        "cells ok",
        "evidence recall (%)",
        "lowest-highest conversation (%)",
        "prompt tokens / exchange",
        "maintenance tokens / exchange",
        "own s / exchange",
        "USD / 1,000 exchanges (gpt-4o-mini)",
    ]
    body = [
        [
            r.memory,
            r.cells,
            _pct(r.evidence_recall),
            "-" if math.isnan(r.recall_low) else f"{_pct(r.recall_low)}-{_pct(r.recall_high)}",
            _num(r.prompt_tokens),
            _num(r.maintenance_tokens),
            _num(r.seconds, 3),
            _num(r.cost, 2),
        ]
        for r in rows
    ]
    return table(head, body, markdown)


def growth_tables(
    measured: tuple[dict[str, dict[int, tuple[int, float, float]]], dict[tuple[str, str], str]],
    markdown: bool,
    first: int = FIRST_BAND,
) -> str:
    found, unfinished = measured
    out = []
    for title, at in (("own seconds / exchange", 1), ("maintenance tokens / exchange", 2)):
        bands = sorted({b for per in found.values() for b in per})
        body = []
        for memory, per in found.items():
            means = {b: v[at] for b, v in per.items()}
            cells = []
            for b in bands:
                if b not in per:
                    cells.append("-")
                    continue
                value = f"{per[b][at]:,.3f}" if at == 1 else f"{per[b][at]:,.0f}"
                before = per.get(b - 1)
                if before and before[at] > 0:
                    value += f" (×{per[b][at] / before[at]:.2f})"
                cells.append(value)
            body.append([memory, *cells, _num(per_doubling(means), 2)])
        head = ["memory", *(band_label(b, first) for b in bands), "× per doubling (fit)"]
        out.append(f"{title}, by the history before the exchange\n\n{table(head, body, markdown)}")
    exchanges = {
        m: {band_label(b, first): v[0] for b, v in per.items()} for m, per in found.items()
    }
    out.append("exchanges per band: " + json.dumps(exchanges))
    if unfinished:
        out.append(
            "cells that did not finish, counted up to their last recorded exchange:\n"
            + "\n".join(f"- {m} on {d}: {how}" for (m, d), how in sorted(unfinished.items()))
        )
    return "\n\n".join(out)


def report(args: argparse.Namespace) -> str:
    parts, folders = [], []
    for scale, which in args.scales:
        folder = args.out / scale
        if not (folder / "run.json").is_file():
            parts.append(f"## {scale} ({which}): not run")
            continue
        folders.append(folder)
        log = folder / LOG
        runs = json.loads(log.read_text()) if log.is_file() else []
        measured = (
            f"{len(runs)} invocation(s), wall {sum(r['wall_s'] for r in runs):,.0f} s, "
            f"CPU {sum(r['cpu_s'] for r in runs):,.0f} s, peak PSS summed over the processes "
            f"{max(r['peak_pss_mib'] for r in runs):,} MiB"
            if runs
            else "no measurements recorded"
        )
        rows = scale_rows(folder)
        parts.append(f"## {scale} ({which})\n\n{measured}\n\n{scale_table(rows, args.markdown)}")
    for folder in args.also:
        folders.append(folder)
        parts.append(f"## {folder}\n\n{scale_table(scale_rows(folder), args.markdown)}")
    if folders:
        parts.append("## growth\n\n" + growth_tables(growth(folders), args.markdown))
    return "\n\n".join(parts)


# ----------------------------------------------------------------------------------------- main
def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beam", required=True, help="BEAM's chats/ folder")
    parser.add_argument(
        "--scales",
        nargs="+",
        type=parse_scale,
        default=[parse_scale(s) for s in SCALES],
        help=f"SCALE:CONVERSATIONS ... (default {' '.join(SCALES)})",
    )
    parser.add_argument("--memory", nargs="+", default=MEMORIES, help="memory specs")
    parser.add_argument("--jobs", type=int, default=2, help="cells in N processes (default 2)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "graph-scale")
    parser.add_argument("--report-only", action="store_true", help="report finished runs only")
    parser.add_argument(
        "--also",
        nargs="+",
        type=Path,
        default=[],
        help="more results folders to report and count in the growth table (e.g. a memory's "
        "own run of a scale)",
    )
    parser.add_argument("--markdown", action="store_true", help="tables as markdown")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not args.report_only:
        sweep(args)
    print(report(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
