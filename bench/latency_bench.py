"""End-to-end latency: a card frame written on the shoe's pty -> its ``card_dealt`` event at an
MQTT subscriber and at an HTTP server, through the real daemon; and the same frames through
relays, the goals' yardsticks (bench part ``latency``).

Real path (bench/harness.py: ``python -m controller run`` on a simulated Bee-Tek shoe and a
line panel on ptys): shoe driver (pyserial) -> daemon queue -> owner loop -> table machine ->
journal append (SQLite WAL, fsync) -> outbox -> MQTT (QoS 1, real mosquitto on loopback) and
HTTP webhook (loopback, HMAC signed).
Durable relay (a subprocess: this file with ``--relay``), the goals' yardstick: pyserial read of
a pty -> Bee-Tek parser -> one SQLite commit per card (WAL, ``synchronous=FULL`` like the
journal: the commit returns once the WAL is fsynced), on the same disk -> MQTT publish (QoS 1)
and HTTP POST. A table that journals before it sends cannot beat that floor. Its second copy
(``durable-aa``) is the A/A yardstick: the relay against itself, the noise of this machine.
Threaded durable relay: the durable relay's steps on the daemon's threads (a reader thread, a
committing thread, one sender thread per transport, handed over by queue and Event): what the
hand-overs alone cost under one interpreter lock.

Goals (bench/verdict.py judges them against the A/A floor): the daemon's p50 <= x1.3 of the
durable relay (x1.5 until 2026-12-02), its p99 <= x2, its p50 <= x1.3 of the threaded relay.

The broker runs with the settings we ship for latency and durability
(config/mosquitto/pokdeng.conf: ``set_tcp_nodelay true``, persistence) on a plain loopback
listener; ``--broker-default`` runs mosquitto's defaults instead (Nagle on: ~40 ms stalls).

Cards are sent one at a time: each frame's time is taken just before the simulator writes it,
and the next card goes once the event reached both receivers, so every figure is the latency
of an idle table. The relays deal to the daemon's rhythm: 13 cards, then a rest as long as the
daemon's between two rounds (a burst after a rest is about twice as slow as cards back to
back, for the relays as for the daemon). ``--pairs N`` runs every path N times, alternated
(fresh daemon, fresh journals each time).

    python bench/latency_bench.py [--rounds 8] [--pairs 5] [--only mqtt|http] [--state-dir DIR]
                                  [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import harness  # noqa: E402
from bench.harness import CARDS_A_ROUND, RELAY_TOPIC, Receivers  # noqa: E402
from bench.measuring import PAIRS, ROUNDS, save_json  # noqa: E402

#: the paths, in the order of even pairs (odd pairs reverse it: the relays take the rhythm of
#: the daemon's run before them)
PATHS = {"daemon": "real daemon", "durable": "durable relay",
         "threaded": "threaded durable relay", "durable-aa": "durable relay, A/A copy"}
#: (figure, the path it is a ratio to, goal)
GOALS = (("p50", "durable", 1.3), ("p99", "durable", 2.0), ("p50", "threaded", 1.3))


# --- the relays (subprocesses) -------------------------------------------------------------------



class DurableRecord:
    """One SQLite commit per card, as the journal commits: WAL, ``synchronous=FULL``."""

    def __init__(self, path: str, check_same_thread: bool = True):
        import sqlite3

        self.conn = sqlite3.connect(path, isolation_level=None,
                                    check_same_thread=check_same_thread)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS records (n INTEGER PRIMARY KEY, "
                          "written REAL NOT NULL, body TEXT NOT NULL)")

    def commit(self, seq: int, body: str) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO records(n, written, body) VALUES (?, ?, ?)",
                          (seq, time.time(), body))
        self.conn.execute("COMMIT")


def relay_client(client_id: str, mqtt_port: int, receivers: tuple[str, ...]) -> Any:
    """A connected paho client with its network thread, or None when MQTT is not measured
    (its thread would compete with the HTTP sender's)."""
    if "mqtt" not in receivers:
        return None
    import paho.mqtt.client as mqtt

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id)
    client.connect("127.0.0.1", mqtt_port)
    client.loop_start()
    return client


def relay_main(kind: str, link: str, mqtt_port: int, http_port: int, journal: str,
               receivers: tuple[str, ...]) -> int:
    """pyserial read -> parse -> one fsync'd SQLite commit -> MQTT publish + HTTP POST (to
    ``receivers`` only); ``kind`` names it on the receivers (``durable``, its A/A copy
    ``durable-aa``), ``threaded`` lays the same steps out on the daemon's threads."""
    import http.client

    import serial

    from controller.table.inputs import CardScan
    from drivers.protocols.beetek import BeeTekParser

    if kind == "threaded":
        return threaded_relay_main(link, mqtt_port, http_port, journal, receivers)
    record = DurableRecord(journal)
    client = relay_client(f"bench-relay-{kind}", mqtt_port, receivers)
    conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=5)
    port = serial.serial_for_url(link, timeout=0.2)
    parser = BeeTekParser()
    seq = 0
    print("ready", flush=True)
    while True:
        data = port.read(port.in_waiting or 1)
        if not data:
            continue
        for output in parser.feed(data):
            if not isinstance(output, CardScan):
                continue
            seq += 1
            body = json.dumps({"id": f"relay:{seq}", "seq": seq, "type": "card_dealt",
                               "data": {"index": seq}})
            record.commit(seq, body)
            if "mqtt" in receivers:
                client.publish(f"{RELAY_TOPIC}/{kind}", body, qos=1)
            if "http" in receivers:
                conn.request("POST", f"/relay/{kind}", f'{{"events": [{body}]}}',
                             {"Content-Type": "application/json"})
                conn.getresponse().read()


def threaded_relay_main(link: str, mqtt_port: int, http_port: int, journal: str,
                        receivers: tuple[str, ...]) -> int:
    """The durable relay's steps laid out on the daemon's threads: a reader thread posts each
    card to a queue; one thread commits it (as the owner loop journals) and hands it to one
    sender thread per transport, each woken by an Event (as the outbox's); the MQTT sender
    waits for the PUBACK, as the daemon's does. No table machine, no journal schema: what is
    left is the cost of the hand-overs between threads under one interpreter lock."""
    import http.client
    import queue
    from collections import deque

    import serial

    from controller.table.inputs import CardScan
    from drivers.protocols.beetek import BeeTekParser

    record = DurableRecord(journal, check_same_thread=False)
    client = relay_client("bench-relay-threaded", mqtt_port, receivers)
    conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=5)
    cards: queue.Queue[CardScan] = queue.Queue()

    class Sender:
        def __init__(self, send) -> None:
            self.items: deque[str] = deque()
            self.wake = threading.Event()
            self.send = send
            threading.Thread(target=self.run, daemon=True).start()

        def run(self) -> None:
            while True:
                self.wake.wait()
                self.wake.clear()
                while self.items:
                    self.send(self.items.popleft())

    def post(body: str) -> None:
        conn.request("POST", "/relay/threaded", f'{{"events": [{body}]}}',
                     {"Content-Type": "application/json"})
        conn.getresponse().read()

    senders = []
    if "mqtt" in receivers:
        senders.append(Sender(lambda body: client.publish(f"{RELAY_TOPIC}/threaded", body,
                                                          qos=1).wait_for_publish(5)))
    if "http" in receivers:
        senders.append(Sender(post))

    def commit_and_hand_over() -> None:
        seq = 0
        while True:
            cards.get()
            seq += 1
            body = json.dumps({"id": f"relay:{seq}", "seq": seq, "type": "card_dealt",
                               "data": {"index": seq}})
            record.commit(seq, body)
            for sender in senders:
                sender.items.append(body)
                sender.wake.set()

    threading.Thread(target=commit_and_hand_over, daemon=True).start()
    port = serial.serial_for_url(link, timeout=0.2)
    parser = BeeTekParser()
    print("ready", flush=True)
    while True:
        data = port.read(port.in_waiting or 1)
        for output in parser.feed(data) if data else ():
            if isinstance(output, CardScan):
                cards.put(output)



class RelayPath:
    """One relay subprocess with its own simulated shoe, dealt a few cards at a time."""

    def __init__(self, kind: str, work: Path, backends: Receivers):
        from drivers.sim.shoe import ShoeSimulator, shuffled_shoe

        self.kind, self.backends = kind, backends
        link = work / f"{kind}-relay-shoe"
        self.shoe = ShoeSimulator(link, "beetek").start()
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--relay", kind, str(link), str(backends.mqtt_port),
             str(backends.http_port), str(work / f"{kind}-relay.db"),
             ",".join(backends.names)], stdout=subprocess.PIPE, cwd=ROOT, text=True)
        self.cards = iter(shuffled_shoe(8))
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            self.close()
            raise harness.Stalled(f"the {kind} relay did not start")
        for _ in range(3):  # warm-up, as the flip and burn cards warm up the daemon
            self._one()

    def _one(self) -> dict[str, float]:
        card = next(self.cards)
        return self.backends.arrivals.time_one(lambda: self.shoe.send_card(card), self.kind,
                                               self.backends.names)

    def deal(self, rounds: int, gaps: list[float]) -> dict[str, list[float]]:
        """``rounds`` rounds of 13 cards, resting ``gaps`` between them."""
        into: dict[str, list[float]] = {r: [] for r in self.backends.names}
        for number in range(rounds):
            if number:
                time.sleep(gaps[(number - 1) % len(gaps)] if gaps else 1.5)
            for _ in range(CARDS_A_ROUND):
                for receiver, ms in self._one().items():
                    into[receiver].append(ms)
        return into

    def close(self) -> None:
        self.process.kill()
        self.process.wait(5)
        self.shoe.close(drain_timeout=0.2)


def measure(work: Path, rounds: int = 8, pairs: int = 5, *,
            receivers: tuple[str, ...] = ("mqtt", "http"), shipped_broker: bool = True,
            log_level: str = "warning") -> dict[str, Any]:
    """Every path once a pair, ``pairs`` times, alternated (the relays to the rhythm of the
    daemon's last run); per path and transport each pair's figures, and the goals judged."""
    gaps: list[float] = []
    stalled: list[str] = []
    runs: dict[str, list[dict[str, dict[str, float]]]]

    with harness.receivers(work, receivers, shipped_broker) as backends:
        def run(path: str, pair: int) -> dict[str, dict[str, float]]:
            run_dir = Path(tempfile.mkdtemp(prefix=f"{path}{pair + 1}-", dir=work))
            if path == "daemon":
                gaps.clear()
                with harness.start_daemon(run_dir, backends, log_level=log_level) as table:
                    samples = harness.deal(table, backends, rounds, round_gaps=gaps)
            else:
                backends.arrivals.clear()
                relay = RelayPath(path, run_dir, backends)
                try:
                    samples = relay.deal(rounds, gaps)
                finally:
                    relay.close()
            return {t: harness.figures(v) for t, v in samples.items()}

        runs = harness.alternate(list(PATHS), pairs, run, stalled)
    summary: dict[str, Any] = {"cards": rounds * CARDS_A_ROUND, "pairs": pairs, "runs": runs,
                               "stalled": stalled,
                               "broker": "shipped" if shipped_broker else "mosquitto defaults",
                               "transports": list(receivers), "daemon_log_level": log_level,
                               "paths": {}, "goals": {}}
    for path in PATHS:
        summary["paths"][path] = {
            t: {f: statistics.median(run[t][f] for run in runs[path]) for f in ("p50", "p99")}
            | {"max": max(run[t]["max"] for run in runs[path])} for t in receivers}
    for t in receivers:
        def per_pair(path: str, figure: str, t: str = t) -> list[float]:
            return [run[t][figure] for run in runs[path]]

        summary["goals"][t] = [
            {"figure": figure, "against": against} | harness.judged(
                per_pair("daemon", figure), per_pair(against, figure), goal,
                aa=(per_pair("durable-aa", figure), per_pair("durable", figure)))
            for figure, against, goal in GOALS]
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    print(f"card frame on the pty -> card_dealt at the receiver: {summary['cards']} cards a run, "
          f"{summary['pairs']} alternated pairs; broker: {summary['broker']}; daemon log "
          f"level: {summary['daemon_log_level']}; ms, median of the pairs (max: of all)")
    print(f"{'path':<44}{'p50':>8}{'p99':>8}{'max':>8}")
    for path, name in PATHS.items():
        for t in summary["transports"]:
            f = summary["paths"][path][t]
            print(f"{name + ' -> ' + t.upper():<44}{f['p50']:>8.2f}{f['p99']:>8.2f}"
                  f"{f['max']:>8.2f}")
    for t in summary["transports"]:
        for goal in summary["goals"][t]:
            print(f"{t.upper()} daemon {goal['figure']} / {PATHS[goal['against']]}: "
                  f"x{goal['ratio']:.2f}, {goal['note']}")
    for stall in summary["stalled"]:
        print(f"run again after: {stall}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=ROUNDS, default=8, help="rounds (13 cards each) per run")
    parser.add_argument("--pairs", type=PAIRS, default=5,
                        help="alternated pairs: every path once a pair (default 5)")
    parser.add_argument("--state-dir", default=None,
                        help="work directory (default: a temporary one; the journals live "
                             "there, so its disk is the one measured)")
    parser.add_argument("--broker-default", action="store_true",
                        help="run mosquitto with its defaults (set_tcp_nodelay false, no "
                             "persistence) instead of the settings we ship")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--only", choices=("mqtt", "http"),
                        help="one transport alone, on every path (the daemon configured with it "
                             "alone): what the other's threads cost this one")
    parser.add_argument("--log-level", choices=("warning", "info"), default="warning",
                        help="the daemon's log level (default warning; info is what "
                             "config/example.yaml ships: a log line per event)")
    parser.add_argument("--relay", nargs=6,
                        metavar=("KIND", "LINK", "MQTT_PORT", "HTTP_PORT", "JOURNAL", "TO"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.relay:
        kind, link, mqtt_port, http_port, journal, receivers = args.relay
        return relay_main(kind, link, int(mqtt_port), int(http_port), journal,
                          tuple(receivers.split(",")))
    if missing := harness.mosquitto_missing():
        raise SystemExit(missing)
    work = Path(args.state_dir or tempfile.mkdtemp(prefix="pokdeng-latency-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        summary = measure(work, args.rounds, args.pairs,
                          receivers=(args.only,) if args.only else ("mqtt", "http"),
                          shipped_broker=not args.broker_default, log_level=args.log_level)
    finally:
        if not args.state_dir:
            shutil.rmtree(work, ignore_errors=True)
    print_summary(summary)
    save_json(args.json, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
