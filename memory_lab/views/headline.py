"""The answer a report leads with: the best memory per metric, within its interval, and the
cost frontier, as short lines of text (the report escapes them, the viewer sets them as text).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from memory_lab.views.charts import pareto_front


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _paired(pairs: pd.DataFrame, best: str, other: str) -> dict[str, Any] | None:
    """The paired comparison row of two memories with shared probes, oriented best − other."""
    if pairs.empty:
        return None
    for a, b, sign in ((best, other, 1), (other, best, -1)):
        row = pairs[(pairs["memory_a"] == a) & (pairs["memory_b"] == b)]
        if len(row) and row.iloc[0]["probes"] > 0:
            r = row.iloc[0]
            low, high = sorted((sign * r["ci_low"], sign * r["ci_high"]))
            return {"difference": sign * r["difference"], "low": low, "high": high}
    return None


def recall_line(summary: pd.DataFrame, pairs: pd.DataFrame) -> str | None:
    """The memory with the highest recall, its Wilson interval, and the memories it cannot be
    told apart from: by the paired 95% interval of the difference on shared probes (Newcombe),
    else, with no shared probes, by their recall falling inside its interval."""
    rows = summary.dropna(subset=["accuracy"]).sort_values("accuracy", ascending=False)
    if rows.empty:
        return None
    best = rows.iloc[0]
    tied, apart = [], []
    for r in rows.iloc[1:].to_dict("records"):
        paired = _paired(pairs, best["memory"], r["memory"])
        if paired is not None:
            within = paired["low"] <= 0 <= paired["high"]
        else:
            within = r["accuracy"] >= best["accuracy_low"]
        (tied if within else apart).append(f"{r['memory']} {_pct(r['accuracy'])}")
    line = (
        f"Recall: {best['memory']} {_pct(best['accuracy'])} "
        f"[95% CI {_pct(best['accuracy_low'])}–{_pct(best['accuracy_high'])}]"
    )
    if tied:
        line += f"; not distinguishable from it at 95%: {', '.join(tied)}"
    elif len(rows) > 1:
        line += "; ahead of every other memory at 95%"
    return line + "."


def best_line(
    summary: pd.DataFrame, column: str, label: str, spread: str | None = None, percent=True
) -> str:
    """The best memory on a mean without an interval of its own (with its sd over judge runs
    when there is one, and the memories within one sd)."""
    rows = summary.dropna(subset=[column]).sort_values(column, ascending=False)
    if rows.empty:
        return ""
    best = rows.iloc[0]
    value = _pct(best[column]) if percent else f"{best[column]:.3f}"
    shown = f"{label}: {best['memory']} {value}"
    sd = best.get(spread) if spread else None
    if not _missing(sd):
        near = [
            r["memory"] for r in rows.iloc[1:].to_dict("records") if r[column] >= best[column] - sd
        ]
        shown += f" ± {_pct(sd)} sd over judge runs"
        if near:
            shown += f"; within one sd: {', '.join(near)}"
    return shown + "."


def frontier_line(summary: pd.DataFrame) -> str | None:
    """The memories no other beats on both recall and total tokens, fewest tokens first."""
    front = pareto_front(summary)
    if not front:
        return None
    rows = summary[summary["memory"].isin(front)].sort_values("total_tokens")
    shown = ", ".join(
        f"{r['memory']} ({r['total_tokens']:,} tokens, {_pct(r['accuracy'])})"
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
    if "judge_accuracy" in summary and summary["judge_accuracy"].notna().any():
        lines.append(best_line(summary, "judge_accuracy", "J", "judge_accuracy_sd"))
    lines += [best_line(summary, "f1_locomo", "F1 LoCoMo", percent=False), frontier_line(summary)]
    return [line for line in lines if line]
