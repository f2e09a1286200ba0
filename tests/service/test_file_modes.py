"""The table's files are private whoever starts it: the journal (and its WAL/SHM), archives,
the events file and the demo's state come out without group write or any access by others,
even when started from a shell whose umask lets everyone read (0022)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    daemon_config,
    edited_config,
    running_daemon,
)
from support.waiting import wait_until

LOOSE_UMASK = 0o022  # a usual login shell's: files 0644, directories 0755
NOT_PRIVATE = 0o027  # group write, and anything for others


def modes_under(directory: Path) -> dict[str, int]:
    """Every file and directory under ``directory`` (sockets and symlinks aside): its mode."""
    found = {}
    for path in [directory, *directory.rglob("*")]:
        mode = path.lstat().st_mode
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            found[str(path.relative_to(directory))] = stat.S_IMODE(mode)
    return found


def assert_private(directory: Path) -> dict[str, int]:
    found = modes_under(directory)
    loose = {path: oct(mode) for path, mode in found.items() if mode & NOT_PRIVATE}
    assert loose == {}, f"readable or writable by others: {loose}"
    return found


def pokdeng_table(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", *args], capture_output=True,
                          text=True, timeout=120, preexec_fn=lambda: os.umask(LOOSE_UMASK))


def wait_for_files(directory: Path, names: list[str], timeout: float = 15.0) -> None:
    wait_until(lambda: all((directory / name).exists() for name in names), timeout,
               f"{names} to be created", details=lambda: f"have {modes_under(directory)}")


def test_the_daemon_keeps_its_journal_and_events_private(short_dir: Path) -> None:
    shoe = ShoeSimulator(short_dir / "shoe", "beetek")
    shoe.start()
    panel = LinePanelPty()
    config = daemon_config(short_dir, short_dir / "shoe", panel.path)
    state = short_dir / "state"
    with edited_config(config) as data:
        data["transports"]["file"]["path"] = str(state / "events.jsonl")
    try:
        with running_daemon(config, short_dir, panel, umask=LOOSE_UMASK):
            panel.send("new_shoe")  # shoe_started goes to the events file
            live = ["journal.sqlite", "journal.sqlite-wal", "journal.sqlite-shm",
                    "events.jsonl"]
            wait_for_files(state, live)
            assert set(live) <= set(assert_private(state))
    finally:
        shoe.close(drain_timeout=0.2)
        panel.close()
    assert {"journal.sqlite", "events.jsonl"} <= set(assert_private(state))


@pytest.mark.slow
def test_the_demo_and_the_journal_commands_keep_their_files_private(tmp_path: Path) -> None:
    state = tmp_path / "state"
    played = pokdeng_table("demo", "--speed", "200", "--quiet", "--seed", "5",
                           "--state-dir", str(state))
    assert played.returncode == 0, played.stderr[-2000:]
    assert {"journal.sqlite", "events.jsonl", "demo.json", "journal.key",
            "journal.sqlite.head"} <= set(assert_private(state))
    assert (state / "journal.key").stat().st_mode & 0o777 == 0o600  # the chain key: owner only
    journal, key = str(state / "journal.sqlite"), str(state / "journal.key")
    archived = pokdeng_table("journal", "archive", journal, "--older-than", "0s",
                             "--key-file", key)
    assert archived.returncode == 0 and "shoe(s) 1)" in archived.stdout, archived.stderr
    verified = pokdeng_table("journal", "verify", journal, "--key-file", key)
    assert verified.returncode == 0, verified.stderr
    files = assert_private(state)
    assert "journal.sqlite.archive/manifest.json" in files
    assert any(name.startswith("journal.sqlite.archive/records-") for name in files)
