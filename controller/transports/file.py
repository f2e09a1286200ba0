"""A JSON-lines file sink: one event a line, appended, flushed and fsynced per batch.

For the demo and for debugging; a restart may append a batch again (at least once), so
readers de-duplicate by ``id`` like any backend. A process killed in the middle of a write can
leave a last line without its end (the kernel stops a long write at a fatal signal); that
batch was never counted delivered, so the sink cuts the torn line off when it opens the file
again, and every line stays whole JSON.

The file is a backend's copy like any other, so it says where it stands (docs/backend.md):
its last event of this table (``LastEvent``). Batches are appended in seq order and each one
starts at or before the seq after the file's last (a repeat after a restart), never past it,
so every event up to the file's highest seq is in it. The file is read from its end, a chunk
at a time, until a chunk holds one of this table's events: a start costs the same on a month
of events as on one shoe. The highest seq in that chunk is taken (a repeat cut short by a
kill can leave a lower seq last), with its last copy.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.regular_file import open_regular, open_regular_for_append
from controller.transports import (
    LastEvent,
    TransientError,
    Transport,
    TransportConfigError,
    option,
)

log = logging.getLogger("pokdeng.transports.file")

#: how far back from the end a torn last line is looked for, at most, per read
_TAIL_CHUNK = 64 * 1024


@dataclass(frozen=True)
class FileSinkSettings:
    path: str = option(path=True)
    batch_max: int = option(500, minval=1, maxval=10_000)
    # failing this long: the table records the backend unreachable (an event)
    unreachable_after_s: float = option(30.0, above=0, maxval=3600)


class FileSink(Transport):
    kind = "file"

    def __init__(self, settings: FileSinkSettings, *, table: str, name: str | None = None):
        super().__init__(name)
        self.settings = settings
        self.table = table
        self.batch_max = settings.batch_max
        self.unreachable_after_s = settings.unreachable_after_s
        self.path = Path(settings.path)
        if not self.path.parent.is_dir():
            raise TransportConfigError(
                f"file transport: path: directory {self.path.parent} does not exist")
        self._fd: int | None = None

    def deliver(self, events: list[dict[str, Any]]) -> None:
        data = "".join(json.dumps(e, sort_keys=True, separators=(",", ":"),
                                  ensure_ascii=False) + "\n" for e in events).encode("utf-8")
        start = None
        try:
            if self._fd is None:
                self._fd = open_regular_for_append(self.path)
                self._cut_torn_line(self._fd)
            start = os.fstat(self._fd).st_size
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
        except OSError as exc:
            if start is not None and self._fd is not None:
                try:  # no torn line left behind for the retry to append after
                    os.ftruncate(self._fd, start)
                except OSError:
                    pass
            self._drop_fd()
            raise TransientError(f"cannot write {self.path}: {exc.strerror}") from exc

    tells_held = True  # its own file: the last event of this table in it

    def ask_held(self) -> None:
        """Where this file stands: its last event of this table (read from the end)."""
        try:  # a FIFO planted at its name would hang this reader: only a regular file
            with os.fdopen(open_regular(self.path), "rb") as file:
                event = self._last_event(file.fileno())
        except FileNotFoundError:
            event = None  # nothing written yet: it holds none
        except OSError as exc:
            raise TransientError(f"cannot read {self.path}: {exc.strerror}") from exc
        self.report_held(LastEvent(event))

    def _last_event(self, fd: int) -> dict[str, Any] | None:
        """The highest seq of this table in the last chunk of the file that has any (its last
        copy), reading back from the end a chunk at a time; None when the file has none."""
        end = os.fstat(fd).st_size
        carry: bytes | None = None  # the end of a line that starts in the next chunk back
        while end > 0:
            start = max(0, end - _TAIL_CHUNK)
            pieces = (os.pread(fd, end - start, start) + (carry or b"")).split(b"\n")
            if carry is None:
                # after the file's last newline: nothing, or a torn write (the sink cuts it)
                pieces.pop()
            carry = pieces.pop(0) if start > 0 else None  # its start is further back
            best: dict[str, Any] | None = None
            for line in pieces:
                event = self._event_of(line, start)
                if event is not None and (best is None or event["seq"] >= best["seq"]):
                    best = event  # a later copy of the same seq wins, as for any backend
            if best is not None:
                return best
            end = start
        return None

    def _event_of(self, line: bytes, near: int) -> dict[str, Any] | None:
        """``line`` as one of this table's events, or None (another table's, or not one)."""
        try:
            event = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            if line.strip():
                log.warning("%s: a line near byte %d is not JSON; not read as an event",
                            self.path, near)
            return None
        if not isinstance(event, dict) or event.get("table") != self.table:
            return None
        seq = event.get("seq")
        if isinstance(seq, bool) or not isinstance(seq, int) or \
                event.get("id") != f"{self.table}:{seq}":
            log.warning("%s: a line near byte %d names this table but is not one of its "
                        "events (id and seq disagree); not read as an event", self.path, near)
            return None
        return event

    def _cut_torn_line(self, fd: int) -> None:
        """Truncate after the file's last newline: a line without one is a write that was
        cut short (the batch is sent again), and appending after it would spoil two lines."""
        size = end = os.fstat(fd).st_size
        while end > 0:
            start = max(0, end - _TAIL_CHUNK)
            chunk = os.pread(fd, end - start, start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        if end == size:
            return
        os.ftruncate(fd, end)
        os.fsync(fd)
        log.warning("%s: cut %d bytes of a line left unfinished by an interrupted write "
                    "(its events are sent again)", self.path, size - end)

    def _drop_fd(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def _close(self) -> None:
        self._drop_fd()
