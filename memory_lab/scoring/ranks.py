"""Rank-aware retrieval scores: recall@k and NDCG@k per probe, by the field's definitions
(their source, and the check that these equal it, are in docs/metrics.md, "Rank scores").

Evidence recall (``memory_lab.scoring.probes``) says whether a probe's evidence reached the prompt;
these say at which rank the memory's retrieval put it. They are defined only for memories that
report a ranking (``Recall.ranking``: the source turns of the retrieved items, best first) and
for answerable probes with evidence; everything else gets None.

- ``recall_any@k``: 1.0 when at least one evidence document is among the top ``k``, else 0.0;
- ``recall_all@k``: 1.0 when every evidence document is among the top ``k``, else 0.0;
- ``ndcg_any@k``: binary relevance (1 for an evidence document), ``DCG@k = rel_1 +
  sum_{i=2..k} rel_i / log2(i)`` (ranks from 1: ranks 1 and 2 are both undiscounted), divided
  by the ideal DCG@k of the corpus, i.e. that of ``min(R, k)`` relevant documents first, where
  ``R`` is the number of evidence documents; 0.0 when the ideal is 0.

A ranked list shorter than ``k`` is scored as it is (nothing after its end), the ideal still
counts ``min(R, k)``: the definitions rank a whole corpus, a memory shows its top few, so
recall@10 of a memory that retrieves 4 items is its recall@4, and a memory that retrieves fewer
than ``R`` items cannot reach NDCG 1.

Documents are single turns (turn level) or sessions (session level). A memory's ranked item may
name several turns (an exchange names its user turn and its reply), so the ranking is flattened
to the level's unit first:

- **turn level**: the items' turn ids, item by item in rank order and within an item in the
  order it names them, each turn kept at its first (best) place; so ``k`` counts turns, and an
  exchange takes two ranks;
- **session level**: each of those turns mapped to its session, each session kept at its first
  (best) place; so ``k`` counts distinct sessions. For recall this is exactly the turn-to-session
  evaluation of the definitions' source, which widens ``k`` until the top holds ``k`` distinct
  sessions. Its NDCG differs: there every retrieved turn of an evidence session counts as a
  relevant document again (and the ideal counts every turn of the evidence sessions); here a
  session counts once, as in session-granularity retrieval.

An item that names no turn still takes a rank (a document that is no evidence). ``R`` is the
number of the probe's evidence turns found in the dialogue (sessions: their distinct sessions).

The probe records carry ``recall_all`` and ``ndcg_any`` at k = 5 and 10, at both levels
(``RANK_SCORES``); a benchmark with rank metrics of its own reads the record's ``ranking``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

RANK_KS = (5, 10)
RANK_LEVELS = ("turn", "session")
RANK_SCORES = [
    f"{level}_{metric}_at_{k}"
    for level in RANK_LEVELS
    for k in RANK_KS
    for metric in ("recall_all", "ndcg_any")
]


def dcg(relevances: Sequence[float], k: int) -> float:
    """DCG@k: the first relevance, plus ``rel_i / log2(i)`` for ranks i = 2..k."""
    head = list(relevances)[:k]
    return sum(rel if i == 1 else rel / math.log2(i) for i, rel in enumerate(head, start=1))


@dataclass(frozen=True)
class RankAt:
    """The three scores of one ranked list at one ``k``."""

    recall_any: float
    recall_all: float
    ndcg_any: float


def score_ranked(ranked: Sequence[Hashable], relevant: set, k: int) -> RankAt:
    """``recall_any@k``, ``recall_all@k`` and ``ndcg_any@k`` of a ranked list of distinct ids.

    ``relevant``: the evidence ids (all of them, also those the list misses: they set the ideal).
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    top = set(ranked[:k])
    found = [doc in top for doc in relevant]
    ideal = dcg([1.0] * min(len(relevant), k), k)
    actual = dcg([1.0 if doc in relevant else 0.0 for doc in ranked], k)
    return RankAt(
        recall_any=float(any(found)),
        recall_all=float(all(found)),
        ndcg_any=actual / ideal if ideal else 0.0,
    )


def turn_ranking(ranking: Sequence[Sequence[str]]) -> list[Hashable]:
    """Turn ids by rank, best first, each kept at its best place (see the module docstring).

    An item naming no turn keeps its place as a non-evidence entry.
    """
    out: list[Hashable] = []
    seen: set[Hashable] = set()
    for rank, turn_ids in enumerate(ranking):
        for entry in turn_ids or ((None, rank),):
            if entry not in seen:
                seen.add(entry)
                out.append(entry)
    return out


def session_ranking(turns: Sequence[Hashable], session_of: Mapping[str, str]) -> list[Hashable]:
    """The sessions of ranked turns, each kept at its best place; a turn the dialogue does not
    know (or an item naming no turn) is an entry of its own that matches no evidence session."""
    out: list[Hashable] = []
    seen: set[Hashable] = set()
    for turn in turns:
        session = session_of.get(turn) if isinstance(turn, str) else None
        entry = ("session", session) if session is not None else ("unknown", turn)
        if entry not in seen:
            seen.add(entry)
            out.append(entry)
    return out


def rank_scores(
    ranking: Sequence[Sequence[str]] | None,
    evidence: Sequence[str],
    session_of: Mapping[str, str],
) -> dict[str, float | None]:
    """The ``RANK_SCORES`` of one probe: None throughout when the memory does not rank
    (``ranking`` None) or the probe has no evidence turn in the dialogue.

    ``evidence``: the probe's evidence turn ids; ``session_of``: turn id -> session id of the
    dialogue (evidence turns it does not know are left out, as evidence recall leaves them).
    """
    known = [t for t in dict.fromkeys(evidence) if t in session_of]
    if ranking is None or not known:
        return dict.fromkeys(RANK_SCORES)
    turns = turn_ranking(ranking)
    lists = {
        "turn": (turns, set(known)),
        "session": (
            session_ranking(turns, session_of),
            {("session", session_of[t]) for t in known},
        ),
    }
    out: dict[str, float | None] = {}
    for level in RANK_LEVELS:
        ranked, relevant = lists[level]
        for k in RANK_KS:
            at = score_ranked(ranked, relevant, k)
            out[f"{level}_recall_all_at_{k}"] = at.recall_all
            out[f"{level}_ndcg_any_at_{k}"] = at.ndcg_any
    return {name: out[name] for name in RANK_SCORES}
