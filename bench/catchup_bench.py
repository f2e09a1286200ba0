"""MQTT catch-up: a backlog of journaled events (as after an outage) to a real mosquitto, with
one batch on the way at a time against several (``in_flight_batches``), on loopback and through
a link that delays every byte (a studio network's round trip).

The outbox and the MQTT transport (MQTT 5) are the daemon's; the broker runs with the settings we
ship (bench/harness.py's Broker); a subscriber on the broker counts the events, and a run
ends when the last event is both PUBACKed and received. The delayed link is a TCP
relay in this process that forwards each chunk ``--delay-ms`` after it arrived, both ways.
Prints the time to deliver the backlog and events per second, min / median / max over
``--repeat`` runs. A figure, not a test.

    python bench/catchup_bench.py [--events 3000] [--batch 100] [--delay-ms 0,10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import multiprocessing
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the clone

from bench.harness import Broker, free_port  # noqa: E402
from bench.measuring import save_json, wait_listening  # noqa: E402
from controller.durability.delivery.outbox import Outbox  # noqa: E402
from controller.durability.journal import Journal  # noqa: E402
from controller.table.inputs import Button  # noqa: E402
from controller.transports import create  # noqa: E402

TABLE = "CATCHUP"
PROTOCOL = "5"  # the table's, as docs/backend.md recommends


class DelayedLink:
    """A loopback TCP relay to ``upstream`` that holds every chunk ``delay_s`` each way; it
    runs in a child process, so its threads do not compete with the measured ones."""

    def __init__(self, upstream: int, delay_s: float):
        self.upstream, self.delay_s = upstream, delay_s
        self.port = free_port()
        self._process = multiprocessing.get_context("fork").Process(target=self._serve,
                                                                    daemon=True)
        self._process.start()
        wait_listening(self.port, "the delayed link", self._process.is_alive)

    def stop(self) -> None:
        self._process.terminate()
        self._process.join(5)

    def _serve(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._accept()

    def _accept(self) -> None:
        while True:
            client, _ = self._listener.accept()
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                client.close()  # the start-up probe, or the broker is gone
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        due: list[tuple[float, int, bytes]] = []
        order = itertools.count()
        ready = threading.Condition()

        def send_when_due() -> None:
            while True:
                with ready:
                    while not due or due[0][0] > time.monotonic():
                        ready.wait(None if not due else due[0][0] - time.monotonic())
                    _, _, chunk = heapq.heappop(due)
                if not chunk:
                    sink.close()
                    return
                sink.sendall(chunk)

        threading.Thread(target=send_when_due, daemon=True).start()
        while True:
            try:
                chunk = source.recv(65536)
            except OSError:
                chunk = b""
            with ready:
                heapq.heappush(due, (time.monotonic() + self.delay_s, next(order), chunk))
                ready.notify()
            if not chunk:
                return


def backlog(path: Path, events: int) -> int:
    """A journal holding ``events`` events, ten per input; returns the last seq."""
    with Journal(path) as journal:
        seq = 0
        for number in range(events // 10):
            batch = [{"seq": seq + i, "id": f"{TABLE}:{seq + i}", "type": "card_burned",
                      "table": TABLE, "data": {"index": seq + i}} for i in range(1, 11)]
            journal.append(Button(float(number), "new_shoe"), batch)
            seq += 10
        return seq


class Counter:
    """A QoS 1 subscriber on the broker itself (a backend in the studio): events received."""

    def __init__(self, port: int):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.received = 0
        self.changed = threading.Condition()
        subscribed = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="catchup-backend",
                                  protocol=mqtt.MQTTv5)
        self.client.on_connect = lambda c, *a: c.subscribe(f"pokdeng/{TABLE}/events", qos=1)
        self.client.on_subscribe = lambda *a: subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        if not subscribed.wait(10):
            raise SystemExit("the subscriber could not subscribe")

    def _on_message(self, *args: object) -> None:
        with self.changed:
            self.received += 1
            self.changed.notify_all()

    def wait_for(self, count: int, timeout: float = 300) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: self.received >= count, timeout):
                raise SystemExit(f"the subscriber got {self.received} of {count} events")

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def deliver_backlog(journal: Path, last_seq: int, port: int, batch: int, window: int,
                    counter: Counter) -> float:
    """Seconds from the outbox's start to the last event delivered (PUBACKed) and received."""
    before = counter.received
    transport = create("mqtt", {"host": "127.0.0.1", "port": port, "batch_max": batch,
                                "in_flight_batches": window, "publish_timeout_s": 30,
                                "protocol": PROTOCOL},
                       table=TABLE)
    t0 = time.perf_counter()
    with Outbox(journal, [transport]) as outbox:
        if not outbox.wait_delivered(last_seq, 300):
            raise SystemExit(f"the backlog was not delivered: {outbox.status()}")
        counter.wait_for(before + last_seq)
        return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000, help="backlog (default 3000)")
    parser.add_argument("--batch", type=int, default=100, help="batch_max (default 100)")
    parser.add_argument("--delay-ms", default="0,10",
                        help="one-way delays of the link, comma separated (default 0,10)")
    parser.add_argument("--windows", default="1,4", help="in_flight_batches to compare")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    results: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="pokdeng-catchup-") as folder:
        work = Path(folder)
        broker = Broker(work)
        counter = Counter(broker.port)
        try:
            print(f"a backlog of {args.events} events, batch_max {args.batch}, to mosquitto "
                  f"(shipped settings); {args.repeat} runs each")
            print(f"{'link':<14}{'in flight':>10}{'seconds min/med/max':>26}{'events/s (med)':>16}")
            for delay_ms in (float(d) for d in args.delay_ms.split(",")):
                link = None if delay_ms == 0 else DelayedLink(broker.port, delay_ms / 1000)
                port = broker.port if link is None else link.port
                for window in (int(w) for w in args.windows.split(",")):
                    times = []
                    for run in range(args.repeat):
                        journal = work / f"journal-{delay_ms}-{window}-{run}.sqlite"
                        last = backlog(journal, args.events)
                        times.append(deliver_backlog(journal, last, port, args.batch, window,
                                                     counter))
                    median = statistics.median(times)
                    results.append({"delay_ms": delay_ms, "in_flight_batches": window,
                                    "events": args.events, "seconds_min": min(times),
                                    "seconds_median": median, "seconds_max": max(times)})
                    print(f"{f'{delay_ms:g} ms each way':<14}{window:>10}"
                          f"{min(times):>10.3f}{median:>8.3f}{max(times):>8.3f}"
                          f"{args.events / median:>16.0f}")
                if link is not None:
                    link.stop()
        finally:
            counter.close()
            broker.stop()
    save_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
