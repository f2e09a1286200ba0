"""The parts start-up builds around the owner loop, each from the config and what it is
handed: transports, outbox, drivers, retention, control socket, dealer display.

Nothing here knows the daemon; the order they are built in is ``sequence.py``'s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import structlog

from controller import transports as transport_module
from controller.durability.archives.archive_resend import ArchiveSource
from controller.durability.archives.retention import JournalRetention
from controller.durability.delivery.outbox import DeliveryHold, Outbox
from controller.durability.journal import Journal
from controller.durability.shoe_tags import open_shoe_tags
from controller.service.clock.table_clock import TableClock
from controller.service.config.errors import EX_CONFIG
from controller.service.config.settings import Config
from controller.service.control.client import ControlConfigError, ControlError
from controller.service.control.handler import TableControl
from controller.service.control.server import ControlServer
from controller.service.display_link import backend_backlog, shoe_history
from controller.service.screens.link import ScreenLink, ScreenStartError
from controller.service.startup.failure import StartupError
from controller.service.status_board import StatusBoard
from controller.table.inputs import BackendStatus, Input
from controller.table.machine import MachineSettings, TableMachine
from drivers import registry
from drivers.base import Driver

log = structlog.get_logger("pokdeng.daemon")

#: builds a driver from the daemon's input sink and the table clock
DriverFactory = Callable[[Callable[[Input], None], Callable[[], float]], Driver]


def build_transports(config: Config) -> list[Any]:
    """The configured transports, created through controller.transports."""
    return [transport_module.create(kind, settings, table=config.table.table_id)
            for kind, settings in config.transports.items()]


def start_outbox(config: Config, transports: list[Any], machine: TableMachine,
                 journal: Journal, post: Callable[[Input], None],
                 hold: DeliveryHold | None = None) -> Outbox:
    """The outbox on the journal, started; a backend's reachability comes back as an input.
    ``hold``: why a transport's events must wait (its backend has not said where it stands)."""
    recorded_down = dict(machine.backends_unreachable)
    # Resends reach archived shoes through the archives retention writes, checked with
    # the journal's own key.
    archives = ArchiveSource.beside(config.journal_path, config.journal.archive_dir,
                                    journal.chain.key)

    def backend_changed(name: str, reachable: bool, reason: str) -> None:
        """The outbox's report (a delivery thread): journaled like a device's status."""
        post(BackendStatus(0.0, name, reachable, reason))

    outbox = Outbox(config.journal_path, transports,
                    on_backend_change=backend_changed,
                    known_unreachable=recorded_down, archives=archives, hold=hold)
    for name in sorted(set(recorded_down) - {t.name for t in transports}):
        # recorded unreachable, now gone from the config: nothing will report it back
        post(BackendStatus(0.0, name, True, "no longer configured"))
    outbox.start()
    return outbox


def create_drivers(config: Config, factories: list[DriverFactory] | None,
                   post: Callable[[Input], None], clock: TableClock) -> list[Driver]:
    """The drivers handed in (the demo's), else the shoe and panel the config names."""
    if factories is not None:
        return [factory(post, clock) for factory in factories]
    # positional: the registry's own first parameter is called "name" too
    drivers = [registry.create(config.shoe.driver, post,
                               config.shoe.driver_options(), clock, "shoe")]
    if config.panel is not None:
        drivers.append(registry.create(config.panel.driver, post,
                                       config.panel.driver_options(), clock, "panel"))
    return drivers


def restore_shoe_tags(journal: Journal, drivers: list[Driver]) -> None:
    """A restart in the middle of a shoe: the drivers learn the tags it already gave."""
    tags = open_shoe_tags(journal)
    if tags:
        for driver in drivers:
            driver.restore_shoe_tags(tags)
        log.info("tags of the open shoe restored", tags=len(tags))  # a count, never a tag


def start_retention(config: Config, settings: MachineSettings, journal: Journal,
                    start_after: threading.Event,
                    check_failure: Callable[[], str | None]) -> JournalRetention | None:
    """Archiving closed, delivered shoes, when configured; its first run waits for
    ``start_after`` (the journal check after READY), and no run goes ahead once
    ``check_failure`` names why that check failed."""
    if not config.journal.archive:
        return None
    retention = JournalRetention(
        config.journal_path, config.journal, settings,
        key=journal.chain.key, start_after=start_after, check_failure=check_failure)
    retention.start()
    return retention


def start_control(config: Config, handler: TableControl) -> ControlServer:
    """The control socket, listening; a socket it cannot make stops the start."""
    settings = config.control
    control = ControlServer(settings.socket, handler, group=settings.group,
                            mode=settings.mode, supervisor_group=settings.supervisor_group,
                            max_clients=settings.max_clients)
    try:
        control.start()
    except ControlError as exc:
        status = EX_CONFIG if isinstance(exc, ControlConfigError) else 1
        raise StartupError(str(exc), status) from None
    return control


def start_dealer_display(config: Config, board: StatusBoard, clock: TableClock,
                         outbox: Outbox | None,
                         wrapper: list[str] | None = None) -> ScreenLink | None:
    """The dealer display in its screen process, fed the published status (and, by the
    caller, the journaled events); None when not configured or it cannot be shown."""
    if config.display is None:
        return None
    from controller.display.words import BEHIND_ENGLISH

    if BEHIND_ENGLISH:  # an added catalogue after an upgrade: its new words show in English
        log.warning("the screens show some words in English: a catalogue lacks them",
                    languages=BEHIND_ENGLISH)
    journal_path = config.journal_path
    link = ScreenLink(config.display, board, clock, lambda: shoe_history(journal_path),
                      backend_backlog(outbox), config.logging, config.table.table_id,
                      wrapper=wrapper)
    try:
        link.start()
    except ScreenStartError as exc:
        # A screen is a nicety next to the money path: the table plays on without it.
        log.error("the dealer display is not shown", reason=str(exc))
        return None
    board.subscribe_changes(link.status_changed)
    return link
