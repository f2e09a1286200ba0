"""`journal new-key FILE`: the journal's chain key made by the program itself (the guide needs
no openssl), owner-only, long enough for the daemon, and never over an existing key."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

from controller.service.config.settings import parse_config
from controller.service.trust.journal_key import MIN_KEY_BYTES, load_journal_key


def new_key(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", "journal", "new-key", str(path)],
                          capture_output=True, text=True, timeout=60)


def test_new_key_writes_a_private_key_the_daemon_accepts_and_never_overwrites(
        tmp_path: Path) -> None:
    path = tmp_path / "journal-key"
    made = new_key(path)
    assert made.returncode == 0, made.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = path.read_bytes()
    config = parse_config({"table": {"id": "T1"}, "state_dir": str(tmp_path),
                           "shoe": {"driver": "beetek", "url": "/dev/null"},
                           "journal": {"key_file": str(path)}}, "test")
    loaded = load_journal_key(config)
    assert loaded is not None and len(loaded) >= MIN_KEY_BYTES
    assert new_key(tmp_path / "another").returncode == 0
    assert (tmp_path / "another").read_bytes() != key  # random: two keys differ

    again = new_key(path)
    assert again.returncode == 1 and "exists" in again.stderr
    assert path.read_bytes() == key
    missing_dir = new_key(tmp_path / "no-such-dir" / "key")
    assert missing_dir.returncode == 1 and "cannot write" in missing_dir.stderr
