"""Dealing right after a start, by journal size: card -> backend on a long journal against a
1-shoe one, and with ``journal.archive`` on against off.

Right after READY the daemon starts its housekeeping: the full journal check, and (archiving
on) a retention run. Both read the whole journal; neither may delay a card. For each case the
real daemon (``pokdeng-table run``: simulated Bee-Tek shoe and line panel on ptys, an HTTP
webhook to a loopback server in this process) is started on a copy of a cached journal
(testkit/journals.py, marked delivered), and as soon as its panel opens the dealer starts a
shoe and deals: the flip card, the burns, then ``--rounds`` rounds of 13 cards, back to back;
every card's time (but the flip card's: the simulator's first write waits out its settle time)
from the frame written on the shoe's pty to its event (``card_burned``, ``card_dealt``) at the
server. A pair is one run of each case, the order reversed every other pair (``--pairs``):

* 1 shoe, archiving off (the yardstick);
* N shoes (default 500, ``--full`` 1,500), archiving off;
* N shoes, archiving on (a retention age no shoe reaches: every run checks, none cuts);
* 1 shoe again: the A/A copy, the yardstick against itself (this machine's noise).

Goals (issue 21), judged by bench/verdict.py on the median pair against the 1-shoe A/A floor
(one floor for both ratios: a second N-shoe copy would cost as much again): p99 at N shoes
<= x1.2 the 1-shoe journal, archiving on <= x1.2 off, no card over 20 ms.

    python bench/start_deal_bench.py [--shoes 500] [--full] [--rounds 5] [--pairs 5]
                                     [--repo CHECKOUT] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from bench.measuring import PAIRS, ROUNDS, save_json  # noqa: E402
from bench.verdict import judge_count  # noqa: E402
from controller.table.machine import MachineSettings  # noqa: E402
from testkit.journals import cached_journal, journal_in_cache  # noqa: E402

#: the settings the cached journals are built with (bench/start_bench.py uses the same ones)
JOURNAL_SETTINGS = MachineSettings(table_id="BENCH", betting_seconds=15.0)
SHOES, FULL_SHOES = 500, 1500
GOAL_RATIO = 1.2
JOURNAL_CONFIG = "journal: {{archive: {archive}, retention_days: 36500}}\n"


def delivered_copy(state: Path, shoes: int) -> None:
    """A copy of the cached N-shoe journal in ``state``, every event marked delivered."""
    state.mkdir(mode=0o750)
    journal = state / "journal.sqlite"
    cached_journal(journal, shoes, JOURNAL_SETTINGS)
    conn = sqlite3.connect(journal)
    with conn:  # everything delivered: the outbox has no backlog to send
        conn.execute("INSERT INTO delivery(transport, last_seq, updated) "
                     "SELECT 'http', MAX(event_seq), 0 FROM records")
    conn.close()
    # The copy is hundreds of MB of dirty pages: written back while the daemon deals, they
    # would queue every journal fsync behind them. A table's journal is not a fresh copy.
    os.sync()


def measure(shoes: int = SHOES, rounds: int = 5, pairs: int = 5,
            repo: Path = REPO) -> dict[str, Any]:
    """Every case once a pair, ``pairs`` times, alternated; per case each pair's figures (card
    -> HTTP, burns included), the ratios judged."""
    cases = {"1 shoe": (1, False), f"{shoes} shoes": (shoes, False),
             f"{shoes} shoes, archive on": (shoes, True), "1 shoe, A/A copy": (1, False)}
    for size in {1, shoes}:  # build (or find) the cached journals before timing anything
        journal_in_cache(size, JOURNAL_SETTINGS)
    # Every run's copy is deleted at the end, not after its run: deleting hundreds of MB on a
    # filesystem mounted with ``discard`` sends the disk a storm of discards for seconds,
    # which would fall on the next run's cards (a 37 ms card on the 1-shoe journal here).
    works: list[Path] = []
    stalled: list[str] = []
    try:
        with harness.receivers(Path(tempfile.gettempdir()), ("http",)) as backends:
            def run(case: str, pair: int) -> dict[str, float]:
                size, archive = cases[case]
                works.append(Path(tempfile.mkdtemp(prefix="pdsd-", dir="/tmp")))
                delivered_copy(works[-1] / "state", size)
                with harness.start_daemon(works[-1], backends, repo=repo,
                                          extra_config=JOURNAL_CONFIG.format(
                                              archive=str(archive).lower())) as table:
                    return harness.figures(harness.deal(table, backends, rounds, seed=11,
                                                        time_burns=True)["http"])

            runs = harness.alternate(list(cases), pairs, run, stalled)
    finally:
        for work in works:
            shutil.rmtree(work, ignore_errors=True)

    def per_pair(case: str, figure: str) -> list[float]:
        return [run[figure] for run in runs[case]]

    base, big, on, again = cases
    result: dict[str, Any] = {
        "shoes": shoes, "rounds": rounds, "pairs": pairs, "runs": runs, "stalled": stalled,
        "cases": {case: {f: statistics.median(per_pair(case, f)) for f in ("p50", "p99")}
                  | {"max": max(per_pair(case, "max")),
                     "over_goal": int(sum(per_pair(case, "over_goal"))),
                     "cards": int(sum(per_pair(case, "cards")))} for case in cases},
        "size": harness.judged(per_pair(big, "p99"), per_pair(base, "p99"), GOAL_RATIO,
                               aa=(per_pair(again, "p99"), per_pair(base, "p99"))),
        "archive": harness.judged(per_pair(on, "p99"), per_pair(big, "p99"), GOAL_RATIO,
                                  aa=(per_pair(again, "p99"), per_pair(base, "p99")))}
    def summed(figure: str, *of: str) -> int:
        return sum(result["cases"][case][figure] for case in of)

    result["over_goal"] = {"cards": summed("over_goal", big, on),
                           "yardstick": summed("over_goal", base, again)}
    result["over_goal"]["verdict"] = judge_count(
        result["over_goal"]["cards"], summed("cards", big, on),
        result["over_goal"]["yardstick"], summed("cards", base, again))
    return result


def rows(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The bench table's rows (bench/report.py, ``start`` part)."""
    out = []
    again = harness.stalled_text(result["stalled"])
    for name, f in result["cases"].items():
        out.append((f"deal after start, {name}",
                    f"{f['p50']:.2f} / {f['p99']:.2f} / {f['max']:.1f} ms",
                    f"card -> HTTP p50 / p99 / max, {f['cards']} cards in {result['pairs']} "
                    f"runs{again}; {f['over_goal']} over {harness.GOAL_MAX_MS:.0f} ms"))
    for key, label in (("size", f"{result['shoes']} shoes / 1 shoe p99"),
                       ("archive", "archive on / off p99")):
        r = result[key]
        out.append((f"  {label}", f"x{r['ratio']:.2f}", r["note"]))
    over = result["over_goal"]
    out.append((f"  cards over {harness.GOAL_MAX_MS:.0f} ms after a start", str(over["cards"]),
                f"goal none: {over['verdict']} (1 shoe: {over['yardstick']})"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoes", type=int, default=None, help=f"default {SHOES}")
    parser.add_argument("--full", action="store_true", help=f"{FULL_SHOES} shoes")
    parser.add_argument("--rounds", type=ROUNDS, default=5, help="rounds dealt a run (13 cards)")
    parser.add_argument("--pairs", type=PAIRS, default=5,
                        help="alternated pairs: every case once a pair (default 5)")
    parser.add_argument("--repo", type=Path, default=REPO,
                        help="run the daemon from this checkout (e.g. the code before a change)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    shoes = args.shoes or (FULL_SHOES if args.full else SHOES)
    result = measure(shoes, args.rounds, args.pairs, args.repo.resolve())
    for name, value, note in rows(result):
        print(f"{name:<40}{value:>26}  {note}")
    save_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
