"""The devices and views the soak harness plays: the panel's pty, an MQTT subscriber reading
the broker directly, and the daemon's status from a ``watch`` stream."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.soak.results import STEP_TIMEOUT_S, SoakFailure
from controller.service.control.client import ControlClient, ControlError


class PanelPort:
    """The panel end of a serial line panel: a pty whose slave is linked at a fixed path, so it
    can be unplugged (pty gone) and plugged back (a new pty at the same path).

    Each plug has one thread that reads the master (answering the host's ``status?`` with the
    key switch level, as the firmware does) and that alone closes the pty on unplug, so a
    closed descriptor number is never reused under a reader.
    """

    def __init__(self, link: Path):
        self.link = link
        self.switch_pause = False
        self._lock = threading.Lock()
        self._master: int | None = None
        self._unplugged: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self.plug()

    def plug(self) -> None:
        with self._lock:
            if self._master is not None:
                return
            master, slave = os.openpty()
            tmp = self.link.with_suffix(".new")
            if tmp.is_symlink():
                tmp.unlink()
            tmp.symlink_to(os.ttyname(slave))
            os.replace(tmp, self.link)
            self._master = master
            self._unplugged = threading.Event()
            self._thread = threading.Thread(target=self._serve,
                                            args=(master, slave, self._unplugged), daemon=True)
            self._thread.start()

    def unplug(self) -> None:
        with self._lock:
            if self._master is None:
                return
            self._master = None
            assert self._unplugged is not None and self._thread is not None
            self._unplugged.set()
            thread = self._thread
        thread.join(5)

    def send(self, line: str) -> None:
        with self._lock:
            if self._master is None:
                return
            try:
                os.write(self._master, line.encode() + b"\n")
            except OSError:
                pass

    def set_switch(self, pause: bool) -> None:
        self.switch_pause = pause
        self.send(f"switch pause {'on' if pause else 'off'}")

    def _serve(self, master: int, slave: int, unplugged: threading.Event) -> None:
        import select

        buffer = b""
        try:
            while not unplugged.is_set():
                ready, _, _ = select.select([master], [], [], 0.05)
                if not ready:
                    continue
                try:
                    buffer += os.read(master, 1024)
                except OSError:
                    time.sleep(0.05)  # the host has the port closed (EIO): wait for it
                    continue
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip() == b"status?":
                        self.send(f"switch pause {'on' if self.switch_pause else 'off'}")
        finally:
            with self._lock:  # no send() is writing to it now
                os.close(master)
                os.close(slave)


class MqttSubscriber:
    """Reads the table's event topic straight from the broker (QoS 1, persistent session)."""

    def __init__(self, port: int, topic: str):
        import paho.mqtt.client as mqtt

        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="soak-subscriber",
                                  clean_session=False)
        self.client.on_connect = lambda c, u, f, rc, p=None: c.subscribe(topic, qos=1)
        self.client.on_message = self._message
        self.client.connect("127.0.0.1", port, keepalive=30)
        self.client.loop_start()

    def _message(self, client: Any, userdata: Any, message: Any) -> None:
        event = json.loads(message.payload)
        with self.lock:
            self.events.append(event)

    def received(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


class StatusWatch:
    """The daemon's latest sealed status, kept current by a ``watch`` stream; reconnects."""

    def __init__(self, socket_path: str):
        self.client = ControlClient(socket_path, timeout=STEP_TIMEOUT_S)
        self.cond = threading.Condition()
        self.status: dict[str, Any] | None = None
        self.version = 0
        self._closed = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._closed:
            try:
                for status in self.client.watch():
                    with self.cond:
                        self.status, self.version = status, self.version + 1
                        self.cond.notify_all()
                    if self._closed:
                        return
            except (ControlError, OSError, ValueError):
                pass
            with self.cond:
                self.status = None
                self.cond.notify_all()
            time.sleep(0.05)

    def wait(self, predicate: Callable[[dict[str, Any]], bool], what: str,
             timeout: float = STEP_TIMEOUT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                if self.status is not None and predicate(self.status):
                    return self.status
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SoakFailure(f"timed out waiting for {what}; last status: "
                                      f"{json.dumps(self.status)[:600]}")
                self.cond.wait(min(left, 0.5))

    def close(self) -> None:
        self._closed = True
