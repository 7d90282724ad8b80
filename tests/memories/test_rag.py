"""The ``rag`` memory: the conversation in fixed-size token chunks, the nearest k recalled."""

from __future__ import annotations

import pytest

from memory_lab.memories import MemorySpecError, Query, parse_memory_spec, tokens_held
from memory_lab.memories.protocol import Exchange
from memory_lab.models.tokens import token_ids
from memory_lab.run.exchanges import exchanges

from .replay import replayed


def conversation(dialogue) -> str:
    """The conversation as rag writes it (dated user lines), one exchange after another."""
    out = []
    for ex in exchanges(dialogue):
        if ex.user:
            out.append(f"input: {ex.dated_user()}\n")
        if ex.assistant:
            out.append(f"response: {ex.assistant}\n")
    return "".join(out)


def test_parameters_are_checked_when_the_spec_is_parsed():
    spec = parse_memory_spec("rag:chunk_tokens=128,k=1")
    assert spec.params == {"chunk_tokens": 128, "k": 1}
    assert parse_memory_spec("rag").params == {"chunk_tokens": 512, "k": 2}
    with pytest.raises(MemorySpecError, match="'chunk_tokens' must be at least 16, got 8"):
        parse_memory_spec("rag:chunk_tokens=8")
    with pytest.raises(MemorySpecError, match="'k' must be at least 1, got 0"):
        parse_memory_spec("rag:k=0")
    with pytest.raises(MemorySpecError, match="'chunk_tokens' must be int"):
        parse_memory_spec("rag:chunk_tokens=big")


def test_chunks_cut_the_conversation_at_chunk_tokens_and_name_their_turns(nurse, run_models):
    cell = replayed("rag:chunk_tokens=16,k=2", nurse, run_models)
    memory = cell.memory
    chunks = memory.chunks
    text = conversation(nurse)
    assert "".join(c.text for c in chunks) == text  # the whole conversation, once, in order
    assert memory.held_texts() == [c.text for c in chunks]
    assert [c.tokens for c in chunks[:-1]] == [16] * (len(chunks) - 1)
    assert 0 < chunks[-1].tokens <= 16 and memory.tokens == len(token_ids(text))
    # the turns with a token in each chunk, found by locating each turn's line in the text
    position = 0
    spans = []  # (turn id, first token, end token) of each turn in the stream
    for ex in exchanges(nurse):
        for turn_id, line in ((ex.user_turn_id, f"input: {ex.dated_user()}\n"),) + tuple(
            (t, f"response: {ex.assistant}\n") for t in ex.assistant_turn_ids
        ):
            n = len(token_ids(line))
            spans.append((turn_id, position, position + n))
            position += n
    for c in chunks:
        start, end = c.index * 16, c.index * 16 + c.tokens
        expected = [t for t, a, b in spans if a < end and b > start]
        assert c.turn_ids == expected
    # a turn cut by a chunk's end is named by both chunks
    assert any(set(a.turn_ids) & set(b.turn_ids) for a, b in zip(chunks, chunks[1:], strict=False))
    assert tokens_held(memory) >= len(token_ids(text)) - len(chunks)
    cell.close()


def test_recall_is_the_nearest_chunks_best_first_naming_their_turns(nurse, run_models):
    cell = replayed("rag:chunk_tokens=32,k=1", nurse, run_models)
    recall = cell.memory.recall(Query("Where do I teach these days?", "s2", "2026-04-10"))
    [item] = recall.items
    assert item.kind == "retrieved" and "Haeundae Middle School" in item.text
    assert "job-v2" in item.turn_ids and recall.ranking == (item.turn_ids,)
    two = cell.memory.recall(Query("Where do I teach these days?", "s2"))
    assert len(two.items) == 1  # k=1
    cell.close()
    cell = replayed("rag:chunk_tokens=32,k=2", nurse, run_models)
    recall = cell.memory.recall(Query("Where do I teach these days?", "s2"))
    assert len(recall.items) == 2 and recall.ranking == tuple(i.turn_ids for i in recall.items)
    assert recall.items[0].turn_ids == item.turn_ids  # the same nearest chunk first
    assert cell.memory.recall(Query("")).items == ()
    cell.close()


def test_a_chunk_larger_than_the_conversation_holds_it_all_and_is_found_at_once(nurse, run_models):
    cell = replayed("rag:chunk_tokens=8192,k=1", nurse, run_models, upto=2)
    [chunk] = cell.memory.chunks
    recall = cell.memory.recall(Query("Which city do I live in?"))
    first_two = exchanges(nurse)[:2]
    assert (
        recall.items[0].text == conversation(nurse).split("input: [2026-03-02] I love")[0].strip()
    )
    assert recall.ranking == (tuple(t for ex in first_two for t in ex.turn_ids),)
    assert chunk.turn_ids[0] == "city-v1" and "job-v1" in chunk.turn_ids
    cell.close()


def test_a_character_split_by_a_cut_goes_whole_to_the_next_chunk(run_models):
    from memory_lab.memories.protocol import MemoryResources
    from memory_lab.memories.registry import build_memory

    res = MemoryResources(
        models={}, embeddings=run_models.shared_embeddings(), cell_id="rag-korean"
    )
    memory = build_memory(parse_memory_spec("rag:chunk_tokens=16"), res)
    memory.timestamps = False
    lines = ["동생은 수원에 살아요. 회사는 판교에 있어요.", "제 고양이 이름은 나비예요."]
    for i, user in enumerate(lines):
        memory.observe(Exchange(i, user, "알겠어요, 기억할게요.", f"u{i}", (f"a{i}",), "s1"))
    text = "".join(f"input: {u}\nresponse: 알겠어요, 기억할게요.\n" for u in lines)
    assert len(memory.chunks) > 2
    assert "".join(c.text for c in memory.chunks) == text
    assert all("\ufffd" not in c.text for c in memory.chunks)
    recall = memory.recall(Query("고양이 이름이 뭐예요?"))
    assert "u1" in recall.items[0].turn_ids
    res.close()


def test_each_exchange_embeds_only_the_chunks_it_touched(nurse, run_models):
    """The maintenance cost of an exchange is bounded by chunk_tokens, not the dialogue."""
    cell = replayed("rag:chunk_tokens=16,k=2", nurse, run_models, upto=0)
    embedded: list[list[str]] = []
    inner = cell.memory.embed_documents
    cell.memory.embed_documents = lambda texts: embedded.append(texts) or inner(texts)
    for ex in exchanges(nurse):
        cell.memory.observe(ex)
    assert len(embedded) == len(exchanges(nurse))
    assert all(sum(len(token_ids(t)) for t in texts) <= 16 * 4 for texts in embedded)
    assert cell.memory.collection.count() == len(cell.memory.chunks)
    cell.close()
