"""Soak: the real daemon plays many whole shoes at full speed while faults are thrown at it.

    python bench/soak.py --shoes 200            # the long soak (docs/soak.md has its figures)
    python bench/soak.py --shoes 3              # the short one CI runs (tests/commands/test_soak.py)

What runs: ``python -m controller run --config <generated yaml> --clock-speed X`` as a
subprocess (table time X times faster: the 1 s betting window closes in 1/X s); the shoe is a
``ShoeSimulator`` (Bee-Tek frames) on a pty, the panel a serial line panel on a pty (this
harness writes the button and key-switch lines); events go to a real HTTP webhook on loopback
(HMAC-checked, counting repeats) and to a real mosquitto on a free loopback port, reached
through a TCP relay the harness can cut. A subscriber reads the broker directly.

This harness is the dealer (follows the daemon's sealed status from ``watch``: new shoe, flip
card and burns, start round, deal the shoe's cards in order, cut card where it lies) and the
supervisor (resumes, enters misread cards, turns the key back), and injects faults at random
rounds (seeded): supervisor pause, key-switch pause, cancel round, misread fixed with
``enter-card``, shoe unplug, panel unplug, garbage on the shoe line, HTTP 503 spell, HTTP
server gone (connection refused), MQTT relay cut, SIGKILL of the daemon and restart. Every
kind happens at least once in the first shoe. The SIGKILLs fall before the end of shoe
``--rss-from`` (default 20), so RSS, threads and fds are compared over a stretch with no
restart: from the end of that shoe to the end of the last one.

At the end it checks, and exits 1 when any fails:

- each ``round_result`` equals ``controller.rules.hands.round_result_data`` on the cards this harness
  actually sent (or entered) for each position of that round, and names those same cards;
- each backend (HTTP, MQTT) received every journaled event, first copies in seq order, no id
  missing, repeats identical to the first copy;
- ``journal verify`` passes;
- RSS grew less than 10 % and threads and fds did not grow between the two samples.

``run_soak(options) -> SoakResult`` is the same as a function (tests, ``pokdeng-table bench``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from controller.rules.cards import parse_card  # noqa: E402
from controller.service.control import ControlClient, ControlError  # noqa: E402
from controller.service.control_access import own_group  # noqa: E402
from controller.rules.hands import HAND_ORDER, evaluate_hand, round_result_data  # noqa: E402
from drivers.sim.shoe import ShoeSimulator, cut_card_position, shuffled_shoe  # noqa: E402
from testkit.backends import Mosquitto, TcpRelay, WebhookBackend  # noqa: E402

TABLE = "SOAK"
DECKS = 8
ROUND_STATES = ("betting", "dealing", "revealing")
# Fault kinds thrown during rounds; "sigkill" is scheduled separately (a few, early).
ROUND_FAULTS = ("supervisor_pause", "switch_pause", "cancel_round", "misread", "shoe_unplug",
                "panel_unplug", "garbage", "http_503", "http_down", "mqtt_cut")
FAULT_KINDS = ROUND_FAULTS + ("sigkill",)
STEP_TIMEOUT_S = 30.0     # real seconds the daemon may take to react to one action


class SoakFailure(Exception):
    """The soak could not go on (the daemon stopped reacting, a device never came back…)."""


@dataclass
class SoakOptions:
    shoes: int = 3
    seed: int = 1
    clock_speed: float = 10.0
    fault_rate: float = 0.2          # chance per round of one random fault
    kills: int = 3                   # SIGKILL restarts, all before the end of shoe rss_from
    rss_from: int = 20               # the RSS/thread/fd reference shoe (clamped to shoes - 1)
    workdir: str | None = None
    verbose: bool = False


@dataclass
class ProcSample:
    shoe: int
    pid: int
    rss_kb: int
    threads: int
    fds: int
    cpu_s: float
    fd_targets: list[str] = field(default_factory=list)


@dataclass
class SoakResult:
    shoes: int = 0
    rounds: int = 0
    cancelled: int = 0
    events: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    pause_codes: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    duration_s: float = 0.0
    samples: list[ProcSample] = field(default_factory=list)
    reference: ProcSample | None = None
    final: ProcSample | None = None
    http_repeats: int = 0
    mqtt_repeats: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def figures(self) -> dict[str, Any]:
        ref, fin = self.reference, self.final
        growth = (100.0 * (fin.rss_kb - ref.rss_kb) / ref.rss_kb) if ref and fin else None
        return {
            "shoes": self.shoes, "rounds": self.rounds, "rounds_cancelled": self.cancelled,
            "events": self.events, "faults_injected": dict(sorted(self.faults.items())),
            "pauses_by_code": dict(sorted(self.pause_codes.items())),
            "restarts": self.restarts, "duration_s": round(self.duration_s, 1),
            "reference_shoe": ref.shoe if ref else None,
            "rss_kb_reference": ref.rss_kb if ref else None,
            "rss_kb_last": fin.rss_kb if fin else None,
            "rss_growth_pct": round(growth, 2) if growth is not None else None,
            "threads_reference": ref.threads if ref else None,
            "threads_last": fin.threads if fin else None,
            "fds_reference": ref.fds if ref else None, "fds_last": fin.fds if fin else None,
            "daemon_cpu_s_last_stretch": round(fin.cpu_s - ref.cpu_s, 1) if ref and fin else None,
            "http_repeats": self.http_repeats, "mqtt_repeats": self.mqtt_repeats,
            "ok": self.ok, "problems": self.problems,
        }


# --- devices the harness plays ------------------------------------------------------------------

class PanelPort:
    """The panel end of a serial line panel: a pty whose slave is linked at a fixed path, so it
    can be unplugged (pty gone) and plugged back (a new pty at the same path).

    Each plug has one thread that reads the master (answering the host's ``status?`` with the
    key switch level, as the firmware does) and that alone closes the pty on unplug, so a
    closed descriptor number is never reused under a reader.
    """

    def __init__(self, link: Path):
        self.link = link
        self.switch_pause = False
        self._lock = threading.Lock()
        self._master: int | None = None
        self._unplugged: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self.plug()

    def plug(self) -> None:
        with self._lock:
            if self._master is not None:
                return
            master, slave = os.openpty()
            tmp = self.link.with_suffix(".new")
            if tmp.is_symlink():
                tmp.unlink()
            tmp.symlink_to(os.ttyname(slave))
            os.replace(tmp, self.link)
            self._master = master
            self._unplugged = threading.Event()
            self._thread = threading.Thread(target=self._serve,
                                            args=(master, slave, self._unplugged), daemon=True)
            self._thread.start()

    def unplug(self) -> None:
        with self._lock:
            if self._master is None:
                return
            self._master = None
            assert self._unplugged is not None and self._thread is not None
            self._unplugged.set()
            thread = self._thread
        thread.join(5)

    def send(self, line: str) -> None:
        with self._lock:
            if self._master is None:
                return
            try:
                os.write(self._master, line.encode() + b"\n")
            except OSError:
                pass

    def set_switch(self, pause: bool) -> None:
        self.switch_pause = pause
        self.send(f"switch pause {'on' if pause else 'off'}")

    def _serve(self, master: int, slave: int, unplugged: threading.Event) -> None:
        import select

        buffer = b""
        try:
            while not unplugged.is_set():
                ready, _, _ = select.select([master], [], [], 0.05)
                if not ready:
                    continue
                try:
                    buffer += os.read(master, 1024)
                except OSError:
                    time.sleep(0.05)  # the host has the port closed (EIO): wait for it
                    continue
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip() == b"status?":
                        self.send(f"switch pause {'on' if self.switch_pause else 'off'}")
        finally:
            with self._lock:  # no send() is writing to it now
                os.close(master)
                os.close(slave)


class MqttSubscriber:
    """Reads the table's event topic straight from the broker (QoS 1, persistent session)."""

    def __init__(self, port: int, topic: str):
        import paho.mqtt.client as mqtt

        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="soak-subscriber",
                                  clean_session=False)
        self.client.on_connect = lambda c, u, f, rc, p=None: c.subscribe(topic, qos=1)
        self.client.on_message = self._message
        self.client.connect("127.0.0.1", port, keepalive=30)
        self.client.loop_start()

    def _message(self, client: Any, userdata: Any, message: Any) -> None:
        event = json.loads(message.payload)
        with self.lock:
            self.events.append(event)

    def received(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


class StatusWatch:
    """The daemon's latest sealed status, kept current by a ``watch`` stream; reconnects."""

    def __init__(self, socket_path: str):
        self.client = ControlClient(socket_path, timeout=STEP_TIMEOUT_S)
        self.cond = threading.Condition()
        self.status: dict[str, Any] | None = None
        self.version = 0
        self._closed = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._closed:
            try:
                for status in self.client.watch():
                    with self.cond:
                        self.status, self.version = status, self.version + 1
                        self.cond.notify_all()
                    if self._closed:
                        return
            except (ControlError, OSError, ValueError):
                pass
            with self.cond:
                self.status = None
                self.cond.notify_all()
            time.sleep(0.05)

    def wait(self, predicate: Callable[[dict[str, Any]], bool], what: str,
             timeout: float = STEP_TIMEOUT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                if self.status is not None and predicate(self.status):
                    return self.status
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SoakFailure(f"timed out waiting for {what}; last status: "
                                      f"{json.dumps(self.status)[:600]}")
                self.cond.wait(min(left, 0.5))

    def close(self) -> None:
        self._closed = True


# --- the soak ---------------------------------------------------------------------------------

def proc_sample(pid: int, shoe: int) -> ProcSample:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                  if ":" in line)
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass  # closed while we looked
    return ProcSample(shoe=shoe, pid=pid, rss_kb=int(fields["VmRSS"].split()[0]),
                      threads=int(fields["Threads"]), fds=len(targets), cpu_s=cpu,
                      fd_targets=sorted(targets))


class Soak:
    def __init__(self, options: SoakOptions):
        self.options = options
        self.rng = random.Random(options.seed)
        self.result = SoakResult()
        self.work = Path(options.workdir or tempfile.mkdtemp(prefix="pokdeng-soak-"))
        self.work.mkdir(parents=True, exist_ok=True)
        # card sent for (shoe, round, index in the round: 0 = burn, 1..12)
        self.sent: dict[tuple[int, int, int], str] = {}
        self.proc: subprocess.Popen | None = None
        self.rss_from = max(1, min(options.rss_from, options.shoes - 1))
        self._outages: dict[str, int] = {}   # kind -> round count left
        self._round_key: tuple[int, int] | None = None
        self._round_fault: tuple[str, int] | None = None  # (kind, at card index)
        self._forced = list(ROUND_FAULTS)
        self.rng.shuffle(self._forced)
        self._kill_rounds: set[int] = set()
        self._rounds_seen = 0
        self._last_shoe_open = 0
        self._shoe_orders: dict[int, tuple[list[str], int]] = {}

    # -- set-up ------------------------------------------------------------------------------
    def _config(self) -> Path:
        secret = self.work / "webhook.secret"
        secret.write_bytes(b"soak-secret\n")
        data = {
            "table": {"id": TABLE, "betting_seconds": 1, "reveal": "auto", "decks": DECKS},
            "state_dir": str(self.work / "state"),
            "shoe": {"driver": "beetek", "url": str(self.work / "shoe.pty"),
                     "reconnect_seconds": 0.1},
            "panel": {"driver": "line_panel", "url": str(self.work / "panel.pty"),
                      "reconnect_seconds": 0.1},
            "control": {"socket": str(self.work / "control.sock"),
                        "supervisor_group": own_group()},
            "transports": {
                "http": {"url": self.webhook.url, "secret_file": str(secret), "timeout_s": 2,
                         "allow_insecure": True, "batch_max": 200, "backoff_initial_s": 0.05,
                         "backoff_max_s": 0.5},
                "mqtt": {"host": "127.0.0.1", "port": self.relay.port, "keepalive": 5},
            },
            "logging": {"level": "warning", "format": "json"},
        }
        path = self.work / "table.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    def _start_daemon(self) -> None:
        log = open(self.work / "daemon.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "controller", "run", "--config", str(self.config_path),
             "--clock-speed", str(self.options.clock_speed)],
            stdout=log, stderr=subprocess.STDOUT, cwd=str(self.work))
        log.close()
        self.watch.wait(lambda s: s.get("state") not in ("starting", "stopped")
                        and bool((s.get("devices") or {}).get("shoe")),
                        "the daemon to be up with the shoe connected", 60)

    def _kill_and_restart(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.result.restarts += 1
        with self.watch.cond:
            self.watch.status = None
        self._start_daemon()

    # -- helpers -----------------------------------------------------------------------------
    def _note(self, kind: str) -> None:
        self.result.faults[kind] = self.result.faults.get(kind, 0) + 1
        if self.options.verbose:
            print(f"  fault: {kind}", file=sys.stderr)

    def _order(self, shoe: int) -> tuple[list[str], int]:
        if shoe not in self._shoe_orders:
            seed = self.options.seed * 100_000 + shoe
            cards = [c.code for c in shuffled_shoe(seed, DECKS)]
            self._shoe_orders = {shoe: (cards, cut_card_position(seed, len(cards)))}
        return self._shoe_orders[shoe]

    def _supervisor(self, action: str, card: str | None = None) -> dict[str, Any]:
        if action in ("pause", "resume") and self.rng.random() < 0.2:
            # now and then through the CLI, as a supervisor would
            args = [sys.executable, "-m", "controller", "supervisor", "--socket",
                    str(self.work / "control.sock"), action.replace("_", "-")]
            done = subprocess.run(args, capture_output=True, text=True, timeout=60)
            return {"ok": done.returncode == 0, "error": done.stdout + done.stderr}
        try:
            return self.watch.client.supervisor(action, card)
        except ControlError as exc:
            return {"ok": False, "error": str(exc)}

    # -- the dealer and the supervisor -------------------------------------------------------
    def play(self) -> None:
        started = time.monotonic()
        self.webhook = WebhookBackend(b"soak-secret")
        self.broker = Mosquitto(self.work)
        self.broker.start()
        self.relay = TcpRelay(self.broker.port)
        self.subscriber = MqttSubscriber(self.broker.port, f"pokdeng/{TABLE}/events")
        self.shoe = ShoeSimulator(self.work / "shoe.pty", "beetek", decks=DECKS,
                                  seed=self.options.seed)
        self.shoe.start()
        self.panel = PanelPort(self.work / "panel.pty")
        self.config_path = self._config()
        self.watch = StatusWatch(str(self.work / "control.sock"))
        rounds_estimate = max(3, self.rss_from * 22)  # ~25-27 rounds a shoe
        self._kill_rounds = set(self.rng.sample(range(2, max(3, rounds_estimate)),
                                                min(self.options.kills, rounds_estimate - 2)))
        try:
            self._start_daemon()
            self._loop()
            self._finish()
        finally:
            self.result.duration_s = time.monotonic() - started
            self.watch.close()
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
            self.shoe.close(drain_timeout=0.2)
            self.panel.unplug()
            self.subscriber.close()
            self.relay.cut()
            self.broker.stop()
            self.webhook.down()

    def _loop(self) -> None:
        while True:
            status = self.watch.wait(lambda s: True, "a status")
            shoe = status.get("shoe")
            if shoe is not None:
                self._last_shoe_open = int(shoe)
            if status.get("paused"):
                self._supervise(status)
                continue
            state = status["state"]
            if state == "no_shoe":
                if self._last_shoe_open > self.result.shoes:
                    self._shoe_done(self._last_shoe_open)
                if self.result.shoes >= self.options.shoes:
                    return
                self._press("new_shoe", status, lambda s: s["state"] != "no_shoe")
            elif state == "ready":
                self._outage_tick()
                self._press("start_round", status, lambda s: s["state"] != "ready")
            elif status.get("next_target") is not None:
                self._deal(status)
            else:  # betting still open with all cards out, or revealing: the table's turn
                v = self.watch.version
                self.watch.wait(lambda s: self.watch.version != v, "the table", 5)

    def _press(self, button: str, status: dict[str, Any],
               moved: Callable[[dict[str, Any]], bool]) -> None:
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while True:
            self.panel.send(button)
            try:
                self.watch.wait(lambda s: moved(s) or s.get("paused"), f"{button} to act", 1.0)
                return
            except SoakFailure:
                if time.monotonic() > deadline:
                    raise
                status = self.watch.wait(lambda s: True, "a status")
                if status.get("paused") or moved(status):
                    return

    def _shoe_done(self, shoe: int) -> None:
        self.result.shoes = shoe
        if shoe in (self.rss_from, self.options.shoes):
            # Compare like with like: no outage on, every backend connected and caught up
            # (a connection that is down is one fd and a thread-state fewer, not a leak fixed).
            self._settle_backends()
        if self.proc is not None:
            try:  # a status request opens the outbox's lazy status connection: warm it first
                self.watch.client.status()
            except ControlError:
                pass
            # Threads and fds that come and go (a control connection being served, a backend
            # reconnecting) are not leaks: keep the lowest of a few looks.
            looks = []
            for _ in range(5):
                looks.append(proc_sample(self.proc.pid, shoe))
                time.sleep(0.1)
            sample = min(looks, key=lambda look: (look.threads, look.fds))
            self.result.samples.append(sample)
            if shoe == self.rss_from:
                self.result.reference = sample
            self.result.final = sample
        if self.options.verbose or shoe % 10 == 0:
            s = self.result.samples[-1] if self.result.samples else None
            print(f"shoe {shoe} done, {time.strftime('%H:%M:%S')}"
                  + (f", rss {s.rss_kb} kB, threads {s.threads}, fds {s.fds}" if s else ""),
                  file=sys.stderr, flush=True)

    def _deal(self, status: dict[str, Any]) -> None:
        shoe = int(status["shoe"])
        cards, cut_at = self._order(shoe)
        drawn = int(status["cards_drawn"])
        in_round = status["state"] in ROUND_STATES and status.get("round") is not None
        if in_round:
            key = (shoe, int(status["round"]))
            if key != self._round_key:
                self._new_round(key)
            if self._round_fault and self._round_fault[1] == status["cards_dealt"]:
                kind, self._round_fault = self._round_fault[0], None
                if self._inject(kind, status):
                    return  # the table moved: look again
        if drawn >= len(cards):
            raise SoakFailure(f"shoe {shoe} is empty and the table still wants cards")
        if drawn >= cut_at and not status.get("last_round"):
            self.shoe.send_cut_card()
            self.watch.wait(lambda s: s.get("last_round") or s.get("paused")
                            or s.get("state") == "no_shoe", "the cut card")
            return
        card = cards[drawn]
        epoch = self.result.restarts
        self.shoe.send_card(card)
        after = self.watch.wait(lambda s: s.get("cards_drawn") != drawn or bool(s.get("paused"))
                                or s.get("shoe") != shoe, "a card to be taken")
        taken = (after.get("cards_drawn") == drawn + 1 and after.get("shoe") == shoe) or (
            # the last card of the shoe's last round settles it and ends the shoe at once
            after.get("state") == "no_shoe" and status.get("last_round")
            and status.get("cards_dealt") == 12)
        if taken and in_round and epoch == self.result.restarts:
            self.sent[(shoe, int(status["round"]), int(status["cards_dealt"]))] = card

    def _new_round(self, key: tuple[int, int]) -> None:
        self._round_key = key
        self._rounds_seen += 1
        self._round_fault = None
        if self._rounds_seen in self._kill_rounds:
            self._round_fault = ("sigkill", self.rng.randint(0, 12))
        elif self._forced:
            self._round_fault = (self._forced.pop(), self.rng.randint(0, 12))
        elif self.rng.random() < self.options.fault_rate:
            self._round_fault = (self.rng.choice(ROUND_FAULTS), self.rng.randint(0, 12))

    def _inject(self, kind: str, status: dict[str, Any]) -> bool:
        """Throw one fault; True when the table's state may have moved (look again)."""
        if kind in ("http_503", "http_down", "mqtt_cut"):
            if kind in self._outages:
                return False
            self._note(kind)
            self._outages[kind] = self.rng.randint(1, 3)  # rounds it lasts
            if kind == "http_503":
                self.webhook.always = 503
            elif kind == "http_down":
                self.webhook.down()
            else:
                self.relay.cut()
            return False
        self._note(kind)
        if kind == "sigkill":
            self._kill_and_restart()
        elif kind == "supervisor_pause":
            self._supervisor("pause")
            self.watch.wait(lambda s: s.get("paused"), "the supervisor's pause")
        elif kind == "switch_pause":
            self.panel.set_switch(True)
            self.watch.wait(lambda s: s.get("paused"), "the key switch to pause")
        elif kind == "cancel_round":
            if self.rng.random() < 0.5:
                self._supervisor("cancel_round")
            else:
                self.panel.send("cancel_round")  # the supervisor's cancel key on the panel
            self.watch.wait(lambda s: s.get("round") != status.get("round")
                            or s.get("state") not in ROUND_STATES, "cancel_round")
        elif kind == "misread":
            self.shoe.send_misread()
            self.watch.wait(lambda s: s.get("card_owed"), "the misread to pause the table")
        elif kind == "shoe_unplug":
            self.shoe.unplug()
            self.watch.wait(lambda s: s["devices"].get("shoe") is False, "the shoe to be lost")
            self.shoe.replug()
            self.watch.wait(lambda s: s["devices"].get("shoe") is True, "the shoe to be back")
        elif kind == "panel_unplug":
            self.panel.unplug()
            self.watch.wait(lambda s: s["devices"].get("panel") is False, "the panel to be lost")
            self.panel.plug()
            self.watch.wait(lambda s: s["devices"].get("panel") is True, "the panel to be back")
        elif kind == "garbage":
            self.shoe.send_garbage(self.rng.randint(1, 40))
            time.sleep(0.02)
        return True

    def _settle_backends(self) -> int:
        """End every outage and wait until both backends have every journaled event."""
        for kind in list(self._outages):
            self._outages[kind] = 1
        self._outage_tick()
        last_seq = int(self.watch.wait(lambda s: True, "a status")["seq"])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if (self._max_seq(self.webhook.events) >= last_seq
                    and self._max_seq(self.subscriber.received()) >= last_seq):
                break
            time.sleep(0.05)
        return last_seq

    def _outage_tick(self) -> None:
        """Between rounds: outages that have lasted their rounds end."""
        for kind in list(self._outages):
            self._outages[kind] -= 1
            if self._outages[kind] > 0:
                continue
            del self._outages[kind]
            if kind == "http_503":
                self.webhook.always = None
            elif kind == "http_down":
                self.webhook.up()
            else:
                self.relay.restore()

    def _supervise(self, status: dict[str, Any]) -> None:
        """The supervisor: deal with whatever paused the table, then resume."""
        code = (status.get("fault") or {}).get("code", "?")
        v = self.watch.version
        if status.get("switch") == "pause":
            self.panel.set_switch(False)
        elif status.get("card_owed"):
            shoe = int(status["shoe"])
            cards, _ = self._order(shoe)
            drawn = int(status["cards_drawn"])
            card = cards[drawn]
            answer = self._supervisor("enter_card", card)
            if not answer.get("ok"):
                raise SoakFailure(f"enter-card refused: {answer}")
            if status["state"] in ROUND_STATES and status.get("round") is not None:
                self.sent[(shoe, int(status["round"]), int(status["cards_dealt"]))] = card
        elif not status["devices"].get("shoe"):
            self.shoe.replug()
        elif not status["devices"].get("panel"):
            self.panel.plug()
        else:
            answer = self._supervisor("resume")
            if not answer.get("ok"):
                time.sleep(0.05)  # e.g. refused while something settles; look again
        try:
            self.watch.wait(lambda s: self.watch.version != v, f"the table after {code}", 5)
        except SoakFailure:
            pass

    # -- the checks --------------------------------------------------------------------------
    def _finish(self) -> None:
        from controller.durability.journal import Journal

        last_seq = self._settle_backends()
        with Journal(self.work / "state" / "journal.sqlite") as journal:
            journaled = journal.events_after(0, last_seq + 10)
        problems = self.result.problems
        problems += self._check_delivery("http", self.webhook.events, journaled)
        problems += self._check_delivery("mqtt", self.subscriber.received(), journaled)
        if self.webhook.conflicts or self.webhook.bad_signatures:
            problems.append(f"http: {len(self.webhook.conflicts)} repeats with another body, "
                            f"{self.webhook.bad_signatures} bad signatures")
        self.result.http_repeats = self.webhook.repeats()
        self.result.mqtt_repeats = len(self.subscriber.received()) - len(
            {e["id"] for e in self.subscriber.received()})
        self.result.events = len(journaled)
        for event in journaled:
            if event["type"] == "round_result":
                self.result.rounds += 1
                problems += self._check_round(event)
            elif event["type"] == "round_cancelled":
                self.result.cancelled += 1
            elif event["type"] == "paused":
                code = event["data"]["code"]
                self.result.pause_codes[code] = self.result.pause_codes.get(code, 0) + 1
        verify = subprocess.run([sys.executable, "-m", "controller", "journal", "verify",
                                 str(self.work / "state" / "journal.sqlite")],
                                capture_output=True, text=True, timeout=600)
        if verify.returncode != 0:
            problems.append(f"journal verify: {verify.stdout}{verify.stderr}".strip())
        ref, fin = self.result.reference, self.result.final
        if ref is None or fin is None:
            problems.append("no RSS reference sample")
        else:
            if ref.pid != fin.pid:
                problems.append("the daemon restarted inside the RSS window")
            if fin.rss_kb > ref.rss_kb * 1.10:
                problems.append(f"RSS grew {ref.rss_kb} -> {fin.rss_kb} kB (> 10 %)")
            if fin.threads > ref.threads:
                problems.append(f"threads grew {ref.threads} -> {fin.threads}")
            if fin.fds > ref.fds + 1:  # one connection may be mid-reconnect
                grown = sorted(set(fin.fd_targets) - set(ref.fd_targets))
                problems.append(f"fds grew {ref.fds} -> {fin.fds}: new {', '.join(grown)}")
        for kind in FAULT_KINDS:
            if self.options.kills == 0 and kind == "sigkill":
                continue
            if not self.result.faults.get(kind):
                problems.append(f"fault kind {kind} was never injected")

    @staticmethod
    def _max_seq(events: list[dict[str, Any]]) -> int:
        return max((int(e["seq"]) for e in events), default=0)

    @staticmethod
    def _check_delivery(name: str, received: list[dict[str, Any]],
                        journaled: list[dict[str, Any]]) -> list[str]:
        first: dict[str, dict[str, Any]] = {}
        order: list[int] = []
        problems = []
        for event in received:
            if event["id"] in first:
                if first[event["id"]] != event:
                    problems.append(f"{name}: {event['id']} came again with another body")
                continue
            first[event["id"]] = event
            order.append(int(event["seq"]))
        if order != sorted(order):
            bad = next(i for i in range(1, len(order)) if order[i] < order[i - 1])
            problems.append(f"{name}: out of order at seq {order[bad - 1]} then {order[bad]}")
        want = [e["id"] for e in journaled]
        missing = [i for i in want if i not in first]
        if missing:
            problems.append(f"{name}: {len(missing)} events missing, first {missing[0]}")
        differing = [e["id"] for e in journaled if e["id"] in first and first[e["id"]] != e]
        if differing:
            problems.append(f"{name}: {len(differing)} events differ from the journal, "
                            f"first {differing[0]}")
        return problems[:5]

    def _check_round(self, event: dict[str, Any]) -> list[str]:
        shoe, rnd = int(event["shoe"]), int(event["round"])
        hands = {}
        for i, position in enumerate(HAND_ORDER):
            codes = [self.sent.get((shoe, rnd, 1 + i)), self.sent.get((shoe, rnd, 7 + i))]
            if None in codes:
                return [f"shoe {shoe} round {rnd}: the harness has no record of the cards of "
                        f"{position}"]
            hands[position] = evaluate_hand([parse_card(c) for c in codes])
        expected = round_result_data(hands)
        data = event["data"]
        if expected["hands"] != data["hands"] or expected["positions"] != data["positions"]:
            return [f"shoe {shoe} round {rnd}: round_result disagrees with the rules on the "
                    f"cards sent: {json.dumps(data)[:300]} vs {json.dumps(expected)[:300]}"]
        return []


def run_soak(options: SoakOptions) -> SoakResult:
    soak = Soak(options)
    try:
        soak.play()
    except SoakFailure as exc:
        soak.result.problems.append(str(exc))
    return soak.result


def print_figures(result: SoakResult, out: Any = sys.stdout) -> None:
    figures = result.figures()
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        if key == "problems":
            continue
        out.write(f"{key:<{width}}  {value}\n")
    for problem in result.problems:
        out.write(f"PROBLEM: {problem}\n")
    out.write("soak: OK\n" if result.ok else "soak: FAILED\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shoes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None, help="default: random, printed")
    parser.add_argument("--clock-speed", type=float, default=10.0,
                        help="table time runs this many times faster (default 10)")
    parser.add_argument("--fault-rate", type=float, default=0.2,
                        help="chance per round of a random fault (default 0.2)")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILL restarts (default 3)")
    parser.add_argument("--rss-from", type=int, default=20,
                        help="reference shoe for RSS/threads/fds (default 20)")
    parser.add_argument("--workdir", help="keep the state, logs and config here")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    print(f"soak: {args.shoes} shoes, seed {seed}, clock x{args.clock_speed:g}", flush=True)
    result = run_soak(SoakOptions(shoes=args.shoes, seed=seed, clock_speed=args.clock_speed,
                                  fault_rate=args.fault_rate, kills=args.kills,
                                  rss_from=args.rss_from, workdir=args.workdir,
                                  verbose=args.verbose))
    print_figures(result)
    if args.json:
        Path(args.json).write_text(json.dumps({"seed": seed, **result.figures()}, indent=2) + "\n")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
