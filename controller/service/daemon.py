"""The daemon: one thread owns the table machine and feeds it from one queue.

Drivers, the betting timer, the control socket and signal handlers only *post* to the queue;
the owner thread (the one that calls ``run``) is the only one that touches the machine and
writes the journal. For each input the owner:

1. stamps it with the table clock, never earlier than the previous input (a non-decreasing
   clock, as the table-script contract requires);
2. lets the machine handle it and journals the input with its events in one transaction;
   if that write fails, the machine is rebuilt from the journal and the table stops with a
   storage fault, holding later inputs in order until a write succeeds (storage_fault.py);
3. wakes the outbox, publishes the sealed status (control socket, ``STATUS=``), binds
   table/shoe/round to the log context and logs the events (already sealed by the machine:
   no card value of a round before its betting closed; raw card inputs are never logged).

Journal retention (archiving closed, delivered shoes) and the full journal check after READY
run in child processes at idle priority, each waited for by a thread of its own
(``controller/durability/archives/retention.py``, ``journal_check.py``): they read the whole
journal, which the owner loop must never wait for; the loop only tells retention that a shoe
ended.

The timer is the queue's wait: the owner waits at most until ``machine.next_deadline()`` and
then handles a ``Tick``. While a deadline is pending the table clock is kept steady (on the
monotonic clock), so a wall-clock step neither shortens nor lengthens the betting countdown;
``ClockWatch`` (clock/watch.py) turns steps and the clock's synchronisation into ``clock``
inputs (docs/clock.md). The systemd watchdog is pinged from this same loop, so a stuck loop
stops the pings and systemd restarts us.

The daemon owns its collaborators, none of which imports the daemon (``StorageFault`` and the
start-up room call back through a Protocol): ``TableClock`` (clock/), ``StatusBoard``
(status_board.py: the published snapshot, its watchers and ``STATUS=``), ``StorageFault``
(storage_fault.py, with ``HeldInputs``), ``TableControl`` (control/handler.py: the control
socket's handler) and ``PanelLights`` (panel_leds.py: which buttons to light). Its way up and
down (recovery, backends, drivers, control socket, display, READY=1; the ordered shutdown) are
startup/'s; what remains here is the owner loop.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import structlog

from controller import __version__
from controller.durability.archives.retention import JournalRetention
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal, JournalError
from controller.durability.recovery import recover
from controller.durability.wal_checkpoints import WalCheckpointer
from controller.service.clock.table_clock import TableClock
from controller.service.clock.time_sync import SyncReading, read_kernel_sync
from controller.service.clock.watch import ClockWatch
from controller.service.config.settings import Config
from controller.service.control.handler import TableControl, supervisor_answer
from controller.service.control.last_actions import LAST_ACTIONS_KEPT, LastActions
from controller.service.control.server import ControlServer
from controller.service.panel_leds import PanelLights
from controller.service.recovery_hooks import save_checkpoint
from controller.service.screens.link import ScreenLink
from controller.service.startup import sequence
from controller.service.startup.failure import EX_DATAERR, StartupError
from controller.service.startup.parts import DriverFactory
from controller.service.startup.shutdown import shut_down
from controller.service.status_board import StatusBoard
from controller.service.storage_fault import StorageFault
from controller.service.telemetry.health_reporter import HealthReporter
from controller.service.telemetry.logging_setup import bind_table_context
from controller.service.telemetry.metrics_writer import MetricsWriter
from controller.service.telemetry.notify import Notifier
from controller.service.trust.head_marks import HeadMarks
from controller.service.trust.history_guard import HistoryGuard
from controller.service.trust.journal_check import JournalCheck
from controller.service.trust.journal_trust import mark_head
from controller.table.inputs import (
    ControllerFault,
    Input,
    Supervisor,
    Tick,
    with_time,
)
from controller.table.machine import MachineSettings, TableMachine
from drivers.base import Driver

#: the events after which the head file moves (durability/head_file.py): every round's end
#: and every shoe's end, so a lost journal tail is seen at start within a round
HEAD_MARKED_AT = frozenset({"round_result", "round_cancelled", "shoe_ended"})

log = structlog.get_logger("pokdeng.daemon")

HOUSEKEEPING_S = 1.0          # longest the loop sleeps: storage retries, watchdog slack
#: device inputs already queued together (a burst of frames) share one journal transaction,
#: at most this many; a shoe's start or end closes a group (checkpoints, drivers' new shoe)
GROUP_MAX = 64
_GROUP_ENDS = frozenset({"shoe_started", "shoe_ended"})


@dataclass
class _Work:
    inp: Input
    reply: Future[dict[str, Any]] | None = None


_STOP = object()
_REPUBLISH = object()  # another thread's part of the status changed: publish it again


class Daemon:
    """The table daemon. Build it, then call ``run()`` on the thread that is to own the table.

    ``drivers`` replaces the drivers named in the config (the demo hands in drivers wired to
    simulators); each is created by ``factory(sink, clock)``.
    """

    def __init__(self, config: Config, *, notifier: Notifier | None = None,
                 clock: TableClock | None = None,
                 drivers: Iterable[DriverFactory] | None = None,
                 transports: list[Any] | None = None,
                 time_sync: Callable[[], SyncReading] = read_kernel_sync,
                 screen_wrapper: list[str] | None = None):
        self.config: Config = config
        self.notifier: Notifier = notifier or Notifier()
        self.clock: TableClock = clock or TableClock()
        self.settings: MachineSettings = config.machine_settings()
        self.driver_factories: list[DriverFactory] | None = (
            list(drivers) if drivers is not None else None)
        self.transports_override: list[Any] | None = transports
        self.queue: queue.Queue[Any] = queue.Queue()
        # Set by start-up (startup/sequence.py), in its order; None until then (or if start
        # failed before).
        self.machine: TableMachine | None = None
        self.journal: Journal | None = None
        self.outbox: Outbox | None = None
        self.transports: list[Any] = []
        self.history: HistoryGuard | None = None  # where the backends stand, held to the journal
        self.forked: str | None = None  # set when the history forked: stop, journal nothing
        #: why it could not start, for a caller that runs it in-process (the demo says it)
        self.start_failure: str | None = None
        self.drivers: list[Driver] = []
        self.retention: JournalRetention | None = None
        self.control_handler: TableControl | None = None
        self.control: ControlServer | None = None
        #: the dealer display's screen process, when configured (controller/service/screens/)
        self.display: ScreenLink | None = None
        #: a command the screen process is started through (a test's recorder of its feed)
        self.screen_wrapper: list[str] | None = screen_wrapper
        self.health: HealthReporter | None = None  # the MQTT health topic (fleet view)
        self.metrics: MetricsWriter | None = None  # the node_exporter textfile
        self.checkpointer: WalCheckpointer | None = None
        self.journal_check: JournalCheck | None = None
        self.head_marks: HeadMarks | None = None  # the head file, written off this thread
        self.identity: dict[str, str] | None = None  # the software, journaled by start-up
        self.board: StatusBoard = StatusBoard(self.clock, self.notifier)
        self.clock_watch: ClockWatch = ClockWatch(self.clock, time_sync)
        self.storage: StorageFault = StorageFault(self)  # the journal refusing writes
        self.ready: threading.Event = threading.Event()  # set once READY=1 was sent
        self.stop_requested: threading.Event = threading.Event()
        self.check_finished = threading.Event()  # the check after READY has ended
        self._stopping: bool = False
        self._last_at: float = 0.0
        self._watchdog_interval: float | None = self.notifier.watchdog_interval()
        self._watchdog_due: float = 0.0
        self._event_listeners: list[Callable[[list[dict[str, Any]]], None]] = []
        self._last_actions: LastActions = LastActions()
        self._lights: PanelLights = PanelLights(self.settings.reveal)
        self.group_max: int = GROUP_MAX  # 1: one transaction per input (the benchmark's "before")
        self._pushed_back: Any = None    # taken from the queue behind a group: next in turn

    # -- posting (any thread) -----------------------------------------------------------------
    def post(self, inp: Input) -> None:
        """The drivers' sink: queue an input for the owner thread."""
        self.queue.put(_Work(inp))

    def submit(self, inp: Input) -> Future[dict[str, Any]]:
        """Queue an input and get a future resolved with the owner's answer."""
        future: Future[dict[str, Any]] = Future()
        self.queue.put(_Work(inp, future))
        return future

    def request_stop(self) -> None:
        """Ask the loop to stop; safe from any thread and from a signal handler."""
        self.stop_requested.set()
        # From a signal handler the main thread may hold the queue's lock: post from a thread.
        threading.Thread(target=self.queue.put, args=(_STOP,), daemon=True).start()

    @property
    def stopping(self) -> bool:
        return self.stop_requested.is_set() or self._stopping

    def republish_soon(self) -> None:
        """Another thread's part of the status changed: the owner publishes it again."""
        self.queue.put(_REPUBLISH)

    def add_event_listener(self, listener: Callable[[list[dict[str, Any]]], None]) -> None:
        """Called on the owner thread with each input's events once they are journaled."""
        self._event_listeners.append(listener)

    # -- the published status (the demo reads it here) ----------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return self.board.snapshot()

    def wait_for_change(self, version: int, timeout: float) -> tuple[int, dict[str, Any]]:
        return self.board.wait_for_change(version, timeout)

    def software(self) -> dict[str, Any]:
        """The software this daemon runs (version, digest), as health and metrics name it."""
        return dict(self.identity) if self.identity else {"version": __version__}

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
            self.start_failure = str(exc)
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
        return EX_DATAERR if self.forked else 0

    def start(self) -> None:
        """Recover, catch up the clock, start outbox, drivers, retention and control socket,
        then READY=1 (the steps and their order: startup/sequence.py)."""
        sequence.start(self)

    def _shutdown(self) -> None:
        """One idempotent way down: stop inputs, finish queued work, flush, close."""
        if self._stopping:
            return
        self._stopping = True
        shut_down(self)

    # -- start-up's steps on the owner thread (startup/sequence.py calls them) ---------------
    def resume(self, journal: Journal, machine: TableMachine) -> None:
        """The table clock and the supervisor's last actions where the journal left them."""
        self._last_at = float(machine.status().get("clock") or 0.0)
        self._last_actions = LastActions(
            (entry.input, entry.events)
            for entry in journal.recent_entries("supervisor", LAST_ACTIONS_KEPT)
            if isinstance(entry.input, Supervisor))
        self.clock.catch_up(self._last_at)

    def relight_panel(self) -> None:
        """Light the panel's LEDs afresh (the drivers just started: they know none yet)."""
        self._lights.forget()
        self._lights.show(self.snapshot(), self.drivers)

    # -- the owner loop -----------------------------------------------------------------------
    # From here on start() has run: machine and journal exist.
    def _loop(self) -> None:
        assert self.machine is not None
        while not self.stop_requested.is_set():
            try:
                item = self._next_item()
            except queue.Empty:
                item = None
            if item is _STOP or self.forked:
                break
            if isinstance(item, _Work) and item.reply is None:
                self._process_group(self._gather(item))
            elif isinstance(item, _Work):
                self._process(item)
            elif item is _REPUBLISH:
                self.storage.publish_status()
            deadline = self.machine.next_deadline()
            if (deadline is not None and not self.storage.reason
                    and self.clock.now() >= deadline):
                self.handle(Tick(0.0))
            if self.storage.retry_due():
                self.storage.retry()
            self.watch_clock()
            self.ping_watchdog()

    def _wait_seconds(self) -> float:
        assert self.machine is not None
        wait = HOUSEKEEPING_S
        deadline = self.machine.next_deadline()
        if deadline is not None and not self.storage.reason:
            wait = min(wait, self.clock.real_seconds(deadline - self.clock.now()))
        if self._watchdog_interval is not None:
            wait = min(wait, self._watchdog_due - time.monotonic())
        return max(0.0, wait)

    def drain(self) -> None:
        """Handle what is queued now, without waiting (the way down: shutdown calls it)."""
        while True:
            try:
                item = self._next_item(block=False)
            except queue.Empty:
                return
            if isinstance(item, _Work):
                self._process(item)

    def _next_item(self, block: bool = True) -> Any:
        """The item pushed back behind the last group, else the queue's next (queue.Empty
        when there is none in time)."""
        item, self._pushed_back = self._pushed_back, None
        if item is not None:
            return item
        if not block:
            return self.queue.get_nowait()
        return self.queue.get(timeout=self._wait_seconds())

    def _gather(self, first: _Work) -> list[Input]:
        """``first`` and the device inputs queued right behind it, up to ``group_max``; a
        supervisor's action (it waits for its answer) or a stop ends the group and is next."""
        inputs = [first.inp]
        while len(inputs) < self.group_max:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if not (isinstance(item, _Work) and item.reply is None):
                self._pushed_back = item
                break
            inputs.append(item.inp)
        return inputs

    def watch_clock(self) -> None:
        """Report wall-clock steps and synchronisation changes to the table (as inputs)."""
        assert self.machine is not None
        self.clock.keep_steady(self.machine.next_deadline() is not None)
        for report in self.clock_watch.reports():
            self.handle(report)

    def ping_watchdog(self, force: bool = False) -> None:
        if self._watchdog_interval is None:
            return
        now = time.monotonic()
        if force or now >= self._watchdog_due:
            self.notifier.watchdog()
            self._watchdog_due = now + self._watchdog_interval

    def _process(self, work: _Work) -> None:
        if self.storage.reason and work.reply is not None:
            # A supervisor sees the refusal and can act again later; only what the devices
            # already did is held.
            if not work.reply.done():
                work.reply.set_result(supervisor_answer([], self.storage.reason))
            return
        try:
            events = self.handle(work.inp)
        except Exception as exc:  # the loop must survive anything one input does
            reason = self._controller_failed(work.inp, exc)
            if work.reply is not None and not work.reply.done():
                work.reply.set_result({"ok": False, "error": reason})
            return
        if work.reply is not None and not work.reply.done():
            work.reply.set_result(supervisor_answer(events, self.storage.reason))

    def _process_group(self, inputs: list[Input]) -> None:
        """Device inputs that arrived together: each handled in order, all journaled in one
        transaction, then published. Whatever goes wrong undoes the group (the machine is
        rebuilt from the journal) and handles its inputs one by one, where every failure
        has its own path."""
        while inputs:
            if len(inputs) == 1 or self.storage.reason:
                for inp in inputs:
                    self._process(_Work(inp))
                return
            assert self.machine is not None and self.journal is not None
            entries: list[tuple[Input, list[dict[str, Any]]]] = []
            try:
                for inp in inputs:
                    stamped = self.stamp(inp)
                    events = self.machine.handle(stamped)
                    self.clock.keep_steady(self.machine.next_deadline() is not None)
                    entries.append((stamped, events))
                    if any(event["type"] in _GROUP_ENDS for event in events):
                        break
                self.journal.append_many(entries)
            except Exception:  # see the docstring: one by one, each on its own path
                self.rebuild()
                for inp in inputs:
                    self._process(_Work(inp))
                return
            self.after_journal(entries)
            inputs = inputs[len(entries):]

    def apply(self, inp: Input) -> None:
        """A device's input, handled as if it came from the queue (the held inputs)."""
        self._process(_Work(inp))

    def _controller_failed(self, inp: Input, exc: Exception) -> str:
        """A bug met an input: undo it (rebuild from the journal) and pause for the supervisor.

        The message names the exception's type only: its text or traceback might carry a
        sealed card value, so the details go to the log at DEBUG.
        """
        reason = (f"internal error ({type(exc).__name__}) while handling a {inp.kind} input; "
                  f"the input was not applied")
        log.error("input could not be handled; rebuilding from the journal and pausing",
                  kind=inp.kind, error_type=type(exc).__name__)
        log.debug("input failure details", exc_info=exc)
        self.rebuild()
        self.handle(ControllerFault(0.0, "controller_error", reason))
        return reason

    def rebuild(self) -> TableMachine:
        """The machine as the journal has it: undoes whatever did not reach the disk."""
        assert self.journal is not None
        self.machine = recover(self.journal, self.settings)
        return self.machine

    def stamp(self, inp: Input) -> Input:
        at = max(self.clock.now(), self._last_at)
        self._last_at = at
        return with_time(inp, at)

    def handle(self, inp: Input) -> list[dict[str, Any]]:
        """Handle one input on the owner thread; returns the events it produced."""
        assert self.machine is not None and self.journal is not None
        if self.storage.reason:
            # The journal cannot take records: acting on input now would not survive a
            # restart. Keep it for when the journal works again (the table is stopped).
            self.storage.keep(inp)
            return []
        stamped = self.stamp(inp)
        events = self.machine.handle(stamped)
        # A countdown runs on the monotonic clock, from the reading that started it.
        self.clock.keep_steady(self.machine.next_deadline() is not None)
        if not events and inp.kind == "tick":
            return []  # a tick that fired nothing need not be journaled
        try:
            self.journal.append(stamped, events)
        except (JournalError, OSError) as exc:
            # This input goes first when the journal works again: the held inputs are only
            # ever what came after it.
            self.storage.keep(inp, first=True)
            self.storage.failed(exc)
            return []
        self.after_journal([(stamped, events)])
        return events

    def after_journal(self, entries: list[tuple[Input, list[dict[str, Any]]]]) -> None:
        """What follows a commit of ``entries`` (inputs with their events, in order)."""
        assert self.machine is not None
        if self.outbox is not None and any(events for _, events in entries):
            assert self.journal is not None  # the outbox delivers what the journal committed
            # Committed: the delivery threads take them from memory, not from the disk.
            self.outbox.publish(self.journal.appended_events())
        status = self.machine.status()
        bind_table_context(self.config.table.table_id, status.get("shoe"), status.get("round"))
        for inp, events in entries:
            self._after_input(inp, events)
        self._mark_head(entries)
        self.publish(status)

    def _mark_head(self, entries: list[tuple[Input, list[dict[str, Any]]]]) -> None:
        """Move the head file (start-up refuses a journal cut behind it) when the group ends
        with a round's or a shoe's end. Only then: the mark is the journal's end, and a
        group's end after a round end may lie in the next round's open betting window, whose
        record hashes must not leave the journal (the head file is quoted at start)."""
        if self.journal is None or not entries or not any(
                event["type"] in HEAD_MARKED_AT for event in entries[-1][1]):
            return
        if self.head_marks is not None:
            self.head_marks.mark(self.journal)  # written off this thread
        else:
            mark_head(self.journal)

    def _after_input(self, inp: Input, events: list[dict[str, Any]]) -> None:
        assert self.machine is not None
        log.debug("input", kind=inp.kind, events=len(events))  # never the card itself
        if isinstance(inp, Supervisor):
            self._last_actions.record(inp, events)
        if self.metrics is not None:
            self.metrics.metrics.count(inp.kind, events)
        for event in events:
            log.info(event["type"], seq=event["seq"], data=event.get("data"))
            if event["type"] == "shoe_started":
                for driver in self.drivers:
                    driver.new_shoe()
            elif event["type"] == "shoe_ended" and self.retention is not None:
                self.retention.shoe_ended(event["seq"])
        if any(event["type"] == "shoe_ended" for event in events):
            # A group ends with its shoe's end: the machine is as this input left it.
            save_checkpoint(self.journal, self.machine)  # the next start replays from here
        # Listeners first: whoever sees the new status may count on them having seen its events.
        for listener in self._event_listeners:
            try:
                listener(events)
            except Exception:
                log.exception("event listener failed")

    def publish(self, status: dict[str, Any]) -> None:
        snapshot = dict(status)
        snapshot["table"] = self.config.table.table_id
        # the table's language: `watch` speaks it without being told (display.language)
        snapshot["language"] = self.config.display.language if self.config.display else "en"
        snapshot["storage_fault"] = self.storage.reason
        snapshot["journal"] = "unwritable" if self.storage.reason else "ok"
        snapshot["chain"] = self.journal.chain.describe() if self.journal else None
        snapshot["held_inputs"] = len(self.storage.held)
        snapshot["dropped_inputs"] = self.storage.held.dropped
        snapshot["last_actions"] = self._last_actions.recent()
        # a device that is NOT CONNECTED says why, when its driver knows (path, node, errno)
        snapshot["device_problems"] = {
            driver.device or driver.name: driver.access_problem
            for driver in self.drivers if driver.access_problem is not None}
        if self.journal_check is not None:
            snapshot["journal_check"] = self.journal_check.status()
        self.board.publish(snapshot)
        self._lights.show(snapshot, self.drivers)
