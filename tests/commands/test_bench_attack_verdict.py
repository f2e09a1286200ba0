"""The verdict rule (bench/verdict.py) fed what a busy machine or a broken run can hand it."""

from __future__ import annotations

import math

import pytest

from bench.verdict import CANNOT_TELL, MET, NOT_MET, judge_count, judge_ratio, pair_ratios


@pytest.mark.parametrize("bad", [0.0, -1.5, math.nan, math.inf])
def test_a_measured_figure_that_is_no_latency_is_refused_by_name(bad: float) -> None:
    # a p99 of 0 ms or NaN means the run timed nothing: a ratio of it would read "met"
    with pytest.raises(ValueError, match="measured figure"):
        pair_ratios([2.0, bad, 2.0], [1.0, 1.0, 1.0])


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_a_yardstick_figure_that_is_no_latency_is_refused_by_name(bad: float) -> None:
    with pytest.raises(ValueError, match="yardstick figure"):
        pair_ratios([2.0, 2.0, 2.0], [1.0, bad, 1.0])


@pytest.mark.parametrize("bad", [math.nan, 0.0, -0.5, math.inf])
def test_a_floor_of_unusable_aa_ratios_never_gives_a_word(bad: float) -> None:
    # NaN was dropped by min()/max() (a floor of x1.00-1.00: "not met" on no evidence), and
    # an A/A ratio of 0 divided by zero
    with pytest.raises(ValueError, match="A/A ratio"):
        judge_ratio([3.0, 3.0, 3.0], [1.0, bad, 1.0], 1.3)


@pytest.mark.parametrize("bad", [math.nan, 0.0, -2.0, math.inf])
def test_an_unusable_pair_ratio_never_gives_a_word(bad: float) -> None:
    with pytest.raises(ValueError, match="pair ratio"):
        judge_ratio([1.0, bad, 1.0], [1.0, 1.0, 1.0], 1.3)


@pytest.mark.parametrize("pairs", [1, 2])
def test_one_or_two_pairs_are_too_few_to_know_the_noise(pairs: int) -> None:
    # one A/A ratio that happens to be x1.00 read as a noiseless machine: one pair said
    # "not met" (or "met") on no measure of the noise at all
    judged = judge_ratio([5.0] * pairs, [1.0] * pairs, 1.3)
    assert judged.word == CANNOT_TELL
    assert judged.text().endswith("; fewer than 3 pairs give no word)")
    assert judge_ratio([0.5] * pairs, [1.0] * pairs, 1.3).word == CANNOT_TELL


def test_enough_pairs_still_judge_a_clear_case() -> None:
    aa = [0.95, 1.05, 1.0]
    assert judge_ratio([5.0, 4.0, 6.0], aa, 1.3).word == NOT_MET
    assert judge_ratio([0.5, 0.6, 0.4], aa, 1.3).word == MET


def test_even_pairs_identical_numbers_and_band_edges() -> None:
    # identical numbers: a floor of x1.00-1.00 and a ratio exactly on the goal is met
    assert judge_ratio([1.3] * 4, [1.0] * 4, 1.3).word == MET
    # the band's top exactly on the goal: met; its bottom exactly on it: cannot tell
    assert judge_ratio([2.0] * 4, [1.0, 0.5, 2.0, 1.0], 4.0).word == MET
    assert judge_ratio([4.0] * 4, [2.0, 1.0, 1.0, 1.0], 2.0).word == CANNOT_TELL
    assert judge_ratio([1.2, 1.4, 1.3, 1.3], [0.8, 1.0, 1.1, 1.0], 1.3).word == CANNOT_TELL
    # a yardstick faster than itself by chance widens the band downwards: not "met" for free
    judged = judge_ratio([1.25, 1.28, 1.27], [0.5, 1.0, 1.0], 1.3)
    assert judged.word == CANNOT_TELL and judged.floor.low == 0.5


def test_a_yardstick_far_faster_than_itself_is_noise_both_ways() -> None:
    # seen under two CPU hogs: A/A x0.06-1.00 and pairs x2.03, x0.19, x6.18 read "not met"
    # while the yardstick's own noise was x16
    judged = judge_ratio([2.03, 0.19, 6.18], [0.06, 0.5, 1.0], 1.3)
    assert judged.word == CANNOT_TELL
    assert (round(judged.floor.low, 2), round(judged.floor.high, 2)) == (0.06, 16.67)
    # a yardstick slower than itself is the same noise seen from the other copy
    assert judge_ratio([0.5, 0.6, 0.4], [4.0, 1.0, 1.0], 1.3).word == CANNOT_TELL


def test_one_outlier_aa_pair_does_not_hide_a_regression_every_pair_shows() -> None:
    # a stall in one copy of the yardstick (x5) among five pairs widened the floor to
    # x0.2-5 and hid a regression all five pairs agree on (x3)
    judged = judge_ratio([3.0, 3.1, 2.9, 3.0, 3.05], [1.0, 0.98, 5.0, 1.02, 1.01], 1.3)
    assert judged.word == NOT_MET
    assert (round(judged.floor.low, 2), round(judged.floor.high, 2)) == (0.98, 1.02)
    # the same stall slowing the other copy (x0.2) is left out alike
    assert judge_ratio([3.0, 3.1, 2.9, 3.0, 3.05], [1.0, 0.98, 0.2, 1.02, 1.01], 1.3).word \
        == NOT_MET


def test_two_stalls_in_five_still_widen_the_floor() -> None:
    # one left out in five: a second stall is noise the run really had
    judged = judge_ratio([3.0, 3.1, 2.9, 3.0, 3.05], [1.0, 0.98, 5.0, 4.0, 1.01], 1.3)
    assert judged.word == CANNOT_TELL
    assert round(judged.floor.high, 2) == 4.0


def test_nine_pairs_leave_out_two_stalls_and_no_more() -> None:
    aa = [1.0, 1.02, 0.99, 6.0, 1.01, 0.2, 1.0, 0.98, 1.03]
    assert judge_ratio([2.0] * 9, aa, 1.3).word == NOT_MET
    assert judge_ratio([2.0] * 9, [*aa[:-1], 3.0], 1.3).word == CANNOT_TELL


def test_a_clear_rise_in_slow_cards_is_not_hidden_behind_cannot_tell() -> None:
    # 40 stressed cards over 20 ms against 1 in the quiet runs of twice as many cards
    assert judge_count(40, 320, 1, 640) == NOT_MET


def test_a_count_within_the_machines_own_slow_cards_cannot_be_told() -> None:
    assert judge_count(2, 320, 1, 640) == CANNOT_TELL
    assert judge_count(3, 320, 2, 320) == CANNOT_TELL
    # the same rise over far fewer yardstick cards is as likely chance
    assert judge_count(6, 320, 1, 40) == CANNOT_TELL


def test_none_over_is_met_and_some_over_a_clean_yardstick_is_not() -> None:
    assert judge_count(0, 320, 5, 640) == MET
    assert judge_count(1, 320, 0, 640) == NOT_MET


@pytest.mark.parametrize(("args", "named"), [((1, 0, 0, 640), "cards"),
                                             ((1, 320, 0, 0), "yardstick cards"),
                                             ((400, 320, 0, 640), "over"),
                                             ((-1, 320, 0, 640), "over"),
                                             ((1, 320, 700, 640), "yardstick over")])
def test_counts_no_run_can_give_are_refused_by_name(args: tuple[int, int, int, int],
                                                    named: str) -> None:
    with pytest.raises(ValueError, match=named):
        judge_count(*args)
