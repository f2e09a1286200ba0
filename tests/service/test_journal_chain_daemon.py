"""The real daemon says which chain its journal has (status, status --json), keys it from a
systemd credential ($CREDENTIALS_DIRECTORY), signs its head file on a clean stop, and refuses to
start with another key (exit 78, naming the file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.durability.head_file import head_path
from controller.service.control.client import ControlClient
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    cli,
    daemon_config,
    edited_config,
    start_daemon,
    stop_daemon,
    wait_status,
)

EX_CONFIG = 78


def keyed(config: Path, credential: str) -> None:
    """The daemon's config with the journal keyed from a systemd credential."""
    with edited_config(config) as data:
        data["journal"] = {"key_credential": credential}


@pytest.mark.slow
def test_status_names_the_chain_and_a_credential_keys_it(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    _, panel = devices
    credentials = short_dir / "credentials"
    credentials.mkdir(mode=0o700)
    (credentials / "journal-key").write_text("k3y-" + "ab" * 30 + "\n")
    config = daemon_config(short_dir, short_dir / "shoe", panel.path)
    keyed(config, "journal-key")
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    sock = str(short_dir / "control.sock")
    proc = start_daemon(config, notify.path, log, CREDENTIALS_DIRECTORY=str(credentials))
    try:
        notify.wait_for("READY", "1")
        status = wait_status(ControlClient(sock), lambda s: s.get("chain") is not None)
        assert status["chain"] == "keyed (HMAC-SHA256)"
        assert "chain: keyed (HMAC-SHA256)" in cli("status", "--socket", sock).stdout
        assert json.loads(cli("status", "--socket", sock, "--json").stdout)["chain"] \
            == "keyed (HMAC-SHA256)"
        assert stop_daemon(proc) == 0
    finally:
        stop_daemon(proc)
        notify.close()
    journal = short_dir / "state" / "journal.sqlite"
    head = json.loads(head_path(journal).read_text())
    assert head["chain"] == "hmac-sha256" and len(head["mac"]) == 64
    verified = cli("journal", "verify", str(journal), "--key-file",
                   str(credentials / "journal-key"))
    assert verified.returncode == 0, verified.stderr

    # another key: refused before anything else, naming the journal file
    (credentials / "journal-key").write_text("0" * 64 + "\n")
    refused = subprocess.run([sys.executable, "-m", "controller", "run", "--config",
                              str(config)], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "CREDENTIALS_DIRECTORY": str(credentials),
                                  "NOTIFY_SOCKET": ""})
    said = refused.stdout + refused.stderr
    assert refused.returncode == EX_CONFIG, said[-2000:]
    assert f"{journal}: the key given is not this journal's key" in said


@pytest.mark.slow
def test_status_says_a_table_without_a_key_has_a_plain_chain(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    _, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path)
    notify = NotifyListener(short_dir / "notify")
    proc = start_daemon(config, notify.path, short_dir / "daemon.log")
    sock = str(short_dir / "control.sock")
    try:
        notify.wait_for("READY", "1")
        shown = cli("status", "--socket", sock).stdout
        assert "chain: plain — anyone who can write the file can rewrite it" in shown
    finally:
        stop_daemon(proc)
        notify.close()
