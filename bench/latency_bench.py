"""End-to-end latency: a card frame written on the shoe's pty -> its ``card_dealt`` event at an
MQTT subscriber and at an HTTP server, through the real daemon; and the same frames through three
relays, for the ratios.

Real path (a subprocess: ``python -m controller run --config …``):
    simulated Bee-Tek shoe on a pty (drivers/sim/shoe.py) -> shoe driver (pyserial) -> daemon
    queue -> owner loop -> table machine -> journal append (SQLite WAL, fsync) -> outbox ->
    MQTT (QoS 1, real mosquitto on loopback) and HTTP webhook (loopback, HMAC signed)
    The dealer's buttons come from a line panel on a second pty.
Bare relay (a subprocess too, this file with ``--relay``):
    pyserial read of a pty -> Bee-Tek parser -> MQTT publish (QoS 1) and HTTP POST; no machine,
    no journal.
Durable bare relay (the yardstick of the goals): the bare relay with one SQLite commit per card
before it publishes (WAL, ``synchronous=FULL`` like the journal: the commit returns once the
WAL is fsynced), on the same disk as the daemon's journal. A table that journals before it
sends cannot beat that floor; the goals are p50 <= 1.5x and p99 <= 2x of it, and p50 <= 1.3x of the
threaded durable relay (the same work with the daemon's hand-overs between threads).
Threaded durable relay: the durable relay's steps on the daemon's threads (a reader thread, a
committing thread, one sender thread per transport, handed over by queue and Event). Its ratio to
the durable relay is what the hand-overs alone cost under one interpreter lock: the part of the
daemon's ratio that no work inside the daemon's steps can remove.

The broker runs with the settings we ship for latency and durability
(config/mosquitto/pokdeng.conf: ``set_tcp_nodelay true``, persistence) on a plain loopback
listener; ``--broker-default`` runs mosquitto's defaults instead (Nagle on: ~40 ms stalls).

Cards are sent one at a time: each frame's time is taken just before the simulator writes it,
and the next card goes once the event reached both receivers, so every figure is the latency
of an idle table (a dealer draws a card every second or so). Both receivers run in this
process and use the same monotonic clock as the writer. The relays deal to the daemon's
rhythm: 13 cards, then a rest as long as the daemon's between two rounds (``--back-to-back``:
no rests). ``--repeat N`` runs the paths N times (fresh daemon, fresh journals each time) and
reports min / median / max of each figure.

    python bench/latency_bench.py [--rounds 24] [--repeat 3] [--only mqtt|http] [--state-dir DIR]
                                  [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pty
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tty
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.measuring import percentile, wait_listening  # noqa: E402
from controller.service.control.access import own_group  # noqa: E402

MOSQUITTO = os.environ.get("MOSQUITTO", "/usr/sbin/mosquitto")
TABLE = "BENCH"
RELAY_TOPIC = "relay/events"
WAIT_S = 10.0
#: the receivers measured (``--only`` narrows it): every path sends to these alone
RECEIVERS: tuple[str, ...] = ("mqtt", "http")
#: the daemon's log level (``--log-level``): warning keeps the figures comparable across days;
#: info is what config/example.yaml ships (a JSON line per event, on the owner thread)
LOG_LEVEL = "warning"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the receivers ---------------------------------------------------------------------------

class Arrivals:
    """Arrival times of card_dealt events per (receiver, source), in arrival order."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.times: dict[tuple[str, str], list[float]] = {}
        self.types: dict[tuple[str, str], list[str]] = {}

    def record(self, receiver: str, source: str, events: list[dict[str, Any]]) -> None:
        now = time.perf_counter()
        with self.lock:
            for event in events:
                self.types.setdefault((receiver, source), []).append(event.get("type", ""))
                if event.get("type") == "card_dealt":
                    self.times.setdefault((receiver, source), []).append(now)
            self.lock.notify_all()

    def clear(self) -> None:
        """Forget every arrival: each run counts its own events."""
        with self.lock:
            self.times.clear()
            self.types.clear()

    def count(self, receiver: str, source: str) -> int:
        with self.lock:
            return len(self.times.get((receiver, source), []))

    def wait(self, predicate, timeout: float = WAIT_S) -> bool:
        with self.lock:
            return self.lock.wait_for(predicate, timeout)

    def seen_type(self, receiver: str, source: str, kind: str) -> int:
        return self.types.get((receiver, source), []).count(kind)


def start_http(arrivals: Arrivals) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"   # keep-alive, as the daemon's transport uses it
        # Headers and body go out in two writes: with Nagle on, the body would wait for the
        # client's delayed ACK (~40 ms). Real backends (nginx, …) set TCP_NODELAY too.
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            batch = json.loads(body)
            source = self.path.rsplit("/", 1)[-1] if self.path.startswith("/relay/") \
                else "daemon"
            arrivals.record("http", source, batch["events"])
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    class QuietServer(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a relay killed at the end of its run resets its connection: expected

    server = QuietServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


#: what config/mosquitto/pokdeng.conf sets that bears on latency and durability
SHIPPED_BROKER_SETTINGS = ("set_tcp_nodelay true\npersistence true\nautosave_interval 10\n"
                           "max_queued_messages 200000\nmax_queued_bytes 0\n")


class Broker:
    """mosquitto on a free loopback port, with the settings we ship (``shipped``) or its
    defaults (``set_tcp_nodelay false``: a message that follows an un-ACKed one to a subscriber
    waits for the subscriber's delayed ACK, ~40 ms)."""

    def __init__(self, workdir: Path, shipped: bool = True):
        self.port = free_port()
        config = workdir / "mosquitto.conf"
        store = workdir / "mosquitto"
        store.mkdir(exist_ok=True)
        settings = (SHIPPED_BROKER_SETTINGS + f"persistence_location {store}/\n") if shipped \
            else "persistence false\n"
        config.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\n"
                          f"user root\n{settings}")
        # at the normal priority whatever the bench's own: a broker on the table PC is the
        # PC's other work (the stress part's catch-up load runs through it)
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(config)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=UnitPriority().apply)
        wait_listening(self.port, "mosquitto", lambda: self.proc.poll() is None)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)


def start_subscriber(port: int, arrivals: Arrivals):
    import paho.mqtt.client as mqtt

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-subscriber")
    subscribed = threading.Event()

    def on_connect(client, userdata, flags, reason, properties):
        client.subscribe([(f"pokdeng/{TABLE}/events", 1), (f"{RELAY_TOPIC}/#", 1)])

    def on_subscribe(client, userdata, mid, reasons, properties):
        subscribed.set()

    def on_message(client, userdata, message):
        source = message.topic.rsplit("/", 1)[-1] if message.topic.startswith(RELAY_TOPIC) \
            else "daemon"
        arrivals.record("mqtt", source, [json.loads(message.payload)])

    client.on_connect, client.on_subscribe, client.on_message = on_connect, on_subscribe, \
        on_message
    client.connect("127.0.0.1", port)
    client.loop_start()
    if not subscribed.wait(10):
        raise SystemExit("MQTT subscriber did not subscribe")
    return client


# --- the dealer's panel on a pty ---------------------------------------------------------------

class PanelPty:
    """A line panel: answers the driver's ``status?`` and sends button lines."""

    def __init__(self, link: Path):
        self.master, slave = pty.openpty()
        tty.setraw(slave)
        self.link = link
        os.symlink(os.ttyname(slave), link)
        self._slave = slave  # kept open so the pty does not hang up between driver opens

    def wait_for_driver(self, timeout: float = 15.0) -> None:
        deadline, seen = time.monotonic() + timeout, b""
        while b"status?" not in seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit("the daemon did not open the panel pty")
            if select.select([self.master], [], [], left)[0]:
                seen += os.read(self.master, 1024)
        os.write(self.master, b"switch pause off\n")

    def press(self, button: str) -> None:
        os.write(self.master, f"{button}\n".encode())

    def close(self) -> None:
        for fd in (self.master, self._slave):
            os.close(fd)
        self.link.unlink(missing_ok=True)


# --- the relays (subprocesses) -------------------------------------------------------------------

#: the relays, in the order they take their cards after each of the daemon's rounds
RELAYS = ("durable", "threaded", "bare")


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
    """pyserial read -> parse [-> one fsync'd SQLite commit] -> MQTT publish + HTTP POST
    (to ``receivers`` only)."""
    import http.client

    import serial

    from controller.table.inputs import CardScan
    from drivers.protocols.beetek import BeeTekParser

    if kind == "threaded":
        return threaded_relay_main(link, mqtt_port, http_port, journal, receivers)
    record = DurableRecord(journal) if kind == "durable" else None
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
            if record is not None:
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


# --- the bench ---------------------------------------------------------------------------------

DAEMON_CONFIG = """
table: {{id: {table}, betting_seconds: 1, reveal: auto, decks: 8}}
state_dir: {state}
shoe: {{driver: beetek, url: {shoe}, reconnect_seconds: 0.2}}
panel: {{driver: line_panel, url: {panel}, reconnect_seconds: 0.2}}
control: {{socket: {socket}, supervisor_group: {supervisor_group}}}
logging: {{level: {log_level}, format: json}}
transports:
"""
TRANSPORT_CONFIG = {
    "http": """  http: {{url: "http://127.0.0.1:{http_port}/events", allow_insecure: true,
         secret_file: {secret}, batch_max: 100, backoff_initial_s: 0.05, backoff_max_s: 0.5}}
""",
    "mqtt": """  mqtt: {{host: 127.0.0.1, port: {mqtt_port}, topic_prefix: pokdeng}}
"""}


def measure(send, arrivals: Arrivals, source: str) -> dict[str, float]:
    """Send one card; per receiver, the latency in ms of its card_dealt."""
    before = {r: arrivals.count(r, source) for r in RECEIVERS}
    t0 = time.perf_counter()
    send()
    if not arrivals.wait(lambda: all(len(arrivals.times.get((r, source), [])) > before[r]
                                     for r in RECEIVERS)):
        raise SystemExit(f"{source}: a card_dealt did not arrive within {WAIT_S} s ("
                         + ", ".join(f"{r} {arrivals.count(r, source)}" for r in RECEIVERS)
                         + ")")
    with arrivals.lock:
        return {r: (arrivals.times[(r, source)][before[r]] - t0) * 1000 for r in RECEIVERS}


@dataclass(frozen=True)
class UnitPriority:
    """How systemd/pokdeng-table.service runs the daemon: ``Nice=``, and the real-time
    priority its config asks for and ``LimitRTPRIO=`` permits (controller/service/realtime.py).
    The default is a shell's: nice 0, no real-time priority."""
    nice: int = 0
    rtprio: int = 0

    def apply(self) -> None:
        """In a child process before it runs (the daemon, the broker, the stress load): a
        normal policy (a bench running at a real-time priority must not hand its own down),
        then the niceness."""
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        if self.nice:
            os.nice(self.nice)

    def config(self) -> str:
        """The daemon's config line asking for the real-time priority, if any."""
        return f"realtime_priority: {self.rtprio}\n" if self.rtprio else ""


def unit_priority() -> UnitPriority:
    """The unit's ``Nice=`` and ``LimitRTPRIO=``, where this user may take them (root)."""
    settings = dict(line.split("=", 1) for line in
                    (ROOT / "systemd" / "pokdeng-table.service").read_text().splitlines()
                    if line.startswith(("Nice=", "LimitRTPRIO=")))
    nice, rtprio = int(settings.get("Nice", 0)), int(settings.get("LimitRTPRIO", 0))
    if os.geteuid() != 0:
        return UnitPriority(max(nice, 0), 0)
    return UnitPriority(nice, rtprio)


def run_daemon_phase(work: Path, rounds: int, arrivals: Arrivals, http_port: int,
                     mqtt_port: int, *, extra_config: str = "",
                     load: Callable[[Path], Any] | None = None,
                     seed: int = 7, priority: UnitPriority = UnitPriority(),
                     round_gaps: list[float] | None = None) -> dict[str, list[float]]:
    """The daemon's latencies; ``extra_config`` is added to its YAML, and ``load(work)`` (a
    context manager: bench/stress_bench.py's load) runs from the first round to the last;
    ``priority``: the daemon's niceness and real-time grant (its unit's: ``unit_priority``);
    ``round_gaps`` gets the seconds from each round's last card at the receivers to the
    next round's first card (the relays deal to the same rhythm)."""
    from drivers.sim.shoe import ShoeSimulator, shuffled_shoe

    secret = work / "secret"
    secret.write_text("bench-secret\n")
    shoe_link, panel_link = work / "shoe", work / "panel"
    config = work / "table.yaml"
    template = DAEMON_CONFIG + "".join(TRANSPORT_CONFIG[r] for r in RECEIVERS)
    config.write_text(template.format(
        table=TABLE, state=json.dumps(str(work / "state")), shoe=json.dumps(str(shoe_link)),
        panel=json.dumps(str(panel_link)), socket=json.dumps(str(work / "control.sock")),
        supervisor_group=json.dumps(own_group()), log_level=LOG_LEVEL,
        http_port=http_port, secret=json.dumps(str(secret)), mqtt_port=mqtt_port)
        + priority.config() + extra_config)
    (work / "state").mkdir()
    cards = iter(shuffled_shoe(seed))
    shoe = ShoeSimulator(shoe_link, "beetek", settle_seconds=0.3).start()
    panel = PanelPty(panel_link)
    log = work / "daemon.log"
    daemon = subprocess.Popen([sys.executable, "-m", "controller", "run", "--config",
                               str(config)], stdout=log.open("ab"), stderr=subprocess.STDOUT,
                              cwd=ROOT, preexec_fn=priority.apply)
    latencies: dict[str, list[float]] = {r: [] for r in RECEIVERS}
    watch = RECEIVERS[-1]  # the receiver whose events tell where the table is
    stack = contextlib.ExitStack()
    try:
        panel.wait_for_driver()
        panel.press("new_shoe")
        if not arrivals.wait(lambda: arrivals.seen_type(watch, "daemon", "shoe_started")):
            raise SystemExit(f"the daemon did not start a shoe; its log: {log}")
        shoe.send_card(next(cards))  # the flip card: its value is the number of burns
        for _ in range(12):          # burn until the table says it is ready
            if arrivals.wait(lambda: arrivals.seen_type(watch, "daemon", "burn_completed"),
                             1.0):
                break
            shoe.send_card(next(cards))
        else:
            raise SystemExit("the burns never completed")
        if load is not None:
            stack.enter_context(load(work))
        last_card_at: float | None = None
        for round_number in range(1, rounds + 1):
            panel.press("start_round")
            if not arrivals.wait(lambda n=round_number: arrivals.seen_type(
                    watch, "daemon", "round_opened") >= n):
                raise SystemExit(f"round {round_number} did not open")
            for card_number in range(CARDS_A_ROUND):
                card = next(cards)
                if card_number == 0 and last_card_at is not None and round_gaps is not None:
                    round_gaps.append(time.perf_counter() - last_card_at)
                for r, ms in measure(lambda c=card: shoe.send_card(c), arrivals,
                                     "daemon").items():
                    latencies[r].append(ms)
            last_card_at = time.perf_counter()
            if not arrivals.wait(lambda n=round_number: arrivals.seen_type(
                    watch, "daemon", "round_result") >= n):
                raise SystemExit(f"round {round_number} has no result")
    finally:
        stack.close()
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(15)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait(5)
        shoe.close(drain_timeout=0.5)
        panel.close()
    return latencies


class RelayPath:
    """One relay subprocess with its own simulated shoe, dealt a few cards at a time."""

    def __init__(self, kind: str, work: Path, arrivals: Arrivals, http_port: int,
                 mqtt_port: int):
        from drivers.sim.shoe import ShoeSimulator, shuffled_shoe

        self.kind, self.arrivals = kind, arrivals
        link = work / f"{kind}-relay-shoe"
        self.shoe = ShoeSimulator(link, "beetek", settle_seconds=0.3).start()
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--relay", kind, str(link), str(mqtt_port),
             str(http_port), str(work / f"{kind}-relay.db"), ",".join(RECEIVERS)],
            stdout=subprocess.PIPE, cwd=ROOT, text=True)
        self.cards = iter(shuffled_shoe(8))
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            self.close()
            raise SystemExit(f"the {kind} relay did not start")
        for _ in range(3):  # warm-up, as the flip and burn cards warm up the daemon
            self._one()

    def _one(self) -> dict[str, float]:
        card = next(self.cards)
        return measure(lambda: self.shoe.send_card(card), self.arrivals, self.kind)

    def deal(self, cards: int, into: dict[str, list[float]]) -> None:
        for _ in range(cards):
            for receiver, ms in self._one().items():
                into.setdefault(receiver, []).append(ms)

    def close(self) -> None:
        self.process.kill()
        self.process.wait(5)
        self.shoe.close(drain_timeout=0.2)


#: card_dealt events a round: the round's burn card and 12 cards
CARDS_A_ROUND = 13
#: path -> its name in the output
PATHS = {"daemon": "real daemon", "durable": "durable relay",
         "threaded": "threaded durable relay", "bare": "bare relay"}
#: the goals, against the durable relay: (p50 ratio, p99 ratio); and the p50 against the
#: threaded durable relay, whose hand-overs between threads the daemon cannot avoid
GOALS = (1.5, 2.0)
THREADED_P50_GOAL = 1.3


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def run_paths(run_dir: Path, rounds: int, arrivals: Arrivals, http_port: int,
              mqtt_port: int, *, back_to_back: bool = False) -> dict[str, dict[str, list[float]]]:
    """One run: the daemon's rounds, then each relay's, one path at a time. A relay deals
    13 cards a round and then rests as long as the daemon rested between its rounds (the
    betting countdown, the result, the next press): on this machine a burst after a rest is
    about twice as slow as cards back to back, for the relays as for the daemon. With
    ``back_to_back`` the relays' cards follow each other without a rest (the bench before
    2026-12-01: the yardstick measured warm, the daemon after every betting pause)."""
    arrivals.clear()
    gaps: list[float] = []
    samples = {"daemon": run_daemon_phase(run_dir, rounds, arrivals, http_port, mqtt_port,
                                          round_gaps=gaps)}
    for kind in RELAYS:
        samples[kind] = {}
        relay = RelayPath(kind, run_dir, arrivals, http_port, mqtt_port)
        try:
            for round_number in range(rounds):
                if round_number and not back_to_back:
                    time.sleep(gaps[round_number - 1])
                relay.deal(CARDS_A_ROUND, samples[kind])
        finally:
            relay.close()
    return samples


def measure_all(work: Path, rounds: int, repeat: int, shipped_broker: bool, *,
                back_to_back: bool = False) -> dict[str, Any]:
    """Every path ``repeat`` times, interleaved (daemon, durable, bare per repetition) so a
    busy moment of the machine hits them alike. Figures in ms."""
    arrivals = Arrivals()
    broker = Broker(work, shipped_broker)
    server = start_http(arrivals)
    subscriber = start_subscriber(broker.port, arrivals)
    http_port = server.server_address[1]
    runs: list[dict[str, dict[str, dict[str, float]]]] = []
    failed: list[str] = []
    try:
        attempts = 0
        while len(runs) < repeat:
            attempts += 1
            run_dir = work / f"run{attempts}"
            run_dir.mkdir()
            try:
                samples = run_paths(run_dir, rounds, arrivals, http_port, broker.port,
                                    back_to_back=back_to_back)
            except SystemExit as exc:
                # A run that stalls (a simulated device on a busy machine) is run again, once
                # per run asked for, and said so; its partial figures are not kept.
                failed.append(f"run {attempts}: {exc}")
                print(f"latency bench: {failed[-1]}; running it again", file=sys.stderr)
                if len(failed) > repeat:
                    raise
                continue
            runs.append({path: {transport: {"p50": percentile(values, 50),
                                            "p99": percentile(values, 99),
                                            "max": max(values),
                                            "mean": statistics.mean(values)}
                                for transport, values in per_receiver.items()}
                         for path, per_receiver in samples.items()})
    finally:
        subscriber.loop_stop()
        subscriber.disconnect()
        server.shutdown()
        broker.stop()
    summary: dict[str, Any] = {"cards": rounds * CARDS_A_ROUND, "repeat": repeat, "runs": runs,
                               "relays": "back to back" if back_to_back else "the daemon's rhythm",
                               "failed_runs": failed,
                               "broker": "shipped" if shipped_broker else "mosquitto defaults",
                               "paths": {}, "ratios": {}, "threaded_ratios": {},
                               "ratios_to_threaded": {},
                               "transports": list(RECEIVERS), "daemon_log_level": LOG_LEVEL}
    for path in PATHS:
        summary["paths"][path] = {
            transport: {figure: spread([run[path][transport][figure] for run in runs])
                        for figure in ("p50", "p99", "max")}
            for transport in RECEIVERS}
    for transport in RECEIVERS:
        ratios = {}
        for figure, goal in zip(("p50", "p99"), GOALS):
            per_run = [run["daemon"][transport][figure] / run["durable"][transport][figure]
                       for run in runs]
            ratios[figure] = dict(spread(per_run), goal=goal,
                                  met=statistics.median(per_run) <= goal)
        summary["ratios"][transport] = ratios
        # what the thread hand-overs alone cost, against the same yardstick (no goal)
        summary["threaded_ratios"][transport] = {
            figure: spread([run["threaded"][transport][figure] / run["durable"][transport][figure]
                            for run in runs]) for figure in ("p50", "p99")}
        per_run = [run["daemon"][transport]["p50"] / run["threaded"][transport]["p50"]
                   for run in runs]
        summary["ratios_to_threaded"][transport] = dict(
            spread(per_run), goal=THREADED_P50_GOAL,
            met=statistics.median(per_run) <= THREADED_P50_GOAL)
    return summary


def print_summary(summary: dict[str, Any], work: Path) -> None:
    print(f"card frame on the pty -> card_dealt at the receiver: {summary['cards']} cards a run, "
          f"{summary['repeat']} runs; journal in {work}; broker: {summary['broker']}; daemon "
          f"log level: {summary['daemon_log_level']}; relays' cards: {summary['relays']}")
    print(f"{'path':<34}{'p50 ms min/med/max':>22}{'p99 ms min/med/max':>22}{'max ms':>9}")
    for path, name in PATHS.items():
        for transport, receiver in (("mqtt", "MQTT subscriber"), ("http", "HTTP server")):
            if transport not in summary["transports"]:
                continue
            f = summary["paths"][path][transport]
            p50, p99 = f["p50"], f["p99"]
            print(f"{name + ' -> ' + receiver:<34}"
                  f"{p50['min']:>8.2f}{p50['median']:>7.2f}{p50['max']:>7.2f}"
                  f"{p99['min']:>8.2f}{p99['median']:>7.2f}{p99['max']:>7.2f}"
                  f"{f['max']['max']:>9.2f}")
    for transport in summary["transports"]:
        r = summary["ratios"][transport]
        verdicts = []
        for figure in ("p50", "p99"):
            x = r[figure]
            verdicts.append(f"{figure} x{x['median']:.2f} (x{x['min']:.2f}-x{x['max']:.2f}, "
                            f"goal <= x{x['goal']:.1f}: {'met' if x['met'] else 'NOT met'})")
        print(f"ratio daemon/durable {transport.upper()}: " + ", ".join(verdicts))
        t = summary["threaded_ratios"][transport]
        print(f"ratio threaded/durable {transport.upper()} (the hand-overs between threads "
              f"alone): p50 x{t['p50']['median']:.2f}, p99 x{t['p99']['median']:.2f}")
        x = summary["ratios_to_threaded"][transport]
        print(f"ratio daemon/threaded {transport.upper()}: p50 x{x['median']:.2f} "
              f"(x{x['min']:.2f}-x{x['max']:.2f}, goal <= x{x['goal']:.1f}: "
              f"{'met' if x['met'] else 'NOT met'})")
    for failure in summary["failed_runs"]:
        print(f"run again after: {failure}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=24, help="rounds (13 cards each) per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of every path (default 3)")
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
    parser.add_argument("--back-to-back", action="store_true",
                        help="the relays' cards without the daemon's rests between rounds (the "
                             "older way: the yardstick measured warm)")
    parser.add_argument("--relay", nargs=6,
                        metavar=("KIND", "LINK", "MQTT_PORT", "HTTP_PORT", "JOURNAL", "TO"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.relay:
        kind, link, mqtt_port, http_port, journal, receivers = args.relay
        return relay_main(kind, link, int(mqtt_port), int(http_port), journal,
                          tuple(receivers.split(",")))
    global RECEIVERS, LOG_LEVEL
    if args.only:
        RECEIVERS = (args.only,)
    LOG_LEVEL = args.log_level
    if not os.access(MOSQUITTO, os.X_OK):
        raise SystemExit(f"mosquitto not found at {MOSQUITTO} (apt-get install mosquitto)")
    work = Path(args.state_dir or tempfile.mkdtemp(prefix="pokdeng-latency-"))
    work.mkdir(parents=True, exist_ok=True)
    summary = measure_all(work, args.rounds, max(1, args.repeat), not args.broker_default,
                          back_to_back=args.back_to_back)
    print_summary(summary, work)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    if not args.state_dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
