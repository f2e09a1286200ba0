"""The control client connects to the daemon's socket only (controller/service/control/
socket_file.py): not through a link the service user planted in its runtime directory, not to a
FIFO or file put there, and for root only to a socket owned by whoever controls the directory;
an answer that is not the control protocol is a clear error naming the socket, never a
traceback. Real sockets, a real second user planting the link, the real commands."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.service.control.client import ControlClient, ControlError
from support.control_helpers import NOBODY
from support.daemon_helpers import cli

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as two users")

#: what the attackers' root-only socket answered: JSON, but no status and no events
FOREIGN_ANSWER = b'{"ok": true, "draining": true, "drained": false}\n'


class AnsweringSocket:
    """A listening Unix socket that reads each caller's line, sends ``answer`` and closes;
    it keeps the ids of those who connected (SO_PEERCRED)."""

    def __init__(self, path: Path, answer: bytes):
        self.answer = answer
        self.callers: list[tuple[int, int, int]] = []  # pid, uid, gid
        self.received: list[bytes] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            with conn:
                creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
                self.callers.append(struct.unpack("3i", creds))
                conn.settimeout(5)
                try:
                    self.received.append(conn.makefile("rb").readline())
                    conn.sendall(self.answer)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


@pytest.fixture
def runtime_dir(short_dir: Path) -> Path:
    """/run/pokdeng-table as systemd's RuntimeDirectory= makes it: the service user's."""
    short_dir.chmod(0o755)
    run = short_dir / "run"
    run.mkdir()
    os.chown(run, NOBODY.pw_uid, NOBODY.pw_gid)
    return run


@pytest.fixture
def root_only_socket(short_dir: Path) -> Iterator[AnsweringSocket]:
    """Another program's socket in a directory only root may enter."""
    private = short_dir / "rootonly"
    private.mkdir(mode=0o700)
    server = AnsweringSocket(private / "victim.sock", FOREIGN_ANSWER)
    yield server
    server.close()


def as_service_user(*argv: str) -> None:
    subprocess.run(argv, user=NOBODY.pw_uid, group=NOBODY.pw_gid, check=True, timeout=30)


ROOTS_COMMANDS = {
    "status": ("status", "--json"),
    "supervisor drain": ("supervisor", "drain", "--wait", "--timeout", "3"),
    "watch": ("watch", "--once"),
}


@needs_root
@pytest.mark.parametrize("command", list(ROOTS_COMMANDS))
def test_root_does_not_connect_through_a_link_the_service_user_planted(
        runtime_dir: Path, root_only_socket: AnsweringSocket, command: str) -> None:
    """The package's preinst and prerm run status and supervisor drain as root: a link at
    control.sock to a root-only socket is refused, naming it, and that socket hears nothing."""
    link = runtime_dir / "control.sock"
    as_service_user("ln", "-s", str(root_only_socket._sock.getsockname()), str(link))
    assert link.is_symlink() and link.lstat().st_uid == NOBODY.pw_uid

    done = cli(*ROOTS_COMMANDS[command][:1], "--socket", str(link),
               *ROOTS_COMMANDS[command][1:])

    assert done.returncode == 69, (done.stdout, done.stderr)
    assert f"{link} is a symbolic link" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""
    assert root_only_socket.callers == [] and root_only_socket.received == []


@needs_root
def test_root_connects_to_the_service_users_socket_as_root_and_to_no_other(
        runtime_dir: Path) -> None:
    """In the service user's directory root takes that user's socket (the daemon's), and
    connects as root (the daemon journals root's actions as root's); a socket owned by
    another (root's own, as a hard link would bring it in) is refused before any connect."""
    path = runtime_dir / "control.sock"
    server = AnsweringSocket(path, b'{"ok": true, "status": {"state": "idle"}}\n')
    try:
        with pytest.raises(ControlError, match=f"{path} belongs to uid 0, not to uid "
                                               f"{NOBODY.pw_uid} who controls {runtime_dir}"):
            ControlClient(str(path), retry_s=0).status()
        assert server.callers == []

        os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
        assert ControlClient(str(path), retry_s=0).status() == {"state": "idle"}
        assert [uid for _, uid, _ in server.callers] == [0]
        assert json.loads(server.received[0]) == {"cmd": "status"}
    finally:
        server.close()


@pytest.mark.parametrize("planted", ["fifo", "file", "directory"])
def test_what_is_not_a_socket_is_refused_at_once(short_dir: Path, planted: str) -> None:
    path = short_dir / "control.sock"
    {"fifo": os.mkfifo, "file": Path.touch, "directory": Path.mkdir}[planted](path)

    done = cli("status", "--socket", str(path))

    assert done.returncode == 69, done.stderr
    assert f"{path} is not a socket" in done.stderr and "Traceback" not in done.stderr


@pytest.fixture
def foreign_socket(short_dir: Path) -> Iterator[AnsweringSocket]:
    """A socket of another program, where the daemon's would be."""
    server = AnsweringSocket(short_dir / "control.sock", FOREIGN_ANSWER)
    yield server
    server.close()


@pytest.mark.parametrize("command", list(ROOTS_COMMANDS))
def test_an_answer_not_of_the_protocol_ends_the_command_with_its_reason(
        foreign_socket: AnsweringSocket, short_dir: Path, command: str) -> None:
    """What the attackers' socket answered made status and supervisor drain crash with
    KeyError: 'status'; now exit 69 naming the socket, no traceback."""
    path = short_dir / "control.sock"
    done = cli(*ROOTS_COMMANDS[command][:1], "--socket", str(path),
               *ROOTS_COMMANDS[command][1:])

    assert done.returncode == 69, (done.stdout, done.stderr)
    assert f"{path} does not answer as the table's control socket" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


NOT_THE_PROTOCOL = {
    "JSON without status or events": FOREIGN_ANSWER,
    "not JSON": b"220 smtp.example ESMTP ready\n",
    "not UTF-8": b"\xff\xfe\x00{\n",
    "a JSON list": b'[{"ok": true}]\n',
    "ok not a boolean": b'{"ok": "yes", "status": {}}\n',
    "a refusal without its error": b'{"ok": false}\n',
    "status not an object": b'{"ok": true, "status": "idle", "events": "paused"}\n',
    "events not names": b'{"ok": true, "status": [], "events": [1, 2]}\n',
    "nested 100,000 deep": b"[" * 100_000 + b"\n",
}


@pytest.mark.parametrize("what", list(NOT_THE_PROTOCOL))
def test_every_call_of_the_client_refuses_an_answer_not_of_the_protocol(
        short_dir: Path, what: str) -> None:
    path = short_dir / "control.sock"
    server = AnsweringSocket(path, NOT_THE_PROTOCOL[what])
    client = ControlClient(str(path), timeout=5, retry_s=0)
    try:
        calls = {"status": client.status, "watch": lambda: next(iter(client.watch())),
                 "supervisor": lambda: client.supervisor("drain")}
        for name, call in calls.items():
            with pytest.raises(ControlError) as refused:
                call()
            assert str(refused.value).startswith(
                f"{path} does not answer as the table's control socket ("), (name, refused.value)
    finally:
        server.close()
