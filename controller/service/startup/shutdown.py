"""The daemon's one way down: stop the inputs, finish what was queued, flush, close.

Runs on the owner thread, after the loop (or after a start that failed part-way: every part
may be missing, and each is closed only if start-up made it). The order matters: the devices
stop before the queue is drained, the control socket closes before the outbox is flushed,
and the journal is marked and closed last.
"""

from __future__ import annotations

import structlog

from controller.service.startup.daemon_surface import TableDaemon
from controller.service.trust.journal_trust import mark_head

log = structlog.get_logger("pokdeng.daemon")

FLUSH_ON_STOP_S = 2.0         # how long a stop waits for the backends to catch up


def shut_down(daemon: TableDaemon) -> None:
    """Stop inputs, finish queued work, flush, close (the daemon makes it happen once)."""
    daemon.notifier.stopping("stopping")
    log.info("stopping")
    for driver in daemon.drivers:
        try:
            driver.stop()
        except Exception:
            log.exception("driver did not stop cleanly", driver=getattr(driver, "name", "?"))
    storage = daemon.storage
    if daemon.forked:
        # Nothing more goes into a forked history: what is queued is dropped, and said.
        log.error("stopping on a forked history: queued inputs not journaled",
                  queued=daemon.queue.qsize())
    # What the devices sent before they stopped was accepted: handle it, lose nothing.
    elif daemon.machine is not None and daemon.journal is not None:
        daemon.drain()
        if storage.reason:  # one last try for the held inputs
            storage.retry()
        if storage.held:
            log.error("stopping with inputs that could not be journaled; they are lost",
                      held=len(storage.held), kinds=storage.held.kinds())
    if daemon.control is not None:
        daemon.control.close()
    if daemon.display is not None:
        daemon.display.close()
    if daemon.health is not None:
        daemon.health.stop()
    if daemon.retention is not None:
        daemon.retention.stop()
    if daemon.journal_check is not None:
        daemon.journal_check.stop()
    if daemon.history is not None:
        daemon.history.stop()
    _stop_outbox(daemon)
    if daemon.metrics is not None:
        daemon.metrics.stop()  # the last figures, deliveries on the way down included
    if daemon.checkpointer is not None:
        daemon.checkpointer.stop()
    if daemon.head_marks is not None:
        daemon.head_marks.stop()  # the last round's mark first: the clean stop's comes after
    if daemon.journal is not None:
        if daemon.machine is not None and not storage.reason and not daemon.forked:
            mark_head(daemon.journal)  # where a clean stop left the journal
        daemon.journal.close()
    daemon.notifier.close()
    daemon.board.mark_stopped()
    log.info("stopped")


def _stop_outbox(daemon: TableDaemon) -> None:
    """Give the backends a moment to take what is journaled (not on a forked history); the
    transports an outbox never took are closed here."""
    if daemon.outbox is None:
        for transport in daemon.transports:  # built, never handed to an outbox
            transport.close()
    elif daemon.forked:
        daemon.outbox.stop()  # a forked history's events are not pushed out on the way down
    else:
        try:
            # The rest goes on the next start (the outbox resumes from its delivered position).
            if daemon.journal is not None and not daemon.outbox.wait_delivered(
                    daemon.journal.last_event_seq(), FLUSH_ON_STOP_S):
                log.warning("stopping with events not yet delivered",
                            backlog=daemon.outbox.status())
            daemon.outbox.stop()
        except Exception:
            log.exception("outbox did not stop cleanly")
