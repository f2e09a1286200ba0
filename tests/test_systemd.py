"""The systemd unit: `systemd-analyze verify` accepts it, and it says what issue 6 §4 asks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
UNIT = REPO / "systemd" / "pokdeng-table.service"
INSTALLED_BINARY = "/opt/pokdeng-table/venv/bin/pokdeng-table"


def unit_directives() -> dict[str, list[str]]:
    """Every `Key=value` of the unit, values of repeated keys in order."""
    found: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        found.setdefault(key.strip(), []).append(value.strip())
    return found


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze not installed (Debian package: systemd)")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    # verify checks that ExecStart= is executable: point it at a stand-in for the venv's script.
    binary = tmp_path / "pokdeng-table"
    binary.write_text(f"#!{sys.executable}\nfrom controller.cli import main\nmain()\n")
    binary.chmod(0o755)
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace(INSTALLED_BINARY, str(binary)))
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    # verify only warns about unknown or misspelt keys: those count as failures here.
    problems = [line for line in result.stderr.splitlines() if UNIT.name in line]
    assert problems == []


def test_unit_asks_for_what_the_daemon_does() -> None:
    d = unit_directives()
    assert d["Type"] == ["notify"]
    assert d["ExecStart"] == [f"{INSTALLED_BINARY} run --config /etc/pokdeng-table/table.yaml"]
    assert d["Restart"] == ["on-failure"]
    assert "78" in d["RestartPreventExitStatus"][0].split()
    assert d["WatchdogSec"] and d["NotifyAccess"] == ["main"]
    assert d["User"] == ["pokdeng"] and d["Group"] == ["pokdeng"]
    assert d["StateDirectory"] == ["pokdeng-table"]
    assert d["ConfigurationDirectory"] == ["pokdeng-table"]
    assert d["LoadCredential"][0].startswith("backend-secret:")
    assert d["DevicePolicy"] == ["closed"]
    allowed = {value.split()[0] for value in d["DeviceAllow"]}
    assert {"char-ttyUSB", "char-ttyACM", "char-usb_device"} <= allowed
    families = set(d["RestrictAddressFamilies"][0].split())
    assert families == {"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"}
    assert d["ProtectSystem"] == ["strict"] and d["NoNewPrivileges"] == ["yes"]
    # PrivateDevices hides the serial ports; BindsTo would stop the daemon on an unplug.
    assert "PrivateDevices" not in d and "BindsTo" not in d
    # An explicit descriptor limit, not whatever the system's default is.
    assert int(d["LimitNOFILE"][0]) >= 1024


def test_sysusers_creates_the_daemon_user() -> None:
    lines = [line.split() for line in (REPO / "systemd" / "pokdeng-table.sysusers.conf")
             .read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert ["g", "pokdeng", "-"] in lines
    assert any(fields[:3] == ["u", "pokdeng", "-:pokdeng"] for fields in lines)
    # The control socket's readers and the supervisors; the daemon owns the socket's group.
    assert ["g", "pokdeng-control", "-"] in lines and ["g", "pokdeng-supervisor", "-"] in lines
    assert ["m", "pokdeng", "pokdeng-control"] in lines


@pytest.mark.skipif(shutil.which("systemd-sysusers") is None, reason="systemd-sysusers missing")
def test_sysusers_file_parses(tmp_path: Path) -> None:
    result = subprocess.run(["systemd-sysusers", "--dry-run", "--root", str(tmp_path),
                             str(REPO / "systemd" / "pokdeng-table.sysusers.conf")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "pokdeng" in result.stdout + result.stderr
