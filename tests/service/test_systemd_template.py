"""The template unit for several tables on one PC: `systemd-analyze verify` accepts an
instance of it, it is the single-table unit with each table's own config, state, runtime
directory (control socket) and credentials, and two instances get nothing in common."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller.service.config.settings import parse_config
from controller.service.control.access import own_group
from support.units import unit_directives as directives

REPO = Path(__file__).resolve().parents[2]
SINGLE = REPO / "systemd" / "pokdeng-table.service"
TEMPLATE = REPO / "systemd" / "pokdeng-table@.service"
INSTALLED_BINARY = "/opt/pokdeng-table/venv/bin/pokdeng-table"

#: the directives in which a table of the fleet differs from the single table
PER_TABLE: dict[str, str | list[str]] = {
    "Description": "Pok Deng table controller for table %i (shoe, panel, table machine, "
                   "backend delivery)",
    "ExecStart": f"{INSTALLED_BINARY} run --config /etc/pokdeng-table/%i.yaml",
    "StateDirectory": "pokdeng-table/%i",
    "RuntimeDirectory": "pokdeng-table/%i",
    "LoadCredential": ["backend-secret:/etc/pokdeng-table/credentials/%i/backend-secret",
                       "journal-key:/etc/pokdeng-table/credentials/%i/journal-key"],
}


def test_the_template_is_the_single_unit_with_per_table_places() -> None:
    single, template = directives(SINGLE), directives(TEMPLATE)
    assert set(single) == set(template)
    differing = {key for key in single if single[key] != template[key]}
    assert differing == set(PER_TABLE)
    for key, value in PER_TABLE.items():
        assert template[key] == (value if isinstance(value, list) else [value])


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze not installed (Debian package: systemd)")
def test_systemd_analyze_verify_accepts_an_instance(tmp_path: Path) -> None:
    binary = tmp_path / "pokdeng-table"
    binary.write_text(f"#!{sys.executable}\nfrom controller.commands.cli import main\nmain()\n")
    binary.chmod(0o755)
    template = tmp_path / TEMPLATE.name
    template.write_text(TEMPLATE.read_text().replace(INSTALLED_BINARY, str(binary)))
    instance = tmp_path / "pokdeng-table@T01.service"
    instance.symlink_to(template.name)  # as `systemctl enable pokdeng-table@T01` links it
    result = subprocess.run(["systemd-analyze", "verify", str(instance)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    problems = [line for line in result.stderr.splitlines() if "pokdeng-table@" in line]
    assert problems == []


def test_two_instances_share_no_state_socket_or_config(tmp_path: Path) -> None:
    """What systemd hands each instance ($STATE_DIRECTORY, $RUNTIME_DIRECTORY) is where its
    journal and control socket go when its config does not name them."""
    places = {}
    for table in ("T01", "T02"):
        environ = {"STATE_DIRECTORY": f"/var/lib/pokdeng-table/{table}",
                   "RUNTIME_DIRECTORY": f"/run/pokdeng-table/{table}"}
        config = parse_config({"table": {"id": table},
                               "shoe": {"driver": "beetek", "url": f"/dev/pokdeng/{table}-shoe"},
                               "control": {"supervisor_group": own_group()}},
                              f"/etc/pokdeng-table/{table}.yaml", environ)
        places[table] = {config.journal_path, config.control.socket, config.source,
                         config.shoe.options["url"]}
    assert places["T01"].isdisjoint(places["T02"])
    assert "/var/lib/pokdeng-table/T01/journal.sqlite" in places["T01"]
    assert "/run/pokdeng-table/T02/control.sock" in places["T02"]
