"""RealMem's retrieval metrics on a memory-lab run, number for number with its
``eval/compute_auto_metrics_for_realmem.py`` (``AvatarMemory/RealMemBench``, read at commit
67afd08).

Each probe record's ranking (``RANKING_FIELD``: ``Recall.ranking``, the retrieved items' turn
ids, best first) becomes a ranking of sessions: each turn's session (turn ids are
``<session_identifier>.t<n>``, ``importer``), each session at its first (best) place, as the
authors' ``eval/eval_mem0.py`` writes one ``chunk`` item per session at its best rank. Their
script then, for ``k`` in 5, 10, 20:

- ``recall_any@k``: 1.0 when a gold session is in the top ``k``; ``recall_all@k``: when all are;
- ``ndcg_any@k``: binary relevance over the sessions, ``DCG = rel_1 + sum_{i>=2} rel_i /
  log2(i)`` (ranks 1 and 2 undiscounted), over the ideal DCG of the gold sessions first;

and reports each metric's mean over the evaluated questions, rounded to 4 places.

The reference protocol keeps their code's quirks: a question is matched to its gold by its text
(stripped), the gold of a text is that of the LAST ``User`` turn of that text in the whole file
followed directly by an ``Assistant`` turn with gold (``memory_session_uuids``, else the
``session_uuid`` of its ``memory_used`` items), so any such turn counts as a question, not only
``is_query`` ones (``importer.reference_gold``); the retrieval results are keyed by question
text, so two probes of one text are one question, the last asked's ranking; a question whose
text has no gold is left out (their "No ground truth" warning). A gold session not yet in memory
(the question's own session) still counts: no memory can retrieve it.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memory_lab.benchmarks.realmem.importer import (
    PERSONA_KEY,
    QUERY_TEXT_KEY,
    REFERENCE_GOLD_KEY,
    SESSION_KEY,
)

RANKING_FIELD = "ranking"  # a probe record's ranked retrieval: [[turn id, ...], ...] best first
KS = (5, 10, 20)
METRICS = tuple(f"{m}@{k}" for m in ("recall_all", "recall_any", "ndcg_any") for k in KS)
SCORES_FILE = "realmem_scores.csv"
COLUMNS = ("memory", "persona", "questions", "unmatched", *METRICS)
ALL = "all"  # the row of a memory's mean over its personas (the authors report per persona)
PROTOCOLS = ("reference",)
_TURN_ID = re.compile(r"(.+)\.t[0-9]+")


def dcg(relevances: Sequence[float], k: int) -> float:
    """``dcg`` of the authors' script (numpy as theirs, ``asfarray`` as ``asarray(float)``)."""
    rel = np.asarray(relevances, dtype=float)[:k]
    if rel.size:
        return rel[0] + np.sum(rel[1:] / np.log2(np.arange(2, rel.size + 1)))
    return 0.0


def evaluate(
    ranked: Sequence[str], gold: Iterable[str], corpus: Sequence[str], k: int
) -> tuple[float, float, float]:
    """``evaluate_retrieval`` of the authors' script: (recall_any, recall_all, ndcg) at ``k`` of
    ``ranked`` session ids (those outside ``corpus`` dropped, as theirs drops unknown ids)."""
    gold = list(gold)
    index = {c: i for i, c in enumerate(corpus)}
    rankings = [index[r] for r in ranked if r in index]
    recalled = {corpus[i] for i in rankings[:k]}
    recall_any = float(any(d in recalled for d in gold))
    recall_all = float(all(d in recalled for d in gold))
    relevances = [1 if c in gold else 0 for c in corpus]
    actual = dcg([relevances[i] for i in rankings[:k]], k)
    ideal = dcg(sorted(relevances, reverse=True), k)
    return recall_any, recall_all, (0.0 if ideal == 0 else float(actual / ideal))


def session_ranking(ranking: Sequence[Sequence[str]]) -> list[str]:
    """The sessions of a ranking's turns, each at its first (best) place."""
    out: dict[str, None] = {}
    for item in ranking:
        for turn in item or ():
            m = _TURN_ID.fullmatch(str(turn))
            if m:
                out.setdefault(m.group(1), None)
    return list(out)


@dataclass
class PersonaScores:
    """One (memory, persona): the questions evaluated, the unmatched, each metric's values."""

    memory: str
    persona: str
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)  # text -> probe record
    unmatched: int = 0
    values: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in METRICS})
    ranks: bool | None = None  # True: records carry rankings; False: the memory does not rank

    def means(self) -> dict[str, float | None]:
        """``round(float(np.mean(v)), 4)``: their summary."""
        return {m: (round(float(np.mean(v)), 4) if v else None) for m, v in self.values.items()}


def probe_rankings(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], PersonaScores]:
    """The probe records of RealMem probes grouped by (memory, persona), keyed by question text
    (a later probe of one text replaces an earlier one, as the authors' results dict does)."""
    groups: dict[tuple[str, str], PersonaScores] = {}
    chosen = [
        r
        for r in records
        if r.get("type") == "probe"
        and isinstance(r.get("probe_metadata"), dict)
        and PERSONA_KEY in r["probe_metadata"]
    ]
    chosen.sort(key=lambda r: int(r.get("exchange") or 0))  # stable: the run's own order within
    for r in chosen:
        meta = r["probe_metadata"]
        key = (str(r["memory"]), str(meta[PERSONA_KEY]))
        group = groups.setdefault(key, PersonaScores(*key))
        text = str(meta.get(QUERY_TEXT_KEY) or r.get("question") or "").strip()
        group.questions[text] = dict(r)
    return groups


def score_group(group: PersonaScores, corpus: Sequence[str] | None = None) -> PersonaScores:
    """Fill ``group.values`` by the reference protocol. ``corpus``: every session id of the
    persona's file (the authors' corpus; only its membership matters for a memory-lab ranking,
    whose sessions are all the file's), default the sessions the rankings and gold name."""
    for m in METRICS:
        group.values[m] = []
    group.unmatched = 0
    have = [r for r in group.questions.values() if RANKING_FIELD in r]
    group.ranks = None if not have else any(r[RANKING_FIELD] is not None for r in have)
    if not group.ranks:
        return group
    gold_of = {t: r["probe_metadata"].get(REFERENCE_GOLD_KEY) for t, r in group.questions.items()}
    if corpus is None:
        names: set[str] = set()
        for t, r in group.questions.items():
            names.update(gold_of[t] or ())
            names.update(session_ranking(r.get(RANKING_FIELD) or ()))
            names.add(str(r["probe_metadata"].get(SESSION_KEY, "")))
        corpus = sorted(names)
    for text, r in group.questions.items():
        gold = gold_of[text]
        if not gold:
            group.unmatched += 1
            continue
        ranked = session_ranking(r.get(RANKING_FIELD) or ())
        for k in KS:
            recall_any, recall_all, ndcg = evaluate(ranked, gold, corpus, k)
            group.values[f"recall_all@{k}"].append(recall_all)
            group.values[f"recall_any@{k}"].append(recall_any)
            group.values[f"ndcg_any@{k}"].append(ndcg)
    return group


def score_records(records: Iterable[Mapping[str, Any]]) -> list[PersonaScores]:
    """Every (memory, persona) of a run's records, scored by the reference protocol."""
    return [score_group(g) for g in probe_rankings(records).values()]


def rows(scored: Sequence[PersonaScores]) -> list[dict[str, Any]]:
    """The CSV's rows: each (memory, persona), then each memory's ``all`` row (the mean of its
    personas' unrounded means, over personas: no figure of the authors')."""
    out: list[dict[str, Any]] = []
    memories = list(dict.fromkeys(g.memory for g in scored))
    for memory in memories:
        mine = [g for g in scored if g.memory == memory]
        for g in sorted(mine, key=lambda g: g.persona):
            out.append(
                {
                    "memory": memory,
                    "persona": g.persona,
                    "questions": len(g.values[METRICS[0]]),
                    "unmatched": g.unmatched,
                    **g.means(),
                }
            )
        scored_ones = [g for g in mine if g.values[METRICS[0]]]
        if len(mine) > 1 and scored_ones:
            means = {
                m: round(float(np.mean([np.mean(g.values[m]) for g in scored_ones])), 4)
                for m in METRICS
            }
            out.append(
                {
                    "memory": memory,
                    "persona": ALL,
                    "questions": sum(len(g.values[METRICS[0]]) for g in scored_ones),
                    "unmatched": sum(g.unmatched for g in mine),
                    **means,
                }
            )
    return out


def write_csv(path: Path, table: Sequence[Mapping[str, Any]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(COLUMNS))
        writer.writeheader()
        for row in table:
            writer.writerow({c: ("" if row.get(c) is None else row.get(c)) for c in COLUMNS})


def read_csv(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``realmem_scores.csv``, metrics as floats (None where empty)."""
    with open(path, newline="", encoding="utf-8") as fh:
        out = []
        for row in csv.DictReader(fh):
            for m in METRICS:
                row[m] = float(row[m]) if row.get(m) not in (None, "") else None
            out.append(row)
        return out


def table_text(scored: Sequence[PersonaScores], table: Sequence[Mapping[str, Any]]) -> str:
    """The printable table, with a line for each memory that does not rank or has no rankings
    recorded."""
    shown = (
        "recall_any@5",
        "recall_any@10",
        "recall_any@20",
        "recall_all@10",
        "ndcg_any@5",
        "ndcg_any@10",
        "ndcg_any@20",
    )
    head = ["memory", "persona", "questions", *shown]
    lines = [
        "RealMem retrieval (the authors' compute_auto_metrics_for_realmem.py, reference protocol)"
    ]
    body = [
        [str(r["memory"]), str(r["persona"]), str(r["questions"])]
        + [("-" if r.get(m) is None else f"{r[m]:.4f}") for m in shown]
        for r in table
        if r.get(METRICS[0]) is not None
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=False)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in body]
    for memory in dict.fromkeys(g.memory for g in scored):
        mine = [g for g in scored if g.memory == memory]
        if all(g.ranks is False for g in mine):
            lines.append(f"{memory}: does not rank its recall (no retrieval to score)")
        elif all(g.ranks is None for g in mine):
            lines.append(
                f"{memory}: its probe records carry no '{RANKING_FIELD}' (a run from before "
                "memory-lab recorded rankings): not scored"
            )
    unmatched = sum(g.unmatched for g in scored if g.ranks)
    if unmatched:
        lines.append(
            f"{unmatched} question(s) whose text has no gold left out, as the authors' script does"
        )
    return "\n".join(lines)
