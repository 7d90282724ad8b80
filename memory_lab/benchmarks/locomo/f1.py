"""LoCoMo's answer score, ``f1_locomo``, by its published definition, declared by the LoCoMo
package for every probe a run scores (``Benchmark.answer_scores``).

LoCoMo's own evaluation: ``task_eval/evaluation.py`` (``normalize_answer``,
``f1_score``, ``f1``, ``eval_question_answering``) on branch ``code`` of
``snap-research/locomo``. A text is normalised by dropping commas, lower-casing, deleting ASCII
punctuation (``string.punctuation``), replacing the words ``a an the and`` by spaces and
collapsing whitespace; its tokens are the Porter stems (NLTK's ``PorterStemmer``) of the
whitespace-separated words; F1 counts the *multiset* overlap of reply and gold tokens. Per
LoCoMo category id: 1 (multi-hop) splits reply and gold on commas and takes the mean over gold
parts of the best reply part's F1; 3 keeps the gold before its first ``;``; 2 and 4 score the
whole texts; 5 (adversarial) is not an F1 at all: 1.0 when the reply contains "no information
available" or "not mentioned" (case-insensitive), else 0.0, which LoCoMo reports in the same
column.


A probe that is not LoCoMo's (no category id) scores the whole texts, as categories 2 and 4
do; ``benchmarks/field_scores_check.py`` compares with LoCoMo's own code.
"""

from __future__ import annotations

import math
import string
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import regex

from memory_lab.benchmarks.locomo.importer import ADVERSARIAL_CATEGORY, CATEGORY_KEY

_ASCII_PUNCT = frozenset(string.punctuation)
# ``regex`` as LoCoMo uses it: its word boundary counts combining marks as word characters.
_LOCOMO_ARTICLES = regex.compile(r"\b(a|an|the|and)\b")
_ADVERSARIAL_PHRASES = ("no information available", "not mentioned")


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    from nltk.stem import PorterStemmer

    return PorterStemmer()


def locomo_tokens(text: str) -> list[str]:
    """LoCoMo's answer tokens: normalised as its ``normalize_answer``, then Porter-stemmed."""
    text = text.replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _ASCII_PUNCT)
    text = _LOCOMO_ARTICLES.sub(" ", text)
    stem = _stemmer().stem
    return [stem(word) for word in text.split()]


def _f1_counts(reply: list[str], gold: list[str]) -> float:
    same = sum((Counter(reply) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(reply), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def locomo_f1(reply: str, gold: str, category: int | None = None) -> float:
    """LoCoMo's F1 of ``reply`` against one ``gold`` answer, by LoCoMo category id (see above).

    ``category`` None (a probe that is not LoCoMo's) scores the whole texts, as 2 and 4 do.
    """
    if category == ADVERSARIAL_CATEGORY:
        low = reply.lower()
        return 1.0 if any(phrase in low for phrase in _ADVERSARIAL_PHRASES) else 0.0
    if category == 3:
        gold = gold.split(";")[0].strip()
    if category == 1:
        parts = [locomo_tokens(p.strip()) for p in reply.split(",")]
        golds = [locomo_tokens(g.strip()) for g in gold.split(",")]
        return math.fsum(max(_f1_counts(p, g) for p in parts) for g in golds) / len(golds)
    return _f1_counts(locomo_tokens(reply), locomo_tokens(gold))


def category_of(metadata: Mapping[str, Any]) -> int | None:
    """The LoCoMo category id a probe's metadata keeps, as a number; None when it has none."""
    value = metadata.get(CATEGORY_KEY)
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def score(reply: str, golds: list[str], metadata: Mapping[str, Any]) -> float | None:
    """A probe's ``f1_locomo``: its adversarial figure for category 5, else the best F1 over
    the accepted answers (None for a probe with none)."""
    category = category_of(metadata)
    if category == ADVERSARIAL_CATEGORY:
        return locomo_f1(reply, "", ADVERSARIAL_CATEGORY)
    if not golds:
        return None
    return max(locomo_f1(reply, g, category) for g in golds)
