"""Helpers for the panel driver tests: a sink that records inputs and waits on conditions,
and a check that a test leaves no driver thread behind."""

from __future__ import annotations

import os
import pty
import select
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.table.inputs import Button, DeviceStatus, Switch
from support import waiting

WAIT = 5.0  # generous: the tests wait on conditions, never on fixed sleeps alone


class Collector:
    """An input sink (what the daemon's queue is to a driver) that tests can wait on."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._cond = threading.Condition()

    def __call__(self, inp: Any) -> None:
        with self._cond:
            self.items.append(inp)
            self._cond.notify_all()

    def snapshot(self) -> list[Any]:
        with self._cond:
            return list(self.items)

    def wait_for(self, predicate: Callable[[list[Any]], bool], timeout: float = WAIT,
                 what: str = "condition") -> list[Any]:
        waiting.wait_until(lambda: predicate(self.items), timeout, what, condition=self._cond,
                           details=lambda: f"inputs: {self.items}")
        return self.snapshot()

    def wait_count(self, kind: type, n: int, timeout: float = WAIT) -> list[Any]:
        self.wait_for(lambda items: len([i for i in items if isinstance(i, kind)]) >= n,
                      timeout, f"{n} {kind.__name__} input(s)")
        return self.of(kind)

    def of(self, kind: type) -> list[Any]:
        return [i for i in self.snapshot() if isinstance(i, kind)]


def summary(items: list[Any]) -> list[tuple]:
    """Inputs without their time stamps, for comparing sequences."""
    out: list[tuple] = []
    for inp in items:
        if isinstance(inp, Button):
            out.append(("button", inp.name))
        elif isinstance(inp, Switch):
            out.append(("switch", inp.name, inp.on))
        elif isinstance(inp, DeviceStatus):
            out.append(("device", inp.name, inp.connected))
        else:
            out.append((inp.kind,))
    return out


def driver_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("driver-") and t.is_alive()}


def wait_until(predicate: Callable[[], Any], timeout: float = WAIT, what: str = "condition") -> Any:
    """The shared wait, with the panels' default timeout."""
    return waiting.wait_until(predicate, timeout, what, interval=0.005)


class PtyPanel:
    """The panel end of a serial line: a pty whose other end is reachable at a stable path
    (a symlink, as udev gives /dev/pokdeng/panel), which can be unplugged and plugged back."""

    def __init__(self, path: Path):
        self.path = path
        self.master: int | None = None
        self._slave: int | None = None
        self._received = bytearray()

    def plug(self) -> None:
        self.master, self._slave = pty.openpty()  # keep a slave fd: master reads never see EIO
        tmp = self.path.with_suffix(".new")
        os.symlink(os.ttyname(self._slave), tmp)
        os.replace(tmp, self.path)
        self._received.clear()

    def unplug(self) -> None:
        if self.master is None:
            return
        os.close(self.master)
        os.close(self._slave)
        self.master = self._slave = None
        self.path.unlink(missing_ok=True)

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def expect(self, token: bytes, timeout: float = WAIT) -> None:
        """Wait until the host has written ``token`` (consumed from what it sent)."""
        deadline = time.monotonic() + timeout
        while token not in self._received:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"host never sent {token!r}; got {bytes(self._received)!r}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                self._received += os.read(self.master, 1024)
        index = self._received.index(token)
        del self._received[:index + len(token)]
