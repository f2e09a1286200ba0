"""Fleet: N tables on one studio broker; the broker is stopped while they deal, then started
again. The figure is the time from the broker accepting connections again to the last table's
backlog delivered, against the goal of 2 s.

Each table is the daemon's delivery path: its own journal (SQLite, WAL, fsync per commit), the
outbox and the MQTT transport with the shipped settings (MQTT 5), dealing one event every
``--every`` seconds, journaled first and then handed to the outbox. The tables are spread over
``--processes`` worker processes: on the studio floor each table has a PC of its own, and one
interpreter lock for 40 tables would measure the lock. The broker is mosquitto with the
studio's settings (config/mosquitto/pokdeng.conf, persistence on, testkit's Mosquitto); a
backend subscribes to every table with a persistent session.

A table's backlog is every event it journaled before the broker accepted a TCP connection again
(the bench probes every 2 ms from the moment it starts the broker, which is down for
``--outage`` seconds and a random part of a second: the tables' reconnect attempts, all begun
at the same instant, do not then decide the figure by the phase they happen to meet); it is
delivered when the outbox holds the broker's PUBACK for the last of them. The tables go on
dealing throughout. At the end the backend must hold every event of every table, or the run
fails.

    python bench/fleet_bench.py [--tables 5,40] [--outage 10] [--every 0.5] [--processes 4]
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the clone

from bench.measuring import save_json  # noqa: E402
from controller.durability.delivery.outbox import Outbox  # noqa: E402
from controller.durability.journal import Journal  # noqa: E402
from controller.table.inputs import Tick  # noqa: E402
from controller.transports import create  # noqa: E402
from testkit.backends import MOSQUITTO, Mosquitto  # noqa: E402

GOAL_S = 2.0
PROBE_EVERY_S = 0.002


def _event(table: str, seq: int) -> dict[str, Any]:
    return {"v": 1, "id": f"{table}:{seq}", "table": table, "seq": seq, "type": "card_dealt",
            "shoe": 1, "round": 1 + seq // 20, "data": {"index": seq % 13, "target": "P1"}}


class _Table:
    """One table in a worker process: a journal, its outbox, what it journaled when."""

    def __init__(self, folder: Path, name: str, port: int):
        self.name = name
        self.journal = Journal(folder / f"{name}.sqlite")
        transport = create("mqtt", {"host": "127.0.0.1", "port": port, "protocol": "5"},
                           table=name)
        self.outbox = Outbox(self.journal.path, [transport])
        self.outbox.start()
        self.journaled: list[float] = []  # monotonic time of each seq's commit, seq 1 first

    def deal(self) -> None:
        seq = len(self.journaled) + 1
        self.journal.append(Tick(float(seq)), [_event(self.name, seq)])
        self.journaled.append(time.monotonic())
        self.outbox.notify()

    def backlog_after(self, accepted: float) -> int:
        """The last seq journaled before the broker accepted connections."""
        return sum(1 for at in self.journaled if at <= accepted)


def _worker(folder: str, port: int, names: list[str], every: float, pipe: Connection) -> None:
    """Deal on ``names`` until told to stop; report when each backlog was delivered."""
    logging.disable(logging.ERROR)  # an outage on purpose: every table would say so, twice
    tables = [_Table(Path(folder), name, port) for name in names]
    # per table: (events waiting when the broker came back, when the last was delivered)
    results: dict[str, tuple[int, float | None]] = {}

    def wait_for(table: _Table, seq: int) -> None:
        waiting = seq - table.outbox.status()["mqtt"]["delivered_seq"]
        done = table.outbox.wait_delivered(seq, 300)
        results[table.name] = (waiting, time.monotonic() if done else None)

    def report(accepted: float) -> None:
        # On threads of their own: the tables deal on meanwhile.
        waiters = [threading.Thread(target=wait_for, args=(t, t.backlog_after(accepted)))
                   for t in tables]
        for waiter in waiters:
            waiter.start()
        for waiter in waiters:
            waiter.join()
        pipe.send(dict(results))

    pause = every / len(tables)
    turn = 0
    try:
        while True:
            if pipe.poll(pause):
                command, argument = pipe.recv()
                if command == "ready?":
                    pipe.send(all(t.outbox.wait_delivered(len(t.journaled), 30) for t in tables))
                elif command == "accepted":
                    threading.Thread(target=report, args=(argument,), daemon=True).start()
                elif command == "stop":
                    break
            tables[turn % len(tables)].deal()
            turn += 1
        pipe.send({t.name: len(t.journaled) for t in tables
                   if t.outbox.wait_delivered(len(t.journaled), 60)})
    finally:
        for table in tables:
            table.outbox.stop()
            table.journal.close()


class _Backend:
    """A QoS 1 subscriber to every table with a persistent session: the seqs it received."""

    def __init__(self, port: int):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.seqs: dict[str, set[int]] = {}
        self.lock = threading.Lock()
        subscribed = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="fleet-backend",
                                  clean_session=False)
        self.client.reconnect_delay_set(0.1, 0.5)
        self.client.on_connect = lambda c, *a: c.subscribe("pokdeng/+/events", qos=1)
        self.client.on_subscribe = lambda *a: subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        if not subscribed.wait(10):
            raise SystemExit("the backend could not subscribe")

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        event = json.loads(message.payload)
        with self.lock:
            self.seqs.setdefault(event["table"], set()).add(event["seq"])

    def missing(self, last: dict[str, int]) -> int:
        with self.lock:
            return sum(len(set(range(1, n + 1)) - self.seqs.get(name, set()))
                       for name, n in last.items())

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def _receive(pipe: Connection, timeout: float) -> Any:
    """A worker's answer; SystemExit when none comes (the worker died, or hangs)."""
    if not pipe.poll(timeout):
        raise SystemExit(f"a worker process gave no answer within {timeout:g} s")
    return pipe.recv()


def _start_and_probe(broker: Mosquitto) -> float:
    """Start the stopped broker; the monotonic time its port first accepted a connection."""
    broker.proc = subprocess.Popen([MOSQUITTO, "-c", str(broker.config)],
                                   stdout=subprocess.DEVNULL, stderr=broker.log.open("ab"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection((broker.host, broker.port), timeout=0.5).close()
            return time.monotonic()
        except OSError:
            time.sleep(PROBE_EVERY_S)
    raise SystemExit("mosquitto did not accept connections within 10 s of its start")


def measure_fleet(tables: int, outage_s: float, every: float, processes: int) -> dict[str, Any]:
    """One fleet of ``tables``: the seconds from the broker accepting connections to each
    table's backlog delivered, and the backlog's size."""
    with tempfile.TemporaryDirectory(prefix="pokdeng-fleet-") as folder:
        broker = Mosquitto(Path(folder))
        broker.start()
        try:
            backend = _Backend(broker.port)
        except SystemExit as exc:  # e.g. another program took the port before mosquitto did
            alive = broker.proc is not None and broker.proc.poll() is None
            broker.stop()
            raise SystemExit(f"{exc} (mosquitto {'running' if alive else 'exited'}: "
                             f"{broker.log.read_text()[-300:]!r})") from None
        names = [f"F{n:02d}" for n in range(1, tables + 1)]
        groups = [names[i::processes] for i in range(min(processes, tables))]
        context = multiprocessing.get_context("spawn")  # no paho threads copied into a fork
        pipes, workers = [], []
        try:
            for group in groups:
                ours, theirs = context.Pipe()
                worker = context.Process(target=_worker, daemon=True,
                                         args=(folder, broker.port, group, every, theirs))
                worker.start()
                theirs.close()  # the worker's end: a worker that dies then reads as EOF here
                pipes.append(ours)
                workers.append(worker)
            time.sleep(2 * every)  # every table has dealt
            for pipe in pipes:
                pipe.send(("ready?", None))
            if not all(_receive(pipe, 60) for pipe in pipes):
                raise SystemExit("the tables did not deliver before the outage")
            broker.stop()
            stopped = time.monotonic()
            # Every table lost the broker at the same instant, so their reconnect attempts
            # keep in step; a random part of a second puts the broker's return anywhere
            # between two attempts, as a real restart would be.
            time.sleep(outage_s + random.random())
            accepted = _start_and_probe(broker)
            for pipe in pipes:
                pipe.send(("accepted", accepted))
            delivered: dict[str, tuple[int, float | None]] = {}
            for pipe in pipes:
                delivered.update(_receive(pipe, 330))
            for pipe in pipes:
                pipe.send(("stop", None))
            last: dict[str, int] = {}
            for pipe in pipes:
                last.update(_receive(pipe, 90))
            for worker in workers:
                worker.join(60)
            deadline = time.monotonic() + 30
            while backend.missing(last) and time.monotonic() < deadline:
                time.sleep(0.1)
            missing = backend.missing(last) + sum(1 for n in names if n not in last)
        finally:
            for worker in workers:
                if worker.is_alive():
                    worker.kill()
            backend.close()
            broker.stop()
    late = [at for _, at in delivered.values()]
    if None in late or len(late) != tables:
        raise SystemExit(f"{late.count(None)} of {tables} backlogs were not delivered")
    after = sorted(at - accepted for at in late if at is not None)
    return {"tables": tables, "outage_s": round(accepted - stopped, 2), "every_s": every,
            "backlog_events": sum(waiting for waiting, _ in delivered.values()),
            "last_s": after[-1], "median_s": statistics.median(after), "first_s": after[0],
            "missing_at_backend": missing, "goal_s": GOAL_S}


def measure(sizes: tuple[int, ...] = (5, 40), outage_s: float = 10.0, every: float = 0.5,
            processes: int = 4) -> list[dict[str, Any]]:
    """Each fleet size in turn (a fresh broker and fresh tables for each)."""
    return [measure_fleet(n, outage_s, every, processes) for n in sizes]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", default="5,40", help="fleet sizes (default 5,40)")
    parser.add_argument("--outage", type=float, default=10.0,
                        help="seconds the broker is down (default 10; the issue measured 20)")
    parser.add_argument("--every", type=float, default=0.5,
                        help="seconds between a table's events (default 0.5)")
    parser.add_argument("--processes", type=int, default=4,
                        help="worker processes the tables are spread over (default 4)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    sizes = tuple(int(n) for n in args.tables.split(","))
    print(f"broker down {args.outage:g} s while the tables deal (an event each every "
          f"{args.every:g} s), then back; seconds from the broker accepting to each backlog "
          f"delivered (goal {GOAL_S:g} s)")
    print(f"{'tables':>6}{'down s':>8}{'backlog':>9}{'first':>8}{'median':>8}{'last':>8}  goal")
    results = []
    for size in sizes:
        f = measure_fleet(size, args.outage, args.every, args.processes)
        results.append(f)
        print(f"{f['tables']:>6}{f['outage_s']:>8.2f}{f['backlog_events']:>9}{f['first_s']:>8.2f}"
              f"{f['median_s']:>8.2f}{f['last_s']:>8.2f}  "
              f"{'met' if f['last_s'] <= GOAL_S else 'NOT met'}"
              + (f"; {f['missing_at_backend']} events MISSING at the backend"
                 if f["missing_at_backend"] else ""))
    save_json(args.json, results)
    return 1 if any(f["missing_at_backend"] for f in results) else 0


if __name__ == "__main__":
    sys.exit(main())
