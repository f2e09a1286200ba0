"""The systemd unit: `systemd-analyze verify` accepts it, and it says what issue 6 §4 asks."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support.units import unit_directives as directives

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "pokdeng-table.service"
INSTALLED_BINARY = "/opt/pokdeng-table/venv/bin/pokdeng-table"


def unit_directives() -> dict[str, list[str]]:
    """Every `Key=value` of the single-table unit, values of repeated keys in order."""
    return directives(UNIT)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze not installed (Debian package: systemd)")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    # verify checks that ExecStart= is executable: point it at a stand-in for the venv's script.
    binary = tmp_path / "pokdeng-table"
    binary.write_text(f"#!{sys.executable}\nfrom controller.commands.cli import main\nmain()\n")
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
    assert {"char-188", "char-166", "char-189"} <= allowed  # ttyUSB, ttyACM, /dev/bus/usb
    assert all(value.split()[1] == "rw" for value in d["DeviceAllow"])
    families = set(d["RestrictAddressFamilies"][0].split())
    assert families == {"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"}
    assert d["ProtectSystem"] == ["strict"] and d["NoNewPrivileges"] == ["yes"]
    # PrivateDevices hides the serial ports; BindsTo would stop the daemon on an unplug.
    assert "PrivateDevices" not in d and "BindsTo" not in d
    # An explicit descriptor limit, not whatever the system's default is.
    assert int(d["LimitNOFILE"][0]) >= 1024
    # The housekeeping children may go back to nice 0 while they hold the journal's lock.
    assert d["LimitNICE"] == ["+0"]


def test_device_access_does_not_depend_on_when_the_drivers_loaded() -> None:
    """systemd resolves `char-NAME` from /proc/devices when the unit starts: a name whose driver
    is a module (usbserial, cdc_acm: loaded by udev, maybe after the unit) is not there yet, and
    the daemon would be refused its shoe until a restart. Only numbers, or the names of majors
    the kernel registers before any unit starts (the tty core's ttyS), are allowed."""
    registered_at_boot = {"char-ttyS"}
    for value in unit_directives()["DeviceAllow"]:
        entry = value.split()[0]
        assert entry in registered_at_boot or re.fullmatch(r"char-\d+", entry), value


def test_sysusers_creates_the_daemon_user() -> None:
    lines = [line.split() for line in (REPO / "systemd" / "pokdeng-table.sysusers.conf")
             .read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert ["g", "pokdeng", "-"] in lines
    assert any(fields[:3] == ["u", "pokdeng", "-:pokdeng"] for fields in lines)
    # The control socket's readers and the supervisors (the unit's SupplementaryGroups= lets the
    # daemon hand the socket to the readers' group: tested with the unit).
    assert ["g", "pokdeng-control", "-"] in lines and ["g", "pokdeng-supervisor", "-"] in lines


@pytest.mark.skipif(shutil.which("systemd-sysusers") is None, reason="systemd-sysusers missing")
def test_sysusers_file_parses(tmp_path: Path) -> None:
    result = subprocess.run(["systemd-sysusers", "--dry-run", "--root", str(tmp_path),
                             str(REPO / "systemd" / "pokdeng-table.sysusers.conf")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "pokdeng" in result.stdout + result.stderr


SYSTEMD = REPO / "systemd"


def sysusers() -> list[list[str]]:
    """The sysusers.d lines, split into fields (quoted fields kept whole)."""
    text = (SYSTEMD / "pokdeng-table.sysusers.conf").read_text()
    return [shlex.split(line) for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def udev_rules() -> list[dict[str, list[str]]]:
    """Every rule of 99-pokdeng.rules, the commented-out alternatives too (an installer may
    switch one on): key -> the values it is given, in order."""
    rules, pending = [], ""
    for line in (SYSTEMD / "99-pokdeng.rules").read_text().splitlines():
        body = line.lstrip("# ").rstrip() if line.startswith("#") else line.rstrip()
        if not pending and not re.match(r"(SUBSYSTEMS?|KERNEL|ACTION)==", body):
            continue
        pending += body.rstrip("\\") + " "
        if not body.endswith("\\"):
            rule: dict[str, list[str]] = {}
            for key, value in re.findall(r'([A-Z_]+(?:\{[^}]*\})?)\s*[=!+:]?=\s*"([^"]*)"',
                                         pending):
                rule.setdefault(key, []).append(value)
            rules.append(rule)
            pending = ""
    return rules


def test_only_the_daemon_can_open_the_devices_people_use_the_socket() -> None:
    entries = sysusers()
    user = next(fields for fields in entries if fields[0] == "u")
    daemon_user, daemon_group = user[1], user[2].split(":")[1]
    people_groups = {fields[1] for fields in entries if fields[0] == "g"} - {daemon_group}
    assert people_groups >= {"pokdeng-control", "pokdeng-supervisor"}
    # nobody else is put in the daemon's group, and the daemon only in the socket's group
    assert all(fields[2] != daemon_group for fields in entries if fields[0] == "m")

    rules = udev_rules()
    device_rules = [rule for rule in rules if "GROUP" in rule]
    assert len(device_rules) >= 4  # shoe (USB and RS-232), panel (USB, hidraw, serial)
    for rule in device_rules:
        assert rule["GROUP"] == [daemon_group], rule
        assert all(mode[-1] == "0" for mode in rule.get("MODE", [])), rule  # nothing for others
    named = " ".join(value for rule in rules for values in rule.values() for value in values)
    assert not any(group in named for group in people_groups)

    unit = unit_directives()
    assert unit["User"] == [daemon_user] and unit["Group"] == [daemon_group]
    example = yaml.safe_load((REPO / "config" / "example.yaml").read_text())
    socket_group = example["control"]["group"]
    assert socket_group in people_groups
    assert unit["SupplementaryGroups"] == [socket_group]  # to chown the socket; nothing more


def test_tmpfiles_keep_the_config_for_the_daemon_and_the_secret_for_root() -> None:
    text = (SYSTEMD / "pokdeng-table.tmpfiles.conf").read_text()
    entries = {fields[1]: fields for fields in (line.split() for line in text.splitlines()
                                                if line.strip() and not line.startswith("#"))}
    daemon_group = next(fields for fields in sysusers() if fields[0] == "u")[2].split(":")[1]
    assert entries["/etc/pokdeng-table"][2:5] == ["0750", "root", daemon_group]
    assert entries["/etc/pokdeng-table/credentials"][2:5] == ["0700", "root", "root"]
    # the metrics files (docs/install.md §9): the daemon's to write, node_exporter's to read
    daemon_user = next(fields for fields in sysusers() if fields[0] == "u")[1]
    assert entries["/var/lib/pokdeng-table-metrics"][2:5] == ["0755", daemon_user, daemon_group]


def test_unit_starts_after_time_sync_and_may_read_the_clock_state() -> None:
    d = unit_directives()
    assert "time-sync.target" in " ".join(d["After"]).split()
    assert "time-sync.target" in " ".join(d["Wants"]).split()
    # Reading the kernel's synchronisation (adjtimex; glibc calls clock_adjtime) is allowed;
    # setting the clock is not: no capability for it, and ProtectClock= would block the read.
    assert "ProtectClock" not in d
    assert d["CapabilityBoundingSet"] == [""] and d["NoNewPrivileges"] == ["yes"]
    allowed = " ".join(d["SystemCallFilter"]).split()
    assert {"adjtimex", "clock_adjtime"} <= set(allowed)


def syscall_group(name: str) -> set[str]:
    """A SystemCallFilter= name, a group expanded (nested ones too) with systemd's own tables."""
    if not name.startswith("@"):
        return {name}
    listing = subprocess.run(["systemd-analyze", "syscall-filter", name],
                             capture_output=True, text=True, timeout=60, check=True)
    entries = [line.strip() for line in listing.stdout.splitlines()[1:]]
    return set().union(*(syscall_group(entry) for entry in entries
                         if entry and not entry.startswith("#")))


def unit_syscalls() -> set[str]:
    """Every system call the unit's SystemCallFilter= lets through."""
    return set().union(*(syscall_group(name) for value in unit_directives()["SystemCallFilter"]
                         for name in value.split()))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze not installed (Debian package: systemd)")
def test_the_unit_syscall_filter_lets_the_clock_state_through_but_not_clock_setting() -> None:
    allowed = unit_syscalls()
    assert len(allowed) > 100  # the groups were expanded
    assert {"adjtimex", "clock_adjtime"} <= allowed
    assert not {"clock_settime", "settimeofday"} & allowed


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze not installed (Debian package: systemd)")
def test_the_unit_syscall_filter_lets_the_screen_process_shut_itself_in() -> None:
    """Landlock's calls (controller/service/screens/sandbox.py), which systemd 252's
    @system-service leaves out: filtered, the screen process would run unsandboxed."""
    assert {"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
            "prctl"} <= unit_syscalls()
