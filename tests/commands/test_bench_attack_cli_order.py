"""The ``cli`` part's rounds are alternated pairs like every other part's: each command once a
round, the order reversed every other round, so the interpreter's A/A copy and the commands
judged against it take turns at either end (bench/cli_bench.py, the real processes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import cli_bench


def test_the_rounds_alternate_and_the_aa_copy_is_timed_like_its_yardstick(
        monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[list[str]] = []
    real = cli_bench.run_once

    def noted(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
        order.append(argv)  # the real process still runs and is timed
        return real(argv, env, cwd)

    monkeypatch.setattr(cli_bench, "run_once", noted)
    figures: dict[str, Any] = cli_bench.measure(repeat=3)
    names = [row["command"] for row in figures["rows"]]
    timed = order[len(names):]  # after one untimed run of each, filling the bytecode cache
    rounds = [timed[i:i + len(names)] for i in range(0, len(timed), len(names))]
    assert len(rounds) == 3
    assert rounds[1] == list(reversed(rounds[0])) and rounds[2] == rounds[0]
    # the A/A copy is the same command as its yardstick, at the other end of every round
    assert rounds[0][0] == rounds[0][-1] == rounds[1][0]
    by_name = {row["command"]: row for row in figures["rows"]}
    assert by_name[cli_bench.PASS]["runs"] == by_name[cli_bench.AGAIN]["runs"] == 3
    judged = by_name["--version"]["judged"]
    assert len(judged["ratios"]) == 3 and judged["verdict"] in judged["note"]
