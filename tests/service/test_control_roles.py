"""Who acted, and only those allowed, on the real daemon: root, a supervisor account and a
dealer account (processes that dropped to those users) against its control socket; the
journal, the events, ``journal export`` and ``status`` name who took each action."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from controller.service.control.client import ControlClient
from controller.table.events import validate_event
from drivers.sim.shoe import ShoeSimulator
from support.control_helpers import NOBODY, UNLISTED_UID, TemporaryGroup, requests_as
from support.daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    cli,
    daemon_config,
    start_daemon,
    stop_daemon,
    wait_status,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")

ROOT = {"user": "root", "uid": 0}
SUPERVISOR = {"user": "nobody", "uid": NOBODY.pw_uid}
PAUSE = {"cmd": "supervisor", "action": "pause"}
RESUME = {"cmd": "supervisor", "action": "resume"}


@pytest.mark.slow
def test_actions_name_who_took_them_and_a_dealer_may_only_read(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty],
        supervisors: TemporaryGroup) -> None:
    _, panel = devices
    short_dir.chmod(0o755)  # the other accounts reach the socket through it
    # The socket's group is nogroup: the dealer's account (primary group nogroup) may open it.
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, group="nogroup",
                           supervisor_group=supervisors.name)
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    sock = str(short_dir / "control.sock")
    client = ControlClient(sock)
    proc = start_daemon(config, notify.path, log)
    try:
        notify.wait_for("READY", "1")
        panel.wait_connected()
        assert cli("supervisor", "--socket", sock, "pause").returncode == 0  # root
        assert requests_as(NOBODY.pw_uid, NOBODY.pw_gid, sock, RESUME)[0]["ok"]  # supervisor
        # The dealer: reads the table, may not act; the table does not hear of it.
        status, refused = requests_as(UNLISTED_UID, NOBODY.pw_gid, sock, {"cmd": "status"},
                                      {"cmd": "supervisor", "action": "enter_card",
                                       "card": "KD"})
        assert status["ok"] and status["status"]["state"] == "no_shoe"
        assert refused["ok"] is False and "may not take supervisor actions" in refused["error"]
        entered = cli("supervisor", "--socket", sock, "enter-card", "QH")
        assert entered.returncode == 1 and "no misread card" in entered.stderr
        assert "QH" not in entered.stderr and "Q♥" not in entered.stderr

        shown = cli("status", "--socket", sock)
        assert "last supervisor actions:" in shown.stdout
        assert "pause by root (uid 0): done: paused" in shown.stdout
        assert f"resume by nobody (uid {NOBODY.pw_uid}): done: resumed" in shown.stdout
        assert "enter_card by root (uid 0): refused: no_card_owed" in shown.stdout
        assert stop_daemon(proc) == 0
        # The list comes back from the journal after a restart.
        proc = start_daemon(config, notify.path, log)
        last = wait_status(client, lambda s: len(s.get("last_actions") or []) == 3)
    finally:
        stop_daemon(proc, signal.SIGKILL)
        notify.close()
    assert [(a["action"], a["by"], a["outcome"]) for a in last["last_actions"]] == [
        ("pause", ROOT, "done"), ("resume", SUPERVISOR, "done"), ("enter_card", ROOT, "refused")]
    assert last["last_actions"][2]["code"] == "no_card_owed"

    exported = cli("journal", "export", str(short_dir / "state" / "journal.sqlite"))
    events = [json.loads(line) for line in exported.stdout.splitlines()]
    for event in events:
        validate_event(event)
    # (a clock that is not synchronised, as in a container, is reported first: not an action)
    assert [(e["type"], e["data"].get("by")) for e in events if e["type"] != "clock_status"] == [
        ("paused", ROOT), ("resumed", SUPERVISOR), ("input_rejected", ROOT)]
    text = log.read_text()
    assert f"supervisor action enter_card refused: {UNLISTED_UID} (uid {UNLISTED_UID})" in text
    for card in ("KD", "K♦", "QH", "Q♥"):  # what callers typed is never echoed
        assert card not in text and card not in exported.stdout
