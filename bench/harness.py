"""The table under test, as every benchmark that runs the daemon runs it.

* the receivers: an HTTP server and an MQTT subscriber on a mosquitto of our own, in this
  process, noting when each event arrived on one monotonic clock (``Receivers``);
* the real daemon (``python -m controller run``) on a simulated Bee-Tek shoe and a line panel,
  both on ptys, its config written for those receivers (``start_daemon``);
* the dealer: a new shoe, the flip card and the burns, then rounds of 13 cards, each card
  timed from its frame on the pty to its event at every receiver (``deal``);
* a daemon under a systemd notify socket, on simulated devices, with a file transport
  (``notified_table``: start to READY, idle figures, a daemon for the commands to ask);
* alternated pairs: every case once a pair, the order reversed every other pair, so a busy
  moment of the machine falls on every case alike (``alternate``);
* each run's figures (``figures``) and a ratio judged against its A/A floor (``judged``,
  the rule in bench/verdict.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import socket
import subprocess
import sys
import threading
import time
import tty
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.card_trace import CardTrace  # noqa: E402
from bench.cpu_groups import DEFAULT_WEIGHT, CpuGroup  # noqa: E402
from bench.measuring import percentile, wait_listening  # noqa: E402
from bench.verdict import judge_ratio, pair_ratios  # noqa: E402
from controller.service.control.access import own_group  # noqa: E402

MOSQUITTO = os.environ.get("MOSQUITTO", "/usr/sbin/mosquitto")
TABLE = "BENCH"
RELAY_TOPIC = "relay/events"
#: card_dealt events a round: the round's burn card and 12 cards
CARDS_A_ROUND = 13
#: no card slower than this (the goal of the stress and start parts)
GOAL_MAX_MS = 20.0
WAIT_S = 20.0


class Stalled(RuntimeError):
    """A run that did not get through: a simulated device or the daemon too slow on a busy
    machine. ``alternate`` runs it again."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mosquitto_missing() -> str | None:
    """Why the parts that need a broker cannot run, or None."""
    if os.access(MOSQUITTO, os.X_OK):
        return None
    return f"mosquitto missing at {MOSQUITTO} (apt-get install mosquitto)"


# --- the receivers ---------------------------------------------------------------------------

class Arrivals:
    """When each event arrived, per (receiver, source, event type), in arrival order."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.times: dict[tuple[str, str, str], list[float]] = {}

    def record(self, receiver: str, source: str, events: list[dict[str, Any]]) -> None:
        now = time.perf_counter()
        with self.lock:
            for event in events:
                self.times.setdefault((receiver, source, str(event.get("type"))),
                                      []).append(now)
            self.lock.notify_all()

    def clear(self) -> None:
        """Forget every arrival: each run counts its own events."""
        with self.lock:
            self.times.clear()

    def seen(self, receiver: str, source: str, kind: str) -> int:
        with self.lock:
            return len(self.times.get((receiver, source, kind), []))

    def wait(self, predicate: Callable[[], bool], timeout: float = WAIT_S) -> bool:
        with self.lock:
            return self.lock.wait_for(predicate, timeout)

    def time_one(self, send: Callable[[], None], source: str, receivers: Sequence[str],
                 kind: str = "card_dealt") -> dict[str, float]:
        """Send one card; per receiver, ms until the next ``kind`` event from ``source``."""
        before = {r: self.seen(r, source, kind) for r in receivers}
        t0 = time.perf_counter()
        send()
        if not self.wait(lambda: all(len(self.times.get((r, source, kind), [])) > before[r]
                                     for r in receivers)):
            raise Stalled(f"{source}: a {kind} did not arrive within {WAIT_S:g} s ("
                             + ", ".join(f"{r} {self.seen(r, source, kind)}"
                                         for r in receivers) + ")")
        with self.lock:
            return {r: (self.times[(r, source, kind)][before[r]] - t0) * 1000
                    for r in receivers}


def start_http(arrivals: Arrivals) -> ThreadingHTTPServer:
    """A webhook receiver: the daemon's batches at /events, a relay's at /relay/<name>."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"   # keep-alive, as the daemon's transport uses it
        # Headers and body go out in two writes: with Nagle on, the body would wait for the
        # client's delayed ACK (~40 ms). Real backends (nginx, …) set TCP_NODELAY too.
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            source = self.path.rsplit("/", 1)[-1] if self.path.startswith("/relay/") \
                else "daemon"
            arrivals.record("http", source, json.loads(body)["events"])
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

    def __init__(self, workdir: Path, shipped: bool = True,
                 priority: UnitPriority | None = None, store: Path | None = None):
        self.port = free_port()
        config = workdir / "mosquitto.conf"
        store = store or workdir / "mosquitto"  # its persistence, on the bench's disk
        store.mkdir(exist_ok=True)
        settings = (SHIPPED_BROKER_SETTINGS + f"persistence_location {store}/\n") if shipped \
            else "persistence false\n"
        config.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\n"
                          f"user root\n{settings}")
        # at the normal priority whatever the bench's own, in its CPU group where ``priority``
        # names one (the stress part's catch-up load goes through it)
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(config)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=(priority or UnitPriority()).apply)
        wait_listening(self.port, "mosquitto", lambda: self.proc.poll() is None)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)


def start_subscriber(port: int, arrivals: Arrivals) -> Any:
    """An MQTT subscriber to the daemon's events and every relay's."""
    import paho.mqtt.client as mqtt

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-subscriber")
    subscribed = threading.Event()

    def on_connect(client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        client.subscribe([(f"pokdeng/{TABLE}/events", 1), (f"{RELAY_TOPIC}/#", 1)])

    def on_subscribe(client: Any, userdata: Any, mid: Any, reasons: Any,
                     properties: Any) -> None:
        subscribed.set()

    def on_message(client: Any, userdata: Any, message: Any) -> None:
        source = message.topic.rsplit("/", 1)[-1] if message.topic.startswith(RELAY_TOPIC) \
            else "daemon"
        arrivals.record("mqtt", source, [json.loads(message.payload)])

    client.on_connect, client.on_subscribe, client.on_message = on_connect, on_subscribe, \
        on_message
    client.connect("127.0.0.1", port)
    client.loop_start()
    if not subscribed.wait(10):
        raise RuntimeError("the MQTT subscriber did not subscribe")
    return client


@dataclass
class Receivers:
    """The backends of a benchmark: which of them (``names``), their ports, their arrivals."""
    names: tuple[str, ...]
    arrivals: Arrivals
    http_port: int
    mqtt_port: int
    broker_pid: int = 0  # the broker's process, followed by a card trace


@contextlib.contextmanager
def receivers(work: Path, names: tuple[str, ...] = ("mqtt", "http"),
              shipped_broker: bool = True, broker_priority: UnitPriority | None = None,
              broker_store: Path | None = None) -> Iterator[Receivers]:
    """An HTTP server, and for ``mqtt`` a broker with a subscriber, for as long as the block
    (the broker's persistence in ``broker_store``, by default on the bench's disk)."""
    arrivals = Arrivals()
    server = start_http(arrivals)
    broker = Broker(work, shipped_broker, broker_priority, broker_store) \
        if "mqtt" in names else None
    subscriber = start_subscriber(broker.port, arrivals) if broker else None
    try:
        yield Receivers(names, arrivals, server.server_address[1],
                        broker.port if broker else 0, broker.proc.pid if broker else 0)
    finally:
        if subscriber is not None:
            subscriber.loop_stop()
            subscriber.disconnect()
        server.shutdown()
        if broker is not None:
            broker.stop()


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
                raise Stalled("the daemon did not open the panel pty")
            if select.select([self.master], [], [], left)[0]:
                seen += os.read(self.master, 1024)
        os.write(self.master, b"switch pause off\n")

    def press(self, button: str) -> None:
        os.write(self.master, f"{button}\n".encode())

    def close(self) -> None:
        for fd in (self.master, self._slave):
            os.close(fd)
        self.link.unlink(missing_ok=True)


# --- the daemon --------------------------------------------------------------------------------

@dataclass(frozen=True)
class UnitPriority:
    """How systemd runs a unit's process: ``Nice=``, the real-time priority the daemon's
    config asks for and ``LimitRTPRIO=`` permits (controller/service/realtime.py), and the
    unit's CPU cgroup where the bench made one (bench/cpu_groups.py). The default is a
    shell's: nice 0, no real-time priority, no group of its own."""
    nice: int = 0
    rtprio: int = 0
    cpu_group: CpuGroup | None = None

    def apply(self) -> None:
        """In a child process before it runs (the daemon, the broker, the stress load): a
        normal policy (a bench running at a real-time priority must not hand its own down;
        nor may a real-time process join a group without a real-time budget), its group,
        then the niceness."""
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        if self.cpu_group is not None:
            self.cpu_group.join()
        if self.nice:
            os.nice(self.nice)

    def config(self) -> str:
        """The daemon's config line asking for the real-time priority, if any."""
        return f"realtime_priority: {self.rtprio}\n" if self.rtprio else ""


def _unit_settings() -> dict[str, str]:
    """systemd/pokdeng-table.service's ``Nice=``, ``LimitRTPRIO=`` and ``CPUWeight=``."""
    return dict(line.split("=", 1) for line in
                (ROOT / "systemd" / "pokdeng-table.service").read_text().splitlines()
                if line.startswith(("Nice=", "LimitRTPRIO=", "CPUWeight=")))


def unit_priority() -> UnitPriority:
    """The unit's ``Nice=`` and ``LimitRTPRIO=``, where this user may take them (root)."""
    settings = _unit_settings()
    nice, rtprio = int(settings.get("Nice", 0)), int(settings.get("LimitRTPRIO", 0))
    if os.geteuid() != 0:
        return UnitPriority(max(nice, 0), 0)
    return UnitPriority(nice, rtprio)


def unit_cpu_weight() -> int:
    """The unit's ``CPUWeight=`` (systemd's default 100 when it sets none)."""
    return int(_unit_settings().get("CPUWeight", DEFAULT_WEIGHT))


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


@dataclass
class Table:
    """A running daemon with its simulated shoe and panel, in a run's directory."""
    work: Path
    daemon: subprocess.Popen[bytes]
    shoe: Any
    panel: PanelPty
    log: Path


def daemon_path(repo: Path) -> str:
    """The daemon's PYTHONPATH: ``repo`` first (the code measured), then whatever the bench
    inherited (bench/gc_pauses.py's hook reaches the daemon that way)."""
    return os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH")) if p)


@contextlib.contextmanager
def start_daemon(work: Path, backends: Receivers, *, extra_config: str = "",
                 log_level: str = "warning", priority: UnitPriority = UnitPriority(),
                 repo: Path = ROOT) -> Iterator[Table]:
    """The daemon (from ``repo``'s code) on a config for ``backends``, ``extra_config`` added;
    its state in ``work/state`` (which may already hold a journal); stopped at the end."""
    from drivers.sim.shoe import ShoeSimulator

    secret = work / "secret"
    secret.write_text("bench-secret\n")
    config = work / "table.yaml"
    config.write_text((DAEMON_CONFIG + "".join(TRANSPORT_CONFIG[r] for r in backends.names))
                      .format(table=TABLE, state=json.dumps(str(work / "state")),
                              shoe=json.dumps(str(work / "shoe")),
                              panel=json.dumps(str(work / "panel")),
                              socket=json.dumps(str(work / "control.sock")),
                              supervisor_group=json.dumps(own_group()), log_level=log_level,
                              http_port=backends.http_port, secret=json.dumps(str(secret)),
                              mqtt_port=backends.mqtt_port)
                      + priority.config() + extra_config)
    (work / "state").mkdir(mode=0o750, exist_ok=True)
    shoe = ShoeSimulator(work / "shoe", "beetek").start()
    panel = PanelPty(work / "panel")
    log = work / "daemon.log"
    daemon = subprocess.Popen([sys.executable, "-m", "controller", "run", "--config",
                               str(config)], stdout=log.open("ab"), stderr=subprocess.STDOUT,
                              cwd=repo, env={**os.environ, "PYTHONPATH": daemon_path(repo)},
                              preexec_fn=priority.apply)
    try:
        yield Table(work, daemon, shoe, panel, log)
    finally:
        stop(daemon)
        shoe.close(drain_timeout=0.5)
        panel.close()


def deal(table: Table, backends: Receivers, rounds: int, *, seed: int = 7,
         time_burns: bool = False, round_gaps: list[float] | None = None,
         load: Callable[[Path], contextlib.AbstractContextManager[Any]] | None = None,
         trace: CardTrace | None = None, label: str = "") -> dict[str, list[float]]:
    """Deal a shoe's start and ``rounds`` rounds; per receiver, each timed card's ms.

    The flip card is never timed (the simulator's first write waits out its settle time);
    the burns are with ``time_burns``. ``load(work)`` runs from the first round to the last;
    ``round_gaps`` gets the seconds from each round's last card at the receivers to the next
    round's first card (the relays deal to the same rhythm); ``trace`` notes slow cards."""
    from drivers.sim.shoe import shuffled_shoe

    arrivals, names = backends.arrivals, backends.names
    watch = names[-1]  # the receiver whose events tell where the table is
    log = table.log

    def seen(kind: str) -> int:
        return arrivals.seen(watch, "daemon", kind)

    def until(what: str, predicate: Callable[[], bool]) -> None:
        if not arrivals.wait(predicate):
            raise Stalled(f"{what}; the daemon's log: {log}")

    cards = iter(shuffled_shoe(seed))
    latencies: dict[str, list[float]] = {r: [] for r in names}
    if trace is not None:
        trace.follow(table.daemon.pid, label,
                     {"broker": backends.broker_pid} if backends.broker_pid else {})

    def timed(kind: str, keep: bool = True) -> None:
        card = next(cards)
        if trace is not None and keep:
            trace.before()
        times = arrivals.time_one(lambda: table.shoe.send_card(card), "daemon", names, kind)
        if not keep:
            return
        for r, ms in times.items():
            latencies[r].append(ms)
        if trace is not None:
            trace.after(len(latencies[names[0]]), times)

    arrivals.clear()
    table.panel.wait_for_driver(60)
    table.panel.press("new_shoe")
    until("the daemon did not start a shoe", lambda: seen("shoe_started") > 0)
    table.shoe.send_card(next(cards))  # the flip card: its value is the number of burns
    until("the flip card was not shown", lambda: seen("burn_card_shown") > 0)
    while not seen("burn_completed"):
        timed("card_burned", keep=time_burns)
    with contextlib.ExitStack() as stack:
        if load is not None:
            stack.enter_context(load(table.work))
        last_card_at: float | None = None
        for number in range(1, rounds + 1):
            table.panel.press("start_round")
            until(f"round {number} did not open", lambda n=number: seen("round_opened") >= n)
            if last_card_at is not None and round_gaps is not None:
                round_gaps.append(time.perf_counter() - last_card_at)
            for _ in range(CARDS_A_ROUND):
                timed("card_dealt")
            last_card_at = time.perf_counter()
            until(f"round {number} has no result", lambda n=number: seen("round_result") >= n)
    return latencies


# --- a daemon under a notify socket, as systemd starts it ----------------------------------------

class NotifySocket:
    """A systemd notify socket: the daemon's READY=1, then read on as systemd reads it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))

    def wait_ready(self, daemon: subprocess.Popen[bytes] | None = None,
                   timeout: float = 30.0) -> float:
        """When READY=1 arrived (monotonic); RuntimeError when ``daemon`` exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.sock], [], [], 0.05)
            if ready and b"READY=1" in self.sock.recv(4096):
                return time.monotonic()
            if daemon is not None and daemon.poll() is not None:
                raise RuntimeError(f"the daemon exited ({daemon.returncode}) before READY=1")
        raise RuntimeError(f"the daemon did not send READY=1 within {timeout:g} s")

    def drain(self) -> None:
        """From now on read (and drop) what the daemon sends: WATCHDOG=1, STATUS=."""
        def read() -> None:
            with contextlib.suppress(OSError):
                while True:
                    self.sock.recv(4096)

        threading.Thread(target=read, daemon=True).start()

    def close(self) -> None:
        self.sock.close()
        self.path.unlink(missing_ok=True)


def write_table_config(work: Path, panel_tty: str, level: str = "info",
                       **sections: Any) -> Path:
    """``work/table.yaml``: a table on a simulated Bee-Tek shoe at ``work/shoe`` and a line panel
    on ``panel_tty``, its state, socket and events file in ``work``; ``sections`` add to it or
    replace its own (``display=…``, ``table=…``)."""
    import yaml

    config = work / "table.yaml"
    config.write_text(yaml.safe_dump({
        "table": {"id": TABLE},
        "state_dir": str(work / "state"),
        "shoe": {"driver": "beetek", "url": str(work / "shoe")},
        "panel": {"driver": "line_panel", "url": panel_tty},
        "control": {"socket": str(work / "control.sock"), "supervisor_group": own_group()},
        "transports": {"file": {"path": str(work / "events.jsonl")}},
        "logging": {"level": level, "format": "json"},
        **sections,
    }))
    return config


@dataclass
class NotifiedTable:
    """A table's config on simulated devices and the notify socket its daemon reports to;
    ``spawn`` starts a daemon, as many times as asked; ``press`` writes a panel line."""
    config: Path
    notify: NotifySocket
    env: dict[str, str]
    log: Path
    repo: Path
    panel: int  # the panel pty's master side

    def press(self, button: str) -> None:
        os.write(self.panel, f"{button}\n".encode())

    def spawn(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as log:
            return subprocess.Popen([sys.executable, "-m", "controller", "run", "--config",
                                     str(self.config)], stdout=log, stderr=subprocess.STDOUT,
                                    env=self.env, cwd=self.repo)


@contextlib.contextmanager
def notified_table(work: Path, *, level: str = "info", watchdog: bool = False,
                   repo: Path = ROOT, env: dict[str, str] | None = None,
                   **sections: Any) -> Iterator[NotifiedTable]:
    """A table in ``work`` (write_table_config, ``sections`` added) on a simulated shoe and a
    pty panel, its daemon run from ``repo`` under a notify socket (and the watchdog on, as
    under systemd, with ``watchdog``); ``env``: the daemon's environment (default ours)."""
    from drivers.sim.shoe import ShoeSimulator

    shoe = ShoeSimulator(work / "shoe", "beetek").start()
    master, slave = os.openpty()
    notify = NotifySocket(work / "notify")
    daemon_env = {**(os.environ if env is None else env), "NOTIFY_SOCKET": str(notify.path),
                  "PYTHONPATH": daemon_path(repo)}
    if watchdog:
        daemon_env["WATCHDOG_USEC"] = "10000000"
    try:
        yield NotifiedTable(write_table_config(work, os.ttyname(slave), level, **sections),
                            notify, daemon_env, work / "daemon.log", repo, master)
    finally:
        notify.close()
        shoe.close(drain_timeout=0.2)
        os.close(master)
        os.close(slave)


def stop(daemon: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """SIGTERM, as systemd stops it; killed after ``timeout``. Its exit status."""
    daemon.terminate()
    try:
        return daemon.wait(timeout)
    except subprocess.TimeoutExpired:
        daemon.kill()
        return daemon.wait(5)


# --- alternated pairs and their figures ----------------------------------------------------------

T = TypeVar("T")


def alternate(cases: Sequence[str], pairs: int, run: Callable[[str, int], T],
              stalled: list[str] | None = None) -> dict[str, list[T]]:
    """``run(case, pair)`` for every case once a pair, ``pairs`` times; the order of the cases
    reversed every other pair. Each case's results, pair by pair. A run that stalls is run
    again and noted in ``stalled``, up to ``pairs`` times in all; its partial figures are not
    kept."""
    stalled = [] if stalled is None else stalled
    results: dict[str, list[T]] = {case: [] for case in cases}
    for pair in range(pairs):
        for case in (cases if pair % 2 == 0 else list(reversed(cases))):
            while True:
                try:
                    results[case].append(run(case, pair))
                    break
                except Stalled as exc:
                    stalled.append(f"{case} {pair + 1}: {exc}")
                    print(f"bench: {stalled[-1]}; running it again", file=sys.stderr)
                    if len(stalled) > pairs:
                        raise
    return results


def stalled_text(stalled: list[str]) -> str:
    """A row's note on the runs ``alternate`` ran again."""
    return f" ({len(stalled)} stalled and ran again)" if stalled else ""


def figures(values: list[float]) -> dict[str, float]:
    """A run's cards: p50, p99, max (ms), how many over ``GOAL_MAX_MS``, how many."""
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values),
            "over_goal": sum(1 for v in values if v > GOAL_MAX_MS), "cards": len(values)}


def judged(measured: Sequence[float], yardstick: Sequence[float], goal: float, *,
           aa: tuple[Sequence[float], Sequence[float]]) -> dict[str, Any]:
    """Per-pair figures of the measured case and its yardstick, and ``aa``: a yardstick's
    second copy and that yardstick, pair by pair -> the median ratio, its A/A floor and the
    verdict (bench/verdict.py), as JSON."""
    judgement = judge_ratio(pair_ratios(measured, yardstick), pair_ratios(*aa), goal)
    return {"ratio": judgement.ratio, "ratios": list(judgement.ratios),
            "floor": [judgement.floor.low, judgement.floor.high], "goal": goal,
            "verdict": judgement.word, "note": judgement.text()}
