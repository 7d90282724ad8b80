"""The statistics memory-lab reports, in one place.

Proportions: ``wilson_interval`` (95% Wilson score interval). Paired comparisons of two memories
on the same probes: ``mcnemar_exact`` (exact McNemar p-value), ``paired_difference_ci`` (95%
Newcombe interval for the difference) and ``holm`` (Holm-Bonferroni adjustment over every pair).
Graders: ``cohen_kappa``, ``majority_vote`` and ``mean_sd``.

How far two graders agree, and what several runs of one grader say: Cohen's kappa, the
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


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval for a proportion; (nan, nan) when n == 0."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), 1.0 if successes == n else min(1.0, centre + half))


def mcnemar_exact(b: int, c: int) -> float:
    """Exact McNemar p-value: two-sided binomial test of ``b`` vs ``c`` discordant pairs, p=1/2."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


def paired_difference_ci(a: int, b: int, c: int, d: int) -> tuple[float, float]:
    """95% Newcombe (1998, method 10) interval for p1 - p2 from a paired 2x2 table.

    ``a`` both correct, ``b`` only the first, ``c`` only the second, ``d`` neither.
    """
    n = a + b + c + d
    if n == 0:
        return (math.nan, math.nan)
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n)
    l2, u2 = wilson_interval(a + c, n)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(margins) if margins else 0.0
    diff = p1 - p2
    lower = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    upper = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return (max(-1.0, diff - lower), min(1.0, diff + upper))


def holm(pvalues: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order."""
    order = sorted(range(len(pvalues)), key=pvalues.__getitem__)
    adjusted = [1.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


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
