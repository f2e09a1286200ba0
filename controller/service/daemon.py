"""The daemon: one thread owns the table machine and feeds it from one queue.

Drivers, the betting timer, the control socket and signal handlers only *post* to the queue;
the owner thread (the one that calls ``run``) is the only one that touches the machine and
writes the journal. For each input the owner:

1. stamps it with the table clock, never earlier than the previous input (a non-decreasing
   clock, as the table-script contract requires);
2. lets the machine handle it and journals the input with its events in one transaction;
   if that write fails, the in-memory machine may be ahead of the disk, so it is rebuilt from
   the journal and the table stops with a storage fault until a write succeeds again. Inputs
   that arrive meanwhile (a card already drawn is a fact) are *held*, in order, in memory; once
   the ``journal_unwritable`` pause is journaled they are applied through this same path, on a
   paused table, so nothing reaches the machine unjournaled and nothing is lost;
3. wakes the outbox, publishes the sealed status (control socket, ``STATUS=``), binds
   table/shoe/round to the log context and logs the events (already sealed by the machine:
   no card value of a round before its betting closed; raw card inputs are never logged).

Journal retention (archiving closed, delivered shoes) runs on its own thread
(``controller/durability/retention.py``): it replays the journal, which the owner loop must never wait
for; the loop only tells it that a shoe ended.

The timer is the queue's wait: the owner waits at most until ``machine.next_deadline()`` and
then handles a ``Tick``. The systemd watchdog is pinged from this same loop, so a stuck loop
stops the pings and systemd restarts us.
"""

from __future__ import annotations

import os
import queue
from collections import deque
import signal
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import structlog

from controller.service.config import EX_CONFIG, Config, ConfigError
from controller.table.inputs import Actor, ControllerFault, Input, Supervisor, Tick, with_time
from controller.service.last_actions import LAST_ACTIONS_KEPT, LastActions
from controller.service.logging_setup import bind_table_context
from controller.service.notify import Notifier

log = structlog.get_logger("pokdeng.daemon")

HOUSEKEEPING_S = 1.0          # longest the loop sleeps: storage retries, watchdog slack
STORAGE_RETRY_S = 5.0         # how often a failed journal is retried
EX_DATAERR = 65               # sysexits.h: the journal is corrupt or disagrees with the rules
FLUSH_ON_STOP_S = 2.0         # how long a stop waits for the backends to catch up
HELD_INPUTS_MAX = 10_000      # inputs held in memory while the journal cannot be written


class TableClock:
    """The table's clock in Unix seconds; ``speed`` > 1 runs table time faster (the demo).

    At speed 1 it is the wall clock. Otherwise table time advances ``speed`` table seconds per
    real (monotonic) second from ``start``.
    """

    def __init__(self, speed: float = 1.0, start: float | None = None):
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.speed = speed
        self._start = time.time() if start is None else start
        self._mono = time.monotonic()

    def __call__(self) -> float:
        return self.now()

    def now(self) -> float:
        if self.speed == 1.0:
            return time.time()
        return self._start + (time.monotonic() - self._mono) * self.speed

    def catch_up(self, table_time: float) -> None:
        """A fast clock restarted after a stop resumes from where the table was (demo)."""
        if self.speed != 1.0 and self.now() < table_time:
            self._start, self._mono = table_time, time.monotonic()

    def real_seconds(self, table_seconds: float) -> float:
        """Real seconds until ``table_seconds`` of table time have passed."""
        return table_seconds / self.speed


@dataclass
class _Work:
    inp: Input
    reply: Future | None = None


_STOP = object()


class StartupError(Exception):
    """The daemon cannot start; ``exit_status`` says how (78 = configuration)."""

    def __init__(self, message: str, exit_status: int = 1):
        super().__init__(message)
        self.exit_status = exit_status


def status_line(status: dict[str, Any]) -> str:
    """The one-line STATUS= text systemd shows (sealed: built from the sealed status)."""
    parts = [str(status.get("state", "?"))]
    if status.get("shoe") is not None:
        parts.append(f"shoe {status['shoe']}")
    if status.get("round") is not None:
        parts.append(f"round {status['round']}")
    if status.get("cards_left") is not None:
        parts.append(f"{status['cards_left']} cards left")
    fault = status.get("fault")
    if status.get("storage_fault"):
        parts.append(f"STORAGE FAULT: {status['storage_fault']}")
        if status.get("held_inputs"):
            parts.append(f"{status['held_inputs']} inputs held")
    elif status.get("paused"):
        reason = fault.get("reason") if isinstance(fault, dict) else None
        parts.append(f"PAUSED: {reason}" if reason else "PAUSED")
    devices = status.get("devices") or {}
    lost = [name for name, up in devices.items() if up is False]
    if lost:
        parts.append("lost: " + ", ".join(lost))
    return "; ".join(parts)


class Daemon:
    """The table daemon. Build it, then call ``run()`` on the thread that is to own the table.

    ``drivers`` replaces the drivers named in the config (the demo hands in drivers wired to
    simulators); each is created by ``factory(sink, clock)``.
    """

    def __init__(self, config: Config, *, notifier: Notifier | None = None,
                 clock: TableClock | None = None,
                 drivers: Iterable[Callable[[Callable[[Input], None], Callable[[], float]], Any]]
                 | None = None,
                 transports: list[Any] | None = None):
        self.config = config
        self.notifier = notifier or Notifier()
        self.clock = clock or TableClock()
        self._driver_factories = list(drivers) if drivers is not None else None
        self._transports_override = transports
        self.queue: "queue.Queue[Any]" = queue.Queue()
        self.machine: Any = None
        self.journal: Any = None
        self.outbox: Any = None
        self.control: Any = None
        self.retention: Any = None
        self.drivers: list[Any] = []
        self._last_at = 0.0
        self._stop = threading.Event()
        self._stopping = False
        self.ready = threading.Event()  # set once READY=1 was sent
        self._storage_fault: str | None = None
        self._storage_retry_at = 0.0
        # Inputs that arrived while the journal could not be written, in arrival order.
        self._held: deque[Input] = deque()
        self._held_dropped = 0
        self._watchdog_interval = self.notifier.watchdog_interval()
        self._watchdog_due = 0.0
        # The published snapshot: replaced whole by the owner, read by other threads.
        self._snapshot: dict[str, Any] = {"state": "starting"}
        self._version = 0
        self._changed = threading.Condition()
        self._event_listeners: list[Callable[[list[dict[str, Any]]], None]] = []
        self._change_listeners: list[Callable[[], None]] = []
        self._last_actions = LastActions()
        self._leds: dict[str, bool] | None = None
        self.settings = config.machine_settings()

    # -- posting (any thread) -----------------------------------------------------------------
    def post(self, inp: Input) -> None:
        """The drivers' sink: queue an input for the owner thread."""
        self.queue.put(_Work(inp))

    def submit(self, inp: Input) -> Future:
        """Queue an input and get a future resolved with the owner's answer."""
        future: Future = Future()
        self.queue.put(_Work(inp, future))
        return future

    def request_stop(self) -> None:
        """Ask the loop to stop; safe from any thread and from a signal handler."""
        self._stop.set()
        # From a signal handler the main thread may hold the queue's lock: post from a thread.
        threading.Thread(target=self.queue.put, args=(_STOP,), daemon=True).start()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set() or self._stopping

    def add_event_listener(self, listener: Callable[[list[dict[str, Any]]], None]) -> None:
        """Called on the owner thread with each input's events once they are journaled."""
        self._event_listeners.append(listener)

    # -- snapshot for the control socket and the demo -----------------------------------------
    def snapshot(self) -> dict[str, Any]:
        with self._changed:
            return self._snapshot

    def wait_for_change(self, version: int, timeout: float) -> tuple[int, dict[str, Any]]:
        with self._changed:
            if self._version == version:
                self._changed.wait(timeout)
            return self.control_snapshot()

    def control_snapshot(self) -> tuple[int, dict[str, Any]]:
        """The published status, its version and the table clock now (for watchers)."""
        with self._changed:
            snapshot = dict(self._snapshot)
            snapshot["now"] = self.clock.now()
            return self._version, snapshot

    def subscribe_changes(self, callback: Callable[[], None]) -> None:
        """``callback`` is called (on the owner thread; it must not block) at every change."""
        self._change_listeners.append(callback)

    def control_status(self) -> dict[str, Any]:
        status = dict(self.snapshot())
        status["now"] = self.clock.now()
        if self.outbox is not None:
            try:
                status["backend"] = self.outbox.status()
            except Exception as exc:  # status must answer even if the outbox is unwell
                status["backend"] = {"error": str(exc)}
        if self.retention is not None:
            status["journal_archive"] = self.retention.status()
        return status

    def control_watch_interval(self) -> float:
        # Heartbeats keep a dealer view's countdown honest; scaled for a fast demo clock.
        return max(0.05, min(1.0, self.clock.real_seconds(1.0)))

    def control_supervisor(self, action: str, card: str | None, by: Actor) -> Future:
        """Post a supervisor action taken by ``by``; the future holds the table's answer."""
        from controller.rules.cards import ACCEPTED_FORMS, CardCodeError, parse_card

        try:
            parsed = parse_card(card) if card is not None else None
        except CardCodeError:  # its message quotes the text, which may name a sealed card
            return _answered({"ok": False, "error": f"not a card code; accepted: {ACCEPTED_FORMS}"})
        if self._stop.is_set():
            return _answered({"ok": False, "error": "the daemon is stopping"})
        return self.submit(Supervisor(0.0, action, parsed, by))

    # -- lifecycle ----------------------------------------------------------------------------
    def run(self) -> int:
        """Start, serve until asked to stop, shut down; return the exit status."""
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: self.request_stop())
        try:
            self.start()
        except StartupError as exc:
            log.error("cannot start", reason=str(exc))
            self._shutdown()
            return exc.exit_status
        except Exception as exc:
            log.exception("cannot start", reason=str(exc))
            self._shutdown()
            return 1
        try:
            self._loop()
        finally:
            self._shutdown()
        return 0

    def start(self) -> None:
        """Recover, catch up the clock, start drivers, outbox and control socket, READY=1."""
        from controller.service.control import ControlConfigError, ControlError
        from controller.service.control_server import ControlServer
        from controller.durability.journal import Journal, JournalCorrupt, JournalError
        from controller.durability.recovery import RecoveryError, recover
        from controller.transports import TransportConfigError
        from drivers.base import DriverConfigError

        started = time.monotonic()
        os.makedirs(self.config.state_dir, exist_ok=True)
        try:
            self.journal = Journal(self.config.journal_path)
            self.machine = recover(self.journal, self.settings)
        except (JournalCorrupt, RecoveryError) as exc:
            # Restarting will not mend it: a person must look (journal verify/export).
            raise StartupError(f"cannot recover from the journal: {exc}", EX_DATAERR) from None
        except JournalError as exc:
            raise StartupError(f"journal {self.config.journal_path}: {exc}") from None
        except Exception as exc:
            raise StartupError(f"cannot recover from {self.config.journal_path}: {exc}") from None
        self._last_at = float(self.machine.status().get("clock") or 0.0)
        self._last_actions = LastActions(
            (entry.input, entry.events)
            for entry in self.journal.recent_entries("supervisor", LAST_ACTIONS_KEPT))
        self.clock.catch_up(self._last_at)
        # A betting deadline that passed while we were down closes betting now.
        self._handle(Tick(0.0))
        self._publish(self.machine.status())
        try:
            self._start_outbox()
            self.drivers = self._create_drivers()
        except (TransportConfigError, DriverConfigError, ConfigError) as exc:
            raise StartupError(f"configuration: {exc}", EX_CONFIG) from None
        for driver in self.drivers:
            driver.start()
        self._leds = None
        self._update_leds(self.snapshot())
        control = self.config.control
        self.control = ControlServer(control.socket, self, group=control.group, mode=control.mode,
                                     supervisor_group=control.supervisor_group,
                                     max_clients=control.max_clients)
        try:
            self.control.start()
        except ControlError as exc:
            self.control = None
            status = EX_CONFIG if isinstance(exc, ControlConfigError) else 1
            raise StartupError(str(exc), status) from None
        status = self.snapshot()
        log.info("ready", seconds=round(time.monotonic() - started, 3),
                 journal=self.config.journal_path, records=self.journal.record_count(),
                 last_seq=self.journal.last_event_seq(), state=status.get("state"))
        self.notifier.ready(status_line(status))
        self.ready.set()
        self._ping_watchdog(force=True)
        self._start_retention()

    def _start_retention(self) -> None:
        from controller.durability.retention import JournalRetention

        if not self.config.journal.archive:
            return
        self.retention = JournalRetention(self.config.journal_path, self.config.journal,
                                          self.settings)
        self.retention.start()

    def _start_outbox(self) -> None:
        from controller.durability.outbox import Outbox

        transports = self._transports_override
        if transports is None:
            transports = build_transports(self.config)
        self.outbox = Outbox(self.config.journal_path, transports)
        self.outbox.start()

    def _create_drivers(self) -> list[Any]:
        from drivers import registry

        if self._driver_factories is not None:
            return [factory(self.post, self.clock) for factory in self._driver_factories]
        # positional: the registry's own first parameter is called "name" too
        drivers = [registry.create(self.config.shoe.driver, self.post,
                                   self.config.shoe.driver_options(), self.clock, "shoe")]
        if self.config.panel is not None:
            drivers.append(registry.create(self.config.panel.driver, self.post,
                                           self.config.panel.driver_options(), self.clock,
                                           "panel"))
        return drivers

    def _shutdown(self) -> None:
        """One idempotent way down: stop inputs, finish queued work, flush, close."""
        if self._stopping:
            return
        self._stopping = True
        self.notifier.stopping("stopping")
        log.info("stopping")
        for driver in self.drivers:
            try:
                driver.stop()
            except Exception:
                log.exception("driver did not stop cleanly", driver=getattr(driver, "name", "?"))
        # What the devices sent before they stopped was accepted: handle it, lose nothing.
        if self.machine is not None and self.journal is not None:
            self._drain()
            if self._storage_fault:  # one last try for what is held
                self._retry_storage()
            if self._held:
                log.error("stopping with inputs that could not be journaled; they are lost",
                          held=len(self._held), kinds=sorted({i.kind for i in self._held}))
        if self.control is not None:
            self.control.close()
        if self.retention is not None:
            self.retention.stop()
        if self.outbox is not None:
            try:
                # Give the backends a moment to take what is journaled; the rest goes on the
                # next start (the outbox resumes from its delivered position).
                if self.journal is not None and not self.outbox.wait_delivered(
                        self.journal.last_event_seq(), FLUSH_ON_STOP_S):
                    log.warning("stopping with events not yet delivered",
                                backlog=self.outbox.status())
                self.outbox.stop()
            except Exception:
                log.exception("outbox did not stop cleanly")
        if self.journal is not None:
            self.journal.close()
        self.notifier.close()
        with self._changed:
            self._snapshot = dict(self._snapshot, state="stopped")
            self._version += 1
            self._changed.notify_all()
        log.info("stopped")

    def _drain(self) -> None:
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Work):
                self._process(item)

    # -- the owner loop -----------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                item = self.queue.get(timeout=self._wait_seconds())
            except queue.Empty:
                item = None
            if item is _STOP:
                break
            if isinstance(item, _Work):
                self._process(item)
            deadline = self.machine.next_deadline()
            if (deadline is not None and not self._storage_fault
                    and self.clock.now() >= deadline):
                self._handle(Tick(0.0))
            if self._storage_fault and time.monotonic() >= self._storage_retry_at:
                self._retry_storage()
            self._ping_watchdog()

    def _wait_seconds(self) -> float:
        wait = HOUSEKEEPING_S
        deadline = self.machine.next_deadline()
        if deadline is not None and not self._storage_fault:
            wait = min(wait, self.clock.real_seconds(deadline - self.clock.now()))
        if self._watchdog_interval is not None:
            wait = min(wait, self._watchdog_due - time.monotonic())
        return max(0.0, wait)

    def _ping_watchdog(self, force: bool = False) -> None:
        if self._watchdog_interval is None:
            return
        now = time.monotonic()
        if force or now >= self._watchdog_due:
            self.notifier.watchdog()
            self._watchdog_due = now + self._watchdog_interval

    def _process(self, work: _Work) -> None:
        if self._storage_fault and work.reply is not None:
            # A supervisor sees the refusal and can act again later; only what the devices
            # already did is held.
            if not work.reply.done():
                work.reply.set_result(supervisor_answer([], self._storage_fault))
            return
        try:
            events = self._handle(work.inp)
        except Exception as exc:  # the loop must survive anything one input does
            reason = self._controller_failed(work.inp, exc)
            if work.reply is not None and not work.reply.done():
                work.reply.set_result({"ok": False, "error": reason})
            return
        if work.reply is not None and not work.reply.done():
            work.reply.set_result(supervisor_answer(events, self._storage_fault))

    def _controller_failed(self, inp: Input, exc: Exception) -> str:
        """A bug met an input: undo it (rebuild from the journal) and pause for the supervisor.

        The message names the exception's type only: its text or traceback might carry a
        sealed card value, so the details go to the log at DEBUG.
        """
        from controller.durability.recovery import recover

        reason = (f"internal error ({type(exc).__name__}) while handling a {inp.kind} input; "
                  f"the input was not applied")
        log.error("input could not be handled; rebuilding from the journal and pausing",
                  kind=inp.kind, error_type=type(exc).__name__)
        log.debug("input failure details", exc_info=exc)
        self.machine = recover(self.journal, self.settings)
        self._handle(ControllerFault(0.0, "controller_error", reason))
        return reason

    def _stamp(self, inp: Input) -> Input:
        at = max(self.clock.now(), self._last_at)
        self._last_at = at
        return with_time(inp, at)

    def _handle(self, inp: Input) -> list[dict[str, Any]]:
        """Handle one input on the owner thread; returns the events it produced."""
        from controller.durability.journal import JournalError

        if self._storage_fault:
            # The journal cannot take records: acting on input now would not survive a
            # restart. Keep it for when the journal works again (the table is stopped).
            self._hold(inp)
            return []
        stamped = self._stamp(inp)
        events = self.machine.handle(stamped)
        if not events and inp.kind == "tick":
            return []  # a tick that fired nothing need not be journaled
        try:
            self.journal.append(stamped, events)
        except (JournalError, OSError) as exc:
            # This input goes first when the journal works again: what is held is only ever
            # what came after it.
            self._hold(inp, first=True)
            self._storage_failed(exc)
            return []
        self._after_journal(stamped, events)
        return events

    def _hold(self, inp: Input, first: bool = False) -> None:
        """Keep an input that cannot be journaled now; it is applied once the journal works.

        Ticks only move the clock and are not kept. Beyond ``HELD_INPUTS_MAX`` each input is
        dropped with an ERROR line naming its kind (never a card value: it may be sealed).
        """
        if inp.kind == "tick":
            return
        if len(self._held) >= HELD_INPUTS_MAX:
            self._held_dropped += 1
            log.error("input dropped: the journal cannot be written and the hold is full",
                      kind=inp.kind, held=len(self._held), dropped=self._held_dropped)
        elif first:
            self._held.appendleft(inp)
        else:
            self._held.append(inp)
            log.warning("input held: the journal cannot be written", kind=inp.kind,
                        held=len(self._held))
        if self._storage_fault:
            self._publish_storage_fault()

    def _after_journal(self, inp: Input, events: list[dict[str, Any]]) -> None:
        if events and self.outbox is not None:
            self.outbox.notify()
        status = self.machine.status()
        bind_table_context(self.config.table.table_id, status.get("shoe"), status.get("round"))
        log.debug("input", kind=inp.kind, events=len(events))  # never the card itself
        if isinstance(inp, Supervisor):
            self._last_actions.record(inp, events)
        for event in events:
            log.info(event["type"], seq=event["seq"], data=event.get("data"))
            if event["type"] == "shoe_started":
                self._tell_drivers_new_shoe()
            elif event["type"] == "shoe_ended" and self.retention is not None:
                self.retention.shoe_ended(event["seq"])
        # Listeners first: whoever sees the new status may count on them having seen its events.
        for listener in self._event_listeners:
            try:
                listener(events)
            except Exception:
                log.exception("event listener failed")
        self._publish(status)

    def _tell_drivers_new_shoe(self) -> None:
        for driver in self.drivers:
            new_shoe = getattr(driver, "new_shoe", None)
            if callable(new_shoe):
                new_shoe()

    def _publish(self, status: dict[str, Any]) -> None:
        snapshot = dict(status)
        snapshot["table"] = self.config.table.table_id
        snapshot["storage_fault"] = self._storage_fault
        snapshot["journal"] = "unwritable" if self._storage_fault else "ok"
        snapshot["held_inputs"] = len(self._held)
        snapshot["dropped_inputs"] = self._held_dropped
        snapshot["last_actions"] = self._last_actions.recent()
        with self._changed:
            self._snapshot = snapshot
            self._version += 1
            self._changed.notify_all()
        for listener in self._change_listeners:
            listener()
        self.notifier.status(status_line(snapshot))
        self._update_leds(snapshot)

    def _update_leds(self, status: dict[str, Any]) -> None:
        """Light the panel button that is the dealer's next step (where the panel has LEDs)."""
        running = not status.get("paused") and not status.get("storage_fault")
        state = status.get("state")
        leds = {"new_shoe": running and state == "no_shoe",
                "start_round": running and state == "ready",
                "reveal": running and state == "revealing" and self.settings.reveal == "button"}
        if leds == self._leds:
            return
        self._leds = leds
        for driver in self.drivers:
            set_leds = getattr(driver, "set_leds", None)
            if callable(set_leds):
                try:
                    set_leds(leds)
                except Exception as exc:  # an LED is a nicety; never stop the table for it
                    log.warning("cannot set the panel LEDs", error=str(exc))

    # -- disk safety --------------------------------------------------------------------------
    def _storage_failed(self, exc: BaseException) -> None:
        """The journal refused a write: the machine is ahead of the disk. Undo and pause."""
        from controller.durability.recovery import recover

        reason = f"journal write failed: {exc}"
        log.error("journal write failed; rebuilding the table from the journal and pausing",
                  error=str(exc))
        try:
            self.machine = recover(self.journal, self.settings)
        except Exception as rebuild_exc:
            log.critical("cannot rebuild the table from the journal", error=str(rebuild_exc))
            raise
        self._storage_fault = reason
        self._storage_retry_at = time.monotonic()  # first retry right away: may be transient
        self._publish_storage_fault()

    def _publish_storage_fault(self) -> None:
        self._publish(dict(self.machine.status(), paused=True,
                           fault={"code": "journal_unwritable", "reason": self._storage_fault}))

    def _retry_storage(self) -> None:
        """Try to journal the storage fault; once it sticks, the table runs from the journal."""
        from controller.durability.journal import JournalError

        pause = self._stamp(ControllerFault(0.0, "journal_unwritable",
                                            self._storage_fault or "journal write failed"))
        events = self.machine.handle(pause)
        try:
            self.journal.append(pause, events)
        except (JournalError, OSError) as exc:
            from controller.durability.recovery import recover

            self.machine = recover(self.journal, self.settings)
            self._storage_retry_at = time.monotonic() + STORAGE_RETRY_S
            log.error("journal still cannot be written", error=str(exc))
            return
        log.warning("journal writable again; the table stays paused for the supervisor",
                    held=len(self._held))
        self._storage_fault = None
        self._after_journal(pause, events)
        self._apply_held()

    def _apply_held(self) -> None:
        """Apply the held inputs in arrival order, each journaled first, on the paused table.

        They are stamped now (the table clock never runs backwards past the pause); the
        machine treats e.g. a card during a pause as a fault, and the supervisor decides.
        If the journal fails again the rest stay held, in order.
        """
        if self._held:
            log.warning("applying the inputs held while the journal could not be written",
                        held=len(self._held))
        while self._held and not self._storage_fault:
            self._process(_Work(self._held.popleft()))


def _answered(answer: dict[str, Any]) -> Future:
    future: Future = Future()
    future.set_result(answer)
    return future


def supervisor_answer(events: list[dict[str, Any]], storage_fault: str | None) -> dict[str, Any]:
    """The control socket's answer to a supervisor action, from the events it produced."""
    if storage_fault:
        return {"ok": False, "error": f"not done: {storage_fault}"}
    rejected = [e for e in events if e.get("type") == "input_rejected"]
    if rejected:
        data = rejected[0].get("data") or {}
        return {"ok": False, "error": data.get("reason") or "rejected by the table",
                "events": [e["type"] for e in events]}
    if not events:
        return {"ok": False, "error": "nothing to do in the table's current state"}
    return {"ok": True, "events": [e["type"] for e in events]}


def build_transports(config: Config) -> list[Any]:
    """The configured transports, created through controller.transports."""
    from controller import transports as transport_module

    return [transport_module.create(kind, settings, table=config.table.table_id)
            for kind, settings in config.transports.items()]
