"""How far two graders agree, and what several runs of one grader say: Cohen's kappa, the
majority verdict of repeated runs, and the mean and standard deviation over runs.

Conventions, stated once here and in docs/metrics.md:

- ``cohen_kappa(a, b)`` is Cohen's (1960) kappa of two binary labellings of the same items,
  ``(p_o - p_e) / (1 - p_e)`` with ``p_e`` from each labelling's own label shares. It is
  undefined (``nan``) when there are no items, and when ``p_e == 1``: both labellings gave every
  item one and the same label, so they agree perfectly but there is no variation for kappa to
  measure (scikit-learn's ``cohen_kappa_score`` returns ``nan`` there too). Two labellings that
  are each constant but different have ``p_o = p_e = 0`` and kappa 0.
- ``majority_vote`` is the verdict most runs gave, ignoring runs whose verdict could not be read;
  a tie is broken by the earliest run with a verdict.
- ``mean_sd`` gives the sample standard deviation (``ddof=1``, the ``n - 1`` denominator) over
  runs, ``nan`` with fewer than two runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float:
    """Cohen's kappa of two equally long binary labellings (see the module docstring)."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} labels against {len(b)}")
    n = len(a)
    if n == 0:
        return math.nan
    observed = sum(bool(x) == bool(y) for x, y in zip(a, b, strict=True)) / n
    share_a = sum(map(bool, a)) / n
    share_b = sum(map(bool, b)) / n
    expected = share_a * share_b + (1 - share_a) * (1 - share_b)
    if expected == 1:
        return math.nan
    return (observed - expected) / (1 - expected)


def majority_vote(verdicts: Sequence[bool | None]) -> bool | None:
    """The verdict most runs gave (unreadable ones ignored; a tie goes to the earliest run)."""
    read = [v for v in verdicts if v is not None]
    if not read:
        return None
    yes = sum(read)
    if yes * 2 == len(read):
        return read[0]
    return yes * 2 > len(read)


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (``n - 1``); nan where undefined."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = sum(values) / n
    if n < 2:
        return mean, math.nan
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
