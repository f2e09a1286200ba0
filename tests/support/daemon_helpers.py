"""Helpers for tests that run the daemon as a real subprocess against simulated devices."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from controller.service.control.access import own_group
from controller.service.control.client import ControlClient, ControlError
from support.waiting import wait_until


class NotifyListener:
    """A real sd_notify receiver: a datagram socket the daemon sends READY/STATUS/… to."""

    def __init__(self, path: Path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.messages: list[dict[str, str]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._closed:
            ready, _, _ = select.select([self.sock], [], [], 0.1)
            if not ready:
                continue
            data = self.sock.recv(4096).decode()
            fields = dict(line.split("=", 1) for line in data.splitlines() if "=" in line)
            with self._cond:
                self.messages.append(fields)
                self._cond.notify_all()

    def wait_for(self, key: str, value: str | None = None, timeout: float = 15.0,
                 count: int = 1) -> list[dict[str, str]]:
        def found() -> list[dict[str, str]]:
            return [m for m in self.messages if key in m and (value is None or m[key] == value)]

        wait_until(lambda: len(found()) >= count, timeout, f"{count} × {key}={value}",
                   condition=self._cond, details=lambda: f"got {self.messages}")
        with self._cond:
            return found()

    def close(self) -> None:
        self._closed = True
        self._thread.join(2)
        self.sock.close()


class LinePanelPty:
    """The far end of a serial line panel: the test writes button lines into a real pty."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        self.path = os.ttyname(self.slave)
        self.received = b""
        self._closed = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._closed:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    self.received += os.read(self.master, 1024)
                except OSError:
                    return

    def wait_connected(self, count: int = 1, timeout: float = 15.0) -> None:
        wait_until(lambda: self.received.count(b"status?") >= count, timeout,
                   "the daemon to connect to the panel", interval=0.02,
                   details=lambda: f"received {self.received!r}")

    def send(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def close(self) -> None:
        """Close both ends, once: a test that unplugs the panel closes it before the fixture
        does, and closing a descriptor number twice closes whatever reused it meanwhile."""
        if self._closed:
            return
        self._closed = True
        self._thread.join(2)
        os.close(self.master)
        os.close(self.slave)


def control_section(socket_path: Path, **options: Any) -> dict[str, Any]:
    """A control section whose supervisor group exists here (this process's own group)."""
    return {"socket": str(socket_path), "supervisor_group": own_group(), **options}


@contextmanager
def edited_config(config: Path) -> Iterator[dict[str, Any]]:
    """The YAML config at ``config`` to change in the ``with`` block; written back after it."""
    data = yaml.safe_load(config.read_text())
    yield data
    config.write_text(yaml.safe_dump(data))


def in_process_daemon(state_dir: Path, table_id: str = "L1", clock: Any = None) -> Any:
    """A Daemon to run in the test's process: no devices (the test posts the inputs a driver
    would), no transports, no service manager; betting lasts 15 s."""
    from controller.service.config.settings import parse_config
    from controller.service.daemon import Daemon
    from controller.service.telemetry.notify import Notifier

    config = parse_config({
        "table": {"id": table_id, "betting_seconds": 15},
        "state_dir": str(state_dir),
        "shoe": {"driver": "beetek", "url": "/dev/null"},
        "control": control_section(state_dir / "c.sock"),
    }, "test")
    return Daemon(config, notifier=Notifier({}), clock=clock, drivers=[], transports=[])


def daemon_config(tmp_path: Path, shoe_link: Path, panel_path: str,
                  betting_seconds: float = 2, shoe: dict[str, Any] | None = None,
                  display: dict[str, Any] | None = None, **control: Any) -> Path:
    """A daemon config on these devices; ``shoe`` adds or replaces shoe driver options,
    ``display`` is the display section (none: no display), ``control`` adds control-section
    keys."""
    data = {
        "table": {"id": "T1", "betting_seconds": betting_seconds},
        "state_dir": str(tmp_path / "state"),
        "shoe": {"driver": "beetek", "url": str(shoe_link), "reconnect_seconds": 0.2,
                 **(shoe or {})},
        "panel": {"driver": "line_panel", "url": panel_path, "reconnect_seconds": 0.2},
        "control": control_section(tmp_path / "control.sock", **control),
        "transports": {"file": {"path": str(tmp_path / "events.jsonl")}},
        "logging": {"level": "info", "format": "json"},
    }
    if display is not None:
        data["display"] = display
    path = tmp_path / "table.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def start_daemon(config: Path, notify: Path, log: Path, umask: int | None = None,
                 cwd: str | None = None, **env: str) -> subprocess.Popen:
    """``run --config`` in its own process; ``umask``: the one it is started with; ``cwd``:
    where (``python -m`` imports from there first: elsewhere, PYTHONPATH decides)."""
    environment = {**os.environ, "NOTIFY_SOCKET": str(notify), **env}
    return subprocess.Popen([sys.executable, "-m", "controller", "run", "--config", str(config)],
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, env=environment,
                            cwd=cwd,
                            preexec_fn=None if umask is None else lambda: os.umask(umask))


def log_records(log: Path, event: str | None = None) -> list[dict[str, Any]]:
    """The daemon's log lines (``logging.format: json``), those of ``event`` when given."""
    records = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return records if event is None else [r for r in records if r.get("event") == event]


@contextmanager
def running_daemon(config: Path, directory: Path, panel: Any = None, *,
                   umask: int | None = None, env: dict[str, str] | None = None,
                   ) -> Iterator[tuple[subprocess.Popen, Path]]:
    """The daemon of ``config`` at READY, with ``panel`` (a LinePanelPty) connected if given:
    its process and its log, ``directory``/daemon.log (``env``: more of its environment). A
    block that ends without an error must be able to stop it cleanly (SIGTERM, exit 0); it is
    stopped in any case."""
    notify = NotifyListener(directory / "notify")
    log = directory / "daemon.log"
    proc = start_daemon(config, notify.path, log, umask=umask, **(env or {}))
    try:
        notify.wait_for("READY", "1")
        if panel is not None:
            panel.wait_connected()
        yield proc, log
        assert stop_daemon(proc) == 0, log.read_text()[-2000:]
    finally:
        stop_daemon(proc)
        notify.close()


def stop_daemon(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        raise


def wait_status(client: ControlClient, predicate: Callable[[dict[str, Any]], bool],
                timeout: float = 15.0) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def matched() -> dict[str, Any] | None:
        nonlocal last
        try:
            last = client.status()
        except ControlError:
            last = {}
        return last if last and predicate(last) else None

    return wait_until(matched, timeout, "the status to match", interval=0.03,
                      details=lambda: f"last: {json.dumps(last)[:2000]}")


#: a flip card that orders five burns, and those burns: no round is open, nothing is sealed
FLIP, BURNS = "5H", ("2C", "3C", "4C", "6C", "7C")


def open_shoe(client: ControlClient, panel: Any, shoe: Any,
              flip_and_burns: tuple[str, ...] = (FLIP, *BURNS)) -> dict[str, Any]:
    """Press NEW SHOE on the panel and draw the flip card and its burns from the shoe: the
    table is ready for its first round (the status that says so is returned)."""
    panel.send("new_shoe")
    wait_status(client, lambda s: s["state"] == "awaiting_flip")
    for card in flip_and_burns:
        shoe.send_card(card)
    return wait_status(client, lambda s: s["state"] == "ready")


def start_round(client: ControlClient, panel: Any) -> dict[str, Any]:
    """Press START ROUND: betting opens (the status that says so is returned)."""
    panel.send("start_round")
    return wait_status(client, lambda s: s["betting_open"])


def cli(*args: str, timeout: float = 60,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})
