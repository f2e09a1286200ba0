"""The control socket server and client over a real Unix socket, with real callers: root
here, and unprivileged users in processes that dropped to them
(tests/support/control_helpers.py)."""

from __future__ import annotations

import grp
import json
import logging
import os
import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from controller.service.control.client import ControlClient, ControlError
from controller.service.control.server import ControlServer, Deadlines
from controller.table.inputs import Actor
from support.control_helpers import NOBODY, UNLISTED_UID, Flood, TemporaryGroup, requests_as

ROOT_GROUP = grp.getgrgid(0).gr_name
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


class Handler:
    """Stands in for the daemon's side: a status, supervisor answers, change notifications."""

    def __init__(self) -> None:
        self.actions: list[tuple[str, str | None, Actor]] = []
        self.version = 0
        self.status = {"state": "ready", "round": None}
        self.lock = threading.Lock()
        self.listeners: list[Any] = []
        self.answer: Future | None = None  # None: answer at once

    def control_status_line(self) -> bytes:
        return json.dumps({"ok": True, "status": self.status}).encode() + b"\n"

    def control_watch_line(self) -> tuple[int, bytes]:
        with self.lock:
            return self.version, json.dumps({"ok": True, "status": self.status}).encode() + b"\n"

    def control_supervisor(self, action: str, card: str | None, by: Actor) -> Future:
        self.actions.append((action, card, by))
        if self.answer is not None:
            return self.answer
        answer: Future = Future()
        answer.set_result({"ok": True, "events": ["paused"]})
        return answer

    def control_watch_interval(self) -> float:
        return 5.0

    def subscribe_changes(self, callback: Any) -> None:
        self.listeners.append(callback)

    def change(self, **fields: Any) -> None:
        with self.lock:
            self.status.update(fields)
            self.version += 1
        for callback in self.listeners:
            callback()


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pdc-", dir="/tmp"))
    path.chmod(0o755)  # the unprivileged callers reach the socket through it
    yield path
    shutil.rmtree(path, ignore_errors=True)


def serve(sock_dir: Path, handler: Handler, **options: Any) -> ControlServer:
    options.setdefault("supervisor_group", ROOT_GROUP)
    server = ControlServer(str(sock_dir / "c.sock"), handler, **options)
    server.start()
    return server


@pytest.fixture
def served(sock_dir: Path) -> Iterator[tuple[ControlServer, Handler, ControlClient]]:
    handler = Handler()
    server = serve(sock_dir, handler, mode=0o660)
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


def read_until_closed(sock: socket.socket) -> list[dict[str, Any]]:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return [json.loads(line) for line in data.splitlines()]


def test_status_and_supervisor(served: tuple[ControlServer, Handler, ControlClient]) -> None:
    server, handler, client = served
    assert client.status() == {"state": "ready", "round": None}
    assert client.supervisor("cancel-round") == {"ok": True, "events": ["paused"]}
    assert client.supervisor("enter-card", "9D")["ok"]
    root = Actor("root", 0)  # named by the kernel, not by the request
    assert handler.actions == [("cancel_round", None, root), ("enter_card", "9D", root)]
    mode = os.stat(server.path).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o660


def test_bad_requests_get_plain_answers(
        served: tuple[ControlServer, Handler, ControlClient]) -> None:
    server, handler, client = served
    answers = raw_request(server.path, b'not json\n{"cmd": 3}\n{"cmd": "reboot"}\n'
                                       b'{"cmd": "supervisor", "action": "explode"}\n'
                                       b'{"cmd": "supervisor", "action": "enter_card"}\n'
                                       b'{"cmd": "supervisor", "action": "pause", "card": "QS"}\n'
                                       b'{"cmd": "status"}\n')
    assert [a["ok"] for a in answers] == [False] * 6 + [True]
    assert answers[0]["error"].startswith("not a JSON line")
    assert answers[2]["error"] == "unknown command; one of: status, supervisor, watch"
    assert answers[3]["error"].startswith("unknown supervisor action; one of: pause")
    assert "enter_card needs the card" in answers[4]["error"]
    assert '"card" only goes with enter_card' in answers[5]["error"]
    assert "QS" not in json.dumps(answers)  # what the caller sent is never echoed
    assert handler.actions == []  # nothing invalid reached the table


def test_oversized_deep_and_huge_number_requests_get_errors_not_tracebacks(
        served: tuple[ControlServer, Handler, ControlClient], caplog) -> None:
    server, handler, _ = served
    caplog.set_level(logging.DEBUG)
    deep = b'{"cmd": "status", "x": ' + b"[" * 2000 + b"]" * 2000 + b"}"
    long_number = b'{"cmd": "supervisor", "action": "pause", "n": ' + b"9" * 100 + b"}"
    answers = raw_request(server.path, deep + b"\n" + long_number + b'\n{"cmd": "status"}\n')
    assert answers[0] == {"ok": False, "error": "request nested deeper than 4 levels"}
    assert answers[1] == {"ok": False, "error": "a number longer than 32 characters"}
    assert answers[2]["ok"] is True  # the connection is still served
    huge = b'{"cmd": "status", "n": ' + b"9" * 60_000 + b"}"
    assert raw_request(server.path, huge) == [
        {"ok": False, "error": "request longer than 4096 bytes"}]
    assert handler.actions == []
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_watch_streams_every_change(served: tuple[ControlServer, Handler, ControlClient]) -> None:
    _, handler, client = served
    stream = client.watch()
    assert next(stream)["state"] == "ready"
    handler.change(state="betting", round=1)
    assert next(stream) == {"state": "betting", "round": 1}
    handler.change(state="dealing")
    assert next(stream)["state"] == "dealing"
    stream.close()


def test_idle_and_unfinished_requests_are_closed(sock_dir: Path) -> None:
    server = serve(sock_dir, Handler(), deadlines=Deadlines(idle=0.3, request=0.2))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle, \
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
            for sock in (idle, slow):
                sock.settimeout(5)
                sock.connect(server.path)
            slow.sendall(b'{"cmd": ')
            assert read_until_closed(slow) == [
                {"ok": False, "error": "no complete request within 0.2 s"}]
            assert read_until_closed(idle) == [{"ok": False, "error": "idle for 0.3 s"}]
    finally:
        server.close()


def test_an_action_the_table_does_not_answer_in_time_says_so(sock_dir: Path) -> None:
    handler = Handler()
    handler.answer = Future()  # the table loop never answers
    server = serve(sock_dir, handler, deadlines=Deadlines(answer=0.2))
    try:
        answer = ControlClient(server.path, timeout=5).supervisor("pause")
        assert answer["ok"] is False
        assert answer["error"].startswith("no answer from the table loop within 0.2 s")
    finally:
        server.close()


def test_only_supervisors_may_act_and_every_caller_may_read(
        sock_dir: Path, supervisors: TemporaryGroup, caplog) -> None:
    handler = Handler()
    server = serve(sock_dir, handler, supervisor_group=supervisors.name, mode=0o666)
    pause = {"cmd": "supervisor", "action": "pause"}
    try:
        # Not a member (no supplementary groups in the database, primary group nogroup).
        status, refused = requests_as(UNLISTED_UID, NOBODY.pw_gid, server.path,
                                      {"cmd": "status"}, pause)
        assert status == {"ok": True, "status": {"state": "ready", "round": None}}
        assert refused["ok"] is False
        assert refused["error"] == (f"{UNLISTED_UID} (uid {UNLISTED_UID}) may not take "
                                    f"supervisor actions: that needs membership of group "
                                    f"{supervisors.name} (status and watch are open to you)")
        assert handler.actions == []
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("pause refused" in line and f"uid {UNLISTED_UID}" in line for line in warned)
        # A member through the user database (nobody is in the group) ...
        assert requests_as(NOBODY.pw_uid, NOBODY.pw_gid, server.path, pause)[0]["ok"]
        # ... or through its primary group.
        assert requests_as(UNLISTED_UID, supervisors.gid, server.path, pause)[0]["ok"]
        assert [by for _, _, by in handler.actions] == [
            Actor("nobody", NOBODY.pw_uid), Actor(str(UNLISTED_UID), UNLISTED_UID)]
    finally:
        server.close()


def test_readers_leave_room_for_supervisors(sock_dir: Path) -> None:
    handler = Handler()
    server = serve(sock_dir, handler, mode=0o666, max_clients=4)
    flood = Flood(NOBODY.pw_uid, NOBODY.pw_gid, server.path, idle=10, bursts=[])
    held = []
    try:
        assert flood.idle_open() == 10
        # Readers took the two slots open to them; now root fills the two kept for acting.
        for _ in range(2):
            held.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            held[-1].connect(server.path)
        assert "too busy" in requests_as(NOBODY.pw_uid, NOBODY.pw_gid, server.path,
                                         {"cmd": "status"})
        client = ControlClient(server.path, timeout=5, retry_s=0)
        assert client.supervisor("pause") == {"ok": True, "events": ["paused"]}
    finally:
        said = flood.stop()
        for sock in held:
            sock.close()
        server.close()
    # The full socket made room for the supervisor by closing the oldest reader; the other
    # eight readers had been turned away at once.
    assert said == {"open": 1, "busy": 8, "displaced": 1, "closed": 0}


def test_stale_socket_is_replaced_and_a_live_one_is_not(sock_dir: Path) -> None:
    path = sock_dir / "c.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # a socket file nobody listens on: a daemon that died
    first = serve(sock_dir, Handler())
    try:
        with pytest.raises(ControlError, match="another daemon is already serving"):
            serve(sock_dir, Handler())
    finally:
        first.close()
    assert not path.exists()  # close removes it
    path.write_text("not a socket")
    with pytest.raises(ControlError, match="is not a socket"):
        serve(sock_dir, Handler())


def test_client_errors_name_the_problem(sock_dir: Path) -> None:
    with pytest.raises(ControlError, match="is the daemon running"):
        ControlClient(str(sock_dir / "none.sock")).status()


@pytest.mark.parametrize("option", ["group", "supervisor_group"])
def test_unknown_group_is_a_config_error(sock_dir: Path, option: str) -> None:
    with pytest.raises(ControlError, match=f"control.{option}: no group named 'no-such-group-x'"):
        serve(sock_dir, Handler(), **{option: "no-such-group-x"})


def test_group_is_applied(sock_dir: Path) -> None:
    group = grp.getgrgid(os.getgid()).gr_name
    server = serve(sock_dir, Handler(), group=group, mode=0o600)
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
    assert lines[1] == ">> deal a card to Player 3"  # the status names no card index here
    assert "betting closes in 4 s" in lines and "NOT CONNECTED: Button panel" in lines
    dealt = {**base, "cards_dealt": 9}  # burn + 8: card 9 of 12 goes to P3, its second
    assert next_step(dealt) == "deal card 9 of 12: Player 3, second card"
    assert next_step({**base, "next_target": None}) == "all cards dealt — wait for betting to close"
    paused = {**base, "paused": True, "fault": {"code": "ninth_copy", "reason": "9th 7♥"}}
    assert next_step(paused) == ("PAUSED — call the supervisor — The shoe read a card that "
                                 "cannot be in it (a bad read or a foreign card).")
    assert next_step({**base, "storage_fault": "disk full"}).startswith("STOP")
    # paused while betting is open: the countdown waits with the table, nothing is counted
    assert dealer_view(paused)[2] == "PAUSED · countdown frozen"
    assert not any("betting closes in" in line for line in dealer_view(paused))
    # the table's language: the same step as the dealer display's, in Japanese
    assert dealer_view(dealt, "ja")[1] == ">> 12 枚中 9 枚目: プレイヤー3、2 枚目"
    out = io.StringIO()
    follow([base, dict(base), {**base, "next_target": "P4", "prompt": "deal to P4"}], out,
           tty=False)
    printed = out.getvalue().splitlines()
    assert len(printed) == 2  # one line per change
    assert "Player 3" in printed[0] and "Player 4" in printed[1]
    screen = io.StringIO()
    follow([base], screen, tty=True)
    assert screen.getvalue().startswith("\x1b[H\x1b[2J")
