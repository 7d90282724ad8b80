"""``benchmarks/beam_scale.py``'s helpers: the source it runs, the PSS it reads, the floor's
kinds and sum, the rag chunks it counts and the per-conversation tables (the full benchmark is
run by hand: it takes about 40 minutes)."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest

from ..small_run import SMALL_MEMORIES, small_run  # noqa: F401 - a fixture

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import beam_scale  # noqa: E402


def test_source_spec_joins_lists_as_the_importer_reads_them():
    assert (
        beam_scale.source_spec("BEAM/chats", "100K", "1-20")
        == "beam:BEAM/chats#scale=100K,conversations=1-20"
    )
    assert beam_scale.source_spec("B", "1M", "1-3,7+9") == "beam:B#scale=1M,conversations=1-3+7+9"


def test_conversations_are_numbered_and_sorted_by_number():
    labels = [beam_scale.conversation_of(d) for d in ("beam-100k-10", "beam-100k-2", "mini")]
    assert labels == ["10", "2", "mini"]
    assert sorted(labels, key=beam_scale.conversation_order) == ["2", "10", "mini"]


def test_pss_is_read_from_smaps_rollup():
    text = (
        "55d0-7ffd ---p 00000000 00:00 0 [rollup]\nRss:  2048 kB\nPss:  1536 kB\nPss_Anon: 9 kB\n"
    )
    assert beam_scale.pss_kib(text) == 1536
    assert beam_scale.pss_kib("Rss: 1 kB\n") == 0


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="Linux /proc only")
def test_tree_pss_counts_this_process():
    pss, processes = beam_scale.tree_pss(os.getpid())
    assert processes >= 1
    assert 1 << 20 < pss < 64 << 30


def test_floor_kinds_follow_the_memories():
    only_window = beam_scale.floor_kinds({"window"})
    assert all(k.startswith("reader: questions") for k in only_window) and len(only_window) == 2
    rag = beam_scale.floor_kinds({"rag"})
    assert "vector: user turns as queries (e5)" in rag
    assert "vector: exchanges as passages (e5)" not in rag
    every = beam_scale.floor_kinds(set(beam_scale.MEMORIES))
    assert every == list(beam_scale.KIND_MEMORIES)


def test_floor_kinds_are_embedding_floors_kinds():
    from benchmarks import embedding_floor

    kinds = embedding_floor.texts_of("builtin:classic")
    assert set(beam_scale.KIND_MEMORIES) == set(kinds)


def test_floor_total_is_texts_times_seconds_per_text():
    kinds = {"a": (100, 0.5), "b": (40, 0.025), "c": (0, 3.0)}
    assert beam_scale.floor_total(kinds) == pytest.approx(51.0)
    assert "| floor |  |  | 51 |" in beam_scale.floor_table(kinds, markdown=True)


def test_rag_chunk_texts_are_the_chunks_rag_embeds():
    from memory_lab.models.tokens import count_tokens

    texts = beam_scale.rag_chunk_texts("builtin:classic", 64)
    assert texts and len(texts) == len(set(texts))
    assert max(count_tokens(t) for t in texts) <= 64 + 2  # a decoded cut may count a bit more
    assert len(beam_scale.rag_chunk_texts("builtin:classic", 4096)) < len(texts)


def test_table_plain_and_markdown():
    head, body = ["memory", "recall"], [["window", "4.7"], ["vector", "38.1"]]
    assert beam_scale.table(head, body, markdown=True).splitlines()[:3] == [
        "| memory | recall |",
        "|---|---:|",
        "| window | 4.7 |",
    ]
    plain = beam_scale.table(head, body, markdown=False).splitlines()
    assert plain[0] == "memory  recall" and plain[2] == "vector    38.1"


def test_tables_per_conversation_add_up(small_run):  # noqa: F811 - the fixture
    results = small_run
    dialogues = list(dict.fromkeys(results.turns["dialogue"]))
    assert len(dialogues) == 2
    whole = beam_scale.rows(results)
    parts = [beam_scale.rows(beam_scale.of_dialogue(results, d)) for d in dialogues]
    for memory, row in whole.items():
        turns = [
            len(
                results.turns[
                    (results.turns["memory"] == memory) & (results.turns["dialogue"] == d)
                ]
            )
            for d in dialogues
        ]
        tokens = sum(p[memory].prompt_tokens * n for p, n in zip(parts, turns, strict=True))
        assert tokens == pytest.approx(row.prompt_tokens * sum(turns))
        assert not math.isnan(row.evidence_recall)
    text = beam_scale.conversation_tables(results, markdown=True)
    assert text.count("| all |") == 3
    assert all(m in text for m in results.memory_order())
    assert "| buffer |" in beam_scale.memory_table(results, markdown=True)
    assert set(SMALL_MEMORIES) <= set(results.memory_order())
