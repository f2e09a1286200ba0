"""`config check` knows the unit that runs the file: every credential the installed unit's
LoadCredential= lines (unit file and drop-ins, as systemd reads them) name must be there, and
every credential the config reads must be handed over by the unit; without
$CREDENTIALS_DIRECTORY the secrets are read from where the unit loads them.

Each test lays out a system root of its own (the package's real unit files under
/lib/systemd/system, the config under /etc/pokdeng-table, drop-ins under /etc/systemd/system)
and runs the real command on it with `--root`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from support.daemon_helpers import control_section

REPO = Path(__file__).resolve().parents[2]
KEY = "k" * 64
HTTP = {"http": {"url": "https://backend.example/events", "secret_credential": "backend-secret"}}
UNSIGNED = {"file": {"path": "/var/lib/pokdeng-table/events.jsonl"}}

#: docs/install.md §5's drop-ins, as the guide prints them
UNSIGNED_DROPIN = ("[Service]\nLoadCredential=\n"
                   "LoadCredential=journal-key:/etc/pokdeng-table/credentials/journal-key\n")


def system(root: Path, transports: dict[str, Any], name: str = "table",
           keyed: bool = True) -> Path:
    """A system with the package's units and the config /etc/pokdeng-table/NAME.yaml."""
    units = root / "lib/systemd/system"
    units.mkdir(parents=True)
    for unit in ("pokdeng-table.service", "pokdeng-table@.service"):
        shutil.copy(REPO / "systemd" / unit, units / unit)
    (root / "etc/pokdeng-table/credentials").mkdir(parents=True)
    data: dict[str, Any] = {
        "table": {"id": "T01"}, "state_dir": str(root / "state"),
        "shoe": {"driver": "beetek", "url": "/dev/pokdeng/shoe"},
        "control": control_section(root / "control.sock"), "transports": transports}
    if keyed:
        data["journal"] = {"key_credential": "journal-key"}
    config = root / f"etc/pokdeng-table/{name}.yaml"
    config.write_text(yaml.safe_dump(data))
    return config


def credential(root: Path, name: str, value: str, table: str = "") -> None:
    path = root / "etc/pokdeng-table/credentials" / table / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value)
    path.chmod(0o600)  # as docs/install.md §5 makes them


def dropin(root: Path, unit: str, text: str, name: str = "override.conf") -> None:
    folder = root / f"etc/systemd/system/{unit}.d"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def check(root: Path, config: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CREDENTIALS_DIRECTORY"}
    return subprocess.run([sys.executable, "-m", "controller", "config", "check", str(config),
                           "--root", str(root), *extra],
                          capture_output=True, text=True, timeout=60, env=env)


def test_each_missing_credential_file_the_unit_loads_is_named_with_its_line(
        tmp_path: Path) -> None:
    config = system(tmp_path, HTTP)
    result = check(tmp_path, config)
    assert result.returncode == 78, result.stderr
    for name in ("backend-secret", "journal-key"):
        assert (f"credential {name!r}: /etc/pokdeng-table/credentials/{name} does not exist: "
                "the unit would fail to start (243/CREDENTIALS)") in result.stderr
    assert "/lib/systemd/system/pokdeng-table.service:" in result.stderr

    credential(tmp_path, "backend-secret", "the-table-secret\n")
    credential(tmp_path, "journal-key", KEY)
    passed = check(tmp_path, config)  # no $CREDENTIALS_DIRECTORY: read where the unit loads
    assert passed.returncode == 0, passed.stderr
    assert "pokdeng-table.service (/lib/systemd/system/pokdeng-table.service) hands over: " \
           "backend-secret, journal-key" in passed.stdout


def test_a_credential_present_but_empty_or_short_is_refused_as_run_refuses_it(
        tmp_path: Path) -> None:
    config = system(tmp_path, HTTP)
    credential(tmp_path, "backend-secret", "")
    credential(tmp_path, "journal-key", "short")
    result = check(tmp_path, config)
    assert result.returncode == 78
    assert "transports.http.secret_credential: " in result.stderr and "is empty" in result.stderr
    assert "journal.key_credential: the key in credential 'journal-key' is 5 bytes" \
        in result.stderr


def test_a_table_that_signs_nothing_with_the_guides_drop_in_keeps_its_journal_key(
        tmp_path: Path) -> None:
    config = system(tmp_path, UNSIGNED)
    credential(tmp_path, "journal-key", KEY)
    # no drop-in: the unit still loads backend-secret, and systemd would refuse to start it
    result = check(tmp_path, config)
    assert result.returncode == 78
    assert "credential 'backend-secret': /etc/pokdeng-table/credentials/backend-secret " \
           "does not exist" in result.stderr
    # a drop-in that drops every LoadCredential= line drops the journal key too
    dropin(tmp_path, "pokdeng-table.service", "[Service]\nLoadCredential=\n")
    result = check(tmp_path, config)
    assert result.returncode == 78
    assert ("journal.key_credential: credential 'journal-key' is not handed over by "
            "pokdeng-table.service (it loads: none; read from "
            "/lib/systemd/system/pokdeng-table.service, "
            "/etc/systemd/system/pokdeng-table.service.d/override.conf)") in result.stderr
    assert len(result.stderr.splitlines()) == 2  # said once: not again as an unreadable file
    assert "pokdeng-credentials-" not in result.stderr
    # the guide's drop-in for a table that signs nothing
    dropin(tmp_path, "pokdeng-table.service", UNSIGNED_DROPIN)
    passed = check(tmp_path, config)
    assert passed.returncode == 0, passed.stderr
    assert "hands over: journal-key" in passed.stdout


def test_an_instance_reads_the_template_its_drop_ins_and_its_own_credentials(
        tmp_path: Path) -> None:
    config = system(tmp_path, HTTP, name="T01")
    credential(tmp_path, "backend-secret", "secret", table="T01")
    result = check(tmp_path, config)
    assert result.returncode == 78
    assert "/lib/systemd/system/pokdeng-table@.service:" in result.stderr
    assert "credential 'journal-key': /etc/pokdeng-table/credentials/T01/journal-key does " \
           "not exist" in result.stderr
    assert "backend-secret" not in result.stderr
    # a drop-in for every table (the template's) moves the key; /etc hides /lib's same name
    dropin(tmp_path, "pokdeng-table@.service",
           "[Service]\nLoadCredential=journal-key:/etc/pokdeng-table/credentials/keys/%i\n")
    key = tmp_path / "etc/pokdeng-table/credentials/keys/T01"
    key.parent.mkdir()
    key.write_text(KEY)
    passed = check(tmp_path, config)
    assert passed.returncode == 0, passed.stderr
    assert "unit pokdeng-table@T01.service" in passed.stdout


def test_a_config_outside_the_units_place_or_with_no_unit_is_checked_as_before(
        tmp_path: Path) -> None:
    config = system(tmp_path, UNSIGNED, keyed=False)
    moved = tmp_path / "elsewhere.yaml"
    config.rename(moved)
    assert check(tmp_path, moved).returncode == 0
    result = check(tmp_path, moved, "--unit", "pokdeng-table@T09.service")
    assert result.returncode == 78 and "/credentials/T09/backend-secret" in result.stderr
    shutil.rmtree(tmp_path / "lib")
    unit_gone = check(tmp_path, moved, "--unit", "pokdeng-table.service")
    assert unit_gone.returncode == 0
    assert "no unit pokdeng-table.service is installed" in unit_gone.stderr


def test_as_another_user_the_credential_files_are_not_judged_but_said_unchecked(
        short_dir: Path) -> None:
    """systemd reads the credentials as root; a check run as another user cannot see them
    (credentials/ is root's alone) and must not call them missing."""
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        import pytest
        pytest.skip("needs root and setpriv (util-linux) to run the check as nobody")
    root = short_dir / "system"  # /tmp/pdt-…: a path another user can walk once opened up
    config = system(root, UNSIGNED)
    credential(root, "journal-key", KEY)
    (root / "etc/pokdeng-table/credentials").chmod(0o700)
    for path in (short_dir, root, root / "etc", root / "etc/pokdeng-table"):
        path.chmod(0o755)
    config.chmod(0o644)
    env = {k: v for k, v in os.environ.items() if k != "CREDENTIALS_DIRECTORY"}
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m",
         "controller", "config", "check", str(config), "--root", str(root)],
        capture_output=True, text=True, timeout=60, env={**env, "HOME": "/"},
        cwd=str(REPO))
    assert "not root: the credential files pokdeng-table.service loads were not checked" \
        in result.stderr, result.stderr
    assert "does not exist" not in result.stderr


def test_set_credential_lines_are_read_as_systemd_reads_them(tmp_path: Path) -> None:
    """SetCredential= hands a credential over inline, and is what systemd falls back on when
    the LoadCredential= of the same id cannot load its file (systemd.exec(5))."""
    config = system(tmp_path, HTTP)
    credential(tmp_path, "journal-key", KEY)
    dropin(tmp_path, "pokdeng-table.service",
           "[Service]\nLoadCredential=\n"
           "LoadCredential=journal-key:/etc/pokdeng-table/credentials/journal-key\n"
           "SetCredential=backend-secret:inline-secret-value-123\n")
    passed = check(tmp_path, config)
    assert passed.returncode == 0, passed.stderr
    assert "hands over: backend-secret, journal-key" in passed.stdout
    # a plain SetCredential= is readable by every local user: said, not refused
    assert ("WARNING: /etc/systemd/system/pokdeng-table.service.d/override.conf:4: credential "
            "'backend-secret' is given by SetCredential=: every local user can read it") \
        in passed.stderr
    assert "inline-secret-value-123" not in passed.stdout + passed.stderr

    # the inline value is what the daemon reads: an empty one is refused as run refuses it
    # (and named by its line, not by a copy of it)
    dropin(tmp_path, "pokdeng-table.service",
           "[Service]\nSetCredential=backend-secret:\n")
    empty = check(tmp_path, config)
    assert empty.returncode == 78
    assert ("transports.http.secret_credential: the value of SetCredential=backend-secret "
            "(/etc/systemd/system/pokdeng-table.service.d/override.conf:2) is empty") \
        in empty.stderr, empty.stderr
    assert "pokdeng-credentials-" not in empty.stderr

    # LoadCredential= of a missing file with a SetCredential= default: systemd starts the unit
    dropin(tmp_path, "pokdeng-table.service",
           "[Service]\nSetCredential=backend-secret:the-default-secret\n")
    assert not (tmp_path / "etc/pokdeng-table/credentials/backend-secret").exists()
    fallback = check(tmp_path, config)
    assert fallback.returncode == 0, fallback.stderr
    # an empty SetCredential= drops the default: the missing file fails the unit again
    dropin(tmp_path, "pokdeng-table.service",
           "[Service]\nSetCredential=backend-secret:the-default-secret\nSetCredential=\n")
    dropped = check(tmp_path, config)
    assert dropped.returncode == 78
    assert "credential 'backend-secret': /etc/pokdeng-table/credentials/backend-secret does " \
           "not exist" in dropped.stderr


def test_an_encrypted_set_credential_is_not_taken_for_a_file(tmp_path: Path) -> None:
    config = system(tmp_path, HTTP)
    credential(tmp_path, "backend-secret", "the-table-secret")
    dropin(tmp_path, "pokdeng-table.service",
           "[Service]\nLoadCredential=\n"
           "LoadCredential=backend-secret:/etc/pokdeng-table/credentials/backend-secret\n"
           "SetCredentialEncrypted=journal-key: \\\n"
           "        k6iUCUh0RJCQyvL8k8q1UyAAAAABAAAADAAAABAAAAC1lFmbWAqWZ8dCCQkAAAAAgAAAA\n")
    result = check(tmp_path, config)
    assert "Traceback" not in result.stderr
    assert "hands over: backend-secret, journal-key" in result.stdout, result.stderr
    assert "journal-key: encrypted for the system it runs on" in result.stderr


def test_a_directory_credential_is_named_by_the_operators_path(tmp_path: Path) -> None:
    config = system(tmp_path, HTTP)
    credential(tmp_path, "journal-key", KEY)
    credential(tmp_path, "backend-secret", "the-table-secret", table="dir")
    dropin(tmp_path, "pokdeng-table.service",
           "[Service]\nLoadCredential=\n"
           "LoadCredential=backend-secret:/etc/pokdeng-table/credentials/dir\n"
           "LoadCredential=journal-key:/etc/pokdeng-table/credentials/journal-key\n")
    result = check(tmp_path, config)
    assert result.returncode == 78
    assert ("transports.http.secret_credential: credential 'backend-secret': "
            "/etc/pokdeng-table/credentials/dir "
            "(/etc/systemd/system/pokdeng-table.service.d/override.conf:3) is a directory: "
            "systemd hands over each file in it as backend-secret_FILENAME") in result.stderr
    assert "pokdeng-credentials-" not in result.stderr
    assert len(result.stderr.splitlines()) == 2, result.stderr  # said once


def test_a_secret_file_every_user_can_read_is_warned_of(tmp_path: Path) -> None:
    config = system(tmp_path, HTTP)
    credential(tmp_path, "backend-secret", "the-table-secret")
    credential(tmp_path, "journal-key", KEY)
    key = tmp_path / "etc/pokdeng-table/credentials/journal-key"
    key.chmod(0o644)
    result = check(tmp_path, config)
    assert result.returncode == 0, result.stderr  # systemd loads it: a warning, not a refusal
    assert ("WARNING: /lib/systemd/system/pokdeng-table.service:") in result.stderr
    assert ("credential 'journal-key': /etc/pokdeng-table/credentials/journal-key is readable "
            "by every user (mode 0644): chmod 600 /etc/pokdeng-table/credentials/journal-key") \
        in result.stderr
    assert "backend-secret" not in result.stderr
    key.chmod(0o600)
    assert "WARNING" not in check(tmp_path, config).stderr


def with_metrics(root: Path, config: Path, textfile: str) -> None:
    """The config writes its metrics to ``textfile``; the system has the package's users (uid
    and gid 990 pokdeng, as systemd-sysusers makes them) and node_exporter's directory as
    Debian's prometheus-node-exporter ships it (root:root 0755)."""
    data = yaml.safe_load(config.read_text())
    data["metrics"] = {"textfile": textfile}
    config.write_text(yaml.safe_dump(data))
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                     "pokdeng:x:990:990::/nonexistent:/usr/sbin/nologin\n")
    (root / "etc/group").write_text("root:x:0:\npokdeng:x:990:\npokdeng-control:x:991:\n")
    exporter = root / "var/lib/prometheus/node-exporter"
    exporter.mkdir(parents=True)
    exporter.chmod(0o755)


def test_a_metrics_file_the_unit_cannot_write_is_named(tmp_path: Path) -> None:
    """The guide's old recipe: the file in node_exporter's directory. Without a drop-in the
    unit's ProtectSystem=strict keeps it read-only (EROFS); with ReadWritePaths= the directory
    is still root's (EACCES): the daemon would only log a warning, and no metrics reach
    Prometheus."""
    config = system(tmp_path, UNSIGNED)
    credential(tmp_path, "journal-key", KEY)
    dropin(tmp_path, "pokdeng-table.service", UNSIGNED_DROPIN)
    with_metrics(tmp_path, config, "/var/lib/prometheus/node-exporter/pokdeng-table-T01.prom")
    read_only = check(tmp_path, config)
    assert read_only.returncode == 78, read_only.stderr
    assert ("metrics.textfile: pokdeng-table.service cannot write in "
            "/var/lib/prometheus/node-exporter (ProtectSystem=strict, and it is in none of its "
            "ReadWritePaths= or directories)") in read_only.stderr

    dropin(tmp_path, "pokdeng-table.service",
           "[Service]\nReadWritePaths=/var/lib/prometheus/node-exporter\n", name="metrics.conf")
    not_ours = check(tmp_path, config)
    assert not_ours.returncode == 78, not_ours.stderr
    assert ("metrics.textfile: /var/lib/prometheus/node-exporter is not writable by the unit's "
            "user pokdeng (it is root:root, mode 0755)") in not_ours.stderr


def test_the_guides_metrics_directory_passes(tmp_path: Path) -> None:
    config = system(tmp_path, UNSIGNED)
    credential(tmp_path, "journal-key", KEY)
    dropin(tmp_path, "pokdeng-table.service", UNSIGNED_DROPIN)
    with_metrics(tmp_path, config, "/var/lib/pokdeng-table-metrics/pokdeng-table-T01.prom")
    missing = check(tmp_path, config)
    assert missing.returncode == 78
    assert "metrics.textfile: /var/lib/pokdeng-table-metrics does not exist" in missing.stderr
    # as the package's tmpfiles.d line makes it
    metrics = tmp_path / "var/lib/pokdeng-table-metrics"
    metrics.mkdir(parents=True)
    if os.geteuid() != 0:
        import pytest
        pytest.skip("needs root to give the directory to the package's user")
    os.chown(metrics, 990, 990)
    metrics.chmod(0o755)
    passed = check(tmp_path, config)
    assert passed.returncode == 0, passed.stderr
    # and for a table of the template unit, whose unit has the same ReadWritePaths=
    instance = tmp_path / "etc/pokdeng-table/T01.yaml"
    config.rename(instance)
    credential(tmp_path, "journal-key", KEY, table="T01")
    dropin(tmp_path, "pokdeng-table@.service", UNSIGNED_DROPIN.replace(
        "credentials/journal-key", "credentials/%i/journal-key"))
    assert check(tmp_path, instance).returncode == 0
