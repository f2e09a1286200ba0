"""Software identity: the version and a digest of the installed files, `version --verify`
against a real non-editable install (re-hashing its files against RECORD), the `software`
input the daemon journals, `shoe_started` naming it and `software_changed` on an upgrade —
replayed from the journal, not from the code that replays."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from controller.durability.journal import Journal
from controller.table.events import validate_event
from controller.table.inputs import ScriptError, Software, from_dict, to_dict
from controller.table.machine import MachineSettings, TableMachine
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    daemon_config,
    start_daemon,
    stop_daemon,
)
from support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def run_cli(*args: str, pythonpath: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([sys.executable, "-m", "controller", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd="/")


def copy_sources(target: Path) -> Path:
    """The packages as a checkout has them, in ``target`` (to change a file safely)."""
    for package in ("controller", "drivers"):
        shutil.copytree(REPO / package, target / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_software_input_round_trips_and_refuses_bad_values() -> None:
    inp = Software(0.0, "0.1.0", "sha256:" + "a" * 64, "record")
    assert from_dict(to_dict(inp)) == inp
    with pytest.raises(ScriptError, match="digest_of"):
        from_dict({"at": 0, "kind": "software", "version": "1", "digest": "x",
                   "digest_of": "guess"})
    with pytest.raises(ScriptError, match='"version"'):
        from_dict({"at": 0, "kind": "software", "digest": "x", "digest_of": "record"})


def test_the_machine_keeps_the_software_across_a_checkpoint() -> None:
    settings = MachineSettings(table_id="T1")
    machine = TableMachine(settings)
    first = Software(0.0, "0.1.0", "sha256:" + "a" * 64, "sources")
    assert machine.handle(first) == []  # the first software is no change
    restored = TableMachine.from_checkpoint(settings, machine.checkpoint())
    assert restored.handle(first) == []
    upgraded = Software(1.0, "0.2.0", "sha256:" + "b" * 64, "record")
    (changed,) = restored.handle(upgraded)
    validate_event(changed)
    assert changed["type"] == "software_changed"
    assert changed["data"] == {"from": first.data(), "to": upgraded.data()}


def test_version_of_a_checkout_is_a_digest_over_its_sources(tmp_path: Path) -> None:
    sources = copy_sources(tmp_path / "src")
    plain = run_cli("version", "--json", pythonpath=sources)
    assert plain.returncode == 0, plain.stderr
    identity = json.loads(plain.stdout)
    assert identity["digest_of"] == "sources" and DIGEST.match(identity["digest"])
    assert identity["where"] == str(sources)
    verify = run_cli("version", "--verify", pythonpath=sources)
    assert verify.returncode == 2 and "cannot verify" in verify.stderr
    # one changed byte in one file changes the digest
    hands = sources / "controller" / "rules" / "hands.py"
    hands.write_text(hands.read_text() + "\n# changed\n")
    again = json.loads(run_cli("version", "--json", pythonpath=sources).stdout)
    assert again["digest"] != identity["digest"] and again["version"] == identity["version"]
    assert run_cli("--version", pythonpath=sources).stdout.strip() == \
        f"pokdeng-table {identity['version']}"


def test_a_checkout_with_egg_info_has_nothing_to_verify_against(tmp_path: Path) -> None:
    sources = copy_sources(tmp_path / "src")
    egg_info = sources / "pokdeng_table.egg-info"
    egg_info.mkdir()
    version = run_cli("--version", pythonpath=sources).stdout.split()[-1]
    (egg_info / "PKG-INFO").write_text(
        f"Metadata-Version: 2.1\nName: pokdeng-table\nVersion: {version}\n")
    (egg_info / "SOURCES.txt").write_text("controller/__init__.py\ncontroller/rules/hands.py\n")
    hands = sources / "controller" / "rules" / "hands.py"
    hands.write_text(hands.read_text() + "\n# changed\n")
    verify = run_cli("version", "--verify", pythonpath=sources)
    assert verify.returncode == 2, verify.stdout + verify.stderr
    assert "cannot verify" in verify.stderr and "verified: all" not in verify.stdout
    identity = json.loads(run_cli("version", "--json", pythonpath=sources).stdout)
    assert identity["digest_of"] == "sources"  # a digest of the code, not of an empty list


@pytest.mark.slow
def install_target(tmp_path: Path) -> Path:
    """A real non-editable install of this checkout (pip install --target), its directory."""
    build = tmp_path / "build"
    copy_sources(build)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, build / name)
    target = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--target", str(target), str(build)],
        capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    return target


def test_version_verify_rehashes_a_real_install_against_its_record(tmp_path: Path) -> None:
    target = install_target(tmp_path)
    good = run_cli("version", "--verify", "--json", pythonpath=target)
    assert good.returncode == 0, good.stdout + good.stderr
    report = json.loads(good.stdout)
    assert report["ok"] and report["digest_of"] == "record" and report["checked"] > 50
    assert report["where"].endswith("RECORD") and DIGEST.match(report["digest"])
    assert "verified: all" in run_cli("version", "--verify", pythonpath=target).stdout

    # a changed file and a deleted one: exit 1, each named; the digest (of RECORD) stays
    hands = target / "controller" / "rules" / "hands.py"
    hands.write_text(hands.read_text().replace("return", "return  ", 1))
    (target / "drivers" / "debounce.py").unlink()
    bad = run_cli("version", "--verify", pythonpath=target)
    assert bad.returncode == 1
    assert "changed: controller/rules/hands.py" in bad.stderr
    assert "missing: drivers/debounce.py" in bad.stderr
    assert "NOT VERIFIED: 2 of" in bad.stderr
    after = json.loads(run_cli("version", "--json", pythonpath=target).stdout)
    assert after["digest"] == report["digest"]


def test_the_debian_packages_file_list_is_part_of_the_digest_and_verified(
        tmp_path: Path) -> None:
    """build-deb writes PACKAGE-FILES (every file the package installs, sha256sum lines) into
    the .dist-info: a package that changes only a unit, a script or its revision is another
    digest, and `version --verify` re-hashes those files too."""
    target = install_target(tmp_path)
    before = json.loads(run_cli("version", "--verify", "--json", pythonpath=target).stdout)
    unit, script = tmp_path / "pokdeng-table.service", tmp_path / "pokdeng-table.postinst"
    unit.write_text("[Service]\nDeviceAllow=char-188 rw\n")
    script.write_text("#!/bin/sh\nexit 0\n")

    def package(version: str) -> None:
        lines = [f"# pokdeng-table {version} amd64"] + [
            f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path}" for path in (unit, script)]
        (next(target.glob("pokdeng_table-*.dist-info")) / "PACKAGE-FILES").write_text(
            "\n".join(lines) + "\n")

    package("0.1.0-1")
    first = json.loads(run_cli("version", "--json", pythonpath=target).stdout)
    assert first["digest"] != before["digest"] and first["digest_of"] == "record"
    assert first["where"].endswith("PACKAGE-FILES")
    verified = run_cli("version", "--verify", "--json", pythonpath=target)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["checked"] == before["checked"] + 2
    assert "and PACKAGE-FILES" in run_cli("version", "--verify", pythonpath=target).stdout
    # the same program, another revision of the package: another software
    package("0.1.0-2")
    revised = json.loads(run_cli("version", "--json", pythonpath=target).stdout)
    assert revised["digest"] != first["digest"]
    # a unit changed in the package: another software again
    unit.write_text("[Service]\nDeviceAllow=char-188 rw\nDeviceAllow=char-166 rw\n")
    package("0.1.0-2")
    assert json.loads(run_cli("version", "--json", pythonpath=target).stdout)["digest"] \
        not in (first["digest"], revised["digest"])
    # a listed file changed or gone after the install: named, exit 1
    unit.write_text("[Service]\n")
    script.unlink()
    bad = run_cli("version", "--verify", pythonpath=target)
    assert bad.returncode == 1
    assert f"changed: {unit}" in bad.stderr and f"missing: {script}" in bad.stderr


@pytest.mark.slow
def test_the_daemon_journals_its_software_and_announces_a_change(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    shoe, panel = devices
    sources = copy_sources(short_dir / "src")
    config = daemon_config(short_dir, short_dir / "shoe", panel.path)
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    journal_path = short_dir / "state" / "journal.sqlite"
    events_file = short_dir / "events.jsonl"
    env = {"PYTHONPATH": f"{sources}:{REPO / 'tests'}"}
    first = json.loads(run_cli("version", "--json", pythonpath=sources).stdout)
    try:
        proc = start_daemon(config, notify.path, log, cwd="/", **env)
        notify.wait_for("READY", "1")
        panel.wait_connected()
        panel.send("new_shoe")
        wait_until(lambda: "shoe_started" in events_file.read_text()
                   if events_file.exists() else False, 15, "shoe_started")
        assert stop_daemon(proc) == 0
        # the same software again: nothing new is journaled
        proc = start_daemon(config, notify.path, log, cwd="/", **env)
        notify.wait_for("READY", "1", count=2)
        assert stop_daemon(proc) == 0
        # an upgrade: one file changed
        hands = sources / "controller" / "rules" / "hands.py"
        hands.write_text(hands.read_text() + "\n# 0.1.0 with a fix\n")
        second = json.loads(run_cli("version", "--json", pythonpath=sources).stdout)
        proc = start_daemon(config, notify.path, log, cwd="/", **env)
        notify.wait_for("READY", "1", count=3)
        assert stop_daemon(proc) == 0
    finally:
        stop_daemon(proc, signal.SIGKILL)
        notify.close()
    software = [{k: first[k] for k in ("version", "digest", "digest_of")},
                {k: second[k] for k in ("version", "digest", "digest_of")}]
    with Journal(str(journal_path)) as journal:
        entries = list(journal.entries())
    journaled = [e.input.data() for e in entries if isinstance(e.input, Software)]
    assert journaled == software  # once per change, not once per start
    events = [event for entry in entries for event in entry.events]
    (started,) = [e for e in events if e["type"] == "shoe_started"]
    assert started["data"]["software"] == software[0]
    (changed,) = [e for e in events if e["type"] == "software_changed"]
    assert changed["data"] == {"from": software[0], "to": software[1]}
    assert changed["shoe"] == 1 and changed["round"] is None
    for event in events:
        validate_event(event)
    # replay from the journal, by this code (a third digest): the very same events
    machine = TableMachine(MachineSettings(table_id="T1", betting_seconds=2))
    for entry in entries:
        assert machine.handle(entry.input) == entry.events
