"""Who leads a summary: the best memory on a figure and those it cannot be told apart from, and
the cost frontier. The report's headline and the cost chart say what these choose.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from memory_lab.results.pairs import paired_difference
from memory_lab.results.read import Results
from memory_lab.results.summary import judged
from memory_lab.scoring.metrics import Metric, RunFacts, lead_metric


def pareto_front(summary: pd.DataFrame, column: str = "accuracy") -> list[str]:
    """Memories no other memory beats on both ``column`` (higher) and total tokens (fewer)."""
    rows = summary.dropna(subset=[column]).to_dict("records")
    front = []
    for r in rows:
        dominated = any(
            o[column] >= r[column]
            and o["total_tokens"] <= r["total_tokens"]
            and (o[column] > r[column] or o["total_tokens"] < r["total_tokens"])
            for o in rows
        )
        if not dominated:
            front.append(r["memory"])
    return front


def frontier(summary: pd.DataFrame, column: str = "accuracy") -> pd.DataFrame:
    """The summary rows on the Pareto front of ``column`` against total tokens
    (``pareto_front``), fewest total tokens first."""
    front = pareto_front(summary, column)
    return summary[summary["memory"].isin(front)].sort_values("total_tokens")


def run_facts(runs: list[Results], summary: pd.DataFrame) -> RunFacts:
    """What the runs compared had (``metrics.RunFacts``): a real answering model in every run
    (a run without run.json, built by hand, counts as one), a real judge's verdicts, probes
    with evidence."""
    specs = [r.spec for r in runs]
    judges = [s.judge_model for s in specs if s is not None]
    return RunFacts(
        real_answering_model=all(s is None or not s.reader_model.offline for s in specs),
        real_judge=bool(judges)
        and all(j is not None and not j.offline for j in judges)
        and judged(summary),
        evidence="evidence_recall" in summary and summary["evidence_recall"].notna().any(),
    )


def ranking_metric(runs: list[Results], summary: pd.DataFrame) -> Metric | None:
    """The figure the runs' memories are ranked by (``metrics.lead_metric``): the first of
    J, recall and evidence recall that is meaningful for them and in the summary."""
    present = {c for c in summary.columns if summary[c].notna().any()}
    return lead_metric(run_facts(runs, summary), present)


def recall_leader(summary: pd.DataFrame, pairs: pd.DataFrame) -> dict[str, Any] | None:
    """The memory with the highest recall (``best``, a summary row) and the others, each
    ``tied`` with it or ``apart`` from it at 95%: by the paired interval of the difference on
    shared probes (Newcombe, ``pairs.paired_difference``), else, with no shared probes, by
    their recall falling inside its Wilson interval. None when no memory has a recall."""
    rows = summary.dropna(subset=["accuracy"]).sort_values("accuracy", ascending=False)
    if rows.empty:
        return None
    best = rows.iloc[0]
    tied, apart = [], []
    for r in rows.iloc[1:].to_dict("records"):
        paired = paired_difference(pairs, best["memory"], r["memory"])
        if paired is not None:
            within = paired["low"] <= 0 <= paired["high"]
        else:
            within = r["accuracy"] >= best["accuracy_low"]
        (tied if within else apart).append(r)
    return {"best": best, "tied": tied, "apart": apart}


def leader(summary: pd.DataFrame, column: str, spread: str | None = None) -> dict[str, Any] | None:
    """The memory with the highest mean ``column`` (``best``, a summary row). With a ``spread``
    column (the sd over judge runs) that it has: its ``sd`` and the memories within one sd of
    it (``near``); else ``sd`` None and no ``near``. None when no memory has the figure."""
    rows = summary.dropna(subset=[column]).sort_values(column, ascending=False)
    if rows.empty:
        return None
    best = rows.iloc[0]
    sd = best.get(spread) if spread else None
    if sd is None or (isinstance(sd, float) and math.isnan(sd)):
        return {"best": best, "sd": None, "near": []}
    near = [r["memory"] for r in rows.iloc[1:].to_dict("records") if r[column] >= best[column] - sd]
    return {"best": best, "sd": sd, "near": near}
