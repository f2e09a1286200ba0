"""The Node.js reference receiver (examples/node-receiver/) answers as docs/backend.md's "What
to answer" says, each case posted to the real process over HTTP, signed as the table signs:
401 for a bad signature and for a table it has no secret for, 403 for another table's events,
400 for what is not JSON; 2xx with ``held`` for what it stores, with ``resend_from`` for a
gap; an event that fails the schemas is stored and alarmed (2xx), an id with another body is
alarmed and the first kept."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from controller.durability.canonical_form import event_digest
from controller.table.events import EventSchemaError, validate_event
from controller.transports.signing import signed_now
from support import node_packages
from support.waiting import wait_until
from testkit.backends import free_port

RECEIVER_DIR = Path(__file__).resolve().parents[2] / "examples" / "node-receiver"
SECRET = b"answers-secret"


@pytest.fixture
def receiver(tmp_path: Path):
    node = node_packages.node(RECEIVER_DIR, ("ajv", "canonicalize", "mqtt"))
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET + b"\n")
    port = free_port()
    proc = subprocess.Popen([node, str(RECEIVER_DIR / "receiver.js"), "--store",
                             str(tmp_path / "store"), "--secret", f"T01={secret}",
                             "--http-port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # {"what": "http listening", …}
    assert "http listening" in line, proc.stderr.read() if proc.stderr else ""
    yield port, tmp_path / "store"
    proc.send_signal(signal.SIGTERM)
    proc.wait(10)


def event(seq: int, table: str = "T01", **data: Any) -> dict[str, Any]:
    return {"v": 1, "id": f"{table}:{seq}", "table": table, "seq": seq,
            "time": "2026-12-02T08:00:00.000Z", "type": "clock_status", "shoe": None,
            "round": None, "data": data or {"sync": "synchronised", "max_error_s": 0.25}}


def post(port: int, events: list[dict[str, Any]], table: str = "T01", secret: bytes = SECRET,
         body: bytes | None = None) -> tuple[int, dict[str, Any]]:
    body = body if body is not None else json.dumps({"events": events, "table": table}).encode()
    headers = {"Content-Type": "application/json", "X-Pokdeng-Table": table,
               **signed_now(secret, body)}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/pokdeng/events", body, headers)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


def alarms(store: Path) -> list[dict[str, Any]]:
    path = store / "alarms.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def stored(store: Path) -> list[dict[str, Any]]:
    path = store / "http" / "T01.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_node_receiver_answers_each_case_as_the_docs_say(receiver) -> None:
    port, store = receiver
    first = event(1)
    validate_event(first)

    assert post(port, [])[0] == 200  # the table's start-up ask: nothing stored, held told
    assert post(port, [])[1] == {"held": {"seq": 0}}
    assert post(port, [first], secret=b"wrong")[0] == 401
    assert post(port, [event(1, "T09")], table="T09")[0] == 401  # a table it has no secret for
    assert post(port, [event(1, "T02")])[0] == 403  # T01's secret speaking for T02
    assert post(port, [], body=b"not json")[0] == 400
    assert stored(store) == []

    status, answer = post(port, [first])
    assert (status, answer) == (200, {"held": {"seq": 1, "sha256": event_digest(first)}})

    broken = event(2, sync="sometimes")  # fails its schema
    with pytest.raises(EventSchemaError):
        validate_event(broken)
    status, answer = post(port, [broken])
    assert status == 200 and answer["held"]["seq"] == 2  # stored: the table's signed record

    other_body = event(1, sync="unknown")  # seq 1 again, another body
    assert post(port, [other_body])[0] == 200

    status, answer = post(port, [event(5)])  # 3 and 4 missing
    assert status == 200 and answer["resend_from"] == 3 and answer["held"]["seq"] == 2
    time.sleep(0.1)
    status, answer = post(port, [event(6)])  # still missing: asked again only 5 s later
    assert status == 200 and "resend_from" not in answer

    assert stored(store) == [first, broken]  # the first body kept; nothing past the gap
    wait_until(lambda: len(alarms(store)) >= 6, 5, "the alarms")
    kinds = [a["alarm"] for a in alarms(store)]
    assert kinds == ["bad signature", "unknown table", "events of another table", "not JSON",
                     "schema", "two bodies"]
