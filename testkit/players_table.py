"""A real table machine feeding a real display server, stepped through the states the players'
pages tell: betting open, a settled round (with a Pok 8 or 9 winner), a supervisor's pause, a
misread, a cancelled round and the shuffle of a new shoe.

What reaches the server goes through the daemon's sealing filter (``SealedFilter``), as in
the screen process; the status carries a supervisor's login in ``last_actions``, as the real
one does, so a page that showed it would be caught. Used by the browser tests
(tests/display/test_players_browser.py) and the docs' pictures (testkit/screenshots.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from controller.display.server import DisplayServer
from controller.display.settings import DisplaySettings
from controller.display.studio import Limits, StudioSettings
from controller.service.screens.wire import SealedFilter
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import Actor, Misread, Supervisor
from controller.table.machine import MachineSettings, TableMachine

#: the states in the order ``MachineTable.states`` reaches them
STATES = ("result", "betting", "paused", "misread", "cancelled", "shuffling")
SUPERVISOR = Actor("maria", 1001)  # a login no players' page may show
STUDIO = StudioSettings(currency="PHP", limits={"player": Limits(100, 50000),
                                                "pair": Limits(50, 5000)})
SEED = 1           # a shoe whose early rounds have a Pok winner and combinations
ROUNDS_BEFORE = 8  # settled rounds before the states: the 8th has a Pok winner and a combination
START_AT = 1_796_212_800.0  # 2026-12-02 12:00 UTC: the table clock at the script's first input


class MachineTable:
    """``with MachineTable() as table:`` then ``for state in table.states(): …``."""

    def __init__(self, studio: StudioSettings = STUDIO, table: str = "PD07") -> None:
        self.machine = TableMachine(MachineSettings(table_id=table))
        self.table = table
        self.version = 0
        self.filter = SealedFilter()
        self.display = DisplayServer(DisplaySettings(port=0, studio=studio), self._snapshot)
        self.events: list[dict[str, Any]] = []
        self.cancelled_round: int | None = None

    def __enter__(self) -> MachineTable:
        self.display.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.display.close()

    @property
    def port(self) -> int:
        return self.display.port

    def _snapshot(self) -> tuple[int, dict[str, Any]]:
        status = dict(self.machine.status(), table=self.table, last_actions=[
            {"action": "pause", "outcome": "done",
             "by": {"user": SUPERVISOR.user, "uid": SUPERVISOR.uid}}])
        return self.version, SealedFilter.status(dict(status, now=status.get("clock")))

    def handle(self, inp: Any) -> list[dict[str, Any]]:
        events = self.machine.handle(inp)
        self.events += events
        self.display.offer_events(self.filter.events(events))
        self.version += 1
        self.display.status_changed()
        return events

    def states(self) -> Iterator[str]:
        """Step the table into each of ``STATES`` and yield its name there."""
        script = iter(shoe_script(SEED, start_at=START_AT))
        results = 0
        for inp in script:  # rounds on the roadmap, the last one settled: its result
            results += sum(e["type"] == "round_result" for e in self.handle(inp))
            if results == ROUNDS_BEFORE:
                break
        yield "result"
        for inp in script:  # the next round open, some cards out
            self.handle(inp)
            status = self.machine.status()
            if status.get("betting_open") and (status.get("cards_dealt") or 0) >= 5:
                break
        yield "betting"
        at = float(self.machine.status().get("clock") or 0.0)
        self.handle(Supervisor(at + 0.1, "pause", by=SUPERVISOR))
        yield "paused"
        self.handle(Supervisor(at + 0.2, "resume", by=SUPERVISOR))
        self.handle(Misread(at + 0.3, code="beetek_card_not_read", reason="no read"))
        yield "misread"
        cancelled = self.handle(Supervisor(at + 0.4, "cancel_round", by=SUPERVISOR))
        self.cancelled_round = next(e["round"] for e in cancelled
                                    if e["type"] == "round_cancelled")
        yield "cancelled"
        self.handle(Supervisor(at + 0.5, "end_shoe", by=SUPERVISOR))
        yield "shuffling"
