"""LongMemEval's recall@k and NDCG@k, on hand-computed cases (memory_lab.scoring.ranks)."""

from __future__ import annotations

import math

import pytest

from memory_lab.scoring.ranks import RANK_SCORES, rank_scores, score_ranked, turn_ranking

# A dialogue of three sessions: s1 holds t1-t4, s2 t5-t6, s3 t7.
SESSION_OF = {
    **{f"t{i}": "s1" for i in range(1, 5)},
    **{f"t{i}": "s2" for i in range(5, 7)},
    "t7": "s3",
}
LOG3 = math.log2(3)


def items(*turns: str) -> tuple[tuple[str, ...], ...]:
    """A ranking of one-turn items."""
    return tuple((t,) for t in turns)


def test_a_perfect_ranking_scores_one_everywhere():
    scores = rank_scores(items("t5", "t1", "t2"), ["t5"], SESSION_OF)
    assert scores == dict.fromkeys(RANK_SCORES, 1.0)


def test_evidence_at_rank_3_of_5_is_in_the_top_5_with_ndcg_one_over_log2_3():
    scores = rank_scores(items("t1", "t2", "t5", "t3", "t4"), ["t5"], SESSION_OF)
    assert scores["turn_recall_all_at_5"] == scores["turn_recall_all_at_10"] == 1.0
    assert scores["turn_ndcg_any_at_5"] == pytest.approx(1 / LOG3)  # 0.6309
    assert scores["turn_ndcg_any_at_10"] == pytest.approx(1 / LOG3)
    # sessions: s1 (t1, best place), s2 (t5) -> rank 2, undiscounted in LongMemEval's DCG
    assert scores["session_ndcg_any_at_5"] == 1.0
    assert scores["session_recall_all_at_5"] == 1.0


def test_ranks_1_and_2_weigh_the_same_and_rank_3_is_discounted():
    assert score_ranked(["x", "e"], {"e"}, 5).ndcg_any == 1.0
    assert score_ranked(["x", "y", "e"], {"e"}, 5).ndcg_any == pytest.approx(0.6309297535714575)
    assert score_ranked(["x", "y", "z", "e"], {"e"}, 5).ndcg_any == 0.5  # 1 / log2(4)
    assert score_ranked(["x", "y", "z", "e"], {"e"}, 3).ndcg_any == 0.0  # below the cut


def test_two_evidence_turns_one_missing():
    at = score_ranked(["t1", "x", "y"], {"t1", "t7"}, 5)
    assert (at.recall_any, at.recall_all) == (1.0, 0.0)
    assert at.ndcg_any == 0.5  # DCG 1, ideal 1 + 1 (two relevant documents, ranks 1 and 2)
    at = score_ranked(["x", "y", "t1"], {"t1", "t7"}, 5)
    assert at.ndcg_any == pytest.approx((1 / LOG3) / 2)
    scores = rank_scores(items("t1", "t2", "t3"), ["t1", "t7"], SESSION_OF)
    assert scores["turn_recall_all_at_10"] == 0.0
    assert scores["session_recall_all_at_10"] == 0.0  # s3 never retrieved
    assert scores["session_ndcg_any_at_5"] == 0.5  # s1 at rank 1 of an ideal of two sessions


def test_turns_of_one_session_count_once_at_session_level_at_their_best_rank():
    # evidence t5 at turn rank 7; its session s2 already at session rank 2 (through t6)
    ranking = items("t1", "t2", "t1", "t3", "t4", "t6", "t7", "t5")
    assert turn_ranking(ranking) == ["t1", "t2", "t3", "t4", "t6", "t7", "t5"]  # repeats go
    scores = rank_scores(ranking, ["t5"], SESSION_OF)
    assert scores["turn_recall_all_at_5"] == 0.0
    assert scores["turn_recall_all_at_10"] == 1.0
    assert scores["turn_ndcg_any_at_10"] == pytest.approx(1 / math.log2(7))
    assert scores["session_recall_all_at_5"] == 1.0  # LongMemEval widens k to 5 sessions
    assert scores["session_ndcg_any_at_5"] == 1.0  # s1, s2, s3: s2 at rank 2


def test_evidence_in_two_sessions_retrieved_through_duplicates():
    # the s2 evidence turn is retrieved twice (t5, then again with t6), s3 at session rank 3
    ranking = (("t5",), ("t2",), ("t5", "t6"), ("t7",))
    scores = rank_scores(ranking, ["t5", "t7"], SESSION_OF)
    # turns t5 t2 t6 t7: evidence at 1 and 4; ideal two at ranks 1 and 2
    assert scores["turn_ndcg_any_at_5"] == pytest.approx((1 + 1 / 2) / 2)
    # sessions s2 s1 s3: evidence at 1 and 3
    assert scores["session_ndcg_any_at_5"] == pytest.approx((1 + 1 / LOG3) / 2)
    assert scores["session_recall_all_at_5"] == scores["turn_recall_all_at_5"] == 1.0


def test_k_larger_than_the_list_scores_the_list_against_the_full_ideal():
    # three evidence turns, two retrieved (ranks 1, 2), the list ends there
    at = score_ranked(["t1", "t5"], {"t1", "t5", "t7"}, 10)
    assert (at.recall_any, at.recall_all) == (1.0, 0.0)
    assert at.ndcg_any == pytest.approx(2 / (2 + 1 / LOG3))  # 0.7602
    assert score_ranked(["t1"], {"t1"}, 50).ndcg_any == 1.0


def test_an_exchange_item_takes_a_rank_per_turn_in_the_order_it_names_them():
    ranking = (("t1", "t2"), ("t3", "t4"), ("t5", "t6"))
    assert turn_ranking(ranking) == ["t1", "t2", "t3", "t4", "t5", "t6"]
    scores = rank_scores(ranking, ["t5"], SESSION_OF)
    assert scores["turn_ndcg_any_at_5"] == pytest.approx(1 / math.log2(5))
    assert scores["session_ndcg_any_at_5"] == 1.0  # s1, s2


def test_an_item_naming_no_turn_keeps_its_place():
    scores = rank_scores(((), (), ("t5",)), ["t5"], SESSION_OF)
    assert scores["turn_ndcg_any_at_5"] == pytest.approx(1 / LOG3)
    assert scores["session_ndcg_any_at_5"] == pytest.approx(1 / LOG3)


def test_nothing_to_score_is_none_and_an_empty_retrieval_is_zero():
    assert rank_scores(None, ["t5"], SESSION_OF) == dict.fromkeys(RANK_SCORES)  # no ranking
    assert rank_scores(items("t5"), [], SESSION_OF) == dict.fromkeys(RANK_SCORES)  # no evidence
    assert rank_scores(items("t5"), ["gone"], SESSION_OF) == dict.fromkeys(RANK_SCORES)
    assert rank_scores((), ["t5"], SESSION_OF) == dict.fromkeys(RANK_SCORES, 0.0)
    with pytest.raises(ValueError, match="k must be at least 1"):
        score_ranked(["t1"], {"t1"}, 0)


def test_the_recorded_set_is_longmemevals_printed_one_at_both_levels():
    assert RANK_SCORES == [
        f"{level}_{metric}_at_{k}"
        for level in ("turn", "session")
        for k in (5, 10)
        for metric in ("recall_all", "ndcg_any")
    ]
