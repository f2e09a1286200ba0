"""A table logging at DEBUG is not sealed (DEBUG lines carry raw frames): ``config check`` and
the daemon itself say so at start, loudly, so nobody runs a live table that way by mistake."""

from __future__ import annotations

from pathlib import Path

from controller.service.config.settings import DEBUG_NOT_SEALED
from controller.service.control.client import ControlClient
from support.daemon_helpers import (
    NotifyListener,
    cli,
    daemon_config,
    start_daemon,
    stop_daemon,
    wait_status,
)


def debug_config(directory: Path) -> Path:
    config = daemon_config(directory, directory / "shoe", "/dev/null")
    config.write_text(config.read_text().replace("level: info", "level: debug"))
    return config


def test_config_check_warns_that_a_debug_table_is_not_sealed(short_dir: Path) -> None:
    result = cli("config", "check", str(debug_config(short_dir)))
    assert result.returncode == 0, result.stderr
    assert "NOT SEALED" in result.stderr and "WARNING" in result.stderr
    quiet = cli("config", "check", str(daemon_config(short_dir, short_dir / "shoe", "/dev/null")))
    assert quiet.returncode == 0 and "NOT SEALED" not in quiet.stderr + quiet.stdout


def test_the_daemon_logs_at_start_that_a_debug_table_is_not_sealed(short_dir: Path) -> None:
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    proc = start_daemon(debug_config(short_dir), notify.path, log)
    try:
        notify.wait_for("READY", "1")
        wait_status(ControlClient(str(short_dir / "control.sock")), lambda s: "state" in s)
    finally:
        stop_daemon(proc)
        notify.close()
    warnings = [line for line in log.read_text().splitlines()
                if DEBUG_NOT_SEALED in line and '"warning"' in line]
    assert warnings, log.read_text()[:3000]
