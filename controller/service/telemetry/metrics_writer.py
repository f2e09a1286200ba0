"""Writes the table's metrics (metrics.py) to a node_exporter textfile, off the owner thread.

No port is opened: node_exporter's textfile collector reads ``metrics.textfile`` (a ``.prom``
file in its directory). The file is written whole (``prometheus_client.generate_latest``) to a
temporary file in the same directory, made readable by all (node_exporter runs as its own
user; the daemon's umask would keep it out, and the figures are not secret), and renamed over
the old one, so a scrape never reads half a file nor a file it may not open; every
``metrics.interval_s`` seconds, and ``LISTENER_SETTLE_S`` (status_board.py) after a change
but at most once a second. A second thread watches the outbox to time each event's delivery.
A failing write is logged (once until it works again) and never stops the table.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from prometheus_client import generate_latest

from controller.service.status_board import LISTENER_SETTLE_S, StatusBoard
from controller.service.telemetry.health import journal_bytes
from controller.service.telemetry.metrics import TableMetrics

if TYPE_CHECKING:
    from controller.durability.delivery.outbox import Outbox
    from controller.durability.journal import Journal
    from controller.service.config.settings import Config

log = structlog.get_logger("pokdeng.metrics")

MIN_GAP_S = 1.0  # a busy table changes many times a second; the file need not
FILE_MODE = 0o644


def write_atomically(path: str, data: bytes, mode: int = FILE_MODE) -> None:
    """``data`` as the whole of ``path``: a temp file in its directory, renamed over it."""
    directory, name = os.path.split(path)
    fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory or ".")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def filesystem_space(journal_path: str) -> tuple[int, int] | None:
    """(bytes free to an unprivileged writer, size) of the filesystem holding the journal."""
    try:
        fs = os.statvfs(os.path.dirname(os.path.abspath(journal_path)))
    except OSError:
        return None
    return fs.f_bavail * fs.f_frsize, fs.f_blocks * fs.f_frsize


class MetricsWriter:
    def __init__(self, metrics: TableMetrics, path: str, interval_s: float, board: StatusBoard,
                 outbox: Outbox | None, journal_path: str, records: Callable[[], int]):
        self.metrics = metrics
        self.path = path
        self.interval_s = interval_s
        self._board = board
        self._outbox = outbox
        self._journal_path = journal_path
        self._records = records
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._failing = False
        self._writer = threading.Thread(target=self._write_loop, name="metrics", daemon=True)
        self._timer = threading.Thread(target=self._latency_loop, name="metrics-latency",
                                       daemon=True)

    def start(self) -> None:
        self.metrics.start_from(self._board.snapshot())
        self._board.subscribe_changes(self._wake.set)
        self.write()  # the file exists once the daemon is ready
        self._writer.start()
        self._timer.start()

    def stop(self) -> None:
        """Stop both threads and write the final figures, saying the daemon stopped."""
        self._stop.set()
        self._wake.set()
        for thread in (self._writer, self._timer):
            if thread.is_alive():
                thread.join(5)
        self.write(running=False)

    def write(self, running: bool = True) -> None:
        delivery = self._outbox.status() if self._outbox is not None else {}
        self.metrics.refresh(self._board.snapshot(), delivery, journal_bytes(self._journal_path),
                             self._records(), filesystem_space(self._journal_path), running)
        try:
            write_atomically(self.path, generate_latest(self.metrics.registry))
        except OSError as exc:
            if not self._failing:
                log.warning("cannot write the metrics file", path=self.path, error=str(exc))
            self._failing = True
            return
        if self._failing:
            log.info("metrics file written again", path=self.path)
        self._failing = False

    def _write_loop(self) -> None:
        while not self._stop.is_set():
            if self._wake.wait(self.interval_s):
                self._stop.wait(LISTENER_SETTLE_S)
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                self.write()
            except Exception:  # never let the metrics stop: the next round tries again
                log.exception("metrics write failed")
            self._stop.wait(MIN_GAP_S)

    def _latency_loop(self) -> None:
        if self._outbox is None:
            return
        while not self._stop.is_set():
            pending = self.metrics.next_pending(timeout=0.5)
            if pending is None:
                continue
            seq = pending[0]
            if self._outbox.wait_delivered(seq, timeout=0.5):
                self.metrics.delivered(seq)


def metrics_writer_for(config: Config, board: StatusBoard, outbox: Outbox | None, journal: Journal,
                       software: dict[str, Any]) -> MetricsWriter | None:
    """The writer for a table with ``metrics.textfile`` set (None without)."""
    if not config.metrics.textfile:
        return None
    metrics = TableMetrics(config.table.table_id, software)
    writer = MetricsWriter(metrics, config.metrics.textfile, config.metrics.interval_s, board,
                           outbox, config.journal_path, journal.record_count)
    writer.start()
    return writer
