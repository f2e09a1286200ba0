"""``demo --config FILE --faults …``: the real daemon on the simulated devices, pointed at an
integrator's own webhook (a real HTTP server), making the faults a real table makes; and a
sandbox file that is wrong is refused naming what and where."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.commands.demo_sandbox import FaultPlan
from controller.table.events import validate_event
from testkit.backends import WebhookBackend


def demo(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", "demo", "--no-display", *args],
                          capture_output=True, text=True, timeout=timeout)


def sandbox_file(tmp_path: Path, backend: WebhookBackend, secret: Path) -> Path:
    path = tmp_path / "sandbox.yaml"
    path.write_text(f"""table:
  id: T07
transports:
  http:
    url: {backend.url}
    allow_insecure: true
    secret_file: {secret}
    backoff_initial_s: 0.05
    backoff_max_s: 0.5
""")
    return path


def test_the_fault_plan_goes_round_the_list_every_nth_round() -> None:
    plan = FaultPlan(("misread", "pause"), every=2)
    assert [plan.for_round(n) for n in range(1, 8)] == \
        [None, "misread", None, "pause", None, "misread", None]
    assert FaultPlan().for_round(3) is None  # no faults asked: none made


@pytest.mark.slow
def test_a_sandbox_table_sends_every_event_to_the_integrators_webhook_through_its_faults(
        tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"sandbox-secret\n")
    backend = WebhookBackend(b"sandbox-secret")
    state = tmp_path / "state"
    result = demo("--config", str(sandbox_file(tmp_path, backend, secret)),
                  "--faults", "misread,pause,cancel,restart,outage", "--fault-every", "1",
                  "--outage-seconds", "1", "--rounds", "5", "--seed", "11",
                  "--state-dir", str(state))
    assert result.returncode == 0, result.stderr + result.stdout
    assert "table T07" in result.stdout
    for said in ("misreads a card", "pauses the table", "cancels the round",
                 "stops mid-round; it restarts", "stays off for 1 s"):
        assert said in result.stdout

    # the webhook holds exactly what the table journaled: the demo's own events file
    written = {}
    for line in (state / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        written.setdefault(event["id"], event)
    last = max(e["seq"] for e in written.values())
    assert backend.wait_for_seq(last, 30)
    assert backend.conflicts == [] and backend.bad_signatures == 0
    stored = sorted(backend.stored, key=lambda e: e["seq"])
    assert [e["seq"] for e in stored] == list(range(1, last + 1))
    for event in stored:
        validate_event(event)
        assert event["table"] == "T07" and event["id"] == f"T07:{event['seq']}"
    kinds = [e["type"] for e in stored]
    assert kinds.count("round_result") == 5
    assert "round_cancelled" in kinds
    pauses = [e["data"].get("code") for e in stored if e["type"] == "paused"]
    assert "supervisor_pause" in pauses and "misread" in pauses
    backend.down()


@pytest.mark.parametrize(("text", "says"), [
    ("table: {id: T01}\n", "transports: give `http` and/or `mqtt`"),
    ("transports: {http: {url: 'https://x'}}\nshoe: {driver: beetek}\n", "shoe: a sandbox"),
    ("transports: {file: {path: /tmp/x}}\n", "transports.file"),
    ("table: {id: T01, betting_seconds: 3}\ntransports: {mqtt: {host: h}}\n",
     "table: only `id`"),
    ("transports: {http: {url: 'https://b.example', timeout_s: -1, secret_file: /nonexist}}\n",
     "transports.http.timeout_s"),
    ("transports: {http: {url: 'http://127.0.0.1:1/x', allow_insecure: true, timeout_s: 0}}\n",
     "transports.http.timeout_s"),
    ("table: {id: 'T 01'}\ntransports: {http: {url: 'http://127.0.0.1:1/x', "
     "allow_insecure: true}}\n", "table.id"),
])
def test_a_wrong_sandbox_file_is_refused_naming_what_and_where(tmp_path: Path, text: str,
                                                               says: str) -> None:
    path = tmp_path / "sandbox.yaml"
    path.write_text(text)
    result = demo("--config", str(path), "--state-dir", str(tmp_path / "state"), timeout=60)
    assert result.returncode != 0
    assert says in result.stderr
    assert str(path) in result.stderr
    assert "Traceback" not in result.stderr  # the table's own config check: exit 78, its words


def test_an_unknown_fault_is_refused() -> None:
    result = demo("--faults", "misread,earthquake", timeout=60)
    assert result.returncode != 0
    assert "unknown fault 'earthquake'" in result.stderr and "outage" in result.stderr
