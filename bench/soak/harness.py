"""The soak harness and its dealer (the fault injector and the supervisor are beside it)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bench.soak.checks import (
    SentCards,
    check_delivery,
    check_fault_kinds,
    check_footprint,
    check_round,
    max_seq,
)
from bench.soak.devices import MqttSubscriber, PanelPort, StatusWatch
from bench.soak.faults import FaultInjector
from bench.soak.results import (
    DECKS,
    ROUND_STATES,
    STEP_TIMEOUT_S,
    TABLE,
    SoakFailure,
    SoakOptions,
    SoakResult,
    proc_sample,
)
from bench.soak.supervisor import Supervisor
from controller.service.control.access import own_group
from controller.service.control.client import ControlError
from drivers.sim.shoe import ShoeSimulator, cut_card_position, shuffled_shoe
from testkit.backends import Mosquitto, TcpRelay, WebhookBackend


class Soak:
    """The harness and the dealer: sets up the backends, devices and daemon, plays the table
    (new shoe, start round, deal the shoe's cards in order, the cut card where it lies), and
    hands pauses to the supervisor and chosen rounds to the fault injector."""

    def __init__(self, options: SoakOptions):
        self.options = options
        self.rng = random.Random(options.seed)
        self.result = SoakResult()
        self.work = Path(options.workdir or tempfile.mkdtemp(prefix="pokdeng-soak-"))
        self.work.mkdir(parents=True, exist_ok=True)
        # card sent for (shoe, round, index in the round: 0 = burn, 1..12)
        self.sent: SentCards = {}
        self.proc: subprocess.Popen | None = None
        self.rss_from = max(1, min(options.rss_from, options.shoes - 1))
        self.faults = FaultInjector(self)
        self.supervisor = Supervisor(self)
        self._round_key: tuple[int, int] | None = None
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

    def kill_and_restart(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.result.restarts += 1
        with self.watch.cond:
            self.watch.status = None
        self._start_daemon()

    # -- helpers -----------------------------------------------------------------------------
    def note(self, kind: str) -> None:
        self.result.faults[kind] = self.result.faults.get(kind, 0) + 1
        if self.options.verbose:
            print(f"  fault: {kind}", file=sys.stderr)

    def order(self, shoe: int) -> tuple[list[str], int]:
        if shoe not in self._shoe_orders:
            seed = self.options.seed * 100_000 + shoe
            cards = [c.code for c in shuffled_shoe(seed, DECKS)]
            self._shoe_orders = {shoe: (cards, cut_card_position(seed, len(cards)))}
        return self._shoe_orders[shoe]

    # -- the dealer ------------------------------------------------------------------------
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
        self.faults.plan_kills(self.options.kills, rounds_estimate)
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
                self.supervisor.supervise(status)
                continue
            state = status["state"]
            if state == "no_shoe":
                if self._last_shoe_open > self.result.shoes:
                    self._shoe_done(self._last_shoe_open)
                if self.result.shoes >= self.options.shoes:
                    return
                self._press("new_shoe", status, lambda s: s["state"] != "no_shoe")
            elif state == "ready":
                self.faults.outage_tick()
                self._press("start_round", status, lambda s: s["state"] != "ready")
            elif status.get("next_target") is not None:
                self._deal(status)
            else:  # betting still open with all cards out, or revealing: the table's turn
                v = self.watch.version
                self.watch.wait(lambda s, v=v: self.watch.version != v, "the table", 5)

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
            self.settle_backends()
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
        cards, cut_at = self.order(shoe)
        drawn = int(status["cards_drawn"])
        in_round = status["state"] in ROUND_STATES and status.get("round") is not None
        if in_round:
            key = (shoe, int(status["round"]))
            if key != self._round_key:
                self._round_key = key
                self.faults.new_round()
            kind = self.faults.due(status["cards_dealt"])
            if kind and self.faults.inject(kind, status):
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


    def settle_backends(self) -> int:
        """End every outage and wait until both backends have every journaled event."""
        self.faults.end_outages()
        last_seq = int(self.watch.wait(lambda s: True, "a status")["seq"])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if (max_seq(self.webhook.events) >= last_seq
                    and max_seq(self.subscriber.received()) >= last_seq):
                break
            time.sleep(0.05)
        return last_seq

    # -- the checks (checks.py) ---------------------------------------------------------------
    def _finish(self) -> None:
        from controller.durability.journal import Journal

        last_seq = self.settle_backends()
        with Journal(self.work / "state" / "journal.sqlite") as journal:
            journaled = journal.events_after(0, last_seq + 10)
        problems = self.result.problems
        problems += check_delivery("http", self.webhook.events, journaled)
        problems += check_delivery("mqtt", self.subscriber.received(), journaled)
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
                problems += check_round(event, self.sent)
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
        problems += check_footprint(self.result.reference, self.result.final)
        problems += check_fault_kinds(self.result.faults, self.options.kills)



def run_soak(options: SoakOptions) -> SoakResult:
    soak = Soak(options)
    try:
        soak.play()
    except SoakFailure as exc:
        soak.result.problems.append(str(exc))
    return soak.result

