"""Rankings (``Recall.ranking``): the memories that rank report their retrieval's order."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from memory_lab.memories.protocol import Query
from memory_lab.run.exchanges import exchanges

from .replay import replayed

CITY = "Which city do I live in now?"


@pytest.fixture
def replay():
    """``replayed``, with every cell it made closed after the test."""
    cells = []

    def make(*args, **kwargs):
        cells.append(replayed(*args, **kwargs))
        return cells[-1]

    yield make
    for cell in cells:
        cell.close()


def test_vector_ranks_its_documents_nearest_first_as_chroma_measures_them(
    replay, mini_dialogue, run_models
):
    cell = replay("vector", mini_dialogue, run_models)
    recall = cell.memory.recall(Query(CITY))
    stored = cell.memory.inner.retriever.vectorstore._collection.get(
        include=["documents", "metadatas", "embeddings"]
    )
    # each document names the turns of the exchange it holds
    by_turn = {ex.user_turn_id: ex for ex in exchanges(mini_dialogue)}
    for text, meta in zip(stored["documents"], stored["metadatas"], strict=True):
        ids = tuple(json.loads(meta["turn_ids"]))
        assert ids == by_turn[ids[0]].turn_ids and by_turn[ids[0]].user in text
    # the ranking is the 4 nearest by cosine, nearest first, computed here from the vectors
    vectors = np.asarray(stored["embeddings"], dtype=float)
    query = np.asarray(cell.resources.embeddings.embed_query(CITY), dtype=float)
    cosine = vectors @ query / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query))
    nearest = [tuple(json.loads(stored["metadatas"][i]["turn_ids"])) for i in np.argsort(-cosine)]
    assert recall.ranking == tuple(nearest[:4])
    assert "busan" in recall.ranking[0]  # the move is the nearest exchange
    # the context shows the ranked documents in rank order
    context = recall.items[0].text
    places = [context.index(by_turn[ids[0]].user) for ids in recall.ranking]
    assert places == sorted(places)


def test_hybrid_ranks_its_fused_top_k_in_prompt_order(replay, mini_dialogue, run_models):
    cell = replay("hybrid:k=3", mini_dialogue, run_models)
    memory = cell.memory
    recall = memory.recall(Query(CITY))
    final = memory.rank(CITY).final
    assert recall.ranking == tuple(memory.documents[d].turn_ids for d in final)
    assert recall.ranking == tuple(item.turn_ids for item in recall.items)
    # the update probe's two candidates lead: the old city (Seoul), then the new one (Busan)
    assert len(recall.ranking) == 3 and [ids[0] for ids in recall.ranking[:2]] == ["seoul", "busan"]


@pytest.mark.parametrize("spec", ["buffer", "window", "summary_buffer"])
def test_memories_that_do_not_rank_report_no_ranking(replay, spec, mini_dialogue, run_models):
    cell = replay(spec, mini_dialogue, run_models)
    recall = cell.memory.recall(Query(CITY))
    assert recall.items and recall.ranking is None


def test_combined_takes_its_one_ranking_parts_ranking(replay, mini_dialogue, run_models):
    cell = replay("combined:parts=window:k=1+vector:k=2", mini_dialogue, run_models)
    recall = cell.memory.recall(Query(CITY))
    vector = replay("vector:k=2", mini_dialogue, run_models).memory.recall(Query(CITY))
    assert recall.ranking == vector.ranking and len(recall.ranking) == 2
    both = replay("combined:parts=vector:k=2+hybrid:k=2", mini_dialogue, run_models)
    assert both.memory.recall(Query(CITY)).ranking is None  # no one order between two


def test_probe_records_carry_rank_scores_for_ranking_memories_only(
    replay, mini_dialogue, run_models
):
    from memory_lab import replay_dialogue
    from memory_lab.memories import parse_memory_spec
    from memory_lab.scoring.ranks import RANK_SCORES

    probes = {}
    for spec in ("buffer", "hybrid", "vector"):
        records: list[dict] = []
        replay_dialogue(parse_memory_spec(spec), mini_dialogue, run_models, records.append)
        probes[spec] = {r["probe_id"]: r for r in records if r["type"] == "probe"}
    for record in probes["buffer"].values():
        assert all(record[name] is None for name in RANK_SCORES)
    for spec in ("hybrid", "vector"):
        for record in probes[spec].values():
            scored = record["category"] != "abstention" and record["evidence"]
            assert all((record[name] is not None) == bool(scored) for name in RANK_SCORES)
    # hybrid shows 4 exchanges (8 turns): all evidence in its top 10 turns = all in the prompt
    for record in probes["hybrid"].values():
        if record["turn_recall_all_at_10"] is not None:
            shown = set(record["recalled_turns"] or ())
            assert record["turn_recall_all_at_10"] == float(set(record["evidence"]) <= shown)
    # q-city: hybrid ranks Seoul's exchange (s1), then Busan's (s2): the evidence turn "busan"
    # at turn rank 3, its session at session rank 2 (undiscounted, as in LongMemEval's DCG)
    city = probes["hybrid"]["q-city"]
    assert city["turn_ndcg_any_at_5"] == pytest.approx(1 / math.log2(3))
    assert city["session_ndcg_any_at_5"] == 1.0
    assert city["turn_recall_all_at_5"] == city["session_recall_all_at_5"] == 1.0


def test_the_long_term_store_of_hierarchical_ranks_its_entries_not_its_recent_turns(
    replay, nurse, run_models
):
    cell = replay("hierarchical:short_term_limit=2", nurse, run_models, recall=True)
    memory = cell.memory
    recall = memory.recall(Query("Which city do I live in?"))
    chosen = [e for _, _, e in memory.ranked("Which city do I live in?", memory.clock.now)]
    assert recall.ranking == tuple(e.turn_ids for e in chosen[: memory.k])
    recent = {t for s in memory.short_term for t in s.exchange.turn_ids}
    assert recent and not recent & {t for ids in recall.ranking for t in ids}
    empty = replay("hierarchical", nurse, run_models, upto=1).memory  # nothing consolidated
    assert empty.recall(Query("Which city do I live in?")).ranking == ()


def test_memgpt_ranks_its_archival_search_and_store_its_semantic_search(
    replay, seat_change, run_models
):
    query = Query("What is my frequent flyer number?", "s2")
    memgpt = replay("memgpt", seat_change, run_models).memory
    recall = memgpt.recall(query)
    passages = [i.turn_ids for i in recall.items if i.kind == "retrieved"]
    assert recall.ranking == tuple(passages) and passages
    store = replay("store", seat_change, run_models).memory
    recall = store.recall(query)
    assert recall.ranking == tuple(i.turn_ids for i in recall.items if i.kind == "fact")
    assert recall.ranking[0] == ("ffn",)
    recent = replay("store:search=recent", seat_change, run_models).memory
    assert recent.recall(query).ranking is None  # most recent first is no ranking by the query
