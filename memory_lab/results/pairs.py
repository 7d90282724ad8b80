"""Memories compared on the same probes: every pair's counts, accuracy difference with its 95%
interval, and McNemar's exact test, Holm-adjusted over the pairs (``paired_comparison``)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pandas as pd

from memory_lab.results.read import Results
from memory_lab.results.summary import recall_probes
from memory_lab.scoring.stats import holm, mcnemar_exact, paired_difference_ci


def paired_comparison(results: Results) -> pd.DataFrame:
    """Every pair of memories on the probes both answered: counts, difference, CI, McNemar p.

    Over the probes the summary's recall is over (``summary.recall_probes``: answerable, with
    answers to match), so a pair's two recalls are those of the summary wherever both memories
    answered the same probes."""
    probes = recall_probes(results)
    if probes.empty:
        return pd.DataFrame()
    wide = probes.pivot_table(
        index=["dialogue", "probe_id"], columns="memory", values="correct", aggfunc="first"
    )
    rows = []
    memories = [m for m in results.memory_order() if m in wide.columns]
    for first, second in itertools.combinations(memories, 2):
        pair = wide[[first, second]].dropna().astype(bool)
        x, y = pair[first], pair[second]
        a, b, c, d = (int(v.sum()) for v in (x & y, x & ~y, ~x & y, ~x & ~y))
        n = a + b + c + d
        low, high = paired_difference_ci(a, b, c, d)
        rows.append(
            {
                "memory_a": first,
                "memory_b": second,
                "probes": n,
                "accuracy_a": (a + b) / n if n else math.nan,
                "accuracy_b": (a + c) / n if n else math.nan,
                "difference": (b - c) / n if n else math.nan,
                "ci_low": low,
                "ci_high": high,
                "only_a": b,
                "only_b": c,
                "p_mcnemar": mcnemar_exact(b, c),
            }
        )
    frame = pd.DataFrame(rows)
    if len(frame):
        frame["p_holm"] = holm(list(frame["p_mcnemar"]))
    return frame


def paired_difference(pairs: pd.DataFrame, first: str, second: str) -> dict[str, Any] | None:
    """The difference of two memories on their shared probes, oriented ``first`` − ``second``
    (``difference``, and its interval ``low``, ``high``); None when they share no probe."""
    if pairs.empty:
        return None
    for a, b, sign in ((first, second, 1), (second, first, -1)):
        row = pairs[(pairs["memory_a"] == a) & (pairs["memory_b"] == b)]
        if len(row) and row.iloc[0]["probes"] > 0:
            r = row.iloc[0]
            low, high = sorted((sign * r["ci_low"], sign * r["ci_high"]))
            return {"difference": sign * r["difference"], "low": low, "high": high}
    return None
