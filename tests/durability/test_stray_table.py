"""A table still retrying an earlier test's backend must not land its events on a later one.

The kill-and-restart test once saw 52 events "re-received with different content". Every
test table is ``T7`` with the same secret, and a backend's port is the kernel's pick, handed
out again once freed: a table left over from an earlier test (or another checkout's run on the
same machine, killed by a timeout) retries its old URL forever, and when a new backend gets
that port, the stray's ``T7:1``, ``T7:2``… arrive signed and valid, with another shoe's
bodies. Real parts: two journals of different shoes, two outboxes, the real webhook on the
very port the stray is retrying.
"""

from __future__ import annotations

from pathlib import Path

from controller.durability.delivery.anchors import strip_anchor
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine
from controller.transports import create
from support.waiting import wait_until
from testkit.backends import WebhookBackend

TABLE = "T7"


def journal_of_shoe(path: Path, seed: int, inputs: int) -> list[dict]:
    machine = TableMachine(MachineSettings(table_id=TABLE))
    events = []
    with Journal(path) as journal:
        for inp in shoe_script(seed)[:inputs]:
            produced = machine.handle(inp)
            journal.append(inp, produced)
            events += produced
    return events


def http(url: str, secret: Path):
    return create("http", {"url": url, "secret_file": str(secret), "allow_insecure": True,
                           "batch_max": 25, "backoff_initial_s": 0.01, "backoff_max_s": 0.05},
                  table=TABLE)


def test_a_stray_table_retrying_a_reused_port_is_not_counted_by_the_new_backend(
        tmp_path, webhook_secret):
    secret = webhook_secret.read_bytes().rstrip(b"\n")
    earlier = WebhookBackend(secret)
    port, stale_url = earlier.port, earlier.url
    earlier.down()  # that test ended; its table did not

    stray_events = journal_of_shoe(tmp_path / "stray.db", 1, 60)
    ours = journal_of_shoe(tmp_path / "ours.db", 2, 60)
    assert stray_events[0]["id"] == ours[0]["id"] and stray_events[:40] != ours[:40]

    with Outbox(tmp_path / "stray.db", [http(stale_url, webhook_secret)], idle_poll_s=0.05) \
            as stray:
        wait_until(lambda: stray.status()["http"]["state"] == "retrying", 5,
                   "the stray to retry its old backend")
        backend = WebhookBackend(secret, port=port)  # the kernel hands the port out again
        try:
            with Outbox(tmp_path / "ours.db", [http(backend.url, webhook_secret)],
                        idle_poll_s=0.05) as outbox:
                assert outbox.wait_delivered(ours[-1]["seq"], 10)
                wait_until(lambda: backend.strays >= 3, 5, "the stray to knock",
                           details=lambda: stray.status())
                assert stray.status()["http"]["state"] == "refused"
        finally:
            backend.down()

    assert backend.conflicts == []
    assert [strip_anchor(e) for e in backend.stored] == ours
