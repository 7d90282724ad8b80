"""The answer a report leads with: the best memory per meaningful metric, within its interval,
led by the figure the run is ranked by (``scoring/metrics.py``), and the cost frontier by that
figure, as short lines of text (the report escapes them, the viewer sets them as text).
Who leads is chosen in ``results/standings.py``; these lines only say it.
"""

from __future__ import annotations

import pandas as pd

from memory_lab.results.standings import frontier, leader, recall_leader
from memory_lab.results.summary import judged
from memory_lab.scoring.metrics import (
    Metric,
    RunFacts,
    benchmark_metrics,
    lead_metric,
    metric,
)
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


def frontier_line(summary: pd.DataFrame, by: Metric) -> str | None:
    """The memories no other beats on both ``by`` and total tokens, fewest tokens first."""
    rows = frontier(summary, by.name)
    if rows.empty:
        return None
    shown = ", ".join(
        f"{r['memory']} ({r['total_tokens']:,} tokens, {percent(r[by.name])})"
        for r in rows.to_dict("records")
    )
    named = by.noun
    return (
        f"Cost frontier by {named} (no other memory has both higher {named} and fewer "
        f"tokens): {shown}."
    )


RANKING_WHY = {
    "judge_accuracy": "a real judge graded a real answering model's replies.",
    "accuracy": "a real answering model replied (no real judge graded it).",
    "evidence_recall": (
        "the answering model is the offline reader, a stand-in whose recall and answer scores "
        "rank nothing; evidence recall does not depend on it."
    ),
}


def ranked_by(lead: Metric | None) -> dict[str, str] | None:
    """The figure a comparison is ranked by, for the viewer: its column, its name and why."""
    if lead is None:
        return None
    return {"name": lead.name, "title": lead.title, "why": RANKING_WHY[lead.name]}


def unranked_line(facts: RunFacts) -> str | None:
    """Why recall ranks nothing in a run whose answering model is the offline reader."""
    recall = metric("accuracy")
    if recall.meaningful(facts):
        return None
    return (
        "Recall is the offline reader's (a stand-in for an answering model, not a model's "
        "judgement) and ranks nothing here: memories are ranked by evidence recall. Recall "
        "comes from a run with a real model (--llm) or judge (--judge)."
    )


def headline(
    summary: pd.DataFrame,
    pairs: pd.DataFrame,
    facts: RunFacts | None = None,
    declared: list[str] | None = None,
) -> list[str]:
    """The report's opening lines, led by the first figure meaningful for the run
    (``metrics.lead_metric``: J, recall or evidence recall), then the lines the benchmarks declare
    for the run (``declared``: their own scores, ``Benchmark.headline``), the other figures that are
    meaningful, and the cost frontier by the leading figure. ``facts`` None: a run with a real
    answering model."""
    if summary.empty:
        return []
    facts = facts or RunFacts(real_answering_model=True, real_judge=judged(summary), evidence=True)
    present = {c for c in summary.columns if summary[c].notna().any()}
    lead = lead_metric(facts, present)
    lines = {  # each figure's line, made only for the figures shown
        "accuracy": lambda: recall_line(summary, pairs),
        "evidence_recall": lambda: best_line(
            summary, "evidence_recall", "Evidence recall (retrieval; no interval)"
        ),
        "judge_accuracy": lambda: best_line(summary, "judge_accuracy", "J", "judge_accuracy_sd"),
    }
    for own in benchmark_metrics():  # a benchmark's own answer score (its F1)
        if own.unit != "score":
            continue
        lines[own.name] = lambda m=own: best_line(summary, m.name, m.label, as_percent=False)
    shown = [name for name in lines if name in present and metric(name).meaningful(facts)]
    if lead is not None:
        shown = [lead.name] + [n for n in shown if n != lead.name]
    ordered = [lines[name]() for name in shown]
    ordered[1:1] = declared or []
    ordered += [unranked_line(facts), frontier_line(summary, lead) if lead else None]
    return [line for line in ordered if line]
