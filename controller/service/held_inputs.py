"""Held inputs: what the devices sent while the journal could not be written, in order.

A card already drawn is a fact, so it is kept until the journal works again and then applied
on the paused table. Only the kind of an input is ever logged: its card may be sealed.
"""

from __future__ import annotations

from collections import deque

import structlog

from controller.table.inputs import Input

log = structlog.get_logger("pokdeng.daemon")

HELD_INPUTS_MAX = 10_000      # inputs held in memory while the journal cannot be written


class HeldInputs:
    """The inputs waiting for the journal, bounded by ``cap``; beyond it each is dropped."""

    def __init__(self, cap: int | None = None):
        self.cap: int = HELD_INPUTS_MAX if cap is None else cap
        self.dropped: int = 0
        self._inputs: deque[Input] = deque()

    def __len__(self) -> int:
        return len(self._inputs)

    def kinds(self) -> list[str]:
        return sorted({inp.kind for inp in self._inputs})

    def keep(self, inp: Input, first: bool = False) -> None:
        """Keep ``inp`` (``first``: ahead of the rest, it came before them). Ticks only move
        the clock and are not kept; beyond the cap the input is dropped with an ERROR line."""
        if inp.kind == "tick":
            return
        if len(self._inputs) >= self.cap:
            self.dropped += 1
            log.error("input dropped: the journal cannot be written and the held inputs are "
                      "at their limit", kind=inp.kind, held=len(self._inputs),
                      dropped=self.dropped)
        elif first:
            self._inputs.appendleft(inp)
        else:
            self._inputs.append(inp)
            log.warning("input held: the journal cannot be written", kind=inp.kind,
                        held=len(self._inputs))

    def take_first(self) -> Input:
        return self._inputs.popleft()
