"""A real mosquitto stopped and started under a dealing table: once the broker is back, the
backlog goes out at once, not at the end of the outbox's backoff nor of paho's reconnect
delay; every event still reaches the backend first in seq order."""

from __future__ import annotations

import threading
import time
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from controller.durability.delivery.anchors import strip_anchor
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.table.inputs import Tick
from controller.transports import create
from support.backends import first_copies
from support.journal_helpers import TABLE, event
from support.waiting import wait_until

pytestmark = [pytest.mark.mosquitto, pytest.mark.slow]

#: what "at once" must beat on a loaded 2-core machine; the old code took the whole backoff
BACK_WITHIN_S = 5.0


class Backend:
    """A QoS 1 subscriber with a persistent session (docs/backend.md): the broker, restarted
    with persistence, keeps queueing for it while it reconnects."""

    def __init__(self, port: int):
        import json

        self._json = json
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="comeback-backend",
                                  clean_session=False)
        self.client.reconnect_delay_set(0.1, 0.5)
        subscribed = threading.Event()
        self.client.on_connect = lambda c, *a: c.subscribe(f"pokdeng/{TABLE}/events", qos=1)
        self.client.on_subscribe = lambda *a: subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        assert subscribed.wait(10), "the backend could not subscribe"

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        with self.lock:
            self.events.append(self._json.loads(message.payload))

    def seen(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


class Dealer:
    """The table: journals one event per ``step`` call and tells the outbox, as the daemon's
    owner loop does (journal first, then the outbox)."""

    def __init__(self, journal: Journal, outbox: Outbox):
        self.journal, self.outbox = journal, outbox
        self.written: list[dict[str, Any]] = []

    def step(self) -> int:
        seq = len(self.written) + 1
        self.written.append(event(seq))
        self.journal.append(Tick(float(seq)), [self.written[-1]])
        self.outbox.notify()
        return seq

    def deal_until(self, done: Any, timeout: float, what: str, every: float = 0.05) -> float:
        """Deal every ``every`` s until ``done()``; returns when it held (monotonic)."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {timeout:g} s while dealing")
            self.step()
            time.sleep(every)
        return time.monotonic()


def delivered(outbox: Outbox) -> int:
    return outbox.status()["mqtt"]["delivered_seq"]


def outage_and_back(mosquitto, tmp_path, options: dict[str, Any], *, outage_s: float,
                    rand: Any = None) -> tuple[float, float]:
    """Deal, stop the broker for ``outage_s`` while dealing, start it again and deal on.
    Returns the seconds from the broker's start to the first event delivered after it and to
    the whole backlog delivered, after checking what the backend got."""
    backend = Backend(mosquitto.port)
    journal = Journal(tmp_path / "journal.db")
    transport = create("mqtt", {"host": "127.0.0.1", "port": mosquitto.port, **options},
                       table=TABLE)
    extra = {} if rand is None else {"rand": rand}
    try:
        with Outbox(journal.path, [transport], **extra) as outbox:
            table = Dealer(journal, outbox)
            for _ in range(20):
                table.step()
            table.deal_until(lambda: delivered(outbox) == len(table.written), 10,
                             "delivery before the outage")
            mosquitto.stop()
            table.deal_until(lambda: outbox.status()["mqtt"]["state"] == "retrying", 15,
                             "failed attempt")
            stop_for = time.monotonic() + outage_s
            table.deal_until(lambda: time.monotonic() >= stop_for, outage_s + 5, "outage end")
            before = delivered(outbox)
            backlog = len(table.written)
            assert before < backlog
            started = time.monotonic()  # before the start: the figures err on the long side
            mosquitto.start()
            first = table.deal_until(lambda: delivered(outbox) > before, 60,
                                     "delivery after the broker came back")
            whole = table.deal_until(lambda: delivered(outbox) >= backlog, 60,
                                     "whole backlog delivered")
            table.deal_until(lambda: delivered(outbox) == len(table.written), 30,
                             "delivery of the events dealt meanwhile")
        wait_until(lambda: len({e["id"] for e in backend.seen()}) == len(table.written), 15,
                   "every event at the backend")
        seen = backend.seen()
        first_seen = {e["id"]: e for e in reversed(seen)}
        in_order = [strip_anchor(first_seen[i]) for i in first_copies(e["id"] for e in seen)]
        assert in_order == table.written  # every event, first copies in seq order
        return first - started, whole - started
    finally:
        journal.close()
        backend.close()


def test_a_broker_back_ends_the_outbox_backoff(mosquitto, tmp_path):
    # Backoff pinned at 20 s (jitter at its ceiling): only the transport's comeback can make
    # the backlog go out in time; paho reconnects fast here, so this is the outbox's part.
    options = {"reconnect_min_s": 0.1, "reconnect_max_s": 0.3, "connect_timeout_s": 1.0,
               "publish_timeout_s": 2.0, "backoff_initial_s": 20.0, "backoff_max_s": 30.0}
    first, whole = outage_and_back(mosquitto, tmp_path, options, outage_s=1.0,
                                   rand=lambda: 1.0)
    assert whole < BACK_WITHIN_S, f"first delivery {first:.2f} s, the backlog {whole:.2f} s " \
                                  "after the broker started: the backoff was slept out"


def test_a_broker_back_after_a_long_outage_is_noticed_with_the_shipped_settings(mosquitto,
                                                                                 tmp_path):
    # The shipped reconnect and backoff settings; a 12 s outage took paho's doubling reconnect
    # delay to 8-16 s and the outbox's backoff ceiling to 2-4 s before.
    first, whole = outage_and_back(mosquitto, tmp_path, {"protocol": "5"}, outage_s=12.0)
    assert whole < BACK_WITHIN_S, f"first delivery {first:.2f} s, the backlog {whole:.2f} s " \
                                  "after the broker started"
