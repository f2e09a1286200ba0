"""Noticing that a backend which refused connections is back, for a transport with no
connection of its own to watch (HTTP: one request at a time, nothing between them).

While the backend's address refuses connections, ``ConnectProbe`` tries a plain TCP connection
to it every ``every_s``; the first one accepted calls ``on_back`` once (the transport's
``came_back``: the outbox retries now instead of at the end of its backoff) and the probe
stops. A TCP accept does not prove the backend will take a batch: the retry finds out, and the
outbox paces retries against a backend that keeps coming back and failing.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable

log = logging.getLogger("pokdeng.transports.probe")

#: how often a refused address is tried again: a refused TCP connection costs nearly nothing
PROBE_EVERY_S = 1.0


class ConnectProbe:
    def __init__(self, host: str, port: int, on_back: Callable[[], None], *,
                 every_s: float = PROBE_EVERY_S, name: str = "probe"):
        self.host, self.port = host, port
        self.on_back = on_back
        self.every_s = every_s
        self.name = name
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()

    def start(self) -> None:
        """Probe until the address accepts a connection (nothing new while probing already)."""
        with self._lock:
            if self._thread is not None or self._closed.is_set():
                return
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._closed.wait(self.every_s):
            try:
                socket.create_connection((self.host, self.port),
                                         timeout=min(self.every_s, 2.0)).close()
            except OSError:
                continue
            with self._lock:
                self._thread = None  # a failure from here on starts probing again
            log.info("%s:%s accepts connections again", self.host, self.port)
            self.on_back()
            return

    def close(self) -> None:
        self._closed.set()
