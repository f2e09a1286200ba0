"""The full journal check, run once off the owner thread after READY.

A start checks the chain only from the last shoe-end checkpoint on (docs/durability.md), so
the rest of the live journal is checked here, from a thread that waits for a niced child
process doing the work on its own read-only connection (one snapshot; the owner keeps writing
meanwhile). A child, not a thread: a thread walking a million records would hold the GIL the
owner loop needs (measured on a 500-shoe journal: the owner's p99 per input went from 1.5 ms
to 12.6 ms with a thread, 4.0 ms with the child). The same check as
``pokdeng-table journal verify`` makes of the live journal, from its archive cut to its head.
Archives are not read: they may have been moved off the table PC.

Its state is part of the published status: ``running``, ``ok`` (with the time and the count),
or ``failed`` with the reason. A failure is logged at ERROR and shown in ``status`` and in
systemd's STATUS= line; it never stops the daemon (the table runs on the checked tail), but a
supervisor must look at the journal (``pokdeng-table journal verify``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from controller.durability.journal import JournalError, VerifyResult, verify_file
from controller.table.events import iso_time

log = structlog.get_logger("pokdeng.journal_check")


def sealed_reason(result: VerifyResult) -> str:
    """The failure in words that never carry a card: an invalid input's own message may quote
    what the record holds, so only the kind of fault is kept from it."""
    reason = result.reason
    if reason.startswith("input is not valid"):
        reason = "input is not valid"
    where = f"record {result.bad_record}" if result.bad_record is not None else "journal"
    return f"{where}: {reason}"


def verify_in_child(path: Path) -> VerifyResult:
    """``verify_file(path)`` in a child process at a lower priority (``nice`` +10)."""
    done = subprocess.run(
        [sys.executable, "-m", "controller.service.journal_check", str(path)],
        capture_output=True, text=True, preexec_fn=lambda: os.nice(10), check=False)
    try:
        fields = json.loads(done.stdout)
        return VerifyResult(bool(fields["ok"]), int(fields["records"]), int(fields["events"]),
                            fields["bad_record"], str(fields["reason"]))
    except (ValueError, KeyError, TypeError):
        raise JournalError(f"the check process exited with {done.returncode}: "
                           f"{done.stderr.strip()[-300:]}") from None


class JournalCheck:
    """Runs the check once on a daemon thread; ``status()`` may be read from any thread.

    ``on_change`` is called (on the check's thread; it must not block) when the state moves.
    """

    def __init__(self, journal_path: str | Path, on_change: Callable[[], None] | None = None,
                 verify: Callable[[Path], VerifyResult] = verify_in_child):
        self._path = Path(journal_path)
        self._on_change = on_change
        self._verify = verify
        self._lock = threading.Lock()
        self._status: dict[str, Any] = {"state": "not started"}
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._set({"state": "running", "since": iso_time(time.time())})
        self._thread = threading.Thread(target=self._run, name="journal-check", daemon=True)
        self._thread.start()

    def status(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._status)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        started = time.monotonic()
        try:
            result = self._verify(self._path)
        except JournalError as exc:
            result = VerifyResult(False, 0, 0, None, str(exc))
        except Exception as exc:  # a check that breaks must say so, never kill the daemon
            result = VerifyResult(False, 0, 0, None, f"the check itself failed: "
                                                     f"{type(exc).__name__}: {exc}")
        seconds = round(time.monotonic() - started, 3)
        at = iso_time(time.time())
        if result.ok:
            log.info("journal check passed", records=result.records, events=result.events,
                     seconds=seconds)
            self._set({"state": "ok", "at": at, "records": result.records,
                       "seconds": seconds})
        else:
            reason = sealed_reason(result)
            log.error("journal check FAILED: the journal's chain does not hold; run "
                      "`pokdeng-table journal verify` and call a supervisor",
                      reason=reason, journal=str(self._path))
            self._set({"state": "failed", "at": at, "reason": reason})

    def _set(self, status: dict[str, Any]) -> None:
        with self._lock:
            self._status = status
        if self._on_change is not None:
            try:
                self._on_change()
            except Exception:
                log.exception("journal check: status update failed")


def main(argv: list[str]) -> int:
    """The child's side: verify one journal file, print the result as JSON."""
    try:
        result = verify_file(argv[0])
    except JournalError as exc:
        result = VerifyResult(False, 0, 0, None, str(exc))
    print(json.dumps({"ok": result.ok, "records": result.records, "events": result.events,
                      "bad_record": result.bad_record, "reason": result.reason}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
