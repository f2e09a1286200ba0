"""The control socket server and client over a real Unix socket."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from controller.control import ControlClient, ControlError, ControlServer


class Handler:
    """Stands in for the daemon's side: a status, supervisor answers, change notifications."""

    def __init__(self) -> None:
        self.actions: list[tuple[str, str | None]] = []
        self.version = 0
        self.status = {"state": "ready", "round": None}
        self.cond = threading.Condition()

    def control_status(self) -> dict[str, Any]:
        return dict(self.status)

    def control_supervisor(self, action: str, card: str | None) -> dict[str, Any]:
        self.actions.append((action, card))
        return {"ok": True, "events": ["paused"]}

    def wait_for_change(self, version: int, timeout: float) -> tuple[int, dict[str, Any]]:
        with self.cond:
            if version == self.version:
                self.cond.wait(timeout)
            return self.version, dict(self.status)

    def control_watch_interval(self) -> float:
        return 5.0

    def change(self, **fields: Any) -> None:
        with self.cond:
            self.status.update(fields)
            self.version += 1
            self.cond.notify_all()


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pdc-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def served(sock_dir: Path) -> Iterator[tuple[ControlServer, Handler, ControlClient]]:
    handler = Handler()
    server = ControlServer(str(sock_dir / "c.sock"), handler, mode=0o660)
    server.start()
    yield server, handler, ControlClient(server.path, timeout=5)
    server.close()


def raw_request(path: str, payload: bytes) -> list[dict[str, Any]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(path)
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return [json.loads(line) for line in data.splitlines()]


def test_status_and_supervisor(served: tuple[ControlServer, Handler, ControlClient]) -> None:
    server, handler, client = served
    assert client.status() == {"state": "ready", "round": None}
    assert client.supervisor("cancel-round") == {"ok": True, "events": ["paused"]}
    assert client.supervisor("enter-card", "9D")["ok"]
    assert handler.actions == [("cancel_round", None), ("enter_card", "9D")]
    mode = os.stat(server.path).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o660


def test_bad_requests_get_plain_answers(served: tuple[ControlServer, Handler, ControlClient]) -> None:
    server, handler, client = served
    answers = raw_request(server.path, b'not json\n{"cmd": 3}\n{"cmd": "reboot"}\n'
                                       b'{"cmd": "supervisor", "action": "explode"}\n'
                                       b'{"cmd": "supervisor", "action": "enter_card"}\n'
                                       b'{"cmd": "supervisor", "action": "pause", "card": "9D"}\n'
                                       b'{"cmd": "status"}\n')
    assert [a["ok"] for a in answers] == [False] * 6 + [True]
    assert answers[0]["error"].startswith("not a JSON line")
    assert "unknown command 'reboot'" in answers[2]["error"]
    assert "unknown supervisor action 'explode'" in answers[3]["error"]
    assert "enter_card needs the card" in answers[4]["error"]
    assert '"card" only goes with enter_card' in answers[5]["error"]
    assert handler.actions == []  # nothing invalid reached the table


def test_overlong_request_is_refused(served: tuple[ControlServer, Handler, ControlClient]) -> None:
    server, _, _ = served
    answers = raw_request(server.path, b"x" * (70 * 1024))
    assert answers == [{"ok": False, "error": "request longer than 65536 bytes"}]


def test_watch_streams_every_change(served: tuple[ControlServer, Handler, ControlClient]) -> None:
    _, handler, client = served
    stream = client.watch()
    assert next(stream)["state"] == "ready"
    handler.change(state="betting", round=1)
    assert next(stream) == {"state": "betting", "round": 1}
    handler.change(state="dealing")
    assert next(stream)["state"] == "dealing"
    stream.close()


def test_stale_socket_is_replaced_and_a_live_one_is_not(sock_dir: Path) -> None:
    path = sock_dir / "c.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # a socket file nobody listens on: a daemon that died
    first = ControlServer(str(path), Handler())
    first.start()
    try:
        with pytest.raises(ControlError, match="another daemon is already serving"):
            ControlServer(str(path), Handler()).start()
    finally:
        first.close()
    assert not path.exists()  # close removes it
    path.write_text("not a socket")
    with pytest.raises(ControlError, match="is not a socket"):
        ControlServer(str(path), Handler()).start()


def test_client_errors_name_the_problem(sock_dir: Path) -> None:
    with pytest.raises(ControlError, match="is the daemon running"):
        ControlClient(str(sock_dir / "none.sock")).status()


def test_unknown_group_is_a_config_error(sock_dir: Path) -> None:
    server = ControlServer(str(sock_dir / "c.sock"), Handler(), group="no-such-group-x")
    with pytest.raises(ControlError, match="control.group: no group named 'no-such-group-x'"):
        server.start()


def test_group_is_applied(sock_dir: Path) -> None:
    import grp

    group = grp.getgrgid(os.getgid()).gr_name
    server = ControlServer(str(sock_dir / "c.sock"), Handler(), group=group, mode=0o600)
    server.start()
    try:
        info = os.stat(server.path)
        assert info.st_gid == os.getgid() and stat.S_IMODE(info.st_mode) == 0o600
    finally:
        server.close()


def test_dealer_view_says_what_to_do_next() -> None:
    import io

    from controller.commands.watch import dealer_view, follow, next_step

    base = {"table": "T1", "shoe": 2, "round": 5, "state": "betting", "betting_open": True,
            "betting_closes_at": "2026-01-01T00:00:10.000Z", "now": 1767225606.2,
            "next_target": "P3", "prompt": "deal to P3", "cards_left": 300,
            "devices": {"shoe": True, "panel": False}}
    lines = dealer_view(base)
    assert lines[0] == "table T1 · shoe 2 · round 5"
    assert lines[1] == ">> deal to P3"
    assert "betting closes in 4 s" in lines and "NOT CONNECTED: panel" in lines
    assert next_step({**base, "next_target": None}) == "all cards dealt — wait for betting to close"
    paused = {**base, "paused": True, "fault": {"code": "ninth_copy", "reason": "9th 7♥"}}
    assert next_step(paused) == "PAUSED: 9th 7♥ — call supervisor"
    assert next_step({**base, "storage_fault": "disk full"}).startswith("STOP")
    out = io.StringIO()
    follow([base, dict(base), {**base, "next_target": "P4", "prompt": "deal to P4"}], out,
           tty=False)
    printed = out.getvalue().splitlines()
    assert len(printed) == 2  # one line per change
    assert "deal to P3" in printed[0] and "deal to P4" in printed[1]
    screen = io.StringIO()
    follow([base], screen, tty=True)
    assert screen.getvalue().startswith("\x1b[H\x1b[2J")
