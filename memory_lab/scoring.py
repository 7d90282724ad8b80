"""Probe scoring (DESIGN.md section 6) and the Wilson interval for accuracies."""

from __future__ import annotations

import math
from dataclasses import dataclass

from memory_lab.dialogue import Probe
from memory_lab.models.offline_reader import is_abstention
from memory_lab.normalize import find_any


@dataclass(frozen=True)
class ProbeScore:
    correct: bool
    context_hit: bool | None  # None for abstention probes: there is nothing to find
    stale: bool
    abstained: bool
    matched: str | None


def score_probe(probe: Probe, reply: str, memory_context: str) -> ProbeScore:
    """Score a reply against a probe, given the memory text the model was shown.

    ``correct``: an accepted answer in the reply (for abstention probes: the reply abstains).
    ``context_hit``: an accepted answer in the memory context, whatever the model made of it.
    ``stale``: a stale answer in the reply and no accepted one.
    """
    abstained = is_abstention(reply)
    if probe.category == "abstention":
        return ProbeScore(abstained, None, False, abstained, None)
    matched = None if abstained else find_any(reply, list(probe.answers))
    stale = bool(probe.stale) and matched is None and find_any(reply, list(probe.stale)) is not None
    hit = find_any(memory_context, list(probe.answers)) is not None
    return ProbeScore(matched is not None, hit, stale, abstained, matched)


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval for a proportion; (nan, nan) when n == 0."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), 1.0 if successes == n else min(1.0, centre + half))
