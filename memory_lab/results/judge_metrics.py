"""The judge's figures per memory: J over runs, its spread, and its agreement (Cohen's kappa)
with string match and between grading prompts (``judge_metrics``, columns of the summary).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from memory_lab.dialogue.model import EVIDENCE_JUDGED
from memory_lab.scoring.stats import cohen_kappa, majority_vote, mean_sd


def _votes(row: pd.Series) -> dict[str, list[bool | None]]:
    """A probe's verdicts: grading prompt label -> the verdict of each run, in run order."""
    verdicts = row.get("judge_verdicts")  # an older run's: log/formats.py gave it them
    out: dict[str, list[bool | None]] = {}
    for v in sorted(verdicts if isinstance(verdicts, list) else [], key=lambda v: v["run"]):
        out.setdefault(v["prompt"], []).append(v["correct"])
    return out


def judge_metrics(probes: pd.DataFrame) -> pd.DataFrame:
    """Per memory: J (judge accuracy) mean and sd over runs, and agreement, for each prompt.

    Over answerable probes, the probes ``accuracy`` (string recall) is over. For the first
    grading prompt: ``judge_accuracy`` and ``judge_accuracy_sd`` (each run's accuracy over the
    probes it gave a verdict, then their mean and sample sd over runs, ``agreement.mean_sd``),
    ``judge_kappa`` (Cohen's kappa of its majority verdict against string match) and
    ``disagreement_rate`` (the share where they differ); for a prompt ``pK`` after it, the same
    columns suffixed ``_pK`` and ``judge_kappa_p1_pK`` (kappa of the two majority verdicts).
    Kappa is nan where undefined (see ``scoring/stats.py``). ``judge_runs`` is the runs per prompt,
    ``judge_unparseable`` the calls whose verdict could not be read, ``judge_tokens`` the judge's
    input and output tokens over every call (abstention probes included). Probes judged
    against their evidence (``EVIDENCE_JUDGED``) are not graded by ``--judge`` and not here.
    """
    rows = []
    probes = probes[~probes["category"].isin(EVIDENCE_JUDGED)]  # not graded by --judge
    for memory, group in probes.groupby("memory", sort=False):
        votes = [_votes(r) for _, r in group.iterrows()]
        answerable = (group["category"] != "abstention").tolist()
        string = group["correct"].astype(bool).tolist()
        labels = list(dict.fromkeys(label for v in votes for label in v))
        runs = max((len(runs) for v in votes for runs in v.values()), default=0)
        tokens = pd.to_numeric(group["judge_input_tokens"], errors="coerce").fillna(0).sum()
        tokens += pd.to_numeric(group["judge_output_tokens"], errors="coerce").fillna(0).sum()
        row: dict[str, Any] = {
            "memory": memory,
            "judge_runs": runs,
            "judge_unparseable": sum(x is None for v in votes for rs in v.values() for x in rs),
            "judge_tokens": int(tokens),
        }
        majority: dict[str, list[bool | None]] = {}
        for label in labels:
            suffix = "" if label == labels[0] else f"_{label}"
            per_run = []
            for r in range(runs):
                got = [
                    v[label][r]
                    for v, ok in zip(votes, answerable, strict=True)
                    if ok and len(v.get(label, [])) > r and v[label][r] is not None
                ]
                if got:
                    per_run.append(sum(got) / len(got))
            mean, sd = mean_sd(per_run)
            majority[label] = [majority_vote(v.get(label, [])) for v in votes]
            pairs = [
                (m, s)
                for m, s, ok in zip(majority[label], string, answerable, strict=True)
                if ok and m is not None
            ]
            row[f"judge_accuracy{suffix}"] = mean
            row[f"judge_accuracy_sd{suffix}"] = sd
            row[f"judge_kappa{suffix}"] = cohen_kappa([m for m, _ in pairs], [s for _, s in pairs])
            row[f"disagreement_rate{suffix}"] = (
                sum(m != s for m, s in pairs) / len(pairs) if pairs else math.nan
            )
            if suffix:
                both = [
                    (a, b)
                    for a, b, ok in zip(
                        majority[labels[0]], majority[label], answerable, strict=True
                    )
                    if ok and a is not None and b is not None
                ]
                row[f"judge_kappa_{labels[0]}_{label}"] = cohen_kappa(
                    [a for a, _ in both], [b for _, b in both]
                )
        rows.append(row)
    return pd.DataFrame(rows)
