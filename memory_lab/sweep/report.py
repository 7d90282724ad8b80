"""A sweep's report: per run what it cost the machine and each memory's figures; the answer.

Written from the run folders and ``OUT/sweep.json`` alone, so it can be written at any time
(``memory-lab sweep SPEC --report-only``) from whatever has finished. Per run: the invocations'
wall and CPU seconds, the peak PSS summed over the run's processes, the sampler's own share of
a core, and, where measured, the embedding floor (CPU seconds, and wall seconds on the run's
cores) with the run's ratio to it; then each memory's figures (``SWEEP_METRICS``, as
every table writes them). With ``report: {answer: true}`` the rule's picks per run, and with
``growth: true`` each memory's seconds and maintenance tokens by the history before the
exchange, per doubling, over all the runs.
"""

from __future__ import annotations

import math
import os
import platform
from datetime import date
from pathlib import Path
from typing import Any

from memory_lab.sweep.execute import read_log
from memory_lab.sweep.figures import BUDGET, BY_NAME, SWEEP_METRICS, TIE_POINTS, pick, run_rows
from memory_lab.sweep.floor import floor_total
from memory_lab.sweep.growth import Bands, band_label, growth, per_doubling
from memory_lab.sweep.spec import Run, Sweep


def table(head: list[str], body: list[list[str]], markdown: bool, align: str = "") -> str:
    """A table as Markdown, or as aligned plain text; ``align`` says each column's side, ``l``
    or ``r`` (default: the first, names, left; the rest, figures, right)."""
    align = align or "l" + "r" * (len(head) - 1)
    if markdown:
        rule = ["---" if a == "l" else "---:" for a in align]
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(rule) + "|"]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(row: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if align[i] == "l" else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, body)])


def _text(name: str, row: dict[str, Any]) -> str:
    from memory_lab.views.tables import metric_text

    return metric_text(BY_NAME[name], row, missing="-")


def cores(run: Run) -> int:
    """The cores a run keeps busy at most: its ``jobs`` (or ``concurrency``), else one."""
    return int(run.options.get("jobs") or run.options.get("concurrency") or 1)


def cost_line(run: Run, entry: dict[str, Any] | None) -> str:
    """What the run's invocations cost the machine, and the floor where measured."""
    every = (entry or {}).get("invocations") or []
    calls = [c for c in every if not c.get("stopped")]
    cut = len(every) - len(calls)
    cut_short = (
        f"; {cut} more stopped before it ended (the sweep was killed; not measured, so these "
        "figures leave its time out)"
        if cut
        else ""
    )
    if not calls:
        return f"not measured (no invocation ended){cut_short}"
    wall = sum(c["wall"] for c in calls)
    cpu = sum(c["cpu"] for c in calls)
    sampler = sum(c.get("sampler_cpu", 0.0) for c in calls)
    text = (
        f"{len(calls)} invocation(s): wall {wall:,.1f} s, CPU {cpu:,.1f} s "
        f"({cpu / wall if wall else 0:.2f} cores busy), peak PSS "
        f"{max(c['peak_pss'] for c in calls) / 2**20:,.0f} MiB summed over "
        f"{max(c['processes'] for c in calls)} process(es) (RSS "
        f"{max(c['peak_rss'] for c in calls) / 2**20:,.0f} MiB); the sampler used "
        f"{100 * sampler / wall if wall else 0:.2f}% of a core{cut_short}"
    )
    if entry and entry.get("floor"):
        total = floor_total({k: tuple(v) for k, v in entry["floor"].items()})
        on = total / cores(run)
        text += (
            f". Embedding floor {total:,.1f} CPU s, {on:,.1f} s on {cores(run)} core(s): "
            f"wall ÷ floor {wall / on if on else math.nan:.2f}, CPU ÷ floor "
            f"{cpu / total if total else math.nan:.2f}"
        )
    return text


def memory_table(rows: list[dict[str, Any]], markdown: bool, spread: bool = False) -> str:
    head = ["memory", "cells ok", *(m.heading for m in SWEEP_METRICS)]
    if spread:
        head.insert(3, "lowest-highest dialogue")
    body = []
    for r in rows:
        cells = [r["memory"], r["cells"], *(_text(m.name, r) for m in SWEEP_METRICS)]
        if spread:
            low, high = r.get("recall_low"), r.get("recall_high")
            pair = {"evidence_recall": low}, {"evidence_recall": high}
            cells.insert(
                3,
                "-"
                if low is None
                else f"{_text('evidence_recall', pair[0])}-{_text('evidence_recall', pair[1])}",
            )
        body.append(cells)
    return table(head, body, markdown)


def history(run: Run) -> tuple[int, float]:
    """The run's dialogues and the mean tokens of one dialogue's history."""
    from memory_lab.dialogue.sources import load_dialogues
    from memory_lab.models.tokens import count_tokens

    dialogues = load_dialogues(run.dialogues)
    tokens = [sum(count_tokens(t.text) for t in d.turns) for d in dialogues]
    return len(dialogues), sum(tokens) / max(len(tokens), 1)


def answer_section(measured: list[tuple[Run, list[dict[str, Any]]]], markdown: bool) -> str:
    """The rule, its picks per run (with each run's history), and evidence recall by run."""
    rule = (
        "The rule: the highest evidence recall; the cheapest memory (tokens per exchange: "
        f"prompt plus maintenance) within {TIE_POINTS:.0f} points of it; and, for a prompt "
        "that cannot hold the whole history, the highest evidence recall among the memories "
        f"whose prompt is at most {BUDGET:.0%} of buffer's."
    )
    head = [
        "run",
        "dialogues",
        "tokens each",
        "best evidence recall",
        f"cheapest within {TIE_POINTS:.0f} points",
        f"best at ≤ {BUDGET:.0%} of buffer's prompt",
    ]

    def said(r: dict[str, Any] | None, tokens: bool) -> str:
        if r is None:
            return "-"
        total = r["prompt_tokens_per_exchange"] + r["maintenance_tokens_per_exchange"]
        extra = f", {total:,.0f} tokens / exchange" if tokens else ""
        return f"{r['memory']} ({_text('evidence_recall', r)}{extra})"

    body = []
    for run, rows in measured:
        picks = pick(rows)
        n, tokens = history(run)
        body.append(
            [
                run.title,
                f"{n:,}",
                f"{tokens:,.0f}",
                said(picks["best"], False),
                said(picks["cheapest"], True),
                said(picks["frugal"], True),
            ]
        )
    memories = list(dict.fromkeys(r["memory"] for _, rows in measured for r in rows))
    by = {(run.key, r["memory"]): r for run, rows in measured for r in rows}
    recall = [
        [m, *(_text("evidence_recall", by.get((run.key, m), {})) for run, _ in measured)]
        for m in memories
    ]
    return "\n\n".join(
        [
            rule,
            table(head, body, markdown, align="lrrlll"),
            "Evidence recall by run:",
            table(["memory", *(run.title for run, _ in measured)], recall, markdown),
        ]
    )


def growth_tables(found: Bands, unfinished: dict, markdown: bool) -> str:
    out = []
    for title, at in (("own seconds / exchange", 1), ("maintenance tokens / exchange", 2)):
        bands = sorted({b for per in found.values() for b in per})
        body = []
        for memory, per in found.items():
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
            fit = per_doubling({b: v[at] for b, v in per.items()})
            body.append([memory, *cells, "-" if math.isnan(fit) else f"{fit:.2f}"])
        head = ["memory", *(band_label(b) for b in bands), "× per doubling (fit)"]
        out.append(f"{title}, by the history before the exchange\n\n{table(head, body, markdown)}")
    if unfinished:
        out.append(
            "cells that did not finish, counted up to their last recorded exchange:\n"
            + "\n".join(f"- {m} on {d}: {how}" for (m, d), how in sorted(unfinished.items()))
        )
    return "\n\n".join(out)


def report(sweep: Sweep, out: Path | None = None, markdown: bool = False) -> str:
    """The sweep's report from what has finished in ``out`` (the spec's ``out`` by default)."""
    out = Path(out or sweep.out)
    log = read_log(out)
    parts = [
        f"# {sweep.title}",
        f"Every figure below comes from the runs of `memory-lab sweep {sweep.path}` "
        f"({date.today().isoformat()}, {os.cpu_count()} cores, {platform.machine()}; results "
        f"in `{out}`).",
    ]
    if sweep.report.about:
        parts.append(sweep.report.about.strip())
    measured, folders = [], []
    for run in sweep.runs:
        folder = out / run.key
        if not (folder / "run.json").is_file():
            why = f": {run.unset.split(': ', 1)[1]}" if run.unset else ""
            parts.append(f"## {run.title} ({run.key}): not run{why}")
            continue
        rows = run_rows(folder, spread=sweep.report.by_conversation)
        measured.append((run, rows))
        folders.append(folder)
        parts += [
            f"## {run.title} ({run.key})",
            f"`{run.dialogues}`: {cost_line(run, log['runs'].get(run.key))}",
            memory_table(rows, markdown, spread=sweep.report.by_conversation),
        ]
    if sweep.report.answer and measured:
        parts.insert(3 if sweep.report.about else 2, "## The answer per run")
        parts.insert(4 if sweep.report.about else 3, answer_section(measured, markdown))
    if sweep.report.growth and folders:
        parts += ["## Growth", growth_tables(*growth(folders), markdown)]
    return "\n\n".join(parts) + "\n"
