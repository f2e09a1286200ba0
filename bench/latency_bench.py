"""End-to-end latency: a card frame written on the shoe's pty -> its ``card_dealt`` event at an
MQTT subscriber and at an HTTP server, through the real daemon; and the same frames through a
bare relay, for the ratio.

Real path (a subprocess: ``python -m controller run --config …``):
    simulated Bee-Tek shoe on a pty (drivers/sim/shoe.py) -> shoe driver (pyserial) -> daemon
    queue -> owner loop -> table machine -> journal append (SQLite WAL, fsync) -> outbox ->
    MQTT (QoS 1, real mosquitto on loopback) and HTTP webhook (loopback, HMAC signed)
    The dealer's buttons come from a line panel on a second pty.
Bare relay (a subprocess too, this file with ``--relay``):
    pyserial read of a pty -> Bee-Tek parser -> MQTT publish (QoS 1) and HTTP POST; no machine,
    no journal.

Cards are sent one at a time: each frame's time is taken just before the simulator writes it,
and the next card goes once the event reached both receivers, so every figure is the latency
of an idle table (a dealer draws a card every second or so). Both receivers run in this
process and use the same monotonic clock as the writer.

    python bench/latency_bench.py [--rounds 24] [--state-dir DIR]
"""

from __future__ import annotations

import argparse
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.measuring import percentile  # noqa: E402
from controller.service.control_access import own_group  # noqa: E402

MOSQUITTO = os.environ.get("MOSQUITTO", "/usr/sbin/mosquitto")
TABLE = "BENCH"
RELAY_TOPIC = "relay/events"
WAIT_S = 10.0


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
            source = "relay" if self.path == "/relay" else "daemon"
            arrivals.record("http", source, batch["events"])
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Broker:
    """mosquitto on a free loopback port. ``nodelay``: ``set_tcp_nodelay true`` (mosquitto's
    default is false: a message that follows an un-ACKed one to a subscriber waits for the
    subscriber's delayed ACK, ~40 ms)."""

    def __init__(self, workdir: Path, nodelay: bool = False):
        self.port = free_port()
        config = workdir / "mosquitto.conf"
        config.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\n"
                          "persistence false\nuser root\n"
                          + ("set_tcp_nodelay true\n" if nodelay else ""))
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(config)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit("mosquitto did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)


def start_subscriber(port: int, arrivals: Arrivals):
    import paho.mqtt.client as mqtt

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-subscriber")
    subscribed = threading.Event()

    def on_connect(client, userdata, flags, reason, properties):
        client.subscribe([(f"pokdeng/{TABLE}/events", 1), (RELAY_TOPIC, 1)])

    def on_subscribe(client, userdata, mid, reasons, properties):
        subscribed.set()

    def on_message(client, userdata, message):
        source = "relay" if message.topic == RELAY_TOPIC else "daemon"
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


# --- the bare relay (subprocess) ----------------------------------------------------------------

def relay_main(link: str, mqtt_port: int, http_port: int) -> int:
    """pyserial read -> parse -> MQTT publish + HTTP POST; one event per card frame."""
    import http.client

    import paho.mqtt.client as mqtt
    import serial

    from controller.table.inputs import CardScan
    from drivers.protocols.beetek import BeeTekParser

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-relay")
    client.connect("127.0.0.1", mqtt_port)
    client.loop_start()
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
            event = {"id": f"relay:{seq}", "seq": seq, "type": "card_dealt",
                     "data": {"index": seq}}
            client.publish(RELAY_TOPIC, json.dumps(event), qos=1)
            conn.request("POST", "/relay", json.dumps({"events": [event]}),
                         {"Content-Type": "application/json"})
            conn.getresponse().read()


# --- the bench ---------------------------------------------------------------------------------

DAEMON_CONFIG = """
table: {{id: {table}, betting_seconds: 1, reveal: auto, decks: 8}}
state_dir: {state}
shoe: {{driver: beetek, url: {shoe}, reconnect_seconds: 0.2}}
panel: {{driver: line_panel, url: {panel}, reconnect_seconds: 0.2}}
control: {{socket: {socket}, supervisor_group: {supervisor_group}}}
transports:
  http: {{url: "http://127.0.0.1:{http_port}/events", allow_insecure: true, secret_file: {secret},
         batch_max: 100, backoff_initial_s: 0.05, backoff_max_s: 0.5}}
  mqtt: {{host: 127.0.0.1, port: {mqtt_port}, topic_prefix: pokdeng}}
logging: {{level: warning, format: json}}
"""


def measure(send, arrivals: Arrivals, source: str) -> tuple[float, float]:
    """Send one card; (MQTT latency, HTTP latency) in ms of its card_dealt."""
    before = {r: arrivals.count(r, source) for r in ("mqtt", "http")}
    t0 = time.perf_counter()
    send()
    if not arrivals.wait(lambda: all(len(arrivals.times.get((r, source), [])) > before[r]
                                     for r in ("mqtt", "http"))):
        raise SystemExit(f"{source}: a card_dealt did not arrive within {WAIT_S} s "
                         f"(mqtt {arrivals.count('mqtt', source)}, "
                         f"http {arrivals.count('http', source)})")
    with arrivals.lock:
        return tuple((arrivals.times[(r, source)][before[r]] - t0) * 1000
                     for r in ("mqtt", "http"))  # type: ignore[return-value]


def run_daemon_phase(work: Path, rounds: int, arrivals: Arrivals, http_port: int,
                     mqtt_port: int) -> tuple[list[float], list[float]]:
    from drivers.sim.shoe import ShoeSimulator, shuffled_shoe

    secret = work / "secret"
    secret.write_text("bench-secret\n")
    shoe_link, panel_link = work / "shoe", work / "panel"
    config = work / "table.yaml"
    config.write_text(DAEMON_CONFIG.format(
        table=TABLE, state=json.dumps(str(work / "state")), shoe=json.dumps(str(shoe_link)),
        panel=json.dumps(str(panel_link)), socket=json.dumps(str(work / "control.sock")),
        supervisor_group=json.dumps(own_group()),
        http_port=http_port, secret=json.dumps(str(secret)), mqtt_port=mqtt_port))
    (work / "state").mkdir()
    cards = iter(shuffled_shoe(7))
    shoe = ShoeSimulator(shoe_link, "beetek", settle_seconds=0.3).start()
    panel = PanelPty(panel_link)
    log = work / "daemon.log"
    daemon = subprocess.Popen([sys.executable, "-m", "controller", "run", "--config",
                               str(config)], stdout=log.open("ab"), stderr=subprocess.STDOUT,
                              cwd=ROOT)
    mqtt_ms: list[float] = []
    http_ms: list[float] = []
    try:
        panel.wait_for_driver()
        panel.press("new_shoe")
        if not arrivals.wait(lambda: arrivals.seen_type("http", "daemon", "shoe_started")):
            raise SystemExit(f"the daemon did not start a shoe; its log: {log}")
        shoe.send_card(next(cards))  # the flip card: its value is the number of burns
        for _ in range(12):          # burn until the table says it is ready
            if arrivals.wait(lambda: arrivals.seen_type("http", "daemon", "burn_completed"),
                             1.0):
                break
            shoe.send_card(next(cards))
        else:
            raise SystemExit("the burns never completed")
        for round_number in range(1, rounds + 1):
            panel.press("start_round")
            if not arrivals.wait(lambda n=round_number: arrivals.seen_type(
                    "http", "daemon", "round_opened") >= n):
                raise SystemExit(f"round {round_number} did not open")
            for _ in range(13):   # the round's burn card and 12 cards: 13 card_dealt events
                card = next(cards)
                m, h = measure(lambda c=card: shoe.send_card(c), arrivals, "daemon")
                mqtt_ms.append(m)
                http_ms.append(h)
            if not arrivals.wait(lambda n=round_number: arrivals.seen_type(
                    "http", "daemon", "round_result") >= n):
                raise SystemExit(f"round {round_number} has no result")
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(15)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait(5)
        shoe.close(drain_timeout=0.5)
        panel.close()
    return mqtt_ms, http_ms


def run_relay_phase(work: Path, cards_to_send: int, arrivals: Arrivals, http_port: int,
                    mqtt_port: int) -> tuple[list[float], list[float]]:
    from drivers.sim.shoe import ShoeSimulator, shuffled_shoe

    link = work / "relay-shoe"
    shoe = ShoeSimulator(link, "beetek", settle_seconds=0.3).start()
    relay = subprocess.Popen([sys.executable, __file__, "--relay", str(link), str(mqtt_port),
                              str(http_port)], stdout=subprocess.PIPE, cwd=ROOT, text=True)
    mqtt_ms: list[float] = []
    http_ms: list[float] = []
    try:
        if relay.stdout.readline().strip() != "ready":
            raise SystemExit("the relay did not start")
        cards = shuffled_shoe(8)
        for card in cards[:3]:   # warm-up, as the flip and burn cards warm up the daemon
            measure(lambda c=card: shoe.send_card(c), arrivals, "relay")
        for card in cards[3:3 + cards_to_send]:
            m, h = measure(lambda c=card: shoe.send_card(c), arrivals, "relay")
            mqtt_ms.append(m)
            http_ms.append(h)
    finally:
        relay.kill()
        relay.wait(5)
        shoe.close(drain_timeout=0.2)
    return mqtt_ms, http_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=24, help="rounds (13 cards each)")
    parser.add_argument("--state-dir", default=None,
                        help="work directory (default: a temporary one; the journal lives "
                             "there, so its disk is the one measured)")
    parser.add_argument("--broker-tcp-nodelay", action="store_true",
                        help="run mosquitto with set_tcp_nodelay true (default: its default)")
    parser.add_argument("--relay", nargs=3, metavar=("LINK", "MQTT_PORT", "HTTP_PORT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.relay:
        return relay_main(args.relay[0], int(args.relay[1]), int(args.relay[2]))
    if not os.access(MOSQUITTO, os.X_OK):
        raise SystemExit(f"mosquitto not found at {MOSQUITTO} (apt-get install mosquitto)")
    work = Path(args.state_dir or tempfile.mkdtemp(prefix="pokdeng-latency-"))
    work.mkdir(parents=True, exist_ok=True)
    arrivals = Arrivals()
    broker = Broker(work, args.broker_tcp_nodelay)
    server = start_http(arrivals)
    subscriber = start_subscriber(broker.port, arrivals)
    http_port = server.server_address[1]
    try:
        real = run_daemon_phase(work, args.rounds, arrivals, http_port, broker.port)
        bare = run_relay_phase(work, len(real[0]), arrivals, http_port, broker.port)
    finally:
        subscriber.loop_stop()
        subscriber.disconnect()
        server.shutdown()
        broker.stop()
    print(f"card frame on the pty -> card_dealt at the receiver, {len(real[0])} cards each; "
          f"journal in {work}; mosquitto set_tcp_nodelay "
          f"{'true' if args.broker_tcp_nodelay else 'false (default)'}")
    print(f"{'path':<34}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'mean ms':>9}")
    rows = [("real daemon -> MQTT subscriber", real[0]), ("real daemon -> HTTP server", real[1]),
            ("bare relay  -> MQTT subscriber", bare[0]), ("bare relay  -> HTTP server", bare[1])]
    for name, values in rows:
        print(f"{name:<34}{percentile(values, 50):>9.2f}{percentile(values, 99):>9.2f}"
              f"{max(values):>9.2f}{statistics.mean(values):>9.2f}")
    for name, r, b in (("MQTT", real[0], bare[0]), ("HTTP", real[1], bare[1])):
        print(f"ratio real/bare {name}: p50 x{percentile(r, 50) / percentile(b, 50):.1f}, "
              f"p99 x{percentile(r, 99) / percentile(b, 99):.1f}")
    if not args.state_dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
