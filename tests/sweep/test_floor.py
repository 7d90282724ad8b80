"""The embedding floor's texts: which kinds a memory set embeds, rag's chunks, and the reader's
sentences cut to the answering model's window as a buffer's prompt is."""

from __future__ import annotations

import pytest

from memory_lab.sweep.floor import (
    KIND_MEMORIES,
    floor_kinds,
    floor_total,
    rag_chunk_texts,
    texts_of,
)


def test_floor_kinds_follow_the_memories():
    only_window = floor_kinds({"window"})
    assert all(k.startswith("reader: questions") for k in only_window) and len(only_window) == 2
    rag = floor_kinds({"rag"})
    assert "vector: user turns as queries (e5)" in rag
    assert "vector: exchanges as passages (e5)" not in rag
    assert floor_kinds({"buffer", "vector", "rag"}) == list(KIND_MEMORIES)
    assert set(KIND_MEMORIES) == set(texts_of("builtin:classic"))


def test_floor_total_is_texts_times_seconds_per_text():
    assert floor_total({"a": (100, 0.5), "b": (40, 0.025), "c": (0, 3.0)}) == pytest.approx(51.0)


def test_rag_chunk_texts_are_the_chunks_rag_embeds():
    from memory_lab.models.tokens import count_tokens

    texts = rag_chunk_texts("builtin:classic", 64)
    assert texts and len(texts) == len(set(texts))
    assert max(count_tokens(t) for t in texts) <= 64 + 2  # a decoded cut may count a bit more
    assert len(rag_chunk_texts("builtin:classic", 4096)) < len(texts)


def test_the_readers_sentences_are_those_a_window_shows():
    sentences = "reader: sentences as passages (e5)"
    whole = texts_of("builtin:classic")[sentences][0]
    assert texts_of("builtin:classic", window=128_000)[sentences][0] == whole  # all fit
    cut = texts_of("builtin:classic", window=200)[sentences][0]
    assert 0 < len(cut) < len(whole) and set(cut) <= set(whole)
    # the questions and the exchanges are embedded whatever the window
    kinds = texts_of("builtin:classic", window=200)
    assert (
        kinds["vector: exchanges as passages (e5)"]
        == texts_of("builtin:classic")["vector: exchanges as passages (e5)"]
    )
