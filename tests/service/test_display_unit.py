"""The kiosk unit for the dealer display: `systemd-analyze verify` accepts it, and it shows the
page the daemon serves, as its own unprivileged user."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller.display.settings import DisplaySettings

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "pokdeng-display.service"
SYSUSERS = REPO / "systemd" / "pokdeng-display.sysusers.conf"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze not installed (Debian package: systemd)")
def test_systemd_analyze_verify_accepts_the_kiosk_unit(tmp_path: Path) -> None:
    # verify checks that ExecStart= is executable: cage may not be installed here.
    cage = tmp_path / "cage"
    cage.write_text(f"#!{sys.executable}\n")
    cage.chmod(0o755)
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/usr/bin/cage", str(cage)))
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                            text=True, timeout=60)
    problems = [line for line in result.stderr.splitlines()
                if UNIT.name in line and "pokdeng-table.service" not in line]
    assert problems == [], result.stderr


def test_the_kiosk_shows_the_default_display_address_as_its_own_user() -> None:
    text = UNIT.read_text()
    assert f"http://{DisplaySettings().listen}/" in text
    assert "--kiosk" in text and "User=pokdeng-display" in text
    users = SYSUSERS.read_text()
    assert "u pokdeng-display" in users
    assert not any(line.startswith("m pokdeng-display pokdeng") for line in users.splitlines())
