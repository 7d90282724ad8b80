"""The field's answer scores on tricky cases, with values worked out by hand from each definition.

LoCoMo F1: commas dropped, lower-cased, ASCII punctuation deleted, ``a an the and`` dropped,
Porter stems, multiset overlap. mem0 F1: lower-cased, ``. , ! ?`` to spaces, whitespace split,
set overlap. BLEU-1: brevity penalty x clipped unigram precision over ``nltk.word_tokenize``.
"""

from __future__ import annotations

import doctest
import math
import os
from pathlib import Path

import pytest

from memory_lab.benchmarks.locomo.f1 import locomo_f1
from memory_lab.benchmarks.locomo.importer import CATEGORY_KEY
from memory_lab.scoring.answers import (
    answer_scores,
    bleu1,
    exact_match,
    mem0_f1,
    word_tokenize,
    write_punkt_tab,
)


def of(reply, answers, category=None):
    """Every answer score of a probe, of LoCoMo's ``category`` (None: not LoCoMo's)."""
    return answer_scores(reply, answers, {} if category is None else {CATEGORY_KEY: category})


def scores(reply, answers, category=None):
    s = of(reply, answers, category)
    return (s["f1_locomo"], s["f1_mem0"], s["bleu1"], s["exact_match"])


NONE = {"f1_locomo": None, "f1_mem0": None, "bleu1": None, "exact_match": None}


def close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (g is None and w is None) or math.isclose(g, w, abs_tol=1e-12), (got, want)


def test_hyphens_are_deleted_by_locomo_and_kept_by_mem0():
    # LoCoMo: [wellknown selftaught painter] vs [selftaught painter]: P 2/3, R 1 -> 0.8
    # mem0: {a well-known self-taught painter} vs {self-taught painter}: P 1/2, R 1 -> 2/3
    # BLEU: 4 tokens, 2 matched, longer than the reference -> 0.5
    close(scores("A well-known self-taught painter", ["self-taught painter"]), (0.8, 2 / 3, 0.5, 0))


def test_locomo_stems_and_drops_articles_mem0_does_not():
    # "cats" stems to "cat": [she adopt two cat] vs [cat] -> 2*(1/4)/(5/4) = 0.4; mem0 and BLEU 0
    close(scores("She adopted two cats", ["cat"]), (0.4, 0, 0, 0))
    # "the" dropped by LoCoMo only: 1.0; mem0 P 2/3 R 1 -> 0.8; BLEU 2 of 3 -> 2/3
    close(scores("the Eiffel Tower", ["Eiffel Tower"]), (1, 0.8, 2 / 3, 0))


def test_repeated_words_count_once_for_mem0_only():
    # LoCoMo multiset: 1 of 3 -> 0.5; mem0 sets {dog} = {dog} -> 1; BLEU clipped 1/3
    close(scores("dog dog dog", ["dog"]), (0.5, 1, 1 / 3, 0))


def test_numbers_thousands_and_decimals():
    # LoCoMo drops the comma: [it cost 19000 dollar] vs [19000] -> 0.4; mem0 splits "19 000";
    # word_tokenize keeps "19,000" whole, which is not "19000"
    close(scores("It cost 19,000 dollars", ["19000"]), (0.4, 0, 0, 0))
    # "3.5": LoCoMo "35" = "35"; mem0 {3 5} = {3 5}; BLEU one equal token, equal length
    close(scores("3.5", ["3.5"]), (1, 1, 1, 1))


def test_dates():
    # LoCoMo [on may 7 2023] vs [7 may 2023]: P 3/4 R 1 -> 6/7; mem0 the same sets -> 6/7;
    # word_tokenize: on may 7 , 2023 . (6 tokens), 3 matched -> 0.5
    close(scores("On May 7, 2023.", ["7 May 2023"], 2), (6 / 7, 6 / 7, 0.5, 0))


def test_possessives_and_curly_apostrophes():
    # LoCoMo "carolines necklace" vs "necklace" -> 2/3; mem0 {caroline's necklace} -> 2/3;
    # word_tokenize: caroline 's necklace -> 1 of 3
    close(scores("Caroline's necklace", ["necklace"]), (2 / 3, 2 / 3, 1 / 3, 0))
    # "’" is not ASCII punctuation: both F1s keep it inside the word, so no overlap; NLTK's
    # tokenizer splits it off as a quote (caroline ’ s) against (caroline 's): 1 of 3
    close(scores("Caroline’s", ["Caroline's"]), (0, 0, 1 / 3, 0))


def test_punctuation():
    # "!" deleted (LoCoMo) or a space (mem0); exact match compares the raw lower-cased text;
    # word_tokenize: yes ! -> 1 of 2
    close(scores("Yes!", ["yes"]), (1, 1, 0.5, 0))
    # ";" is not in mem0's four marks: "tuesday;" is not "tuesday"; LoCoMo [tuesday mayb] -> 2/3
    assert mem0_f1("Tuesday; maybe", "Tuesday") == 0
    assert locomo_f1("Tuesday; maybe", "Tuesday") == pytest.approx(2 / 3)
    assert exact_match("  Paris ", "paris") == 1


def test_brevity_penalty():
    # one token, all matched, against three: exp(1 - 3/1)
    assert bleu1("Paris", "in Paris France") == pytest.approx(math.exp(-2), abs=1e-12)


def test_korean_text_is_split_on_spaces_only():
    # [부산 해운대] vs [부산]: P 1/2 R 1 -> 2/3 for both F1s; BLEU 1 of 2
    close(scores("부산 해운대", ["부산"]), (2 / 3, 2 / 3, 0.5, 0))
    # a particle attached to the word makes another token for all three
    close(scores("부산으로 갔어요", ["부산"]), (0, 0, 0, 0))


def test_empty_replies_score_zero():
    close(scores("", ["Paris"]), (0, 0, 0, 0))
    close(scores("   ", ["Paris"]), (0, 0, 0, 0))


def test_category_1_splits_reply_and_gold_on_commas():
    # parts [paint] [hike swim] ("and" dropped); gold parts [hike] [paint]:
    # best for "hiking" 2/3, for "painting" 1 -> mean 5/6. Whole texts (no category): [paint hike
    # swim] vs [hike paint] -> 0.8. mem0 never splits: {painting hiking and swimming} -> 2/3;
    # BLEU: painting , hiking and swimming vs hiking , painting -> 3 of 5
    reply, gold = "painting, hiking and swimming", "hiking, painting"
    close(scores(reply, [gold], 1), (5 / 6, 2 / 3, 0.6, 0))
    assert locomo_f1(reply, gold) == pytest.approx(0.8)


def test_category_3_keeps_the_gold_before_the_first_semicolon():
    reply, gold = "Likely yes", "Likely yes; because she said so"
    assert locomo_f1(reply, gold, 3) == 1
    # whole gold: 2 of 6 gold tokens -> 2*(1)(1/3)/(4/3) = 0.5
    assert locomo_f1(reply, gold, 2) == pytest.approx(0.5)
    # mem0 keeps "yes;" as a token: {likely} in common, P 1/2 R 1/6 -> 0.25
    assert of(reply, [gold], 3)["f1_mem0"] == pytest.approx(0.25)


def test_category_5_is_locomo_adversarial_rule_and_left_out_by_mem0():
    said = of("That is Not mentioned in the conversation.", [], 5)
    assert said == {**NONE, "f1_locomo": 1.0}
    assert of("No information available", [], "5")["f1_locomo"] == 1.0
    assert of("She went to Paris", [], 5) == {**NONE, "f1_locomo": 0.0}


def test_abstention_probes_of_our_suites_have_no_scores():
    assert of("I don't know", [], None) == NONE


def test_several_accepted_answers_keep_the_best_of_each_score():
    # against "Paris": LoCoMo [citi of pari] vs [pari] 0.5, mem0 1/4 of the set -> 0.4;
    # against "the city of Paris": every score 1
    close(scores("The city of Paris", ["Paris", "the city of Paris"]), (1, 1, 1, 1))
    # "Paris, the city": LoCoMo best 0.8 (2nd answer), mem0 {paris the city}: 2/3 vs "Paris"
    # (P 1/3 R 1 -> 0.5) or 6/7 vs the 2nd (P 1 R 3/4); BLEU paris , the city: 1/4 vs 1st,
    # 3 of 4 with BP exp(1 - 4/4) = 1 vs the 2nd -> 0.75
    close(scores("Paris, the city", ["Paris", "the city of Paris"]), (0.8, 6 / 7, 0.75, 0))


# --------------------------------------------------------------------------- word_tokenize

TEXTS = [
    "Dr. Smith went home. He was tired.",
    "Mr. and Mrs. Jones met Prof. Lee at 5 p.m. on Jan. 5, 2023. Then they left!",
    "She moved to the U.S. in 2019. It was a big change... Wasn't it?",
    'Caroline said: "I\'m going to the LGBTQ support group." Melanie smiled.',
    "J. K. Rowling's book costs $12.50 (about 10 euros). I bought it.",
    "The meeting is at 3:30pm; don't be late. OK?",
    "They'd've gone, e.g. to St. Louis or Washington D.C. Nobody knows.",
    "‘Quoted’ text — with dashes – and “curly quotes”. Another sentence.",
    "A sentence without a final stop",
    "Line one.\nLine two.\n\nA new paragraph. 7 May 2023.",
    "부산에 갔어요. 정말 좋았어요!",
    "",
]


@pytest.fixture
def nltk_with_punkt_tab(tmp_path, monkeypatch):
    """NLTK's own loader pointed at the packaged parameters in its punkt_tab layout."""
    import nltk
    from nltk import tokenize

    write_punkt_tab(tmp_path)
    write_punkt_tab(tmp_path, "german")  # the doctest has one German example
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    tokenize._get_punkt_tokenizer.cache_clear()
    yield nltk
    tokenize._get_punkt_tokenizer.cache_clear()


def test_word_tokenize_equals_nltk_word_tokenize(nltk_with_punkt_tab):
    texts = TEXTS + [t.lower() for t in TEXTS]
    for text in texts:
        assert word_tokenize(text) == nltk_with_punkt_tab.word_tokenize(text), text


def test_nltk_own_tokenizer_doctest_passes_on_the_packaged_parameters(nltk_with_punkt_tab):
    """NLTK's tokenize.doctest, whose expected outputs were made with the real punkt_tab data:
    every Punkt and word_tokenize example passes (only TextTiling, which needs corpora that are
    not installed, may fail). Without the parameters, 34 of its examples fail."""
    import nltk.test

    path = Path(os.path.dirname(nltk.test.__file__)) / "tokenize.doctest"
    parser = doctest.DocTestParser()
    test = parser.get_doctest(path.read_text("utf-8"), {}, "tokenize", str(path), 0)

    failed: list[str] = []

    class Runner(doctest.DocTestRunner):
        def report_failure(self, out, test, example, got):
            failed.append(example.source)

        def report_unexpected_exception(self, out, test, example, exc_info):
            failed.append(example.source)

    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = Runner(optionflags=flags).run(test, out=lambda s: None)
    assert result.attempted > 150
    tokenize_examples = [e for e in test.examples if "tokenize(" in e.source]
    assert len(tokenize_examples) > 40
    assert all("TextTiling" in src or "brown" in src for src in failed), failed
