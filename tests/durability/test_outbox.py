"""The outbox: ordered, at-least-once delivery per transport from the journal, never blocking."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path

import pytest

from controller.durability.delivery.anchors import strip_anchor
from controller.durability.delivery.outbox import WAITING_FOR_WORD, Outbox, backoff_delay
from controller.durability.journal import Journal
from controller.table.inputs import Tick
from controller.transports import TransientError, Transport
from controller.transports.file import FileSink, FileSinkSettings
from controller.transports.http import HttpTransport, HttpTransportSettings
from support.journal_helpers import TABLE, event, fill
from support.waiting import wait_until


def http(webhook, secret: Path, name: str = "backend", **options) -> HttpTransport:
    options = {"backoff_initial_s": 0.02, "backoff_max_s": 0.2, "timeout_s": 2.0, **options}
    return HttpTransport(HttpTransportSettings(webhook.url, str(secret), allow_insecure=True,
                                               **options),
                         table=TABLE, name=name)


def unanchored(events: list[dict]) -> list[dict]:
    """What was sent, as journaled: each event without the anchor added on the way out."""
    return [strip_anchor(e) for e in events]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def journal(tmp_path):
    j = Journal(tmp_path / "journal.db")
    yield j
    j.close()


def test_delivers_every_event_in_order_as_it_is_journaled(journal, webhook, webhook_secret):
    with Outbox(journal.path, [http(webhook, webhook_secret, batch_max=7)]) as outbox:
        written = []
        for _ in range(5):
            written += fill(journal, 12)
            outbox.notify()
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
        status = outbox.status()["backend"]
    assert unanchored(webhook.events) == written  # in order, nothing repeated, nothing missing
    assert status["state"] == "ok" and status["backlog"] == 0
    assert status["delivered_seq"] == journal.last_event_seq()
    assert status["oldest_age_s"] is None
    assert all(len(k) for k in webhook.idempotency_keys)


@pytest.mark.slow
def test_backend_down_for_a_whole_shoe_then_back(journal, webhook, webhook_secret, caplog):
    webhook.down()
    with caplog.at_level(logging.INFO, logger="pokdeng.outbox"), \
            Outbox(journal.path, [http(webhook, webhook_secret)]) as outbox:
        written = []
        for _ in range(10):  # ~a shoe: 420 inputs, 560 events, while the backend is away
            written += fill(journal, 42)
            outbox.notify()
        assert wait_until(lambda: outbox.status()["backend"]["state"] == "retrying")
        time.sleep(0.3)
        status = outbox.status()["backend"]
        assert status["backlog"] == len(written) and status["delivered_seq"] == 0
        assert status["oldest_age_s"] >= 0.3
        assert "Connection" in status["last_error"]
        webhook.up()
        assert outbox.wait_delivered(journal.last_event_seq(), 15)
        status = outbox.status()["backend"]
    assert webhook.unique_ids() == [e["id"] for e in written]
    assert unanchored(webhook.events) == written
    assert status["state"] == "ok" and status["backlog"] == 0
    assert "delivery failed" in caplog.text and "Connection refused" in caplog.text
    assert "backlog" in caplog.text
    assert "delivering again" in caplog.text


def test_transient_answers_are_retried_and_nothing_is_skipped(journal, webhook, webhook_secret):
    webhook.fail_with = [500, "drop", 429, 503, 408, 500]
    written = fill(journal, 30)
    with Outbox(journal.path, [http(webhook, webhook_secret, batch_max=5)]) as outbox:
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
    assert unanchored(webhook.events) == written
    assert webhook.conflicts == []


def test_a_refusing_backend_is_retried_without_stopping_anything(journal, webhook,
                                                                 webhook_secret, tmp_path,
                                                                 caplog):
    webhook.always = 404
    sink_path = tmp_path / "sink.jsonl"
    sink = FileSink(FileSinkSettings(str(sink_path)), table=TABLE, name="file")
    written = fill(journal, 20)
    with caplog.at_level(logging.INFO, logger="pokdeng.outbox"), \
            Outbox(journal.path, [http(webhook, webhook_secret), sink]) as outbox:
        assert wait_until(lambda: outbox.status()["backend"]["state"] == "refused")
        assert wait_until(lambda: outbox.status()["file"]["delivered_seq"] == len(written))
        status = outbox.status()
        requests = webhook.requests
        assert wait_until(lambda: webhook.requests > requests + 2, 5, "more attempts")
        more = fill(journal, 5)
        outbox.notify()
        webhook.always = None  # the backend is fixed: no restart needed
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
        after = outbox.status()["backend"]
    refused = status["backend"]
    assert "404" in refused["last_error"] and refused["last_error_at"] is not None
    assert refused["delivered_seq"] == 0 and refused["backlog"] == len(written)
    assert refused["failing_since"] is not None
    assert f"delivery failed at seq 1-{len(written)} (POST" in caplog.text
    assert "-> 404 Not Found" in caplog.text
    assert webhook.unique_ids() == [e["id"] for e in written + more]
    assert unanchored(read_jsonl(sink_path)) == written + more
    # recovered: the error is gone from the state, its time is kept
    assert after["state"] == "ok" and after["last_error"] is None
    assert after["failing_since"] is None
    assert after["last_error_at"] >= refused["last_error_at"]
    assert "delivering again" in caplog.text


def test_a_long_failure_is_reported_once_and_its_end_once(journal, webhook, webhook_secret):
    webhook.always = 401
    changes: list[tuple[str, bool, str]] = []
    written = fill(journal, 10)
    with Outbox(journal.path, [http(webhook, webhook_secret, unreachable_after_s=0.3)],
                on_backend_change=lambda *change: changes.append(change)) as outbox:
        assert wait_until(lambda: len(changes) == 1, 5, "the unreachable report")
        status = outbox.status()["backend"]
        requests = webhook.requests
        assert wait_until(lambda: webhook.requests > requests + 2, 5, "more attempts")
        assert len(changes) == 1  # reported once, however many attempts fail
        webhook.always = None
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
        assert wait_until(lambda: len(changes) == 2, 5, "the restored report")
    name, reachable, reason = changes[0]
    assert (name, reachable) == ("backend", False)
    assert "backend refuses our signature: check the secret" in reason and "401" in reason
    assert status["state"] == "refused" and status["unreachable"] is True
    assert changes[1][:2] == ("backend", True)
    assert webhook.unique_ids() == [e["id"] for e in written]


def test_a_restart_reports_the_recovery_of_a_backend_recorded_unreachable(journal, webhook,
                                                                          webhook_secret):
    changes: list[tuple[str, bool, str]] = []
    fill(journal, 3)
    with Outbox(journal.path, [http(webhook, webhook_secret)], known_unreachable=["backend"],
                on_backend_change=lambda *change: changes.append(change)) as outbox:
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
        assert wait_until(lambda: changes == [("backend", True, "delivering again")])


def test_restart_resumes_from_the_durable_position(journal, tmp_path):
    sink_path = tmp_path / "sink.jsonl"

    def outbox() -> Outbox:
        return Outbox(journal.path, [FileSink(FileSinkSettings(str(sink_path), batch_max=4),
                                              table=TABLE)])

    first = fill(journal, 15)
    with outbox() as box:
        assert box.wait_delivered(journal.last_event_seq(), 5)
    second = fill(journal, 15)
    with outbox() as box:
        assert box.status()["file"]["delivered_seq"] >= first[-1]["seq"]
        assert box.wait_delivered(journal.last_event_seq(), 5)
    assert unanchored(read_jsonl(sink_path)) == first + second  # no repeat, no gap
    conn = sqlite3.connect(journal.path)
    assert conn.execute("SELECT last_seq FROM delivery WHERE transport='file'").fetchone()[0] \
        == journal.last_event_seq()
    conn.close()
    assert journal.verify().ok  # the delivery table is not part of the chain


def test_a_position_lost_in_a_crash_repeats_events_with_the_same_id_and_body(journal, tmp_path):
    sink_path = tmp_path / "sink.jsonl"
    written = fill(journal, 15)
    settings = FileSinkSettings(str(sink_path))
    with Outbox(journal.path, [FileSink(settings, table=TABLE)]) as box:
        assert box.wait_delivered(journal.last_event_seq(), 5)
    conn = sqlite3.connect(journal.path)  # as if the position write never reached the disk
    conn.execute("UPDATE delivery SET last_seq=3")
    conn.commit()
    conn.close()
    with Outbox(journal.path, [FileSink(settings, table=TABLE)]) as box:
        assert box.wait_delivered(journal.last_event_seq(), 5)
    got = read_jsonl(sink_path)
    assert unanchored(got) == written + written[3:]
    assert got[len(written):] == got[3:len(written)]  # same anchors again: the same bytes


class Stalling(Transport):
    """A transport whose backend takes a long time; counts calls."""
    kind = "stalling"

    def __init__(self, seconds: float):
        super().__init__("stalling")
        self.seconds = seconds
        self.delivered: list[dict] = []

    def deliver(self, events):
        time.sleep(self.seconds)
        self.delivered.extend(events)


def test_the_table_loop_never_waits_on_a_slow_backend(journal):
    slow = Stalling(0.5)
    with Outbox(journal.path, [slow]) as outbox:
        slowest = 0.0
        for i in range(20):
            journal.append(Tick(float(i)), [event(i + 1)])
            started = time.perf_counter()
            outbox.notify()
            outbox.status()
            slowest = max(slowest, time.perf_counter() - started)
        assert slowest < 0.1  # the stalled deliver is on another thread
        assert outbox.wait_delivered(20, 10)
    assert [e["seq"] for e in slow.delivered] == list(range(1, 21))


class Buggy(Transport):
    kind = "buggy"

    def __init__(self):
        super().__init__("buggy")
        self.calls = 0
        self.backoff_initial_s = 0.01
        self.delivered: list[int] = []

    def deliver(self, events):
        self.calls += 1
        if self.calls < 3:
            raise KeyError("a bug in a transport")
        self.delivered += [e["seq"] for e in events]


def test_an_unexpected_transport_exception_is_retried_and_logged(journal, caplog):
    fill(journal, 6)
    buggy = Buggy()
    with caplog.at_level(logging.WARNING, logger="pokdeng.outbox"), \
            Outbox(journal.path, [buggy]) as outbox:
        assert outbox.wait_delivered(journal.last_event_seq(), 5)
    assert buggy.delivered == list(range(1, journal.last_event_seq() + 1))
    assert "KeyError" in caplog.text


def test_backoff_is_capped_exponential_with_full_jitter():
    assert backoff_delay(1, 0.5, 30, lambda: 1.0) == 0.5
    assert backoff_delay(4, 0.5, 30, lambda: 1.0) == 4.0
    assert backoff_delay(20, 0.5, 30, lambda: 1.0) == 30
    assert backoff_delay(200, 0.5, 30, lambda: 0.5) == 15
    assert backoff_delay(3, 0.5, 30, lambda: 0.0) == 0.0


def test_file_sink_appends_and_reports_a_missing_directory(tmp_path):
    from controller.transports import TransportConfigError, create
    with pytest.raises(TransportConfigError, match="does not exist"):
        create("file", {"path": str(tmp_path / "nope" / "x.jsonl")}, table=TABLE)
    sink = create("file", {"path": str(tmp_path / "x.jsonl")}, table=TABLE)
    sink.deliver([event(1)])
    sink.deliver([event(2), event(3)])
    sink.close()
    assert [e["seq"] for e in read_jsonl(tmp_path / "x.jsonl")] == [1, 2, 3]


@pytest.mark.parametrize("torn", [b'{"id":"T:3","seq":3,"ty', b'{"data":"' + b"x" * 150_000])
@pytest.mark.parametrize("whole_lines", [0, 2])
def test_file_sink_cuts_a_line_an_interrupted_write_left_unfinished(tmp_path, caplog, torn,
                                                                     whole_lines):
    """A kill in the middle of a long write leaves a last line without its end (the batch
    was never counted delivered): the next sink cuts it off, so every line is whole JSON."""
    from controller.transports import create
    path = tmp_path / "x.jsonl"
    first = create("file", {"path": str(path)}, table=TABLE)
    first.deliver([event(n) for n in range(1, whole_lines + 1)])
    first.close()
    with path.open("ab") as f:
        f.write(torn)
    sink = create("file", {"path": str(path)}, table=TABLE)
    with caplog.at_level(logging.WARNING, logger="pokdeng.transports.file"):
        sink.deliver([event(3), event(4)])
    sink.close()
    assert [e["seq"] for e in read_jsonl(path)] == [*range(1, whole_lines + 1), 3, 4]
    assert f"cut {len(torn)} bytes" in caplog.text


def test_transient_error_carries_retry_after():
    assert TransientError("x", 2.5).retry_after == 2.5


def test_a_backend_reply_asks_for_a_resend_bounded_by_what_was_delivered(journal, webhook,
                                                                         webhook_secret,
                                                                         caplog):
    with caplog.at_level(logging.INFO), \
            Outbox(journal.path, [http(webhook, webhook_secret, batch_max=4)],
                   resend_interval_s=0.1) as outbox:
        written = fill(journal, 6)
        outbox.notify()
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
        horizon = journal.last_event_seq()
        sent = len(webhook.events)
        webhook.reply_extra = {"resend_from": "x"}  # not a seq: logged, ignored
        more = fill(journal, 2)
        outbox.notify()
        assert more and outbox.wait_delivered(journal.last_event_seq(), 10)
        assert len(webhook.events) == sent + len(more)
        horizon = journal.last_event_seq()
        webhook.reply_extra = {"resend_from": 3}
        last = fill(journal, 2)
        outbox.notify()
        assert wait_until(lambda: "resend done up to seq" in caplog.text, 10, "the resend")
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
    asked_at = journal.last_event_seq()  # the reply that asked accepted the events up to here
    again = [e["seq"] for e in webhook.events[sent + len(more) + len(last):]]
    assert again == list(range(3, asked_at + 1))  # in order, and no further than delivered
    assert horizon < asked_at
    assert "resend_from must be a whole number, got 'x'; ignored" in caplog.text
    assert f"resending seq 3-{asked_at} as the backend asked" in caplog.text
    assert webhook.unique_ids() == [e["id"] for e in written + more + last]


def test_a_transport_held_back_sends_nothing_and_asks_until_its_word_holds(
        journal, webhook, webhook_secret) -> None:
    """Ask before you deliver: while the hold names a reason, no event leaves (resends
    neither), the backend is asked where it stands again and again, and the status says the
    events wait; once the hold lifts, everything goes in order."""
    released: list[bool] = []

    def hold(name: str) -> str | None:
        return None if released else WAITING_FOR_WORD

    with Outbox(journal.path, [http(webhook, webhook_secret)], hold=hold,
                held_ask_every_s=0.05) as outbox:
        written = fill(journal, 3)
        outbox.notify()
        webhook.reply_extra = {"resend_from": 1}  # asked for: not served while held back
        wait_until(lambda: webhook.requests >= 3, 10, "the backend asked again and again")
        figures = outbox.status()["backend"]
        assert webhook.events == []
        assert figures["state"] == WAITING_FOR_WORD and figures["backlog"] == len(
            [e for e in written if e])  # every journaled event waits
        released.append(True)
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
    assert webhook.unique_ids() == [e["id"] for e in written]
    assert webhook.conflicts == []


def test_a_backend_that_cannot_be_asked_is_reported_unreachable(journal, webhook_secret):
    """Held back and its backend refusing connections: after unreachable_after_s the table
    is told, as for a delivery failing that long."""
    changes: list[tuple[str, bool, str]] = []
    down = HttpTransport(HttpTransportSettings(
        url="http://127.0.0.1:9/events", secret_file=str(webhook_secret), allow_insecure=True,
        unreachable_after_s=0.3), table=TABLE, name="backend")
    with Outbox(journal.path, [down], hold=lambda name: WAITING_FOR_WORD,
                held_ask_every_s=0.05,
                on_backend_change=lambda *change: changes.append(change)) as outbox:
        fill(journal, 1)
        outbox.notify()
        wait_until(lambda: changes, 10, "the backend reported unreachable")
        figures = outbox.status()["backend"]
    assert changes[0][:2] == ("backend", False)
    assert figures["state"] == WAITING_FOR_WORD and "where do you stand" in figures["last_error"]


def test_a_resend_request_out_of_range_is_refused_naming_the_backend(
        journal, webhook, webhook_secret, caplog) -> None:
    with caplog.at_level(logging.INFO), \
            Outbox(journal.path, [http(webhook, webhook_secret)],
                   resend_interval_s=0.05) as outbox:
        fill(journal, 2)
        outbox.notify()
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
        webhook.reply_extra = {"resend_from": 2**63 - 1}
        assert fill(journal, 2)  # events: a batch whose answer asks
        outbox.notify()
        assert outbox.wait_delivered(journal.last_event_seq(), 10)
        refusal = f"resend_from must be between 1 and {2**53 - 1}, got {2**63 - 1}; ignored"
        wait_until(lambda: refusal in caplog.text, 10, "the refusal")
        assert outbox.status()["backend"]["state"] == "ok"
    # refused where it enters, naming the backend (its address) and the value
    assert f"http {webhook.url}: {refusal}" in caplog.text
