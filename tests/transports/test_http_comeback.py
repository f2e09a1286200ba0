"""A webhook that went away and is back (its port accepts connections again) gets the backlog
at once, not at the end of the outbox's backoff; a webhook that answers with errors is paced by
the backoff alone. Real HTTP server on loopback, real journal and outbox."""

from __future__ import annotations

import time

import pytest

from controller.durability.delivery.anchors import strip_anchor
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.table.inputs import Tick
from controller.transports.http import HttpTransport, HttpTransportSettings
from support.journal_helpers import TABLE, event
from support.waiting import wait_until

pytestmark = pytest.mark.slow

#: what "at once" must beat on a loaded 2-core machine: the probe's second plus a retry
BACK_WITHIN_S = 5.0


@pytest.fixture
def table(tmp_path, webhook, webhook_secret):
    """A journal, and an outbox to the webhook whose every backoff is 20 s (jitter pinned at
    its ceiling): only a comeback can deliver sooner."""
    journal = Journal(tmp_path / "journal.db")
    transport = HttpTransport(HttpTransportSettings(
        webhook.url, str(webhook_secret), allow_insecure=True, timeout_s=2.0,
        backoff_initial_s=20.0, backoff_max_s=30.0), table=TABLE, name="backend")
    outbox = Outbox(journal.path, [transport], rand=lambda: 1.0)
    outbox.start()
    yield journal, outbox
    outbox.stop()
    journal.close()


def deal(journal: Journal, outbox: Outbox, count: int) -> None:
    for _ in range(count):
        seq = journal.last_event_seq() + 1
        journal.append(Tick(float(seq)), [event(seq)])
        outbox.notify()
        time.sleep(0.02)


def fail_once(journal: Journal, outbox: Outbox) -> None:
    deal(journal, outbox, 5)
    wait_until(lambda: outbox.status()["backend"]["state"] != "ok", 10, "a failed attempt")


def test_a_webhook_back_on_its_port_gets_the_backlog_at_once(table, webhook):
    journal, outbox = table
    deal(journal, outbox, 10)
    assert outbox.wait_delivered(journal.last_event_seq(), 10)
    webhook.fail_with = ["drop"]  # a webhook that dies: its keep-alive connection goes too,
    webhook.down()                # and its port refuses connections
    fail_once(journal, outbox)
    deal(journal, outbox, 20)  # the table deals on through the outage
    back_at = time.monotonic()
    webhook.up()
    assert outbox.wait_delivered(journal.last_event_seq(), 15), \
        "the backlog waited out the backoff after the webhook came back"
    assert time.monotonic() - back_at < BACK_WITHIN_S
    every = [event(seq) for seq in range(1, journal.last_event_seq() + 1)]
    assert [strip_anchor(e) for e in webhook.stored] == every  # each once, in seq order


def test_a_webhook_that_answers_errors_is_paced_by_the_backoff(table, webhook):
    # It is there (503s): no probe, no early retry; it takes the events again only after the
    # 20 s backoff, which this test does not wait for.
    journal, outbox = table
    webhook.always = 503
    fail_once(journal, outbox)
    requests = webhook.requests
    webhook.always = None
    assert not outbox.wait_delivered(journal.last_event_seq(), 2.5)
    assert webhook.requests == requests
