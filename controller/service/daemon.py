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

Journal retention (archiving closed, delivered shoes) and the full journal check after READY
run in child processes at idle priority, each waited for by a thread of its own
(``controller/durability/retention.py``, ``journal_check.py``): they read the whole journal,
which the owner loop must never wait for; the loop only tells retention that a shoe ended.

The timer is the queue's wait: the owner waits at most until ``machine.next_deadline()`` and
then handles a ``Tick``. While a deadline is pending the table clock is kept steady (on the
monotonic clock), so a wall-clock step neither shortens nor lengthens the betting countdown;
``ClockWatch`` (clock_watch.py) turns steps and the clock's synchronisation into ``clock``
inputs (docs/clock.md). The systemd watchdog is pinged from this same loop, so a stuck loop
stops the pings and systemd restarts us.

The daemon owns its collaborators, none of which knows the daemon: ``TableClock`` (clock.py),
``StatusBoard`` (status_board.py: the published snapshot, its watchers and ``STATUS=``),
``HeldInputs`` (held_inputs.py), ``TableControl`` (table_control.py: the control socket's
handler) and ``panel_leds`` (panel_leds.py: which buttons to light).
"""

from __future__ import annotations

import os
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
from controller import transports as transport_module
from controller.display.server import DisplayServer
from controller.durability.archive_resend import ArchiveSource
from controller.durability.journal import Journal, JournalCorrupt, JournalError
from controller.durability.outbox import Outbox
from controller.durability.recovery import RecoveryError, recover, recover_report
from controller.durability.retention import JournalRetention
from controller.durability.shoe_tags import open_shoe_tags
from controller.durability.wal_checkpoints import WalCheckpointer
from controller.service.clock.table_clock import TableClock
from controller.service.clock.time_sync import SyncReading, read_kernel_sync
from controller.service.clock.watch import ClockWatch
from controller.service.config.errors import EX_CONFIG, ConfigError
from controller.service.config.settings import Config
from controller.service.control.client import ControlConfigError, ControlError
from controller.service.control.handler import TableControl
from controller.service.control.last_actions import LAST_ACTIONS_KEPT, LastActions
from controller.service.control.server import ControlServer
from controller.service.display_link import DisplayStartError, start_display
from controller.service.held_inputs import HeldInputs
from controller.service.panel_leds import panel_leds
from controller.service.recovery_hooks import StartupProgress, log_recovery, save_checkpoint
from controller.service.status_board import StatusBoard, status_line
from controller.service.telemetry.health_reporter import HealthReporter, health_reporter_for
from controller.service.telemetry.logging_setup import bind_table_context
from controller.service.telemetry.metrics_writer import MetricsWriter, metrics_writer_for
from controller.service.telemetry.notify import Notifier
from controller.service.trust.history_guard import HistoryGuard
from controller.service.trust.journal_check import JournalCheck
from controller.service.trust.journal_trust import JournalUntrusted, mark_head, open_trusted_journal
from controller.service.trust.software_identity import current_identity
from controller.table.faults import JOURNAL_CHECK_FAILED
from controller.table.inputs import (
    BackendStatus,
    ControllerFault,
    Input,
    Software,
    Supervisor,
    Tick,
    with_time,
)
from controller.table.machine import MachineSettings, TableMachine
from controller.transports import TransportConfigError
from drivers import registry
from drivers.base import Driver, DriverConfigError

log = structlog.get_logger("pokdeng.daemon")

HOUSEKEEPING_S = 1.0          # longest the loop sleeps: storage retries, watchdog slack
STORAGE_RETRY_S = 5.0         # how often a failed journal is retried
EX_DATAERR = 65               # sysexits.h: the journal is corrupt or disagrees with the rules
#: what the stop on a forked history tells the supervisor (docs/install.md has the whole of it)
FORK_ADVICE = ("Do not deal on this state directory: restore the newest copy of it, or follow "
               "docs/install.md, \"A table whose history forked\"")
FLUSH_ON_STOP_S = 2.0         # how long a stop waits for the backends to catch up
#: device inputs already queued together (a burst of frames) share one journal transaction,
#: at most this many; a shoe's start or end closes a group (checkpoints, drivers' new shoe)
GROUP_MAX = 64
_GROUP_ENDS = frozenset({"shoe_started", "shoe_ended"})

#: builds a driver from the daemon's input sink and the table clock
DriverFactory = Callable[[Callable[[Input], None], Callable[[], float]], Driver]


@dataclass
class _Work:
    inp: Input
    reply: Future[dict[str, Any]] | None = None


_STOP = object()
_REPUBLISH = object()  # another thread's part of the status changed: publish it again


class StartupError(Exception):
    """The daemon cannot start; ``exit_status`` says how (78 = configuration)."""

    def __init__(self, message: str, exit_status: int = 1):
        super().__init__(message)
        self.exit_status = exit_status


class Daemon:
    """The table daemon. Build it, then call ``run()`` on the thread that is to own the table.

    ``drivers`` replaces the drivers named in the config (the demo hands in drivers wired to
    simulators); each is created by ``factory(sink, clock)``.
    """

    def __init__(self, config: Config, *, notifier: Notifier | None = None,
                 clock: TableClock | None = None,
                 drivers: Iterable[DriverFactory] | None = None,
                 transports: list[Any] | None = None,
                 time_sync: Callable[[], SyncReading] = read_kernel_sync):
        self.config: Config = config
        self.notifier: Notifier = notifier or Notifier()
        self.clock: TableClock = clock or TableClock()
        self.settings: MachineSettings = config.machine_settings()
        self._driver_factories: list[DriverFactory] | None = (
            list(drivers) if drivers is not None else None)
        self._transports_override: list[Any] | None = transports
        self.queue: queue.Queue[Any] = queue.Queue()
        # Created by start(), in this order; None until then (or if start failed before).
        self.machine: TableMachine | None = None
        self.journal: Journal | None = None
        self.outbox: Outbox | None = None
        self.transports: list[Any] = []
        self.history: HistoryGuard | None = None  # where the backends stand, held to the journal
        self._forked: str | None = None  # set when the history forked: stop, journal nothing
        self.drivers: list[Driver] = []
        self.retention: JournalRetention | None = None
        self.control_handler: TableControl | None = None
        self.control: ControlServer | None = None
        self.display: DisplayServer | None = None  # the dealer display, when configured
        self.health: HealthReporter | None = None  # the MQTT health topic (fleet view)
        self.metrics: MetricsWriter | None = None  # the node_exporter textfile
        self.board: StatusBoard = StatusBoard(self.clock, self.notifier)
        self.clock_watch: ClockWatch = ClockWatch(self.clock, time_sync)
        self.ready: threading.Event = threading.Event()  # set once READY=1 was sent
        self._last_at: float = 0.0
        self._stop: threading.Event = threading.Event()
        self._stopping: bool = False
        self._storage_fault: str | None = None
        self._storage_retry_at: float = 0.0
        self._held: HeldInputs = HeldInputs()
        self._watchdog_interval: float | None = self.notifier.watchdog_interval()
        self._watchdog_due: float = 0.0
        self._event_listeners: list[Callable[[list[dict[str, Any]]], None]] = []
        self._last_actions: LastActions = LastActions()
        self._leds: dict[str, bool] | None = None
        self.journal_check: JournalCheck | None = None
        self._check_finished = threading.Event()  # the check after READY has ended
        self.checkpointer: WalCheckpointer | None = None
        self._software: dict[str, str] | None = None  # set by start()
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
        self._stop.set()
        # From a signal handler the main thread may hold the queue's lock: post from a thread.
        threading.Thread(target=self.queue.put, args=(_STOP,), daemon=True).start()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set() or self._stopping

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
        return dict(self._software) if self._software else {"version": __version__}

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
        return EX_DATAERR if self._forked else 0

    def start(self) -> None:
        """Recover, catch up the clock, start outbox, drivers, retention and control socket,
        then READY=1: whatever a status answer reports exists before anyone can ask."""
        started = time.monotonic()
        os.makedirs(self.config.state_dir, exist_ok=True)
        journal, machine = self._recover()
        self._hold_history_to_the_backends()  # before this start journals anything
        self._last_at = float(machine.status().get("clock") or 0.0)
        self._last_actions = LastActions(
            (entry.input, entry.events)
            for entry in journal.recent_entries("supervisor", LAST_ACTIONS_KEPT)
            if isinstance(entry.input, Supervisor))
        self.clock.catch_up(self._last_at)
        self._journal_software(machine)
        # A betting deadline that passed while we were down closes betting now.
        self._handle(Tick(0.0))
        self.clock_watch.start(machine.clock_sync)
        self._watch_clock()
        self._publish(machine.status())
        # Checkpoints copy the WAL into the database and fsync it: not between two inputs.
        self.checkpointer = WalCheckpointer(self.config.journal_path).start()
        journal.leave_checkpoints_to_background(self.checkpointer.wal_bytes)
        try:
            self.outbox = self._start_outbox()
            # before the drivers: every input from the devices is counted
            self.metrics = metrics_writer_for(self.config, self.board, self.outbox, journal,
                                              self.software())
            self.drivers = self._create_drivers()
        except (TransportConfigError, DriverConfigError, ConfigError) as exc:
            raise StartupError(f"configuration: {exc}", EX_CONFIG) from None
        self._restore_shoe_tags(journal)
        for driver in self.drivers:
            driver.start()
        self._leds = None
        self._update_leds(self.snapshot())
        self.retention = self._start_retention()
        self.control_handler = TableControl(self.board, self.clock, self.submit, self._stop,
                                            self.outbox, self.retention)
        self.control = self._start_control(self.control_handler)
        self._start_display()
        self.health = health_reporter_for(self.config, self.board, self.outbox, journal,
                                          self.software())
        status = self.snapshot()
        log.info("ready", seconds=round(time.monotonic() - started, 3),
                 journal=self.config.journal_path, records=journal.record_count(),
                 last_seq=journal.last_event_seq(), state=status.get("state"),
                 software=self._software)
        self.notifier.ready(status_line(status))
        self.ready.set()
        self._ping_watchdog(force=True)
        # The chain before the checkpoint recovery started from is checked now, off this thread;
        # retention's first run waits for it to finish.
        key = self.journal.chain.key if self.journal is not None else None
        self.journal_check = JournalCheck(
            self.config.journal_path, on_change=lambda: self.queue.put(_REPUBLISH), key=key,
            finished=self._check_finished,
            on_failed=lambda reason: self.post(ControllerFault(0.0, JOURNAL_CHECK_FAILED,
                                                               reason)))
        self.journal_check.start()

    def _journal_software(self, machine: TableMachine) -> None:
        """Journal the software when it is not the journal's last: shoe_started names it and
        a change is announced (software_changed), from the journal, also in replay."""
        self._software = current_identity().as_dict()
        if machine.software != self._software:
            self._handle(Software(0.0, **self._software))

    def _recover(self) -> tuple[Journal, TableMachine]:
        try:
            self.journal = open_trusted_journal(self.config)  # key, head file, delivered
            report = recover_report(self.journal, self.settings,
                                    progress=StartupProgress(self.notifier))
            self.machine = report.machine
            log_recovery(report)
        except JournalUntrusted as exc:
            raise StartupError(f"cannot run on the journal: {exc}", exc.exit_status) from None
        except (JournalCorrupt, RecoveryError) as exc:
            # Restarting will not mend it: a person must look (journal verify/export).
            raise StartupError(f"cannot recover from the journal: {exc}", EX_DATAERR) from None
        except JournalError as exc:
            raise StartupError(f"journal {self.config.journal_path}: {exc}") from None
        except Exception as exc:
            raise StartupError(f"cannot recover from {self.config.journal_path}: {exc}") from None
        return self.journal, self.machine

    def _hold_history_to_the_backends(self) -> None:
        """Build the transports and hear where their backends stand before this start
        journals anything: a fork stops the start here (exit 65), before an id the backends
        already hold is issued again with another body (docs/backend.md)."""
        try:
            self.transports = self._transports_override if self._transports_override \
                is not None else build_transports(self.config)
        except TransportConfigError as exc:
            raise StartupError(f"configuration: {exc}", EX_CONFIG) from None
        self.history = HistoryGuard(self.config.journal_path, on_fork=self._history_forked)
        self.history.watch(self.transports)
        problem = self.history.wait_first(self.transports, self.config.backend_confirm_s)
        if problem:
            self._forked = problem
            raise StartupError(f"this table's history has forked: {problem}. {FORK_ADVICE}",
                               EX_DATAERR)
        self.history.start()

    def _history_forked(self, problem: str) -> None:
        """A backend that answered after the start holds another history (the guard's
        thread): stop at once, journal nothing more."""
        log.critical("this table's history has forked; stopping: it must not deal on",
                     problem=problem, advice=FORK_ADVICE)
        self._forked = problem
        self.request_stop()

    def _start_outbox(self) -> Outbox:
        transports = self.transports
        assert self.machine is not None
        assert self.journal is not None
        recorded_down = dict(self.machine.backends_unreachable)
        # Resends reach archived shoes through the archives retention writes, checked with
        # the journal's own key.
        archives = ArchiveSource.beside(self.config.journal_path, self.config.journal.archive_dir,
                                        self.journal.chain.key)
        outbox = Outbox(self.config.journal_path, transports,
                        on_backend_change=self._backend_changed,
                        known_unreachable=recorded_down, archives=archives)
        for name in sorted(set(recorded_down) - {t.name for t in transports}):
            # recorded unreachable, now gone from the config: nothing will report it back
            self.post(BackendStatus(0.0, name, True, "no longer configured"))
        outbox.start()
        return outbox

    def _backend_changed(self, name: str, reachable: bool, reason: str) -> None:
        """The outbox's report (a delivery thread): journaled like a device's status."""
        self.post(BackendStatus(0.0, name, reachable, reason))

    def _create_drivers(self) -> list[Driver]:
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

    def _restore_shoe_tags(self, journal: Journal) -> None:
        """A restart in the middle of a shoe: the drivers learn the tags it already gave."""
        tags = open_shoe_tags(journal)
        if tags:
            for driver in self.drivers:
                driver.restore_shoe_tags(tags)
            log.info("tags of the open shoe restored", tags=len(tags))  # a count, never a tag

    def _start_retention(self) -> JournalRetention | None:
        if not self.config.journal.archive:
            return None
        assert self.journal is not None
        retention = JournalRetention(
            self.config.journal_path, self.config.journal, self.settings,
            key=self.journal.chain.key, start_after=self._check_finished)
        retention.start()
        return retention

    def _start_control(self, handler: TableControl) -> ControlServer:
        settings = self.config.control
        control = ControlServer(settings.socket, handler, group=settings.group,
                                mode=settings.mode, supervisor_group=settings.supervisor_group,
                                max_clients=settings.max_clients)
        try:
            control.start()
        except ControlError as exc:
            status = EX_CONFIG if isinstance(exc, ControlConfigError) else 1
            raise StartupError(str(exc), status) from None
        return control

    def _start_display(self) -> None:
        """The dealer display, fed the journaled events and the published status."""
        if self.config.display is None:
            return
        try:
            self.display = start_display(self.config.display, self.board, self.clock,
                                         self.outbox, self.config.journal_path)
        except DisplayStartError as exc:
            # A screen is a nicety next to the money path: the table plays on without it.
            log.error("the dealer display is not shown", reason=str(exc))
            return
        self.add_event_listener(self.display.offer_events)

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
        if self._forked:
            # Nothing more goes into a forked history: what is queued is dropped, and said.
            log.error("stopping on a forked history: queued inputs not journaled",
                      queued=self.queue.qsize())
        # What the devices sent before they stopped was accepted: handle it, lose nothing.
        elif self.machine is not None and self.journal is not None:
            self._drain()
            if self._storage_fault:  # one last try for the held inputs
                self._retry_storage()
            if self._held:
                log.error("stopping with inputs that could not be journaled; they are lost",
                          held=len(self._held), kinds=self._held.kinds())
        if self.control is not None:
            self.control.close()
        if self.display is not None:
            self.display.close()
        if self.health is not None:
            self.health.stop()
        if self.retention is not None:
            self.retention.stop()
        if self.journal_check is not None:
            self.journal_check.stop()
        if self.history is not None:
            self.history.stop()
        if self.outbox is None:
            for transport in self.transports:  # built, never handed to an outbox
                transport.close()
        elif self._forked:
            self.outbox.stop()  # a forked history's events are not pushed out on the way down
        else:
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
        if self.metrics is not None:
            self.metrics.stop()  # the last figures, deliveries on the way down included
        if self.checkpointer is not None:
            self.checkpointer.stop()
        if self.journal is not None:
            if self.machine is not None and not self._storage_fault and not self._forked:
                mark_head(self.journal)  # where a clean stop left the journal
            self.journal.close()
        self.notifier.close()
        self.board.mark_stopped()
        log.info("stopped")

    def _drain(self) -> None:
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

    # -- the owner loop -----------------------------------------------------------------------
    # From here on start() has run: machine and journal exist.
    def _loop(self) -> None:
        assert self.machine is not None
        while not self._stop.is_set():
            try:
                item = self._next_item()
            except queue.Empty:
                item = None
            if item is _STOP or self._forked:
                break
            if isinstance(item, _Work) and item.reply is None:
                self._process_group(self._gather(item))
            elif isinstance(item, _Work):
                self._process(item)
            elif item is _REPUBLISH:
                self._republish()
            deadline = self.machine.next_deadline()
            if (deadline is not None and not self._storage_fault
                    and self.clock.now() >= deadline):
                self._handle(Tick(0.0))
            if self._storage_fault and time.monotonic() >= self._storage_retry_at:
                self._retry_storage()
            self._watch_clock()
            self._ping_watchdog()

    def _wait_seconds(self) -> float:
        assert self.machine is not None
        wait = HOUSEKEEPING_S
        deadline = self.machine.next_deadline()
        if deadline is not None and not self._storage_fault:
            wait = min(wait, self.clock.real_seconds(deadline - self.clock.now()))
        if self._watchdog_interval is not None:
            wait = min(wait, self._watchdog_due - time.monotonic())
        return max(0.0, wait)

    def _watch_clock(self) -> None:
        """Report wall-clock steps and synchronisation changes to the table (as inputs)."""
        assert self.machine is not None
        self.clock.keep_steady(self.machine.next_deadline() is not None)
        for report in self.clock_watch.reports():
            self._handle(report)

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

    def _process_group(self, inputs: list[Input]) -> None:
        """Device inputs that arrived together: each handled in order, all journaled in one
        transaction, then published. Whatever goes wrong undoes the group (the machine is
        rebuilt from the journal) and handles its inputs one by one, where every failure
        has its own path."""
        while inputs:
            if len(inputs) == 1 or self._storage_fault:
                for inp in inputs:
                    self._process(_Work(inp))
                return
            assert self.machine is not None and self.journal is not None
            entries: list[tuple[Input, list[dict[str, Any]]]] = []
            try:
                for inp in inputs:
                    stamped = self._stamp(inp)
                    events = self.machine.handle(stamped)
                    self.clock.keep_steady(self.machine.next_deadline() is not None)
                    entries.append((stamped, events))
                    if any(event["type"] in _GROUP_ENDS for event in events):
                        break
                self.journal.append_many(entries)
            except Exception:  # see the docstring: one by one, each on its own path
                self._rebuild()
                for inp in inputs:
                    self._process(_Work(inp))
                return
            self._after_journal(entries)
            inputs = inputs[len(entries):]

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
        self._rebuild()
        self._handle(ControllerFault(0.0, "controller_error", reason))
        return reason

    def _rebuild(self) -> TableMachine:
        """The machine as the journal has it: undoes whatever did not reach the disk."""
        assert self.journal is not None
        self.machine = recover(self.journal, self.settings)
        return self.machine

    def _stamp(self, inp: Input) -> Input:
        at = max(self.clock.now(), self._last_at)
        self._last_at = at
        return with_time(inp, at)

    def _handle(self, inp: Input) -> list[dict[str, Any]]:
        """Handle one input on the owner thread; returns the events it produced."""
        assert self.machine is not None and self.journal is not None
        if self._storage_fault:
            # The journal cannot take records: acting on input now would not survive a
            # restart. Keep it for when the journal works again (the table is stopped).
            self._keep_held(inp)
            return []
        stamped = self._stamp(inp)
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
            self._keep_held(inp, first=True)
            self._storage_failed(exc)
            return []
        self._after_journal([(stamped, events)])
        return events

    def _keep_held(self, inp: Input, first: bool = False) -> None:
        """Keep an input that cannot be journaled now; it is applied once the journal works."""
        self._held.keep(inp, first)
        if self._storage_fault:
            self._publish_storage_fault()

    def _after_journal(self, entries: list[tuple[Input, list[dict[str, Any]]]]) -> None:
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
        self._publish(status)

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
            if self.journal is not None:
                mark_head(self.journal)  # start-up refuses a journal cut behind this mark
        # Listeners first: whoever sees the new status may count on them having seen its events.
        for listener in self._event_listeners:
            try:
                listener(events)
            except Exception:
                log.exception("event listener failed")

    def _publish(self, status: dict[str, Any]) -> None:
        snapshot = dict(status)
        snapshot["table"] = self.config.table.table_id
        # the table's language: `watch` speaks it without being told (display.language)
        snapshot["language"] = self.config.display.language if self.config.display else "en"
        snapshot["storage_fault"] = self._storage_fault
        snapshot["journal"] = "unwritable" if self._storage_fault else "ok"
        snapshot["chain"] = self.journal.chain.describe() if self.journal else None
        snapshot["held_inputs"] = len(self._held)
        snapshot["dropped_inputs"] = self._held.dropped
        snapshot["last_actions"] = self._last_actions.recent()
        if self.journal_check is not None:
            snapshot["journal_check"] = self.journal_check.status()
        self.board.publish(snapshot)
        self._update_leds(snapshot)

    def _update_leds(self, status: dict[str, Any]) -> None:
        """Light the panel button that is the dealer's next step (where the panel has LEDs)."""
        leds = panel_leds(status, self.settings.reveal)
        if leds == self._leds:
            return
        self._leds = leds
        for driver in self.drivers:
            try:
                driver.set_leds(leds)
            except Exception as exc:  # an LED is a nicety; never stop the table for it
                log.warning("cannot set the panel LEDs", error=str(exc))

    # -- disk safety --------------------------------------------------------------------------
    def _storage_failed(self, exc: BaseException) -> None:
        """The journal refused a write: the machine is ahead of the disk. Undo and pause."""
        reason = f"journal write failed: {exc}"
        log.error("journal write failed; rebuilding the table from the journal and pausing",
                  error=str(exc))
        try:
            self._rebuild()
        except Exception as rebuild_exc:
            log.critical("cannot rebuild the table from the journal", error=str(rebuild_exc))
            raise
        self._storage_fault = reason
        self._storage_retry_at = time.monotonic()  # first retry right away: may be transient
        self._publish_storage_fault()

    def _republish(self) -> None:
        assert self.machine is not None
        if self._storage_fault:
            self._publish_storage_fault()
        else:
            self._publish(self.machine.status())

    def _publish_storage_fault(self) -> None:
        assert self.machine is not None
        self._publish(dict(self.machine.status(), paused=True,
                           fault={"code": "journal_unwritable", "reason": self._storage_fault}))

    def _retry_storage(self) -> None:
        """Try to journal the storage fault; once it sticks, the table runs from the journal."""
        assert self.machine is not None and self.journal is not None
        pause = self._stamp(ControllerFault(0.0, "journal_unwritable",
                                            self._storage_fault or "journal write failed"))
        events = self.machine.handle(pause)
        try:
            self.journal.append(pause, events)
        except (JournalError, OSError) as exc:
            self._rebuild()
            self._storage_retry_at = time.monotonic() + STORAGE_RETRY_S
            log.error("journal still cannot be written", error=str(exc))
            return
        log.warning("journal writable again; the table stays paused for the supervisor",
                    held=len(self._held))
        self._storage_fault = None
        self._after_journal([(pause, events)])
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
            self._process(_Work(self._held.take_first()))


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
    return [transport_module.create(kind, settings, table=config.table.table_id)
            for kind, settings in config.transports.items()]
