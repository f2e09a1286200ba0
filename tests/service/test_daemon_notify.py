"""sd_notify over real datagram sockets (path and abstract namespace) and the log chain."""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import tempfile
from pathlib import Path

import pytest
import structlog

from controller.service.telemetry.logging_setup import bind_table_context, setup_logging
from controller.service.telemetry.notify import Notifier


def receive(sock: socket.socket) -> str:
    sock.settimeout(2)
    return sock.recv(4096).decode()


def test_notify_to_a_path_socket() -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        path = str(Path(tmp) / "n")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(path)
            notifier = Notifier({"NOTIFY_SOCKET": path})
            assert notifier.ready("idle")
            assert receive(sock) == "READY=1\nSTATUS=idle"
            assert notifier.status("betting")
            assert not notifier.status("betting")  # unchanged: not sent again
            assert notifier.watchdog()
            assert notifier.stopping()
            assert [receive(sock) for _ in range(3)] == ["STATUS=betting", "WATCHDOG=1",
                                                         "STOPPING=1"]
            notifier.close()


def test_notify_to_an_abstract_socket() -> None:
    name = f"pokdeng-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        notifier = Notifier({"NOTIFY_SOCKET": "@" + name})
        assert notifier.ready()
        assert receive(sock) == "READY=1"
        notifier.close()


def test_without_a_service_manager_nothing_is_sent() -> None:
    notifier = Notifier({})
    assert not notifier.enabled
    assert not notifier.ready() and not notifier.watchdog()
    assert notifier.watchdog_interval() is None


def test_a_dead_notify_socket_does_not_raise() -> None:
    notifier = Notifier({"NOTIFY_SOCKET": "/tmp/no-such-notify-socket"})
    assert notifier.ready() is False


def test_watchdog_interval_is_half_the_timeout_and_only_for_us() -> None:
    assert Notifier({"WATCHDOG_USEC": "10000000"}).watchdog_interval() == 5.0
    mine = {"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid())}
    assert Notifier(mine).watchdog_interval() == 1.0
    other = {"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid() + 1)}
    assert Notifier(other).watchdog_interval() is None
    assert Notifier({"WATCHDOG_USEC": "soon"}).watchdog_interval() is None


def test_library_logs_go_through_the_same_json_chain() -> None:
    out = io.StringIO()
    setup_logging("info", "json", stream=out)
    try:
        bind_table_context("T7", 3, 12)
        structlog.get_logger("pokdeng.test").info("round_opened", seq=5)
        logging.getLogger("serial").warning("port vanished")
        logging.getLogger("transitions").info("chatty transition")  # below warning: dropped
        logging.getLogger("paho").error("broker gone")
    finally:
        structlog.contextvars.clear_contextvars()
        setup_logging("warning", "console", stream=io.StringIO())
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["round_opened", "port vanished", "broker gone"]
    for line in lines:
        assert (line["table"], line["shoe"], line["round"]) == ("T7", 3, 12)
        assert "timestamp" in line and "level" in line
    assert lines[1]["logger"] == "serial" and lines[1]["level"] == "warning"
    assert lines[0]["seq"] == 5


def test_a_receiver_that_does_not_read_never_blocks_the_sender() -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        path = str(Path(tmp) / "n")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(path)
            notifier = Notifier({"NOTIFY_SOCKET": path})
            results = [notifier.watchdog() for _ in range(500)]  # far beyond the queue length
            assert results[0] is True and results[-1] is False
            notifier.close()


def test_a_long_replay_extends_the_start_timeout_while_it_moves() -> None:
    from controller.service.recovery_hooks import StartupProgress

    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        path = str(Path(tmp) / "n")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(path)
            notifier = Notifier({"NOTIFY_SOCKET": path})
            progress = StartupProgress(notifier, every_s=3600.0, extend_by_s=30.0)
            progress(5000)
            progress(10000)  # within the interval: not sent again
            assert receive(sock) == ("EXTEND_TIMEOUT_USEC=30000000\n"
                                     "STATUS=recovering the journal: 5000 records replayed")
            assert progress.sent == 1
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(4096)
            notifier.close()
