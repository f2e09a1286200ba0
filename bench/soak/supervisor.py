"""The supervisor the soak plays: pauses, cancels, enters misread cards, turns the key back
and resumes; now and then through the ``supervisor`` command line instead of the socket."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from bench.soak.results import ROUND_STATES, SoakFailure
from controller.service.control.client import ControlError

if TYPE_CHECKING:
    from bench.soak.harness import Soak


class Supervisor:
    def __init__(self, soak: Soak):
        self.soak = soak

    def act(self, action: str, card: str | None = None) -> dict[str, Any]:
        soak = self.soak
        if action in ("pause", "resume") and soak.rng.random() < 0.2:
            # now and then through the CLI, as a supervisor would
            args = [sys.executable, "-m", "controller", "supervisor", "--socket",
                    str(soak.work / "control.sock"), action.replace("_", "-")]
            done = subprocess.run(args, capture_output=True, text=True, timeout=60)
            return {"ok": done.returncode == 0, "error": done.stdout + done.stderr}
        try:
            return soak.watch.client.supervisor(action, card)
        except ControlError as exc:
            return {"ok": False, "error": str(exc)}

    def supervise(self, status: dict[str, Any]) -> None:
        """Deal with whatever paused the table, then resume."""
        soak, watch = self.soak, self.soak.watch
        code = (status.get("fault") or {}).get("code", "?")
        v = watch.version
        if status.get("switch") == "pause":
            soak.panel.set_switch(False)
        elif status.get("card_owed"):
            shoe = int(status["shoe"])
            cards, _ = soak.order(shoe)
            drawn = int(status["cards_drawn"])
            card = cards[drawn]
            answer = self.act("enter_card", card)
            if not answer.get("ok"):
                raise SoakFailure(f"enter-card refused: {answer}")
            if status["state"] in ROUND_STATES and status.get("round") is not None:
                soak.sent[(shoe, int(status["round"]), int(status["cards_dealt"]))] = card
        elif not status["devices"].get("shoe"):
            soak.shoe.replug()
        elif not status["devices"].get("panel"):
            soak.panel.plug()
        else:
            answer = self.act("resume")
            if not answer.get("ok"):
                time.sleep(0.05)  # e.g. refused while something settles; look again
        try:
            watch.wait(lambda s: watch.version != v, f"the table after {code}", 5)
        except SoakFailure:
            pass
