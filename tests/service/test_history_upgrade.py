"""A table upgraded onto a journal an older version wrote (``"betting_seconds":15.0`` in its
events) starts and deals when its backend says where it stands with the RFC 8785 digest a
Node.js backend computes (``15``), and when it says so with the older documented form's
digest: a hashing difference is no fork. The real daemon, a real webhook, a real node."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from controller.durability.canonical_form import event_digest, legacy_event_digest
from controller.table.events import to_json_line
from support.daemon_helpers import NotifyListener, start_daemon, stop_daemon
from support.histories import config_for, holding, http, received
from support.node_packages import NODE_DIR, node

pytestmark = pytest.mark.slow

OLDER_DEMO = textwrap.dedent("""
    import sys
    from unittest import mock
    import controller.table.events as events
    # the event writer of versions before RFC 8785: whole numbers kept as floats
    mock.patch.object(events, "whole_numbers_as_integers", lambda value: value).start()
    from controller.commands.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.fixture(scope="module")
def older_table(tmp_path_factory) -> Path:
    """A demo table's state directory, its two rounds dealt by the older event writer."""
    state = tmp_path_factory.mktemp("older") / "table"
    done = subprocess.run([sys.executable, "-c", OLDER_DEMO, "demo", "--rounds", "2", "--speed",
                           "200", "--quiet", "--seed", "7", "--state-dir", str(state)],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return state


def up_to_the_last_round_opened(state: Path) -> list[dict]:
    events = received(state)
    last = max(i for i, e in enumerate(events) if e["type"] == "round_opened")
    assert isinstance(events[last]["data"]["betting_seconds"], float)  # 15.0 on the wire
    return events[:last + 1]


def node_digest(event: dict) -> str:
    done = subprocess.run([node(), str(NODE_DIR / "digests.js")], input=to_json_line(event),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seq, digest = done.stdout.split()
    assert int(seq) == event["seq"]
    return digest


def starts_and_deals_on(state: Path, held: dict, tmp_path: Path) -> None:
    """``run`` on ``state`` with a webhook whose start-up answer is ``held``: READY, a clean
    stop, and no conflict at the backend."""
    backend = holding(up_to_the_last_round_opened(state))
    backend.reply_extra = {"held": held}  # the answer to the table's start-up ask
    notify = NotifyListener(tmp_path / "notify")
    log = tmp_path / "daemon.log"
    proc = start_daemon(config_for(state, http(backend), confirm_s=10.0), notify.path, log)
    try:
        notify.wait_for("READY", "1", timeout=60)
    finally:
        code = stop_daemon(proc)
        notify.close()
        backend.down()
    text = log.read_text()
    assert code == 0, text[-3000:]
    assert "forked" not in text and "does not match" not in text
    assert backend.conflicts == []


def test_a_nodejs_backends_digest_of_an_older_event_is_no_fork(older_table, tmp_path) -> None:
    state = tmp_path / "table"
    subprocess.run(["cp", "-a", str(older_table), str(state)], check=True)
    event = up_to_the_last_round_opened(state)[-1]
    digest = node_digest(event)
    assert digest == event_digest(event) != legacy_event_digest(event)
    starts_and_deals_on(state, {"seq": event["seq"], "sha256": digest}, tmp_path)


def test_an_older_backends_digest_is_still_accepted(older_table, tmp_path) -> None:
    state = tmp_path / "table"
    subprocess.run(["cp", "-a", str(older_table), str(state)], check=True)
    event = up_to_the_last_round_opened(state)[-1]
    starts_and_deals_on(state, {"seq": event["seq"], "sha256": legacy_event_digest(event)},
                        tmp_path)
