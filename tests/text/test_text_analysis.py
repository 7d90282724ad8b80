"""The shared text analysis: one set of terms for the offline reader, hybrid's BM25 and the
offline answers to LangChain's prompts (English stems and stop words, Korean morphemes)."""

from __future__ import annotations

from memory_lab.memories.builtin.hybrid import bm25_terms
from memory_lab.models.langchain_prompts import proper_nouns
from memory_lab.text.analysis import content_words, en_stopwords, features, is_hangul_text, stem


def test_english_words_lose_stop_words_and_endings():
    assert {"the", "did", "ll"} <= en_stopwords()
    assert stem("moved") == stem("move") == "mov" and stem("boilers") == "boiler"
    assert features("I moved the boilers").terms == {"mov", "boiler"}
    assert content_words("I really love my new bike") == {"love", "new", "bike"}


def test_korean_is_matched_on_content_morphemes_whatever_the_particles():
    assert is_hangul_text("부산으로 이사했어요") and not is_hangul_text("Busan, 부산")
    assert features("동생은 부산에 살아요").terms == features("동생이 부산에서 살죠?").terms
    assert "부산" in features("부산으로 이사했어요").terms


def test_the_reader_hybrid_and_the_prompts_share_the_analysis():
    # hybrid's BM25 terms are the same stems; a code is kept whole and in parts
    assert bm25_terms("Moved the boilers, order ZX-48213") == [
        "mov",
        "boiler",
        "order",
        "zx-48213",
        "zx",
        "48213",
    ]
    assert bm25_terms("동생은 부산에 살아요")[:2] == ["동생", "부산"]
    assert "Priya" in proper_nouns("Yesterday my friend Priya came over.")
