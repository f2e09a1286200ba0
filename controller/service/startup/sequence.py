"""The start-up steps, in their order: whatever a status answer reports exists before READY=1.

Recover the table from the journal; hear the backends before journaling anything (a forked
history stops here); journal the software; close a betting deadline that passed while we were
down; start checkpoints, outbox, metrics, drivers, retention, control socket, display and
health; then READY=1, and only after it the full journal check (off the owner thread).
Everything runs on the thread that calls ``Daemon.run`` (the owner), before its loop begins.
"""

from __future__ import annotations

import os
import time

import structlog

from controller.durability.journal import Journal, JournalCorrupt, JournalError
from controller.durability.recovery import RecoveryError, recover_report
from controller.durability.wal_checkpoints import WalCheckpointer
from controller.service.config.errors import EX_CONFIG, ConfigError
from controller.service.control.handler import TableControl
from controller.service.heap import set_start_up_aside
from controller.service.realtime import (
    card_path_threads,
    raise_card_path,
    shorten_lock_handover,
)
from controller.service.recovery_hooks import StartupProgress, log_recovery
from controller.service.startup.daemon_surface import TableDaemon
from controller.service.startup.failure import (
    EX_DATAERR,
    StartupError,
    fork_stop_message,
)
from controller.service.startup.parts import (
    build_transports,
    create_drivers,
    restore_shoe_tags,
    start_control,
    start_dealer_display,
    start_outbox,
    start_retention,
)
from controller.service.status_board import status_line
from controller.service.telemetry.health_reporter import health_reporter_for
from controller.service.telemetry.metrics_writer import metrics_writer_for
from controller.service.trust.head_marks import HeadMarks
from controller.service.trust.history_guard import HistoryGuard
from controller.service.trust.journal_check import JournalCheck
from controller.service.trust.journal_trust import JournalUntrusted, open_trusted_journal
from controller.service.trust.software_identity import current_identity
from controller.table.faults import JOURNAL_CHECK_FAILED
from controller.table.inputs import ControllerFault, Software, Tick
from controller.table.machine import TableMachine
from controller.transports import TransportConfigError
from drivers.base import DriverConfigError

log = structlog.get_logger("pokdeng.daemon")


def start(daemon: TableDaemon) -> None:
    """Recover, catch up the clock, start outbox, drivers, retention and control socket,
    then READY=1: whatever a status answer reports exists before anyone can ask."""
    started = time.monotonic()
    config = daemon.config
    os.makedirs(config.state_dir, exist_ok=True)
    journal, machine = recover(daemon)
    hold_history_to_the_backends(daemon)  # before this start journals anything
    daemon.head_marks = HeadMarks(journal).start()
    daemon.resume(journal, machine)
    journal_software(daemon, machine)
    # A betting deadline that passed while we were down closes betting now.
    daemon.handle(Tick(0.0))
    # From here on the daemon's machine, not recovery's: a journal write that failed above
    # rebuilt it from the journal (and the storage fault is what the status must say).
    assert daemon.machine is not None
    daemon.clock_watch.start(daemon.machine.clock_sync)
    daemon.watch_clock()
    daemon.storage.publish_status()
    # Checkpoints copy the WAL into the database and fsync it: not between two inputs.
    daemon.checkpointer = WalCheckpointer(config.journal_path, wal_bytes=config.wal_bytes).start()
    journal.leave_checkpoints_to_background(daemon.checkpointer.wal_bytes)
    journal.retry_busy_in_short_steps()
    try:
        daemon.outbox = start_outbox(
            config, daemon.transports, daemon.machine, journal, daemon.post,
            hold=daemon.history.waiting_for if daemon.history is not None else None)
        # before the drivers: every input from the devices is counted
        daemon.metrics = metrics_writer_for(config, daemon.board, daemon.outbox, journal,
                                            daemon.software())
        daemon.drivers = create_drivers(config, daemon.driver_factories, daemon.post,
                                        daemon.clock)
    except (TransportConfigError, DriverConfigError, ConfigError) as exc:
        raise StartupError(f"configuration: {exc}", EX_CONFIG) from None
    restore_shoe_tags(journal, daemon.drivers)
    for driver in daemon.drivers:
        # why a device will not open is the status's: published again at each change
        driver.on_access_problem = daemon.republish_soon
        driver.start()
    daemon.relight_panel()
    daemon.retention = start_retention(
        config, daemon.settings, journal, daemon.check_finished,
        check_failure=lambda: (daemon.journal_check.failure()
                               if daemon.journal_check is not None else None))
    daemon.control_handler = TableControl(daemon.board, daemon.clock, daemon.submit,
                                          daemon.stop_requested, daemon.outbox,
                                          daemon.retention)
    daemon.control = start_control(config, daemon.control_handler)
    daemon.display = start_dealer_display(config, daemon.board, daemon.clock, daemon.outbox,
                                          daemon.screen_wrapper)
    if daemon.display is not None:
        daemon.add_event_listener(daemon.display.offer_events)
    daemon.health = health_reporter_for(config, daemon.board, daemon.outbox, journal,
                                        daemon.software())
    # Cards come from here on: the collector no longer walks start-up's objects (heap.py), the
    # threads on their way take the real-time priority the config asks for, and the
    # interpreter lock changes hands sooner (realtime.py); start-up ran at the normal
    # priority and Python's own switch interval.
    frozen = set_start_up_aside()
    raise_card_path(card_path_threads(daemon.drivers, daemon.outbox), config.realtime_priority)
    switch_interval = shorten_lock_handover()
    status = daemon.snapshot()
    log.info("ready", seconds=round(time.monotonic() - started, 3),
             switch_interval_ms=round(switch_interval * 1000, 3), objects_frozen=frozen,
             journal=config.journal_path, records=journal.record_count(),
             last_seq=journal.last_event_seq(), state=status.get("state"),
             software=daemon.identity)
    daemon.notifier.ready(status_line(status))
    daemon.ready.set()
    daemon.ping_watchdog(force=True)
    # The chain before the checkpoint recovery started from is checked now, off this thread;
    # retention's first run waits for it to finish.
    key = daemon.journal.chain.key if daemon.journal is not None else None
    daemon.journal_check = JournalCheck(
        config.journal_path, on_change=daemon.republish_soon, key=key,
        finished=daemon.check_finished,
        on_failed=lambda reason: daemon.post(ControllerFault(0.0, JOURNAL_CHECK_FAILED,
                                                             reason)))
    daemon.journal_check.start()


def recover(daemon: TableDaemon) -> tuple[Journal, TableMachine]:
    """The trusted journal and the machine replayed from it, both set on the daemon as soon
    as they exist (shutdown closes a journal a failed recovery leaves open)."""
    config = daemon.config
    try:
        daemon.journal = open_trusted_journal(config)  # key, head file, delivered
        report = recover_report(daemon.journal, daemon.settings,
                                progress=StartupProgress(daemon.notifier))
        daemon.machine = report.machine
        log_recovery(report)
    except JournalUntrusted as exc:
        raise StartupError(f"cannot run on the journal: {exc}", exc.exit_status) from None
    except (JournalCorrupt, RecoveryError) as exc:
        # Restarting will not mend it: a person must look (journal verify/export).
        raise StartupError(f"cannot recover from the journal: {exc}", EX_DATAERR) from None
    except JournalError as exc:
        raise StartupError(f"journal {config.journal_path}: {exc}") from None
    except Exception as exc:
        raise StartupError(f"cannot recover from {config.journal_path}: {exc}") from None
    return daemon.journal, daemon.machine


def hold_history_to_the_backends(daemon: TableDaemon) -> None:
    """Build the transports and hear where their backends stand before this start
    journals anything: a fork stops the start here (exit 65), before an id the backends
    already hold is issued again with another body (docs/backend.md)."""
    try:
        daemon.transports = daemon.transports_override if daemon.transports_override \
            is not None else build_transports(daemon.config)
    except TransportConfigError as exc:
        raise StartupError(f"configuration: {exc}", EX_CONFIG) from None

    def history_forked(problem: str) -> None:
        """A backend that answered after the start holds another history (the guard's
        thread): stop at once, journal nothing more."""
        log.critical("a backend holds another history than this journal; stopping: it must "
                     "not deal on", problem=fork_stop_message(problem))
        daemon.forked = problem
        daemon.request_stop()

    daemon.history = HistoryGuard(daemon.config.journal_path, on_fork=history_forked)
    daemon.history.watch(daemon.transports)
    problem = daemon.history.wait_first(daemon.transports, daemon.config.backend_confirm_s)
    if problem:
        daemon.forked = problem
        raise StartupError(fork_stop_message(problem), EX_DATAERR)
    daemon.history.start()


def journal_software(daemon: TableDaemon, machine: TableMachine) -> None:
    """Journal the software when it is not the journal's last: shoe_started names it and
    a change is announced (software_changed), from the journal, also in replay."""
    daemon.identity = current_identity().as_dict()
    if machine.software != daemon.identity:
        daemon.handle(Software(0.0, **daemon.identity))
