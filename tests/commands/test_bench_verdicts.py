"""``pokdeng-table bench`` prints every goal's ratio with the A/A floor measured in the same run
and one verdict word, on a tiny configuration (one round a run, two pairs): behaviour, not
speed. The words themselves depend on the machine; that each row has one, and that the floor
and the pairs it names are the run's own, does not."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from bench.report import PARTS
from bench.verdict import CANNOT_TELL, MET, MIN_PAIRS, NOT_MET

pytestmark = pytest.mark.skipif(not Path("/usr/sbin/mosquitto").exists(),
                                reason="needs Debian's mosquitto")

REPO = Path(__file__).resolve().parents[2]
# goal <= x1.3: met (A/A floor x0.84-1.21; 2 pairs x1.02, x1.10)
JUDGED = re.compile(r"goal <= x(?P<goal>[\d.]+): (?P<word>met|not met|cannot tell on this "
                    r"machine) \(A/A floor x(?P<low>[\d.]+)-(?P<high>[\d.]+); (?P<n>\d+) pairs "
                    r"(?P<pairs>x[\d.]+(?:, x[\d.]+)*)"
                    r"(?P<few>; fewer than 3 pairs give no word)?\)")


def judged_rows(rows: list[dict[str, str]]) -> dict[str, re.Match[str]]:
    return {row["figure"].strip(): match for row in rows
            if (match := JUDGED.search(row["note"]))}


def check_judgement(value: str, match: re.Match[str], pairs: int) -> None:
    """The row's value is the median of the pairs it names, and its word the rule's for that
    median, floor and goal (away from the edges the printed rounding blurs)."""
    ratios = [float(x) for x in match["pairs"].replace("x", "").split(", ")]
    assert int(match["n"]) == len(ratios) == pairs
    if pairs < MIN_PAIRS:  # too few A/A ratios to know the noise: no word, and the note says so
        assert match["word"] == CANNOT_TELL and match["few"]
        return
    assert not match["few"]
    median = statistics.median(ratios)
    assert abs(float(value.removeprefix("x")) - median) <= 0.011
    low, high, goal, word = float(match["low"]), float(match["high"]), float(match["goal"]), \
        match["word"]
    assert low <= 1.0 <= high
    # where the true ratio lies (median / high .. median / low), each end as low and as high
    # as the printed rounding (0.005 on the floor, 0.01 on the median) lets it be
    least = ((median - 0.01) / (high + 0.005), (median + 0.01) / (high - 0.005))
    most = ((median - 0.01) / (low + 0.005), (median + 0.01) / max(low - 0.005, 1e-9))
    if most[1] < goal:
        assert word == MET
    elif least[0] > goal:
        assert word == NOT_MET
    elif least[1] < goal < most[0]:
        assert word == CANNOT_TELL


@pytest.mark.slow
def test_latency_and_stress_print_their_floor_and_a_verdict(tmp_path: Path) -> None:
    out, trace = tmp_path / "figures.json", tmp_path / "slow-cards.jsonl"
    others = ",".join(part for part in PARTS if part not in ("latency", "stress"))
    done = subprocess.run([sys.executable, "-m", "controller", "bench", "--skip", others,
                           "--pairs", "2", "--latency-rounds", "1", "--stress-rounds", "1",
                           "--trace", str(trace), "--trace-over", "0", "--json", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    judged = judged_rows(rows)
    values = {row["figure"].strip(): row["value"] for row in rows}
    for transport in ("MQTT", "HTTP"):
        expected = {f"{transport} p50 / durable relay", f"{transport} p99 / durable relay",
                    f"{transport} p50 / threaded durable relay",
                    f"{transport} p99 stressed / quiet"}
        assert expected <= set(judged), sorted(judged)
        for figure in expected:
            check_judgement(values[figure], judged[figure], pairs=2)
            assert figure in done.stdout
        count = next(row for row in rows
                     if row["figure"].strip() == f"{transport} stressed cards > 20 ms")
        assert re.search(r"goal none: (met|not met|cannot tell on this machine) "
                         r"\(quiet runs: \d+\)", count["note"])
    # the A/A copies are printed beside what they are copies of
    assert any(row["figure"].strip().startswith("durable relay again") for row in rows)
    assert any("quiet-aa" in row["figure"] for row in rows)
    # every card is over 0 ms: each one has a line naming its run and its daemon's threads
    # (a run that stalled on a busy machine and ran again has its first cards there too)
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    traced = next(row for row in rows if row["figure"] == "cards traced (stress)")
    assert int(traced["value"]) == len(lines) >= 2 * 3 * 13  # pairs x runs x cards
    assert str(trace) in traced["note"]
    runs = {f"{case} {pair}" for pair in (1, 2) for case in ("quiet", "stressed", "quiet-aa")}
    assert {line["run"] for line in lines} == runs
    assert all(sum(line["run"] == run for line in lines) >= 13 for run in runs)
    assert all(line["on_cpu_us"] and "write_bytes" in line["io"] and "block_io_wait_us" in line
               for line in lines)
    # and where each thread slept while the card was in flight, by state and wait channel
    assert all(isinstance(line["asleep_ms"], dict) for line in lines)
    assert any(re.fullmatch(r"[SDIT] \S+", where) for line in lines
               for slept in line["asleep_ms"].values() for where in slept)
    # the broker the MQTT copy goes through is followed too, under its own name
    assert any(thread.startswith("broker/") for line in lines for thread in line["asleep_ms"])
    # the note says how the processes shared the cores and where the broker kept its store
    quiet = next(row for row in rows if row["figure"].strip().startswith("card -> MQTT quiet "))
    assert re.search(r"(in a CPU cgroup of its own \(cgroup v[12]\), weights table \d+, "
                     r"broker \d+, load \d+|no CPU cgroups \(.+\)); the broker's store "
                     r"(in memory|on the bench's disk)", quiet["note"]), quiet["note"]


@pytest.mark.slow
def test_dealing_after_a_start_prints_its_floor_and_verdicts(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "start_deal_bench.py"),
                           "--shoes", "3", "--rounds", "1", "--pairs", "2", "--json",
                           str(tmp_path / "start.json")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "start.json").read_text())
    assert set(result["cases"]) == {"1 shoe", "3 shoes", "3 shoes, archive on",
                                    "1 shoe, A/A copy"}
    for key, label in (("size", "3 shoes / 1 shoe p99"), ("archive", "archive on / off p99")):
        line = next(line for line in done.stdout.splitlines() if line.strip().startswith(label))
        match = JUDGED.search(line)
        assert match, line
        check_judgement(f"x{result[key]['ratio']:.2f}", match, pairs=2)
        # one floor for both: the 1-shoe journal against its copy, pair by pair
        copies = [a["p99"] / b["p99"] for a, b in zip(result["runs"]["1 shoe, A/A copy"],
                                                      result["runs"]["1 shoe"])]
        # each copy's ratio taken both ways: which of the two came out faster is chance
        both_ways = [*copies, *(1 / c for c in copies)]
        assert result[key]["floor"] == [min(1.0, *both_ways), max(1.0, *both_ways)]
    assert re.search(r"cards over 20 ms after a start +\d+  goal none: (met|not met|cannot tell "
                     r"on this machine)", done.stdout)
