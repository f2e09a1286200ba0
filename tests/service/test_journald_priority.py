"""Log severities reach journald: the ``<N>`` sd-daemon prefix when ``$JOURNAL_STREAM`` names
the daemon's output, plain lines otherwise; the table id is a field of every line."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
from pathlib import Path

import pytest
import structlog

from controller.service.control.client import ControlClient
from controller.service.telemetry.logging_setup import priority, setup_logging, writes_to_journal
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    cli,
    daemon_config,
    start_daemon,
    stop_daemon,
    wait_status,
)


def journal_stream_of(path: Path) -> str:
    stat = os.stat(path)
    return f"{stat.st_dev}:{stat.st_ino}"


def prefixed(lines: list[str]) -> dict[str, list[dict]]:
    """`<N>{json}` lines by their prefix, each line's JSON parsed (fails on any other line)."""
    found: dict[str, list[dict]] = {}
    for line in lines:
        assert line.startswith("<") and line[2] == ">", f"no priority prefix: {line!r}"
        found.setdefault(line[:3], []).append(json.loads(line[3:]))
    return found


def test_priorities_follow_syslog() -> None:
    assert [priority(level) for level in (logging.DEBUG, logging.INFO, logging.WARNING,
                                          logging.ERROR, logging.CRITICAL)] == [7, 6, 4, 3, 2]


def test_journal_stream_must_name_the_stream_itself(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    other = tmp_path / "other.log"
    other.write_text("")
    with open(log, "w") as stream:
        assert writes_to_journal(stream, {"JOURNAL_STREAM": journal_stream_of(log)})
        # inherited by a process whose output was redirected elsewhere: not the journal
        assert not writes_to_journal(stream, {"JOURNAL_STREAM": journal_stream_of(other)})
        assert not writes_to_journal(stream, {"JOURNAL_STREAM": "garbage"})
        assert not writes_to_journal(stream, {})
    assert not writes_to_journal(io.StringIO(), {"JOURNAL_STREAM": journal_stream_of(log)})


def test_without_journal_stream_lines_are_plain_json_with_the_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    path = tmp_path / "plain.log"
    with open(path, "w") as stream:
        setup_logging("info", "json", stream=stream, table="T9")
        structlog.get_logger("pokdeng.test").warning("careful", detail=1)
        logging.getLogger("paho").error("broker gone")
    lines = path.read_text().splitlines()
    records = [json.loads(line) for line in lines]  # no prefix: each line is JSON as before
    assert [(r["event"], r["level"], r["table"]) for r in records] == [
        ("careful", "warning", "T9"), ("broker gone", "error", "T9")]


def test_a_traceback_keeps_its_priority_on_every_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "journal.log"
    path.write_text("")
    monkeypatch.setenv("JOURNAL_STREAM", journal_stream_of(path))
    with open(path, "a") as stream:
        setup_logging("info", "console", stream=stream, table="T9")
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            structlog.get_logger("pokdeng.test").exception("it failed")
    lines = path.read_text().splitlines()
    assert len(lines) > 3 and all(line.startswith("<3>") for line in lines), lines


@pytest.mark.slow
def test_the_daemon_logs_with_priorities_under_systemd(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path)
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    log.write_text("")
    stream = journal_stream_of(log)  # the daemon's stdout and stderr both go to this file
    client = ControlClient(str(short_dir / "control.sock"))
    proc = start_daemon(config, notify.path, log, JOURNAL_STREAM=stream)
    try:
        notify.wait_for("READY", "1")
        assert cli("supervisor", "--socket", str(short_dir / "control.sock"), "pause")\
            .returncode == 0
        wait_status(client, lambda s: s["paused"])
        assert stop_daemon(proc) == 0
    finally:
        stop_daemon(proc, signal.SIGKILL)
        notify.close()
    by_prefix = prefixed(log.read_text().splitlines())
    assert any(r["event"] == "ready" for r in by_prefix["<6>"])
    assert any(r["event"].startswith("table paused") for r in by_prefix["<4>"])
    assert all(r["level"] == "info" for r in by_prefix["<6>"])
    assert all(r["level"] == "warning" for r in by_prefix["<4>"])
    # the table id is a field of every line, the library's and other threads' too
    assert all(r.get("table") == "T1" for records in by_prefix.values() for r in records)

    # a journal that is not one: the daemon cannot start and says so at ERROR
    (short_dir / "state" / "journal.sqlite").unlink()
    (short_dir / "state" / "journal.sqlite").write_bytes(b"not a database " * 100)
    log.write_text("")
    proc = start_daemon(config, notify.path, log, JOURNAL_STREAM=journal_stream_of(log))
    assert proc.wait(30) != 0
    failed = prefixed(log.read_text().splitlines())
    assert [r["event"] for r in failed["<3>"]] == ["cannot start"]
    assert all(r["level"] == "error" for r in failed["<3>"])


@pytest.mark.slow
def test_the_daemon_without_journal_stream_writes_plain_lines(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path)
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    proc = start_daemon(config, notify.path, log)
    try:
        notify.wait_for("READY", "1")
        assert stop_daemon(proc) == 0
    finally:
        stop_daemon(proc, signal.SIGKILL)
        notify.close()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(r["event"] == "ready" and r["table"] == "T1" for r in records)
