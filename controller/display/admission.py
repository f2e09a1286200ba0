"""Who gets a connection and a stream on the display's server: no client can starve the
dealer's screen.

The server has a fixed number of connections (one thread each) and of streams. Two kinds of
client could hold them all while doing nothing: one that sends its request a byte at a time
(each read within the socket timeout, the whole never done), and one that opens streams and
sits on them. So:

* a connection still sending its request when the connections are full is the one that makes
  room: the oldest of those is closed for the newcomer (a browser sends its request at once;
  the request has a deadline of its own besides);
* one address holds at most ``STREAMS_PER_ADDRESS`` streams; one more is refused (503: the
  page tries again a second later, by when a reloaded page's old stream is noticed gone).
  Refused, not swapped for its oldest: pages that took each other's places would reconnect in
  a loop, each new one sent the whole screen;
* the last ``LOOPBACK_RESERVE`` streams are for screens on this machine (the kiosk beside the
  dealer); when the streams are full, a screen on this machine takes the oldest stream of
  another machine's;
* the dealer's screen comes before the players' pages (scoreboards, stream overlays): where a
  limit above would refuse it, it takes the oldest players' stream it is held back by, so a
  studio PC's overlays, or a flood of players' pages, never keep the dealer from the table.

Bookkeeping only: ``connect`` and ``open_stream`` say whom to close, the server closes them.
"""

from __future__ import annotations

import ipaddress
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

LOOPBACK_RESERVE = 2
STREAMS_PER_ADDRESS = 8  # a studio PC may show the dealer page, the scoreboard and overlays


def is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool((mapped or ip).is_loopback)


@dataclass(eq=False)
class Connection:
    sock: Any
    address: str
    order: int
    requesting: bool = True          # still sending its request line and headers
    stream: Any = None               # its stream once it has one
    dealer: bool = False             # its stream is the dealer's screen (not a players' page)
    loopback: bool = field(init=False)

    def __post_init__(self) -> None:
        self.loopback = is_loopback(self.address)


class Admission:
    def __init__(self, connections: int, streams: int):
        self.connections = connections
        self.streams = streams
        self._open: dict[Any, Connection] = {}  # socket -> its connection
        self._order = itertools.count()
        self._lock = threading.Lock()
        self.evicted = 0  # connections closed to make room (for status and tests)

    def connect(self, sock: Any, address: str) -> list[Connection] | None:
        """Admit ``sock``; the connections to close for it (the oldest one still sending its
        request), or None: refuse it (every connection is past its request)."""
        with self._lock:
            victims: list[Connection] = []
            if len(self._open) >= self.connections:
                requesting = [c for c in self._open.values() if c.requesting]
                if not requesting:
                    return None
                victim = min(requesting, key=lambda c: c.order)
                victims.append(self._drop(victim))
            self._open[sock] = Connection(sock, address, next(self._order))
            return victims

    def requested(self, sock: Any) -> None:
        """Its request is in: it no longer makes room for others."""
        with self._lock:
            if sock in self._open:
                self._open[sock].requesting = False

    def open_stream(self, sock: Any, dealer: bool = False) -> list[Connection] | None:
        """Whether ``sock`` may have a stream (``dealer``: for the dealer's screen): the streams
        to end for it, or None (refused)."""
        with self._lock:
            mine = self._open.get(sock)
            if mine is None:
                return None
            mine.dealer = dealer
            victims: list[Connection] = []

            def streaming() -> list[Connection]:
                return sorted((c for c in self._open.values() if c.stream is not None),
                              key=lambda c: c.order)

            def make_room(holders: list[Connection]) -> bool:
                """End the oldest players' page of ``holders`` for the dealer's screen."""
                pages = [c for c in holders if not c.dealer]
                if not (dealer and pages):
                    return False
                victims.append(self._drop(pages[0]))
                return True

            same = [c for c in streaming() if c.address == mine.address]
            if len(same) >= STREAMS_PER_ADDRESS and not make_room(same):
                return None
            if len(streaming()) >= self.streams:
                others = [c for c in streaming() if not c.loopback]
                if mine.loopback and others:
                    victims.append(self._drop(others[0]))
                elif not make_room(streaming()):
                    return None
            remote = [c for c in streaming() if not c.loopback]
            if (not mine.loopback and len(remote) >= self.streams - LOOPBACK_RESERVE
                    and not make_room(remote)):
                return None
            return victims

    def streaming(self, sock: Any, stream: Any) -> None:
        with self._lock:
            if sock in self._open:
                self._open[sock].stream = stream

    def close(self, sock: Any) -> None:
        with self._lock:
            self._open.pop(sock, None)

    def _drop(self, connection: Connection) -> Connection:
        self._open.pop(connection.sock, None)
        self.evicted += 1
        return connection
