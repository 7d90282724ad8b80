"""Probe scoring (docs/metrics.md): correctness, answer in context, evidence recall.

Evidence recall is the reader-independent retrieval figure: the share of a probe's evidence
turns that the memory's context carries. A turn is *carried* when the memory reported it as a
source of a recalled item (``Recall`` turn ids: exact credit), or when its text is in the context
verbatim or nearly so: at least ``CARRY_SHARE`` of the turn's word trigrams (after
normalisation; all of its words for turns under three words) occur in the context. A summary
that keeps the sentence holding the fact carries the turn; one that keeps only its topic does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from memory_lab.dialogue.model import EVIDENCE_JUDGED, Probe
from memory_lab.text.normalize import find_any, normalize

_ABSTAIN_OPENINGS = (
    "i don t know",
    "i do not know",
    "i m not sure",
    "i am not sure",
    "sorry i don t",
    "you haven t told me",
    "you have not told me",
    "모르겠",
    "잘 모르",
    "알 수 없",
)


def is_abstention(reply: str) -> bool:
    """True when a reply declines to answer: empty, or opening with an "I don't know" phrase."""
    text = normalize(reply)
    return not text or text.startswith(_ABSTAIN_OPENINGS)


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
    ``context_hit``: an accepted answer in the memory context, whatever the model made of it;
    None where it means nothing: abstention probes, ``derived`` probes (the answer is not
    verbatim in the dialogue) and answers that appear in the question itself (choice questions).
    ``stale``: a stale answer in the reply and no accepted one.
    A probe judged against its evidence (``EVIDENCE_JUDGED``: cognitive probes) has
    no answer to match: ``correct`` is False and ``context_hit`` None, and the summaries leave it
    out of accuracy (its retrieval figure is evidence recall).
    """
    abstained = is_abstention(reply)
    if probe.category == "abstention":
        return ProbeScore(abstained, None, False, abstained, None)
    if probe.category in EVIDENCE_JUDGED:
        return ProbeScore(False, None, False, abstained, None)
    matched = None if abstained else find_any(reply, list(probe.answers))
    stale = bool(probe.stale) and matched is None and find_any(reply, list(probe.stale)) is not None
    hit: bool | None = find_any(memory_context, list(probe.answers)) is not None
    if probe.derived or find_any(probe.question, list(probe.answers)) is not None:
        hit = None
    return ProbeScore(matched is not None, hit, stale, abstained, matched)


CARRY_SHARE = 0.5


def _shingles(words: list[str]) -> set[tuple[str, ...]]:
    if len(words) < 3:
        return {(w,) for w in words}
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


class ContextIndex:
    """A context prepared once for asking whether it carries turns.

    The normalised words are kept as one space-delimited string: a word or a trigram is in the
    context exactly when it occurs there between spaces, so nothing is built per word (a
    15K-token buffer is prepared in milliseconds, and once per distinct context).
    """

    def __init__(self, context: str):
        self.text = " " + " ".join(normalize(context).split()) + " "

    def carries(self, text: str) -> bool:
        """Whether the context holds ``text`` verbatim or nearly (see the module docstring)."""
        words = normalize(text).split()
        if not words:
            return False
        if len(words) < 3:
            return all(f" {w} " in self.text for w in words)
        grams = _shingles(words)
        found = sum(1 for gram in grams if f" {' '.join(gram)} " in self.text)
        return found >= CARRY_SHARE * len(grams)


@lru_cache(maxsize=8)
def context_index(context: str) -> ContextIndex:
    """The ``ContextIndex`` of ``context`` (probes after one exchange share their context)."""
    return ContextIndex(context)


def evidence_recall(
    evidence: dict[str, str], context: str, recalled_ids: tuple[str, ...] = ()
) -> float | None:
    """The share of evidence turns (id -> text) the context carries; None without evidence."""
    if not evidence:
        return None
    index = context_index(context)
    reported = set(recalled_ids)
    carried = sum(1 for tid, text in evidence.items() if tid in reported or index.carries(text))
    return carried / len(evidence)
