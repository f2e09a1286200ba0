"""The bench's verdict rule (bench/verdict.py): a median pair ratio read against the A/A floor
measured in the same run."""

from __future__ import annotations

import pytest

from bench.verdict import (
    CANNOT_TELL,
    MET,
    NOT_MET,
    Floor,
    judge_count,
    judge_ratio,
    pair_ratios,
)


def test_a_ratio_whose_whole_noise_band_is_under_the_goal_is_met() -> None:
    judged = judge_ratio([1.0, 1.1, 0.9, 1.05, 0.95], [0.9, 1.1, 1.0, 1.05, 0.95], goal=1.3)
    assert judged.ratio == 1.0
    # the pair farthest from x1 of five (x0.9) is left out; A'/A of x1.1 is A/A' of x0.91
    assert judged.floor == Floor(1 / 1.1, 1.1)
    assert judged.word == MET  # the true ratio at most 1.0 * 1.1 = 1.1 <= 1.3


def test_a_ratio_whose_whole_noise_band_is_over_the_goal_is_not_met() -> None:
    judged = judge_ratio([2.0, 2.2, 1.9], [0.95, 1.05, 1.0], goal=1.5)
    assert judged.ratio == 2.0
    assert judged.word == NOT_MET  # the true ratio at least 2.0 / 1.05 = 1.90 > 1.5


def test_a_goal_inside_the_noise_band_cannot_be_told() -> None:
    # the bare relay against itself under load: x0.64-1.60
    judged = judge_ratio([1.1, 1.2, 1.0, 1.15, 1.05], [0.64, 1.6, 1.0, 0.9, 1.2], goal=1.3)
    assert judged.word == CANNOT_TELL
    # the same ratios on a quiet machine's floor: met
    assert judge_ratio([1.1, 1.2, 1.0, 1.15, 1.05], [0.98, 1.02, 1.0], goal=1.3).word == MET


def test_the_floor_always_holds_x1_so_met_implies_the_median_is_under_the_goal() -> None:
    # every A/A pair came out low: the band still holds the ratio itself, and the noise
    # counts both ways (which copy of the yardstick came out faster is chance)
    assert Floor.of([0.7, 0.8]) == Floor(0.7, 1 / 0.7)
    assert judge_ratio([1.2] * 3, [0.7, 0.8, 0.75], goal=1.3).word == CANNOT_TELL  # 0.84 .. 1.71
    assert judge_ratio([2.0] * 3, [0.7, 0.8, 0.75], goal=1.3).word == NOT_MET      # 1.4 .. 2.86
    assert judge_ratio([1.4] * 3, [1.2, 1.3, 1.25], goal=1.3).word == CANNOT_TELL  # 1.08 .. 1.82
    assert judge_ratio([0.9] * 3, [1.2, 1.3, 1.25], goal=1.3).word == MET          # 0.69 .. 1.17
    assert judge_ratio([1.31] * 3, [1.0] * 3, goal=1.3).word == NOT_MET
    assert judge_ratio([1.3] * 3, [1.0] * 3, goal=1.3).word == MET


def test_one_noise_spike_in_five_yardstick_copies_is_left_out_and_two_are_not() -> None:
    # a quiet run's copy met the machine at its worst once (x87) while four of five stressed
    # pairs came out x6-19: the median does not move for one spike, nor does the floor
    assert judge_ratio([6.5, 19.5, 16.1, 8.9, 0.5], [0.85, 87.5, 1.0, 1.2, 0.9],
                       goal=1.3).word == NOT_MET
    # two spikes in five are the machine's own noise: the stressed pairs could be that too
    assert judge_ratio([6.5, 19.5, 16.1, 8.9, 0.5], [0.85, 87.5, 1.0, 12.0, 0.9],
                       goal=1.3).word == CANNOT_TELL


def test_pair_ratios_pair_by_pair_and_refuse_mismatched_or_empty_pairs() -> None:
    assert pair_ratios([2.0, 3.0], [1.0, 2.0]) == [2.0, 1.5]
    with pytest.raises(ValueError, match="2 measured against 1 yardstick"):
        pair_ratios([2.0, 3.0], [1.0])
    with pytest.raises(ValueError, match="at least one"):
        pair_ratios([], [])
    with pytest.raises(ValueError, match="zero or less"):
        pair_ratios([1.0], [0.0])
    with pytest.raises(ValueError, match="A/A pair"):
        judge_ratio([1.0], [], goal=1.3)


def test_the_note_names_goal_word_floor_and_every_pair() -> None:
    note = judge_ratio([1.0, 1.2, 1.1], [0.9, 1.1, 1.0], goal=1.2).text()
    assert note == "goal <= x1.2: cannot tell on this machine (A/A floor x0.90-1.11; " \
                   "3 pairs x1.00, x1.20, x1.10)"


def test_a_count_goal_is_read_against_the_yardsticks_own_count() -> None:
    assert judge_count(0, 160, 3, 320) == MET
    assert judge_count(2, 160, 0, 320) == NOT_MET
    assert judge_count(2, 160, 1, 320) == CANNOT_TELL
    assert judge_count(9, 160, 1, 320) == NOT_MET  # 1 expected at most: 9 is no chance
