"""The table's Prometheus metrics: what is counted and measured, in one registry.

Names follow Prometheus conventions (``pokdeng_table_`` prefix, ``_total`` counters, units
in the name) and every series has a ``table`` label, so a studio's node_exporters can be
scraped into one place. Labels come from closed sets only: input kinds, event types, fault
and rejection codes, transport names. Never a card, a tag id or a frame: the metrics are a
channel that leaves the table and is sealed like the others.

Counters count since the daemon started (Prometheus handles the reset on a restart); gauges
are read from the published status and the outbox when the file is written. The gauges the
shipped alert rules read (packaging/prometheus/alerts.yml) are here too: the state, the drain,
since when the table is paused, the clock's and the journal check's state, the journal's
filesystem, and whether the daemon runs with the time of the last write (a table whose daemon
died leaves its last file behind: the time tells).
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from controller.durability.delivery.outbox import WAITING_FOR_WORD
from controller.table.inputs import CLOCK_SYNC_STATES
from controller.table.procedure import PROCEDURE_STATES

# The ``_created`` series (a counter's start time) would double the file for nothing a
# dashboard of tables uses; the daemon has no other metrics registry.
disable_created_metrics()

#: seconds from an event journaled to every transport having it
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                   300.0, 1800.0)
#: the journal check's states (controller/service/trust/journal_check.py)
JOURNAL_CHECK_STATES = ("not_started", "running", "ok", "waiting", "failed")
#: events journaled but not yet seen delivered, kept for the latency (older ones are dropped)
PENDING_KEPT = 100_000


class TableMetrics:
    """Counters fed by the owner thread (cheap: a few increments per input), gauges set by
    ``refresh`` on the writer's thread, and the delivery latency histogram."""

    def __init__(self, table: str, software: dict[str, Any]):
        self.table = table
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.inputs = Counter("pokdeng_table_inputs", "Inputs journaled, by kind",
                              ["table", "kind"], registry=r)
        self.events = Counter("pokdeng_table_events", "Events journaled, by type",
                              ["table", "type"], registry=r)
        self.faults = Counter("pokdeng_table_faults", "Faults that paused the table, by code "
                              "(docs/faults.md)", ["table", "code"], registry=r)
        self.rejections = Counter("pokdeng_table_rejections", "Inputs the table refused, by "
                                  "code (docs/faults.md)", ["table", "code"], registry=r)
        self.pauses = Counter("pokdeng_table_pauses", "Times the table went from running to "
                              "paused", ["table"], registry=r)
        self.rounds = Counter("pokdeng_table_rounds", "Rounds settled (round_result)",
                              ["table"], registry=r)
        self.paused = Gauge("pokdeng_table_paused", "1 while the table is paused", ["table"],
                            registry=r)
        self.device_up = Gauge("pokdeng_table_device_connected", "1 while the device is "
                               "connected", ["table", "device"], registry=r)
        self.backlog = Gauge("pokdeng_table_backlog_events", "Journaled events a transport "
                             "has not delivered yet", ["table", "transport"], registry=r)
        self.oldest = Gauge("pokdeng_table_oldest_undelivered_age_seconds", "Age of the "
                            "oldest event a transport has not delivered (0 when none)",
                            ["table", "transport"], registry=r)
        self.waiting = Gauge("pokdeng_table_backend_word_awaited", "1 while a transport's "
                             "events wait for its backend to say where it stands (nothing "
                             "is delivered before the table has compared it with its "
                             "journal)", ["table", "transport"], registry=r)
        self.latency = Histogram("pokdeng_table_delivery_latency_seconds", "From an event "
                                 "journaled to every transport having it", ["table"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.journal_bytes = Gauge("pokdeng_table_journal_size_bytes", "The journal database "
                                   "and its write-ahead log on disk", ["table"], registry=r)
        self.journal_records = Gauge("pokdeng_table_journal_records", "Records in the journal "
                                     "(the archived ones included)", ["table"], registry=r)
        self.state = Gauge("pokdeng_table_state", "1 for the table machine's state "
                           "(docs/state-diagram.md), 0 for the others", ["table", "state"],
                           registry=r)
        self.draining = Gauge("pokdeng_table_draining", "1 while the table drains or stays "
                              "drained (supervisor drain, an upgrade) until resumed", ["table"],
                              registry=r)
        self.paused_since = Gauge("pokdeng_table_paused_since_timestamp_seconds", "When this "
                                  "daemon saw the table pause (Unix time; 0 while running)",
                                  ["table"], registry=r)
        self.clock_sync = Gauge("pokdeng_table_clock_sync", "1 for the clock's "
                                "synchronisation state (docs/clock.md), 0 for the others",
                                ["table", "sync"], registry=r)
        self.journal_check = Gauge("pokdeng_table_journal_check", "1 for the state of the "
                                   "journal's check at start (docs/durability.md), 0 for the "
                                   "others", ["table", "state"], registry=r)
        self.fs_avail = Gauge("pokdeng_table_journal_filesystem_avail_bytes", "Bytes free "
                              "to the daemon on the journal's filesystem", ["table"], registry=r)
        self.fs_size = Gauge("pokdeng_table_journal_filesystem_size_bytes", "Size of the "
                             "journal's filesystem", ["table"], registry=r)
        self.running = Gauge("pokdeng_table_running", "1 while the daemon runs; 0 written by "
                             "an orderly stop", ["table"], registry=r)
        self.written = Gauge("pokdeng_table_metrics_written_timestamp_seconds", "When this "
                             "file was written (Unix time): a stale one is a dead daemon",
                             ["table"], registry=r)
        info = Gauge("pokdeng_table_software_info", "The software this table runs (value 1)",
                     ["table", *sorted(software)], registry=r)
        info.labels(table=table, **{k: str(v) for k, v in software.items()}).set(1)
        self._lock = threading.Lock()
        self._is_paused = False
        self._paused_since: float | None = None
        self._pending: collections.deque[tuple[int, float]] = collections.deque(
            maxlen=PENDING_KEPT)
        self._pending_added = threading.Condition(self._lock)
        # every series exists from the start, so a scrape sees 0, not nothing
        for counter in (self.pauses, self.rounds):
            counter.labels(table=table)
        self.latency.labels(table=table)

    def start_from(self, status: dict[str, Any]) -> None:
        """The recovered table: a table that starts paused has not paused again."""
        self._is_paused = bool(status.get("paused"))

    def count(self, kind: str, events: list[dict[str, Any]]) -> None:
        """One journaled input and its events (owner thread)."""
        table = self.table
        self.inputs.labels(table=table, kind=kind).inc()
        for event in events:
            kind_of_event = event["type"]
            self.events.labels(table=table, type=kind_of_event).inc()
            data = event.get("data") or {}
            if kind_of_event == "paused":
                self.faults.labels(table=table, code=str(data.get("code"))).inc()
                if not self._is_paused:
                    self.pauses.labels(table=table).inc()
                self._is_paused = True
            elif kind_of_event == "resumed":
                self._is_paused = False
            elif kind_of_event == "input_rejected":
                self.rejections.labels(table=table, code=str(data.get("code"))).inc()
            elif kind_of_event == "round_result":
                self.rounds.labels(table=table).inc()
        if events:
            with self._lock:
                self._pending.append((max(e["seq"] for e in events), time.monotonic()))
                self._pending_added.notify()

    def refresh(self, status: dict[str, Any], delivery: dict[str, dict[str, Any]],
                journal_bytes: int, journal_records: int,
                filesystem: tuple[int, int] | None = None, running: bool = True,
                now: float | None = None) -> None:
        """Set the gauges from the published (sealed) status and the outbox's figures;
        ``filesystem``: the journal's filesystem (bytes free, size), None when unknown."""
        table = self.table
        now = time.time() if now is None else now
        paused = bool(status.get("paused"))
        self.paused.labels(table=table).set(1 if paused else 0)
        if not paused:
            self._paused_since = None
        elif self._paused_since is None:
            self._paused_since = now
        self.paused_since.labels(table=table).set(self._paused_since or 0)
        _one_of(self.state, table, PROCEDURE_STATES, status.get("state"))
        self.draining.labels(table=table).set(1 if status.get("draining") else 0)
        _one_of(self.clock_sync, table, CLOCK_SYNC_STATES,
                status.get("clock_sync") or "unknown", label="sync")
        check = status.get("journal_check")
        if isinstance(check, dict):
            _one_of(self.journal_check, table, JOURNAL_CHECK_STATES,
                    str(check.get("state")).replace(" ", "_"))
        if filesystem is not None:
            self.fs_avail.labels(table=table).set(filesystem[0])
            self.fs_size.labels(table=table).set(filesystem[1])
        self.running.labels(table=table).set(1 if running else 0)
        self.written.labels(table=table).set(now)
        for device, up in (status.get("devices") or {}).items():
            if isinstance(up, bool):
                self.device_up.labels(table=table, device=str(device)).set(1 if up else 0)
        for name, figures in delivery.items():
            self.backlog.labels(table=table, transport=name).set(figures.get("backlog") or 0)
            self.oldest.labels(table=table, transport=name).set(
                figures.get("oldest_age_s") or 0)
            self.waiting.labels(table=table, transport=name).set(
                1 if figures.get("state") == WAITING_FOR_WORD else 0)
        self.journal_bytes.labels(table=table).set(journal_bytes)
        self.journal_records.labels(table=table).set(journal_records)

    def next_pending(self, timeout: float) -> tuple[int, float] | None:
        """The oldest journaled seq not yet seen delivered, with when it was journaled."""
        with self._pending_added:
            if not self._pending:
                self._pending_added.wait(timeout)
            return self._pending[0] if self._pending else None

    def delivered(self, seq: int) -> None:
        """Every transport has ``seq``: observe the latency of the events up to it."""
        now = time.monotonic()
        with self._lock:
            while self._pending and self._pending[0][0] <= seq:
                _, journaled = self._pending.popleft()
                self.latency.labels(table=self.table).observe(max(0.0, now - journaled))


def _one_of(gauge: Gauge, table: str, states: tuple[str, ...], current: Any,
            label: str = "state") -> None:
    """A state as a set of series, 1 for ``current`` and 0 for the rest: a rule matches the
    state by its label, and a state that was left reads 0 instead of vanishing."""
    for state in states:
        gauge.labels(table=table, **{label: state}).set(1 if state == current else 0)
