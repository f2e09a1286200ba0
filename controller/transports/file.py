"""A JSON-lines file sink: one event a line, appended, flushed and fsynced per batch.

For the demo and for debugging; a restart may append a batch again (at least once), so
readers de-duplicate by ``id`` like any backend. A process killed in the middle of a write can
leave a last line without its end (the kernel stops a long write at a fatal signal); that
batch was never counted delivered, so the sink cuts the torn line off when it opens the file
again, and every line stays whole JSON.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.transports import TransientError, Transport, TransportConfigError, option

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
                self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)
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
