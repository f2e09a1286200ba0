"""What a webhook's answers do, as docs/backend.md ("What to answer", "Catching up") says,
against a real HTTP server: a 401 (a wrong secret, a table the backend does not know) is a
refusal the table retries, losing nothing; an error answer holds back every event behind the
refused batch (so an event that fails a backend's schema is answered 2xx); and a backend that
only answers requests catches up by answering ``resend_from``: a request the table cannot
serve yet waits, and is served with no further POST from the backend's side."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.durability.delivery.anchors import strip_anchor
from controller.durability.delivery.held import parse_held
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.transports.http import HttpTransport, HttpTransportSettings
from support.journal_helpers import TABLE, fill
from support.waiting import wait_until


def http(webhook, secret: Path) -> HttpTransport:
    return HttpTransport(HttpTransportSettings(webhook.url, str(secret), allow_insecure=True,
                                               backoff_initial_s=0.02, backoff_max_s=0.2,
                                               timeout_s=2.0),
                         table=TABLE, name="backend")


@pytest.fixture
def journal(tmp_path):
    j = Journal(tmp_path / "journal.db")
    yield j
    j.close()


def seqs(webhook) -> list[int]:
    with webhook.lock:
        return [e["seq"] for e in webhook.events]


def test_a_401_is_a_refusal_the_table_retries_until_the_backend_knows_its_secret(
        journal, webhook, webhook_secret):
    right = webhook.secret
    webhook.secret = b"the secret of another table"  # or no secret at all for this table
    written = fill(journal, 6)
    with Outbox(journal.path, [http(webhook, webhook_secret)]) as outbox:
        wait_until(lambda: webhook.bad_signatures >= 3, 10, "refused attempts")
        status = outbox.status()["backend"]
        assert status["state"] == "refused"
        assert "backend refuses our signature: check the secret" in status["last_error"]
        assert webhook.events == []  # the backend stored nothing it could not verify
        webhook.secret = right  # the studio gives the backend the table's secret
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
        assert outbox.status()["backend"]["state"] == "ok"
    assert [strip_anchor(e) for e in webhook.stored] == written  # nothing lost, in order


def test_an_error_answer_holds_back_every_event_behind_the_refused_batch(
        journal, webhook, webhook_secret):
    first = fill(journal, 4)
    with Outbox(journal.path, [http(webhook, webhook_secret)]) as outbox:
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
        # a backend refusing an event (one that fails its schema, say) with a 4xx
        webhook.always = 422
        later = fill(journal, 4)
        outbox.notify()
        requests = webhook.requests
        wait_until(lambda: webhook.requests >= requests + 3, 10, "the same batch again")
        later += fill(journal, 4)  # the table deals on; these wait behind the refused one
        outbox.notify()
        requests = webhook.requests
        wait_until(lambda: webhook.requests >= requests + 3, 10, "more attempts")
        assert outbox.status()["backend"]["state"] == "refused"
        assert seqs(webhook) == [e["seq"] for e in first]  # nothing behind it got through
        webhook.always = None  # the backend takes it (stores it, raises its own alarm)
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
    assert [strip_anchor(e) for e in webhook.stored] == first + later


def test_a_backend_that_only_answers_catches_up_by_answering_resend_from(
        journal, webhook, webhook_secret):
    written = fill(journal, 10)
    last = written[-1]["seq"]
    with Outbox(journal.path, [http(webhook, webhook_secret)]) as outbox:
        assert outbox.wait_delivered(last, 10)
        # a gap seen: asked in the answer to the next POST; and asked again in the answer to
        # the resend itself, inside the table's 5 s between requests: the table keeps that
        # request and serves it when it may, with no new event and no POST to answer
        webhook.replies_extra = [{"resend_from": 3}, {"resend_from": 7}]
        written += fill(journal, 2)
        outbox.notify()
        wait_until(lambda: seqs(webhook).count(7) == 3, 15, "the second request, served later",
                   details=lambda: f"came: {seqs(webhook)}")
    came, end = seqs(webhook), written[-1]["seq"]
    assert came[:end] == list(range(1, end + 1))
    assert set(came[end:]) <= set(range(3, end + 1))  # repeats only: same ids
    assert webhook.conflicts == []


def test_a_whole_number_written_with_a_decimal_point_is_the_same_number(
        journal, webhook, webhook_secret):
    """JSON's 3.0 is 3 (a PHP or Python backend writing a float): the request is served, not
    ignored as "not a whole number"."""
    written = fill(journal, 10)
    last = written[-1]["seq"]
    with Outbox(journal.path, [http(webhook, webhook_secret)]) as outbox:
        assert outbox.wait_delivered(last, 10)
        webhook.replies_extra = [{"resend_from": 3.0}]
        written += fill(journal, 2)
        outbox.notify()
        wait_until(lambda: seqs(webhook).count(3) == 2, 15, "the resend asked as 3.0",
                   details=lambda: f"came: {seqs(webhook)}")
    assert parse_held({"seq": 621.0, "sha256": "a" * 64}, "backend") == \
        parse_held({"seq": 621, "sha256": "a" * 64}, "backend")
    with pytest.raises(ValueError, match="whole number"):
        parse_held({"seq": 621.5, "sha256": "a" * 64}, "backend")


def test_held_null_is_refused_not_taken_for_a_backend_that_says_nothing(
        webhook, webhook_secret):
    """``"held": null`` is no position: were it taken as "nothing said", the table would send
    its events without comparing them with where the backend stands."""
    transport = http(webhook, webhook_secret)
    heard: list[object] = []
    transport.held_listener = lambda _transport, value: heard.append(value)
    try:
        webhook.replies_extra = [{"held": None}]
        transport.ask_held()
    finally:
        transport.close()
    assert len(heard) == 1
    assert heard[0] is not None  # None would be "said nothing": no comparison at all
    with pytest.raises(ValueError, match="seq must be a whole number"):
        parse_held(heard[0], "backend")
