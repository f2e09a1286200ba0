"""The fault injector: which round gets which fault (seeded), throwing it, and the backend
outages (HTTP 503, HTTP gone, MQTT relay cut) that last a few rounds."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from bench.soak.results import ROUND_FAULTS, ROUND_STATES

if TYPE_CHECKING:
    from bench.soak.harness import Soak


class FaultInjector:
    def __init__(self, soak: Soak):
        self.soak = soak
        self.rng = soak.rng
        self.outages: dict[str, int] = {}   # kind -> round count left
        self.round_fault: tuple[str, int] | None = None  # (kind, at card index)
        self.forced = list(ROUND_FAULTS)    # every kind once, early
        self.rng.shuffle(self.forced)
        self.kill_rounds: set[int] = set()
        self.rounds_seen = 0

    def plan_kills(self, kills: int, rounds_estimate: int) -> None:
        """The SIGKILLs fall on ``kills`` random rounds among the first ``rounds_estimate``."""
        self.kill_rounds = set(self.rng.sample(range(2, max(3, rounds_estimate)),
                                               min(kills, rounds_estimate - 2)))

    def new_round(self) -> None:
        self.rounds_seen += 1
        self.round_fault = None
        if self.rounds_seen in self.kill_rounds:
            self.round_fault = ("sigkill", self.rng.randint(0, 12))
        elif self.forced:
            self.round_fault = (self.forced.pop(), self.rng.randint(0, 12))
        elif self.rng.random() < self.soak.options.fault_rate:
            self.round_fault = (self.rng.choice(ROUND_FAULTS), self.rng.randint(0, 12))

    def due(self, cards_dealt: Any) -> str | None:
        """The fault planned for this point of the round, once."""
        if self.round_fault and self.round_fault[1] == cards_dealt:
            kind, self.round_fault = self.round_fault[0], None
            return kind
        return None

    def inject(self, kind: str, status: dict[str, Any]) -> bool:
        """Throw one fault; True when the table's state may have moved (look again)."""
        soak, watch = self.soak, self.soak.watch
        if kind in ("http_503", "http_down", "mqtt_cut"):
            if kind in self.outages:
                return False
            soak.note(kind)
            self.outages[kind] = self.rng.randint(1, 3)  # rounds it lasts
            if kind == "http_503":
                soak.webhook.always = 503
            elif kind == "http_down":
                soak.webhook.down()
            else:
                soak.relay.cut()
            return False
        soak.note(kind)
        if kind == "sigkill":
            soak.kill_and_restart()
        elif kind == "supervisor_pause":
            soak.supervisor.act("pause")
            watch.wait(lambda s: s.get("paused"), "the supervisor's pause")
        elif kind == "switch_pause":
            soak.panel.set_switch(True)
            watch.wait(lambda s: s.get("paused"), "the key switch to pause")
        elif kind == "cancel_round":
            if self.rng.random() < 0.5:
                soak.supervisor.act("cancel_round")
            else:
                soak.panel.send("cancel_round")  # the supervisor's cancel key on the panel
            watch.wait(lambda s: s.get("round") != status.get("round")
                       or s.get("state") not in ROUND_STATES, "cancel_round")
        elif kind == "misread":
            soak.shoe.send_misread()
            watch.wait(lambda s: s.get("card_owed"), "the misread to pause the table")
        elif kind == "shoe_unplug":
            soak.shoe.unplug()
            watch.wait(lambda s: s["devices"].get("shoe") is False, "the shoe to be lost")
            soak.shoe.replug()
            watch.wait(lambda s: s["devices"].get("shoe") is True, "the shoe to be back")
        elif kind == "panel_unplug":
            soak.panel.unplug()
            watch.wait(lambda s: s["devices"].get("panel") is False, "the panel to be lost")
            soak.panel.plug()
            watch.wait(lambda s: s["devices"].get("panel") is True, "the panel to be back")
        elif kind == "garbage":
            soak.shoe.send_garbage(self.rng.randint(1, 40))
            time.sleep(0.02)
        return True

    def end_outages(self) -> None:
        for kind in list(self.outages):
            self.outages[kind] = 1
        self.outage_tick()

    def outage_tick(self) -> None:
        """Between rounds: outages that have lasted their rounds end."""
        for kind in list(self.outages):
            self.outages[kind] -= 1
            if self.outages[kind] > 0:
                continue
            del self.outages[kind]
            if kind == "http_503":
                self.soak.webhook.always = None
            elif kind == "http_down":
                self.soak.webhook.up()
            else:
                self.soak.relay.restore()
