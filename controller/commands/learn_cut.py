"""``pokdeng-table read-shoe URL --learn-cut``: which frame is this shoe's cut card?

No public source shows the frame a Bee-Tek shoe sends for its cut card, so the default
(``<Card:CUT>``) is a guess. The technician runs this, draws the cut card through the shoe, and
gets the frame the shoe sent (one that is not a card) and the config line that names it:
``cut_card_frames: ["<…>"]`` for a Bee-Tek shoe, ``TAG,CUT`` for an RFID registry. Cards drawn
meanwhile are named and ignored. No table is running, so nothing here is sealed.
"""

from __future__ import annotations

import json
import queue
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from controller.table.faults import UNKNOWN_SHOE_FRAME
from controller.table.inputs import CardScan, CutCard, DeviceStatus, Input, Misread

if TYPE_CHECKING:
    from drivers.base import Driver

#: driver codes of a frame that is well formed but names no card: a cut card candidate
NOT_A_CARD_CODES = frozenset({UNKNOWN_SHOE_FRAME, "beetek_bad_card"})

Say = Callable[[str], None]


class CutCardLearner:
    """The input sink of the shoe driver while learning: waits for the first frame that is
    not a card and says what the config needs."""

    def __init__(self, protocol: str, configured: list[str], say: Say, answer: Say):
        self.protocol = protocol
        self.configured = configured
        self._say = say          # progress, on stderr
        self._answer = answer    # the result, on stdout
        self.done: queue.Queue[int] = queue.Queue()

    def __call__(self, inp: Input) -> None:
        if isinstance(inp, DeviceStatus):
            self._say("shoe connected: draw the cut card through the reader now" if inp.connected
                      else "shoe disconnected; waiting for it")
        elif isinstance(inp, CardScan):
            self._say(f"that was a card ({inp.card.display()}), not the cut card; draw the "
                      f"cut card")
        elif isinstance(inp, CutCard):
            self._known()
        elif isinstance(inp, Misread):
            self._misread(inp)

    def _known(self) -> None:
        if self.protocol == "beetek":
            self._say("the shoe sent a frame already configured as the cut card")
            self._answer(f"cut_card_frames: {json.dumps(self.configured)}")
        else:
            self._say("the shoe sent its cut card as it is configured; nothing to change")
        self.done.put(0)

    def _misread(self, inp: Misread) -> None:
        evidence = inp.evidence or {}
        frame, tag = evidence.get("frame"), evidence.get("tag")
        if inp.code in NOT_A_CARD_CODES and frame is not None and self.protocol == "beetek":
            if "\\x" in frame:
                self._say(f"the shoe sent {frame}, which is not plain text; cut_card_frames "
                          f"cannot name it: check the line speed and the shoe's mode")
                self.done.put(1)
                return
            self._say(f"the shoe sent {frame} (not a card)")
            self._answer(f"cut_card_frames: {json.dumps([frame], ensure_ascii=False)}")
            self.done.put(0)
        elif inp.code == "rfid_unknown_uid" and tag is not None:
            self._say(f"tag {tag} is not in the registry; add it as the cut card (and remove "
                      f"any other CUT line):")
            self._answer(f"{tag},CUT")
            self.done.put(0)
        elif inp.code == "rfid_duplicate_uid" and tag is not None:
            self._say(f"tag {tag} is already in the registry as {evidence.get('card')}; this "
                      f"reader was shown it twice")
        else:
            self._say(f"the shoe reported {inp.code or 'a misread'}, not a frame of its own; "
                      f"draw the cut card again")


def learn_cut(shoe: Driver, learner: CutCardLearner, say: Say) -> int:
    """Run the shoe driver (whose sink is ``learner``) until the learner has an answer (its
    status), or a signal ends it first (1)."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda signum, frame: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    say("waiting for the shoe; then draw the cut card (Ctrl-C to give up)")
    status: int | None = None
    try:
        shoe.start()
        while status is None and not stop.is_set():
            try:
                status = learner.done.get(timeout=0.2)
            except queue.Empty:
                if not shoe.running:
                    say("the shoe driver stopped")
                    return 1
    finally:
        shoe.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if status is None:
        say("stopped before a cut card came through; nothing learned")
        return 1
    return status
