"""A JSON-lines file sink: one event a line, appended, flushed and fsynced per batch.

For the demo and for debugging; a restart may append a batch again (at least once), so
readers de-duplicate by ``id`` like any backend.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.transports import TransientError, Transport, TransportConfigError, option


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
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
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

    def _drop_fd(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def _close(self) -> None:
        self._drop_fd()
