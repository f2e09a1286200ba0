"""The HTTP webhook transport against a real server on loopback (plain and TLS)."""

from __future__ import annotations

import http.client
import json
import logging
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from controller.durability.delivery.anchors import strip_anchor
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.transports import PermanentError, TransientError, TransportConfigError, create
from controller.transports.http import HttpTransport, HttpTransportSettings, encode_batch
from controller.transports.signing import signed_now
from support.journal_helpers import TABLE, event, fill
from support.waiting import wait_until
from testkit.backends import documented_verifier, make_certificate


def transport(url: str, secret: Path, **options) -> HttpTransport:
    """A transport to ``url``; plain http:// is allowed (the loopback test backend)."""
    return HttpTransport(HttpTransportSettings(url, str(secret), allow_insecure=True, **options),
                         table=TABLE)


def test_posts_a_signed_batch_with_an_idempotency_key(webhook, webhook_secret):
    events = [event(5), event(6), event(7)]
    with transport(webhook.url, webhook_secret) as t:
        t.deliver(events)
        t.deliver([event(8)])  # same keep-alive connection
    assert webhook.bad_signatures == 0
    assert [e["id"] for e in webhook.events] == ["T7:5", "T7:6", "T7:7", "T7:8"]
    assert webhook.events[:3] == events
    assert webhook.idempotency_keys == ["T7:5-7", "T7:8-8"]
    assert json.loads(encode_batch(TABLE, events)) == {"table": TABLE, "events": events}


def replay(url: str, headers: dict[str, str], body: bytes) -> int:
    """POST captured headers and body again, as someone on the network path could: the status."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        conn.request("POST", parts.path, body=body, headers={
            k: v for k, v in headers.items() if k.lower() not in ("host", "content-length")})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_the_documented_verifier_refuses_tampering_and_replays_outside_the_window(
        webhook, webhook_secret):
    window = documented_verifier().WINDOW_S
    with transport(webhook.url, webhook_secret) as t:
        t.deliver([event(1), event(2)])
        headers, body = webhook.last_request
        t.deliver([event(3)])
    assert webhook.bad_signatures == 0
    assert webhook.unique_ids() == ["T7:1", "T7:2", "T7:3"]

    assert replay(webhook.url, headers, body) == 200  # inside the window: a repeat, nothing new
    assert webhook.repeats() == 2 and webhook.unique_ids() == ["T7:1", "T7:2", "T7:3"]
    tampered = body.replace(b'"target":"P1"', b'"target":"P2"', 1)
    assert tampered != body
    assert replay(webhook.url, headers, tampered) == 401
    webhook.clock_offset_s = window + 1  # the same request, replayed later
    assert replay(webhook.url, headers, body) == 401
    refreshed = {**headers, "X-Pokdeng-Timestamp": str(int(headers["X-Pokdeng-Timestamp"])
                                                       + window + 1)}
    assert replay(webhook.url, refreshed, body) == 401  # the timestamp is signed too
    assert webhook.bad_signatures == 3

    # The table's own requests are refused as well while the clocks disagree by more than the
    # window: the transport stops with the backend's reason rather than retrying forever.
    with transport(webhook.url, webhook_secret) as t, pytest.raises(PermanentError, match="401"):
        t.deliver([event(4)])
    assert webhook.unique_ids() == ["T7:1", "T7:2", "T7:3"]


def test_each_attempt_is_signed_afresh_under_the_same_idempotency_key(webhook, webhook_secret):
    secret = webhook_secret.read_bytes().rstrip(b"\n")
    webhook.fail_with = [503]
    with transport(webhook.url, webhook_secret) as t:
        with pytest.raises(TransientError):
            t.deliver([event(1)])
        first, body = webhook.last_request
        while time.time() < int(first["X-Pokdeng-Timestamp"]) + 1:  # the timestamp's resolution
            time.sleep(0.01)
        t.deliver([event(1)])
    again, same_body = webhook.last_request
    assert same_body == body
    assert again["Idempotency-Key"] == first["Idempotency-Key"] == "T7:1-1"
    assert int(again["X-Pokdeng-Timestamp"]) > int(first["X-Pokdeng-Timestamp"])
    assert again["X-Pokdeng-Signature"] != first["X-Pokdeng-Signature"]
    assert documented_verifier().signature_ok(secret, first["X-Pokdeng-Timestamp"],
                                              first["X-Pokdeng-Signature"], body, time.time())
    assert webhook.bad_signatures == 0 and webhook.unique_ids() == ["T7:1"]


def test_the_same_batch_gives_the_same_body_bytes():
    events = [event(1), event(2)]
    again = json.loads(json.dumps(events))
    assert encode_batch(TABLE, events) == encode_batch(TABLE, again)


def test_wrong_secret_is_a_permanent_error(webhook, tmp_path):
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-secret\n")
    with transport(webhook.url, wrong) as t, pytest.raises(PermanentError, match="401"):
        t.deliver([event(1)])
    assert webhook.bad_signatures == 1 and webhook.events == []


@pytest.mark.parametrize("answer", [500, 503, 502, 408, 429, "drop"])
def test_server_errors_and_dropped_connections_are_transient(webhook, webhook_secret, answer):
    webhook.fail_with = [answer]
    with transport(webhook.url, webhook_secret) as t:
        with pytest.raises(TransientError) as caught:
            t.deliver([event(1)])
        if answer in (429, 503):
            assert caught.value.retry_after == 0
        t.deliver([event(1)])  # the next attempt goes through
    assert [e["id"] for e in webhook.events] == ["T7:1"]


@pytest.mark.parametrize("status", [400, 404, 409, 422, 301])
def test_other_client_errors_are_permanent_and_say_what_came_back(webhook, webhook_secret,
                                                                  status):
    webhook.fail_with = [status]
    with transport(webhook.url, webhook_secret) as t:
        with pytest.raises(PermanentError, match=f"-> {status} .*told to fail"):
            t.deliver([event(1)])


def test_refused_connection_and_timeout_are_transient(webhook, webhook_secret):
    webhook.stall_s = 1.0
    webhook.fail_with = ["stall"]
    with transport(webhook.url, webhook_secret, timeout_s=0.2) as t:
        with pytest.raises(TransientError, match="timed out"):
            t.deliver([event(1)])
        webhook.down()
        with pytest.raises(TransientError, match="ConnectionRefused"):
            t.deliver([event(1)])


def test_a_reply_slower_than_timeout_s_brings_the_batch_twice_and_the_verifier_stores_it_once(
        webhook, webhook_secret, tmp_path):
    """docs/backend.md: a reply slower than timeout_s makes the whole batch come again. The
    real webhook stores the first attempt and answers it after the table gave up; the table
    sends the same batch again; the documented verifier stores each event once."""
    journal = Journal(tmp_path / "journal.db")
    written = fill(journal, 12)
    webhook.stall_s = 1.0
    webhook.fail_with = ["stall"]  # the first request only
    table_side = create("http", {"url": webhook.url, "secret_file": str(webhook_secret),
                                 "allow_insecure": True, "timeout_s": 0.3, "batch_max": 100,
                                 "backoff_initial_s": 0.01, "backoff_max_s": 0.05},
                        table=TABLE)
    try:
        with Outbox(journal.path, [table_side]) as outbox:
            assert outbox.wait_delivered(written[-1]["seq"], 10)
            wait_until(lambda: len(webhook.events) == 2 * len(written), 5,
                       "the stalled first attempt to be stored too")
    finally:
        journal.close()
    key = f"{TABLE}:1-{len(written)}"
    assert webhook.idempotency_keys == [key, key]          # the whole batch, twice
    assert webhook.repeats() == len(written)
    assert webhook.events[:len(written)] == webhook.events[len(written):]  # the same bodies
    assert [strip_anchor(e) for e in webhook.stored] == written  # each event once, in order
    assert webhook.conflicts == [] and webhook.bad_signatures == 0

    # The same id with another body is the one thing a repeat may never be: the verifier names
    # it, and the first body stands.
    changed = {**webhook.stored[3], "data": {"index": 99, "target": "P5"}}
    body = encode_batch(TABLE, [changed])
    parts = urlsplit(webhook.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        conn.request("POST", parts.path, body=body, headers={
            "Content-Type": "application/json", "X-Pokdeng-Table": TABLE,
            **signed_now(webhook_secret.read_bytes().rstrip(b"\n"), body)})
        assert conn.getresponse().status == 200
    finally:
        conn.close()
    assert webhook.conflicts == [changed["id"]]
    assert [strip_anchor(e) for e in webhook.stored] == written


def test_secret_from_a_systemd_credential(webhook, webhook_secret, tmp_path, monkeypatch):
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "webhook").write_bytes(webhook_secret.read_bytes())
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    t = create("http", {"url": webhook.url, "secret_credential": "webhook",
                        "allow_insecure": True}, table=TABLE)
    t.deliver([event(1)])
    t.close()
    assert webhook.bad_signatures == 0 and len(webhook.events) == 1


def test_config_errors_name_the_option(tmp_path, webhook_secret, monkeypatch):
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    with pytest.raises(TransportConfigError, match="url"):
        transport("ftp://x/y", webhook_secret)
    with pytest.raises(TransportConfigError, match="secret_file: cannot read .*missing"):
        transport("http://127.0.0.1:9/x", tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(TransportConfigError, match="is empty"):
        transport("http://127.0.0.1:9/x", empty)
    with pytest.raises(TransportConfigError, match="CREDENTIALS_DIRECTORY"):
        create("http", {"url": "http://127.0.0.1:9/x", "secret_credential": "w",
                        "allow_insecure": True}, table=TABLE)
    with pytest.raises(TransportConfigError, match="unknown option.*urll"):
        create("http", {"urll": "http://127.0.0.1:9/x"}, table=TABLE)
    with pytest.raises(TransportConfigError, match="unknown transport kind 'smtp'"):
        create("smtp", {}, table=TABLE)


# -- TLS ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    return make_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_server(certificate, webhook_secret):
    cert, key = certificate
    secret = webhook_secret.read_bytes().rstrip(b"\n")
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            good = documented_verifier().signature_ok(
                secret, self.headers["X-Pokdeng-Timestamp"], self.headers["X-Pokdeng-Signature"],
                body, time.time())
            seen.extend(json.loads(body)["events"] if good else [])
            self.send_response(200 if good else 401)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}/hook", seen
    server.shutdown()
    server.server_close()


def test_tls_is_verified_by_default(tls_server, webhook_secret, certificate):
    url, seen = tls_server
    with transport(url, webhook_secret) as t:
        with pytest.raises(TransientError, match="certificate verification failed"):
            t.deliver([event(1)])
    with transport(url, webhook_secret, ca_file=str(certificate[0])) as t:
        t.deliver([event(1)])
    assert [e["id"] for e in seen] == ["T7:1"]


def test_insecure_tls_works_but_warns_loudly(tls_server, webhook_secret, caplog):
    url, seen = tls_server
    with caplog.at_level(logging.WARNING, logger="pokdeng.transports.http"):
        t = transport(url, webhook_secret, verify_tls=False)
    assert "VERIFICATION IS OFF" in caplog.text
    t.deliver([event(2)])
    t.close()
    assert [e["id"] for e in seen] == ["T7:2"]
