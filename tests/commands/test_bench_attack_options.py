"""``pokdeng-table bench`` given options out of range: a clear error naming the option, exit 2,
before any part runs (each run here would otherwise start daemons for minutes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.report import PARTS

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench(*options: str, script: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(BENCH / script)] if script else \
        [sys.executable, "-m", "controller", "bench"]
    # every part skipped: should an option slip through, nothing long runs
    skip = [] if script else ["--skip", ",".join(PARTS)]
    return subprocess.run([*command, *options, *skip], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("option", "value"), [
    ("--pairs", "0"), ("--pairs", "-1"), ("--pairs", "99999999999999"), ("--pairs", "two"),
    ("--latency-repeat", "0"), ("--latency-rounds", "0"), ("--deal-rounds", "-2"),
    ("--stress-rounds", "1000000"), ("--replay-shoes", "0"), ("--journal-shoes", "-1"),
    ("--soak-shoes", "0"), ("--idle-seconds", "nan"), ("--idle-seconds", "-5"),
    ("--trace-over", "-1"), ("--trace-over", "inf"),
])
def test_an_option_out_of_range_is_named_without_a_traceback(option: str, value: str) -> None:
    done = bench(f"{option}={value}")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"argument {option}:" in done.stderr
    assert "Traceback" not in done.stderr
    assert "bench:" in done.stderr and "…" not in done.stderr  # no part was started


@pytest.mark.parametrize("script", ["latency_bench.py", "stress_bench.py",
                                    "start_deal_bench.py"])
@pytest.mark.parametrize(("option", "value"), [("--pairs", "0"), ("--pairs", "1000"),
                                               ("--rounds", "-1")])
def test_each_part_alone_names_its_option_too(script: str, option: str, value: str) -> None:
    done = bench(f"{option}={value}", script=script)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"argument {option}:" in done.stderr and "Traceback" not in done.stderr


def test_every_part_skipped_is_a_clear_error_not_an_empty_table() -> None:
    done = bench()
    assert done.returncode == 2, done.stdout + done.stderr
    assert "every part left out" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("option", ["--json", "--trace"])
def test_a_file_that_cannot_be_written_is_named_before_the_run(option: str,
                                                               tmp_path: Path) -> None:
    # written at the end of a run of minutes: a missing folder was a traceback then
    for where, says in ((tmp_path / "no-such-folder" / "figures.json", "no folder"),
                        (tmp_path, "is a folder")):
        done = bench(option, str(where))
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"argument {option}:" in done.stderr and says in done.stderr
        assert "Traceback" not in done.stderr
