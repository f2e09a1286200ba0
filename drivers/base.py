"""The driver contract: a driver turns a device's bytes into table inputs posted to a sink.

Drivers never touch the table machine. Each runs its own thread(s), owns its reconnects, and
reports device trouble as ``DeviceStatus`` inputs and log lines, never by dying (a thread body
that fails unexpectedly is logged and run again, later each time); while
its device cannot be opened, ``access_problem`` says why (not journaled: it is the status's, for
the person at the table) and ``on_access_problem`` is called at each change.
``stop()`` is idempotent and safe from any thread; a driver is also a context manager.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from controller.table.inputs import Input

InputSink = Callable[[Input], None]
Clock = Callable[[], float]

#: a driver's thread body that fails unexpectedly is run again after this, doubling up to the
#: most: the failure is logged with its traceback each time, never left to stop the table
RESTART_FIRST_S = 1.0
RESTART_MOST_S = 30.0


class DriverError(Exception):
    """Base of driver errors."""


class DriverConfigError(DriverError):
    """A driver's options are wrong; the message names the option.

    ``problems`` holds ``(option, what is wrong)`` pairs, ``option`` being the key inside the
    driver's options (``buttons.reveal``) or None for the options as a whole, so the daemon's
    config can name each under its own key path (``panel.buttons.reveal: …``).
    """

    def __init__(self, message: str, option: str | None = None, problem: str | None = None,
                 *, problems: list[tuple[str | None, str]] | None = None):
        super().__init__(message)
        self.problems = list(problems) if problems is not None else [(option, problem or message)]


class DeviceUnavailable(DriverError):
    """The device could not be opened or went away."""


class Driver(ABC):
    """Base of every device driver.

    Subclasses implement ``_run(stop_event)``: the body of the driver's thread, which loops
    until ``stop_event`` is set. The base starts and joins the thread, turns an escaping
    exception into a disconnected ``DeviceStatus``, a log line and a later run of the body
    again, and makes stop idempotent.
    """

    #: which table device this driver serves: "shoe" or "panel"
    device: str = ""

    def __init__(self, sink: InputSink, options: Mapping[str, Any] | None = None,
                 clock: Clock = time.time, name: str | None = None):
        self.sink = sink
        self.options = dict(options or {})
        self.clock = clock
        self.name = name or self.device or type(self).__name__
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._lock = threading.Lock()
        self._access_problem: str | None = None
        #: called from the driver's thread when ``access_problem`` changed (the daemon
        #: publishes its status again)
        self.on_access_problem: Callable[[], None] = lambda: None

    @property
    def access_problem(self) -> str | None:
        """Why the device cannot be opened now (path, node, errno: drivers/device_access.py);
        None while it is open or before the first try."""
        return self._access_problem

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> list[tuple[str | None, str]]:
        """What is wrong with ``options``, as ``DriverConfigError.problems``; [] when nothing.

        Builds the driver without starting it: a constructor parses its options and opens no
        device (the contract every driver keeps), so the config and the daemon share one check.
        """
        try:
            cls(lambda inp: None, options)
        except DriverConfigError as exc:
            return exc.problems
        return []

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._thread_main, name=f"driver-{self.name}", daemon=True
            )
            self._thread.start()

    @property
    def thread(self) -> threading.Thread | None:
        """The reader thread, once started (the daemon raises its priority: realtime.py)."""
        return self._thread

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self._stop_event.set()
            thread = self._thread
        self._wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> Driver:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- told by the daemon (no-ops unless the device cares) ---------------------------------
    def new_shoe(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """The table started a shoe: forget whatever belonged to the last one."""

    def restore_shoe_tags(self, tags: Iterable[str]) -> None:  # noqa: B027 - optional hook
        """The daemon restarted in the middle of a shoe: the tags it has read so far (from the
        journal), so a card that comes back is still a duplicate."""

    def set_leds(self, states: Mapping[str, bool]) -> None:  # noqa: B027 - optional hook
        """Light (True) or darken (False) the named buttons' LEDs, where the device has any."""

    # -- for subclasses -----------------------------------------------------------------------
    def _set_access_problem(self, problem: str | None) -> None:
        if problem != self._access_problem:
            self._access_problem = problem
            self.on_access_problem()

    def post(self, inp: Input) -> None:
        """Hand an input to the sink (the daemon's queue)."""
        self.sink(inp)

    def _wake(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Interrupt a blocking read so the thread sees the stop; override where needed."""

    @abstractmethod
    def _run(self, stop: threading.Event) -> None:
        """Thread body; return when ``stop`` is set."""

    def _thread_main(self) -> None:
        import logging

        from controller.table.inputs import DeviceStatus

        log = logging.getLogger(f"pokdeng.drivers.{self.name}")
        backoff = RESTART_FIRST_S
        while not self._stop_event.is_set():
            try:
                self._run(self._stop_event)
                return
            except Exception:  # neither silent nor final: a table without its shoe cannot deal
                log.exception("driver %s stopped by an unexpected error; restarting it in "
                              "%g s", self.name, backoff)
                if self.device:
                    self.post(DeviceStatus(self.clock(), self.device, False))
            self._stop_event.wait(backoff)
            backoff = min(backoff * 2, RESTART_MOST_S)
