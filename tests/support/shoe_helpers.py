"""Shared by the shoe tests: a sink that records inputs and lets a test wait for them."""

from __future__ import annotations

import threading
from collections.abc import Callable

from controller.table.inputs import DeviceStatus, Input
from support.waiting import wait_until


class Collector:
    """An InputSink (and problem sink) that tests can wait on, instead of sleeping."""

    def __init__(self) -> None:
        self.inputs: list[Input] = []
        self.problems: list = []
        self._cond = threading.Condition()

    def __call__(self, inp: Input) -> None:
        with self._cond:
            self.inputs.append(inp)
            self._cond.notify_all()

    def problem(self, problem) -> None:
        with self._cond:
            self.problems.append(problem)
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[Collector], bool], timeout: float = 15.0) -> None:
        # the condition also re-checks every 50 ms: state that does not notify
        wait_until(lambda: predicate(self), timeout, "the shoe's inputs", condition=self._cond,
                   interval=0.05, details=lambda: f"inputs so far: {self.inputs!r}; "
                                                  f"problems: {[p.code for p in self.problems]}")

    @property
    def shoe_inputs(self) -> list[Input]:
        with self._cond:
            return [i for i in self.inputs if not isinstance(i, DeviceStatus)]

    @property
    def statuses(self) -> list[bool]:
        with self._cond:
            return [i.connected for i in self.inputs if isinstance(i, DeviceStatus)]

    def problem_codes(self) -> list[str]:
        with self._cond:
            return [p.code for p in self.problems]


def summary(inputs) -> list[tuple]:
    """What a shoe input says, without its time: (kind, card code or None)."""
    return [(i.kind, i.card.code if i.kind == "card" else None) for i in inputs]
