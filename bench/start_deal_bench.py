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
server. Cases, alternated ``--repeat`` times:

* 1 shoe, archiving off (the yardstick);
* N shoes (default 500, ``--full`` 1,500), archiving off;
* N shoes, archiving on (a retention age no shoe reaches: every run checks, none cuts).

Goals (issue 21): p99 at N shoes <= 1.2x the 1-shoe journal, archiving on <= 1.2x off, no card
over 20 ms.

    python bench/start_deal_bench.py [--shoes 500] [--full] [--rounds 5] [--repeat 2]
                                     [--repo CHECKOUT] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.latency_bench import Arrivals, PanelPty, start_http  # noqa: E402
from bench.measuring import percentile  # noqa: E402
from controller.service.control.access import own_group  # noqa: E402
from controller.table.machine import MachineSettings  # noqa: E402
from testkit.journals import cached_journal, journal_in_cache  # noqa: E402

#: the settings the cached journals are built with (bench/start_bench.py uses the same ones)
JOURNAL_SETTINGS = MachineSettings(table_id="BENCH", betting_seconds=15.0)
SHOES, FULL_SHOES = 500, 1500
GOAL_RATIO, GOAL_MAX_MS = 1.2, 20.0
WAIT_S = 20.0

CONFIG = """
table: {{id: BENCH, betting_seconds: 1, reveal: auto, decks: 8}}
state_dir: {state}
shoe: {{driver: beetek, url: {shoe}, reconnect_seconds: 0.2}}
panel: {{driver: line_panel, url: {panel}, reconnect_seconds: 0.2}}
control: {{socket: {socket}, supervisor_group: {group}}}
logging: {{level: warning, format: json}}
journal: {{archive: {archive}, retention_days: 36500}}
transports:
  http: {{url: "http://127.0.0.1:{port}/events", allow_insecure: true, secret_file: {secret},
         batch_max: 100, backoff_initial_s: 0.05, backoff_max_s: 0.5}}
"""


class Events(Arrivals):
    """Arrival times of every event the daemon sends (Arrivals keeps card_dealt's only)."""

    def __init__(self) -> None:
        super().__init__()
        self.at: dict[str, list[float]] = {}

    def record(self, receiver: str, source: str, events: list[dict[str, Any]]) -> None:
        now = time.perf_counter()
        with self.lock:
            for event in events:
                self.at.setdefault(str(event.get("type")), []).append(now)
        super().record(receiver, source, events)

    def clear(self) -> None:
        with self.lock:
            self.at.clear()
        super().clear()

    def seen(self, kind: str) -> int:
        with self.lock:
            return len(self.at.get(kind, []))

    def latency(self, kind: str, send) -> float:
        """Send one card; ms until the next ``kind`` event it makes arrives."""
        before = self.seen(kind)
        began = time.perf_counter()
        send()
        if not self.wait(lambda: len(self.at.get(kind, [])) > before, WAIT_S):
            raise RuntimeError(f"no {kind} within {WAIT_S} s of its card")
        with self.lock:
            return (self.at[kind][before] - began) * 1000


def deal_after_start(work: Path, shoes: int, archive: bool, rounds: int, events: Events,
                     port: int, repo: Path = REPO) -> list[float]:
    """Start the daemon on an N-shoe journal and deal at once; each card's latency in ms."""
    from drivers.sim.shoe import ShoeSimulator, shuffled_shoe

    state = work / "state"
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
    secret = work / "secret"
    secret.write_text("bench-secret\n")
    config = work / "table.yaml"
    config.write_text(CONFIG.format(
        state=json.dumps(str(state)), shoe=json.dumps(str(work / "shoe")),
        panel=json.dumps(str(work / "panel")), socket=json.dumps(str(work / "control.sock")),
        group=json.dumps(own_group()), archive=str(archive).lower(), port=port,
        secret=json.dumps(str(secret))))
    shoe = ShoeSimulator(work / "shoe", "beetek", settle_seconds=0.3).start()
    panel = PanelPty(work / "panel")
    log = work / "daemon.log"
    daemon = subprocess.Popen([sys.executable, "-m", "controller", "run", "--config",
                               str(config)], stdout=log.open("ab"), stderr=subprocess.STDOUT,
                              cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)})
    events.clear()
    cards = iter(shuffled_shoe(11))
    latencies: list[float] = []

    def deal(kind: str) -> None:
        card = next(cards)
        latencies.append(events.latency(kind, lambda: shoe.send_card(card)))

    try:
        # From the first card on, as a dealer starting a shoe right after a restart would:
        # the flip card, the burns, then the rounds (13 cards each, back to back).
        panel.wait_for_driver(60)
        panel.press("new_shoe")
        if not events.wait(lambda: events.seen("shoe_started") > 0, WAIT_S):
            raise RuntimeError(f"the daemon did not start a shoe; its log: {log}")
        # the flip card, untimed: the simulator's first write after the driver opened its pty
        # waits out its settle time (pyserial flushes input just after opening)
        shoe.send_card(next(cards))
        if not events.wait(lambda: events.seen("burn_card_shown") > 0, WAIT_S):
            raise RuntimeError(f"the flip card was not shown; its log: {log}")
        while not events.seen("burn_completed"):
            deal("card_burned")
        for number in range(1, rounds + 1):
            panel.press("start_round")
            if not events.wait(lambda n=number: events.seen("round_opened") >= n, WAIT_S):
                raise RuntimeError(f"round {number} did not open; its log: {log}")
            for _ in range(13):
                deal("card_dealt")
            if not events.wait(lambda n=number: events.seen("round_result") >= n, WAIT_S):
                raise RuntimeError(f"round {number} has no result; its log: {log}")
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait(5)
        shoe.close(drain_timeout=0.2)
        panel.close()
    return latencies


def figures(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values),
            "over_20ms": sum(v > GOAL_MAX_MS for v in values), "cards": len(values)}


def measure(shoes: int = SHOES, rounds: int = 5, repeat: int = 2,
            repo: Path = REPO) -> dict[str, Any]:
    """Every case ``repeat`` times, alternated; each case's cards pooled over its runs."""
    cases = {"1 shoe": (1, False), f"{shoes} shoes": (shoes, False),
             f"{shoes} shoes, archive on": (shoes, True)}
    for size in {1, shoes}:  # build (or find) the cached journals before timing anything
        journal_in_cache(size, JOURNAL_SETTINGS)
    events = Events()
    server = start_http(events)
    pooled: dict[str, list[float]] = {name: [] for name in cases}
    # Every run's copy is deleted at the end, not after its run: deleting hundreds of MB on a
    # filesystem mounted with ``discard`` sends the disk a storm of discards for seconds,
    # which would fall on the next run's cards (a 37 ms card on the 1-shoe journal here).
    works: list[Path] = []
    try:
        for _ in range(repeat):
            for name, (size, archive) in cases.items():
                works.append(Path(tempfile.mkdtemp(prefix="pdsd-", dir="/tmp")))
                pooled[name] += deal_after_start(works[-1], size, archive, rounds, events,
                                                 server.server_address[1], repo)
    finally:
        server.shutdown()
        for work in works:
            shutil.rmtree(work, ignore_errors=True)
    result: dict[str, Any] = {"shoes": shoes, "rounds": rounds, "repeat": repeat,
                              "cases": {name: figures(v) for name, v in pooled.items()},
                              "samples_ms": pooled}  # in dealing order, run after run
    base, big, on = (result["cases"][name] for name in cases)
    result["ratios"] = {
        "size": {k: big[k] / base[k] for k in ("p50", "p99")},
        "archive": {k: on[k] / big[k] for k in ("p50", "p99")},
    }
    return result


def rows(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The bench table's rows (bench/report.py, ``start`` part)."""
    out = []
    for name, f in result["cases"].items():
        out.append((f"deal after start, {name}",
                    f"{f['p50']:.2f} / {f['p99']:.2f} / {f['max']:.1f} ms",
                    f"card -> HTTP p50 / p99 / max, {f['cards']} cards; {f['over_20ms']} over "
                    f"{GOAL_MAX_MS:.0f} ms (goal 0)"))
    for key, label in (("size", f"{result['shoes']} shoes / 1 shoe"),
                       ("archive", "archive on / off")):
        r = result["ratios"][key]
        met = "met" if r["p99"] <= GOAL_RATIO else "NOT met"
        out.append((f"  {label}", f"x{r['p50']:.2f} / x{r['p99']:.2f}",
                    f"p50 / p99; goal p99 <= x{GOAL_RATIO}: {met}"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoes", type=int, default=None, help=f"default {SHOES}")
    parser.add_argument("--full", action="store_true", help=f"{FULL_SHOES} shoes")
    parser.add_argument("--rounds", type=int, default=5, help="rounds dealt a run (13 cards)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each case, alternated")
    parser.add_argument("--repo", type=Path, default=REPO,
                        help="run the daemon from this checkout (e.g. the code before a change)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    shoes = args.shoes or (FULL_SHOES if args.full else SHOES)
    result = measure(shoes, args.rounds, args.repeat, args.repo.resolve())
    for name, value, note in rows(result):
        print(f"{name:<40}{value:>26}  {note}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
