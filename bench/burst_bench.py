"""Group commit: a burst of card frames (a shoe sending what it buffered, a dealer drawing
fast) from the moment a driver posts it to the moment its last card is journaled.

The owner loop runs in this process on a real journal (WAL, synchronous=FULL) in a temporary
directory; each round's cards are posted at once, as the shoe driver posts the frames of one
read. ``grouped`` is the daemon as shipped (inputs queued together share one transaction);
``one by one`` is the same daemon with ``group_max = 1`` (a transaction per input). Prints per
burst the time and the commits, min / median / max over the rounds. A figure, not a test.

    python bench/burst_bench.py [--rounds 8] [--burst 13] [--dir /var/lib/pokdeng-table]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the clone

from bench.measuring import save_json  # noqa: E402
from controller.rules.cards import parse_card  # noqa: E402
from controller.service.config.settings import parse_config  # noqa: E402
from controller.service.control.access import own_group  # noqa: E402
from controller.service.daemon import Daemon  # noqa: E402
from controller.service.telemetry.logging_setup import setup_logging  # noqa: E402
from controller.service.telemetry.notify import Notifier  # noqa: E402
from controller.table.inputs import Button, CardScan  # noqa: E402
from drivers.sim.shoe import shuffled_shoe  # noqa: E402

FLIP_AND_BURNS = ("5H", "2C", "3C", "4C", "6C", "7C")


def dealing_order(seed: int = 7) -> list[str]:
    """The rest of an 8-deck shoe after the flip and burn cards, shuffled: no card more
    often than the shoe holds it (the table faults on a ninth)."""
    rest = [card.code for card in shuffled_shoe(seed)]
    for code in FLIP_AND_BURNS:
        rest.remove(code)
    return rest


class CardsJournaled:
    """An event listener (the owner thread calls it after each commit): what was journaled,
    and when the last of it was."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.cards = 0
        self.burns_done = 0
        self.results = 0
        self.at = 0.0

    def __call__(self, events: list[dict[str, Any]]) -> None:
        with self.changed:
            self.cards += sum(1 for e in events if e["type"] == "card_dealt")
            self.results += sum(1 for e in events if e["type"] == "round_result")
            self.burns_done += sum(1 for e in events if e["type"] == "burn_completed")
            self.at = time.perf_counter()
            self.changed.notify_all()

    def wait(self, predicate: Any, timeout: float = 20.0) -> None:
        with self.changed:
            if not self.changed.wait_for(predicate, timeout):
                raise SystemExit("the table did not get there in time")


def commits(journal_path: Path, since_record: int) -> int:
    """Transactions that wrote input records after ``since_record`` (one time of writing each)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{journal_path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT COUNT(DISTINCT written) FROM records WHERE n > ? AND "
                            "kind='input'", (since_record,)).fetchone()[0]
    finally:
        conn.close()


def run(group_max: int, rounds: int, burst: int, directory: str | None) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(dir=directory, prefix="pokdeng-burst-") as folder:
        state = Path(folder)
        config = parse_config({
            "table": {"id": "BURST", "betting_seconds": 1, "reveal": "auto"},
            "state_dir": str(state), "shoe": {"driver": "beetek", "url": "/dev/null"},
            "control": {"socket": str(state / "c.sock"), "supervisor_group": own_group()},
            "logging": {"level": "warning"}}, "burst bench")
        daemon = Daemon(config, notifier=Notifier({}), drivers=[], transports=[])
        daemon.group_max = group_max
        seen = CardsJournaled()
        daemon.add_event_listener(seen)
        thread = threading.Thread(target=daemon.run, daemon=True)
        thread.start()
        if not daemon.ready.wait(20):
            raise SystemExit("the daemon did not start")
        figures: dict[str, list[float]] = {"ms": [], "commits": []}
        try:
            daemon.post(Button(0.0, "new_shoe"))
            for code in FLIP_AND_BURNS:
                daemon.post(CardScan(0.0, parse_card(code)))
            seen.wait(lambda: seen.burns_done == 1)
            shoe = iter(dealing_order())
            for number in range(1, rounds + 1):
                cards = [next(shoe) for _ in range(burst)]
                daemon.post(Button(0.0, "start_round"))
                time.sleep(0.05)  # the round is open
                assert daemon.journal is not None
                records = daemon.journal.record_count()
                before = seen.cards
                t0 = time.perf_counter()
                for code in cards:
                    daemon.post(CardScan(0.0, parse_card(code)))
                seen.wait(lambda b=before: seen.cards >= b + burst)
                figures["ms"].append((seen.at - t0) * 1000)
                figures["commits"].append(commits(daemon.journal.path, records))
                seen.wait(lambda n=number: seen.results >= n)
        finally:
            daemon.request_stop()
            thread.join(20)
        return figures


def spread(values: list[float]) -> str:
    return f"{min(values):7.2f} {statistics.median(values):7.2f} {max(values):7.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8, help="bursts per way (default 8)")
    parser.add_argument("--burst", type=int, default=13, help="cards per burst (default 13)")
    parser.add_argument("--dir", default=None, help="where the journal lives (its disk)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    setup_logging("warning", "json", stream=sys.stderr)
    results = {}
    for name, group_max in (("one by one", 1), ("grouped", 64)):
        results[name] = run(group_max, args.rounds, args.burst, args.dir)
    print(f"a burst of {args.burst} card frames posted at once -> its last card journaled; "
          f"{args.rounds} bursts each way")
    print(f"{'':<12}{'ms min/med/max':>24}{'commits min/med/max':>26}")
    for name, figures in results.items():
        print(f"{name:<12}{spread(figures['ms']):>24}{spread(figures['commits']):>26}")
    ratio = statistics.median(results["one by one"]["ms"]) / statistics.median(
        results["grouped"]["ms"])
    print(f"grouped is x{ratio:.1f} faster (medians)")
    save_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
