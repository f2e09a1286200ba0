"""packaging/fleet-upgrade's refusals, without tables: its arguments, and a table it cannot
reach (the roll stops there, before touching it or any table after it). The roll itself, over
booted tables: tests/packaging/test_fleet.py.

Some tests reach a "table PC" that is a real `sh` running the real step scripts, with
pokdeng-table, dpkg-query, systemctl and apt-get on its PATH as small scripts that answer as a
table would (fake_pc below); each records the arguments it was run with."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

FLEET_UPGRADE = Path(__file__).resolve().parents[2] / "packaging" / "fleet-upgrade"


def roll(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(FLEET_UPGRADE), *args], capture_output=True,
                          text=True, timeout=60)


def test_a_table_it_cannot_reach_stops_the_roll_before_anything_is_touched() -> None:
    # `false` stands for a transport that fails (ssh to a PC that is down): a real command
    result = roll("--version", "0.2.0-1", "--via", "false {host}", "T01=table01", "T02")
    assert result.returncode == 1, result
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "fleet-upgrade: STOPPED at T01: cannot reach it with false table01: exit status 1",
        "fleet-upgrade: upgraded: none; not touched: T02 (they keep their version)"]


def test_bad_arguments_are_named_with_exit_2() -> None:
    no_version = roll("T01")
    assert no_version.returncode == 2 and "--version" in no_version.stderr
    no_place = roll("--version", "1", "--via", "ssh root@studio", "T01")
    assert no_place.returncode == 2
    assert "--via: the template names no {host} or {table}" in no_place.stderr
    twice = roll("--version", "1", "T01=a", "T01=b")
    assert twice.returncode == 2 and "a table is named twice" in twice.stderr


#: the table PC's commands: each logs its arguments (one JSON list a line) and answers
FAKE_COMMANDS = {
    "dpkg-query": "printf '0.1.0-1 ii '",
    "systemctl": "echo active",
    "journalctl": ":",
    "pokdeng-table": """case "$*" in
  *status*) echo '{"paused": false, "draining": false, "fault": null, "shoe": 1,
                   "rounds_played": 4, "state": "betting"}';;
  *drain*) [ -n "$DRAIN_REFUSED" ] && { echo "$DRAIN_REFUSED" >&2; exit 1; }; exit 0;;
esac""",
    "apt-get": """case "$*" in
  *install*) echo "E: Version '0.2.0-1' for 'pokdeng-table' was not found" >&2; exit 100;;
esac""",
}


def fake_pc(tmp_path: Path) -> str:
    """A --via template that runs the step's script in a real sh on this machine, with the
    table PC's commands (FAKE_COMMANDS) first on its PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    for name, body in FAKE_COMMANDS.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n"
                        f"{sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"
                        f' {name} "$@" >> {log}\n{body}\n')
        path.chmod(0o755)
    via = tmp_path / "via"
    # the script's preamble sets the PATH of a table PC: the fake commands go first in it
    via.write_text(f'#!/bin/sh\nshift\nsed "s|^export PATH=|export PATH={bin_dir}:|" | "$@"\n')
    via.chmod(0o755)
    return f"{via} {{host}}"


def calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "calls"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_table_name_or_host_that_is_not_plain_is_refused_before_anything_runs(
        tmp_path: Path) -> None:
    via = fake_pc(tmp_path)
    for table, told in (
            ("T1;touch PWNED;#=t1", "table 'T1;touch PWNED;#': a table's name is letters"),
            ("x$(touch PWNED)", "table 'x$(touch PWNED)': a table's name is letters"),
            ("T1=-oProxyCommand=touch PWNED", "table T1: host '-oProxyCommand=touch PWNED' "
                                              "is not a host name")):
        result = roll("--version", "0.2.0-1", "--via", via, "--control",
                      "--config /etc/pokdeng-table/{table}.yaml", "--unit",
                      "pokdeng-table@{table}", "T00", table)
        assert result.returncode == 2, result
        assert f"fleet-upgrade: {told}" in result.stderr
        assert calls(tmp_path) == []  # not even the table before it was touched
    assert not list(tmp_path.glob("**/PWNED"))


def test_every_value_put_into_the_tables_script_reaches_the_command_as_one_argument(
        tmp_path: Path) -> None:
    """--control is split as a shell would, filled in and quoted: a path with a space, a $(…)
    or a quote is one argument of pokdeng-table on the table PC, never shell code."""
    path = "/etc/pokdeng-table/my tables/$(touch PWNED)'x/{table}.yaml"
    result = roll("--version", "0.2.0-1", "--via", fake_pc(tmp_path), "--round-timeout", "0",
                  "--control", f'--config "{path}"', "--source",
                  f"{tmp_path}/no such'list$(touch PWNED)", "T01")
    assert result.returncode == 1, result
    config = path.replace("{table}", "T01")
    assert ["pokdeng-table", "status", "--config", config, "--json"] in calls(tmp_path)
    assert ["pokdeng-table", "supervisor", "--config", config, "drain", "--wait", "--timeout",
            "600"] in calls(tmp_path)
    assert f"no APT source {tmp_path}/no such'list$(touch PWNED)" in result.stderr
    assert not list(tmp_path.glob("**/PWNED")) and not Path("PWNED").exists()


def test_a_brace_other_than_table_or_host_is_a_usage_error() -> None:
    for option in ("--control", "--unit", "--via"):
        value = {"--via": "ssh root@{host}-{x}"}.get(option, "/x/{table}-{x}.yaml")
        result = roll("--version", "1", option, value, "T01")
        assert result.returncode == 2, result
        assert "Traceback" not in result.stderr
        assert f"fleet-upgrade: {option} '{value}': only {{table}} and {{host}} are filled " \
               "in" in result.stderr


def test_a_drain_refused_at_once_says_why_not_that_it_timed_out(tmp_path: Path) -> None:
    refused = "pokdeng-table: cannot reach /run/pokdeng-table/control.sock: Permission denied"
    result = subprocess.run(
        [sys.executable, str(FLEET_UPGRADE), "--version", "0.2.0-1", "--via", fake_pc(tmp_path),
         "T01", "T02"], capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "DRAIN_REFUSED": refused})
    assert result.returncode == 1, result
    assert "within 600 s" not in result.stderr
    assert re.search(r"fleet-upgrade: STOPPED at T01: the drain failed after \d+ s: "
                     + re.escape(f"{refused}; nothing was installed"), result.stderr), result
    assert not any(call[0] == "apt-get" for call in calls(tmp_path))


def test_a_failed_install_says_the_table_is_left_drained(tmp_path: Path) -> None:
    result = roll("--version", "0.2.0-1", "--via", fake_pc(tmp_path), "--source", "/etc/hostname",
                  "T01", "T02")
    assert result.returncode == 1, result
    assert ("fleet-upgrade: STOPPED at T01: the install of 0.2.0-1 failed; the table is left "
            "drained (`pokdeng-table supervisor resume` releases it):\n"
            "  E: Version '0.2.0-1' for 'pokdeng-table' was not found") in result.stderr
    assert "not touched: T02" in result.stderr
