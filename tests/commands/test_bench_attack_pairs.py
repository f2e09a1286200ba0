"""Alternated pairs (bench/harness.py ``alternate``): every case once a pair, the order reversed
every other pair, the A/A copy in the same pairs as its yardstick; a stalled run is run again
in its place, its partial figures not kept."""

from __future__ import annotations

import pytest

from bench.harness import Stalled, alternate


def test_every_case_once_a_pair_the_order_reversed_on_odd_pairs() -> None:
    order: list[tuple[str, int]] = []
    cases = ["quiet", "stressed", "quiet-aa"]

    results = alternate(cases, 4, lambda case, pair: order.append((case, pair)) or
                        f"{case}{pair}")
    assert order == [("quiet", 0), ("stressed", 0), ("quiet-aa", 0),
                     ("quiet-aa", 1), ("stressed", 1), ("quiet", 1),
                     ("quiet", 2), ("stressed", 2), ("quiet-aa", 2),
                     ("quiet-aa", 3), ("stressed", 3), ("quiet", 3)]
    # pair i of every case is the run of pair i: the A/A ratio and B/A share their A
    assert results == {case: [f"{case}{pair}" for pair in range(4)] for case in cases}


def test_a_stalled_run_is_run_again_in_its_place_and_noted() -> None:
    tries: list[str] = []
    stalled: list[str] = []

    def run(case: str, pair: int) -> str:
        tries.append(f"{case}{pair}")
        if tries.count("B1") == 1 and f"{case}{pair}" == "B1":
            raise Stalled("the shoe went quiet")
        return f"{case}{pair}"

    results = alternate(["A", "B"], 2, run, stalled)
    assert tries == ["A0", "B0", "B1", "B1", "A1"]
    assert results == {"A": ["A0", "A1"], "B": ["B0", "B1"]}
    assert stalled == ["B 2: the shoe went quiet"]


def test_a_run_that_keeps_stalling_stops_the_part() -> None:
    def run(case: str, pair: int) -> str:
        raise Stalled("never")

    with pytest.raises(Stalled):
        alternate(["A", "B"], 2, run, [])
