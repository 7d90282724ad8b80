"""memory_lab.scoring.stats on hand-computed and reference cases: Wilson, McNemar, Newcombe, Holm,
kappa."""

from __future__ import annotations

import math
import statistics

import pytest

from memory_lab.scoring.stats import (
    cohen_kappa,
    holm,
    majority_vote,
    mcnemar_exact,
    mean_sd,
    paired_difference_ci,
    wilson_interval,
)

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


def test_wilson_interval_matches_known_values():
    low, high = wilson_interval(8, 10)
    assert abs(low - 0.4902) < 1e-3 and abs(high - 0.9433) < 1e-3
    assert wilson_interval(0, 0)[0] != wilson_interval(0, 0)[0]  # nan
    assert wilson_interval(10, 10)[1] == 1.0
    assert not math.isnan(wilson_interval(0, 5)[0])


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [(0, 0, 1.0), (1, 6, 0.125), (0, 5, 0.0625), (5, 4, 1.0), (2, 8, 0.109375), (6, 1, 0.125)],
)
def test_mcnemar_exact_known_values(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, abs=1e-12)


def test_mcnemar_exact_matches_scipy_binomtest():
    stats = pytest.importorskip("scipy.stats")
    for b, c in [(10, 25), (30, 12), (3, 3), (0, 40), (17, 18)]:
        expected = stats.binomtest(b, b + c, 0.5).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9)


def test_paired_difference_interval_contains_the_difference_and_is_antisymmetric():
    low, high = paired_difference_ci(40, 30, 10, 20)
    assert low < (30 - 10) / 100 < high and -1 <= low and high <= 1
    low2, high2 = paired_difference_ci(40, 10, 30, 20)
    assert (low2, high2) == pytest.approx((-high, -low))
    # with many pairs it agrees with the Wald interval on paired differences
    a, b, c, d = 400, 300, 100, 200
    n, diff = 1000, (300 - 100) / 1000
    half = 1.96 * ((b + c) / n - diff**2) ** 0.5 / n**0.5
    assert paired_difference_ci(a, b, c, d) == pytest.approx((diff - half, diff + half), abs=2e-3)


def test_holm_adjustment():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
