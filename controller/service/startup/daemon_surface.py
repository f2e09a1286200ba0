"""What start-up and shutdown see of the daemon: its parts (which they set and close) and the
few owner-loop steps start-up runs on the owner thread before the loop begins.

A Protocol, so that this room never imports the daemon (no import circle): ``Daemon`` in
controller/service/daemon.py is the one thing that has this shape.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

from controller.durability.archives.retention import JournalRetention
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.durability.wal_checkpoints import WalCheckpointer
from controller.service.clock.table_clock import TableClock
from controller.service.clock.watch import ClockWatch
from controller.service.config.settings import Config
from controller.service.control.handler import TableControl
from controller.service.control.server import ControlServer
from controller.service.screens.link import ScreenLink
from controller.service.startup.parts import DriverFactory
from controller.service.status_board import StatusBoard
from controller.service.storage_fault import StorageFault
from controller.service.telemetry.health_reporter import HealthReporter
from controller.service.telemetry.metrics_writer import MetricsWriter
from controller.service.telemetry.notify import Notifier
from controller.service.trust.head_marks import HeadMarks
from controller.service.trust.history_guard import HistoryGuard
from controller.service.trust.journal_check import JournalCheck
from controller.table.inputs import Input
from controller.table.machine import MachineSettings, TableMachine
from drivers.base import Driver


class TableDaemon(Protocol):
    """The daemon as its way up and way down use it."""

    # given at construction
    config: Config
    notifier: Notifier
    clock: TableClock
    settings: MachineSettings
    driver_factories: list[DriverFactory] | None
    transports_override: list[Any] | None
    queue: queue.Queue[Any]
    board: StatusBoard
    clock_watch: ClockWatch
    storage: StorageFault
    ready: threading.Event
    stop_requested: threading.Event
    check_finished: threading.Event
    # set by start-up, in its order; None (or empty) until then
    journal: Journal | None
    machine: TableMachine | None
    transports: list[Any]
    history: HistoryGuard | None
    forked: str | None
    identity: dict[str, str] | None
    checkpointer: WalCheckpointer | None
    outbox: Outbox | None
    metrics: MetricsWriter | None
    drivers: list[Driver]
    retention: JournalRetention | None
    control_handler: TableControl | None
    control: ControlServer | None
    display: ScreenLink | None
    screen_wrapper: list[str] | None
    health: HealthReporter | None
    journal_check: JournalCheck | None
    head_marks: HeadMarks | None

    # any thread
    def post(self, inp: Input) -> None: ...
    def submit(self, inp: Input) -> Future[dict[str, Any]]: ...
    def request_stop(self) -> None: ...
    def republish_soon(self) -> None: ...
    def add_event_listener(self, listener: Callable[[list[dict[str, Any]]], None]) -> None: ...
    def snapshot(self) -> dict[str, Any]: ...
    def software(self) -> dict[str, Any]: ...

    # the owner thread's steps
    def resume(self, journal: Journal, machine: TableMachine) -> None: ...
    def handle(self, inp: Input) -> list[dict[str, Any]]: ...
    def watch_clock(self) -> None: ...
    def publish(self, status: dict[str, Any]) -> None: ...
    def relight_panel(self) -> None: ...
    def ping_watchdog(self, force: bool = False) -> None: ...
    def drain(self) -> None: ...
