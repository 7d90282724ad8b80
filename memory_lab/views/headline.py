"""The answer a report leads with: the best memory per metric, within its interval, and the
cost frontier, as short lines of text (the report escapes them, the viewer sets them as text).
Who leads is chosen in ``results/standings.py``; these lines only say it.
"""

from __future__ import annotations

import pandas as pd

from memory_lab.results.standings import frontier, leader, recall_leader
from memory_lab.results.summary import judged
from memory_lab.views.numbers import percent


def recall_line(summary: pd.DataFrame, pairs: pd.DataFrame) -> str | None:
    """The memory with the highest recall, its Wilson interval, and the memories it cannot be
    told apart from (``standings.recall_leader``)."""
    standing = recall_leader(summary, pairs)
    if standing is None:
        return None
    best, tied = standing["best"], standing["tied"]
    line = (
        f"Recall: {best['memory']} {percent(best['accuracy'])} "
        f"[95% CI {percent(best['accuracy_low'])}–{percent(best['accuracy_high'])}]"
    )
    if tied:
        shown = ", ".join(f"{r['memory']} {percent(r['accuracy'])}" for r in tied)
        line += f"; not distinguishable from it at 95%: {shown}"
    elif standing["apart"]:
        line += "; ahead of every other memory at 95%"
    return line + "."


def best_line(
    summary: pd.DataFrame, column: str, label: str, spread: str | None = None, as_percent=True
) -> str:
    """The best memory on a mean without an interval of its own (with its sd over judge runs
    when there is one, and the memories within one sd: ``standings.leader``)."""
    standing = leader(summary, column, spread)
    if standing is None:
        return ""
    best, sd = standing["best"], standing["sd"]
    value = percent(best[column]) if as_percent else f"{best[column]:.3f}"
    shown = f"{label}: {best['memory']} {value}"
    if sd is not None:
        shown += f" ± {percent(sd)} sd over judge runs"
        if standing["near"]:
            shown += f"; within one sd: {', '.join(standing['near'])}"
    return shown + "."


def frontier_line(summary: pd.DataFrame) -> str | None:
    """The memories no other beats on both recall and total tokens, fewest tokens first."""
    rows = frontier(summary)
    if rows.empty:
        return None
    shown = ", ".join(
        f"{r['memory']} ({r['total_tokens']:,} tokens, {percent(r['accuracy'])})"
        for r in rows.to_dict("records")
    )
    return f"Cost frontier (no other memory has both higher recall and fewer tokens): {shown}."


def headline(summary: pd.DataFrame, pairs: pd.DataFrame) -> list[str]:
    """The report's opening lines: recall, evidence recall, J (when judged), LoCoMo's F1 and
    the cost frontier."""
    if summary.empty:
        return []
    lines = [
        recall_line(summary, pairs),
        best_line(summary, "evidence_recall", "Evidence recall (retrieval; no interval)"),
    ]
    if judged(summary):
        lines.append(best_line(summary, "judge_accuracy", "J", "judge_accuracy_sd"))
    lines += [
        best_line(summary, "f1_locomo", "F1 LoCoMo", as_percent=False),
        frontier_line(summary),
    ]
    return [line for line in lines if line]
