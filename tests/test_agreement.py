"""Cohen's kappa, the majority verdict of repeated runs, mean and sd over runs: hand-computed."""

from __future__ import annotations

import math
import statistics

import pytest

from memory_lab.agreement import cohen_kappa, majority_vote, mean_sd

T, F = True, False


@pytest.mark.parametrize(
    ("a", "b", "kappa"),
    [
        # p_o = 3/4; shares 1/2 and 1/4: p_e = 1/2*1/4 + 1/2*3/4 = 1/2; (3/4 - 1/2) / (1/2)
        ([T, T, F, F], [T, F, F, F], 0.5),
        # the textbook table: yes/yes 20, yes/no 5, no/yes 10, no/no 15 (n = 50)
        # p_o = 35/50 = 0.7; shares 25/50 and 30/50: p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa 0.4
        ([T] * 25 + [F] * 25, [T] * 20 + [F] * 5 + [T] * 10 + [F] * 15, 0.4),
        ([T, F, T, F], [T, F, T, F], 1.0),  # perfect agreement with variation
        ([T, F], [F, T], -1.0),  # p_o = 0, p_e = 1/2
        ([T, T], [F, F], 0.0),  # each constant, but different: p_o = p_e = 0
        ([T, T, T, T], [T, T, T, F], 0.0),  # one grader constant: p_o = p_e = 3/4
    ],
)
def test_kappa_on_hand_computed_cases(a, b, kappa):
    assert cohen_kappa(a, b) == pytest.approx(kappa)
    assert cohen_kappa(b, a) == pytest.approx(kappa)  # symmetric


@pytest.mark.parametrize("label", [True, False])
def test_kappa_is_undefined_when_every_label_is_the_same(label):
    # p_o = p_e = 1: perfect agreement, but no variation for kappa to measure -> nan
    assert math.isnan(cohen_kappa([label] * 5, [label] * 5))


def test_kappa_of_nothing_is_undefined_and_lengths_must_match():
    assert math.isnan(cohen_kappa([], []))
    with pytest.raises(ValueError, match="3 labels against 2"):
        cohen_kappa([T, F, T], [T, F])


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([T, F, T], T),
        ([F, F, T], F),
        ([T, F], T),  # a tie goes to the earliest run
        ([F, T], F),
        ([None, F, T, T], T),  # an unreadable run does not vote
        ([None, F, T], F),  # a tie among the readable ones: the earliest readable run
        ([None, None], None),
        ([], None),
    ],
)
def test_majority_vote(verdicts, expected):
    assert majority_vote(verdicts) is expected


def test_mean_and_sample_sd():
    runs = [0.5, 0.7, 0.6]
    mean, sd = mean_sd(runs)
    assert mean == pytest.approx(0.6) and sd == pytest.approx(0.1)
    assert sd == pytest.approx(statistics.stdev(runs))  # n - 1, not pstdev
    assert mean_sd([0.4, 0.4]) == (0.4, 0.0)
    one = mean_sd([0.8])
    assert one[0] == 0.8 and math.isnan(one[1])
    assert all(math.isnan(x) for x in mean_sd([]))
