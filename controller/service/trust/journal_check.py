"""The full journal check, run once off the owner thread after READY.

A start checks the chain only from the last shoe-end checkpoint on (docs/durability.md), so
the rest of the live journal is checked here, from a thread that waits for a child process
at idle priority (``durability/idle_child.py``: SCHED_IDLE, nice 19, idle I/O class) doing the
work on its own read-only connection. A child, not a thread: a thread walking a million
records would hold the GIL the owner loop needs (measured on a 500-shoe journal: the owner's
p99 per input went from 1.5 ms to 12.6 ms with a thread, 4.0 ms with the child). A keyed
chain's key goes to the child on its stdin. The child reads in short read transactions
(``chain_check.verify_in_steps``), so it never holds one snapshot, and with it the WAL
checkpoints, for the whole walk, and paced (``CHECK_DUTY``), so it never takes a core for long
either; when the chain holds it leaves the verified mark at the end
of its walk, and retention's first run (which waits for ``finished``) starts from there. The
same check as ``pokdeng-table journal verify`` makes of the live journal, from its archive cut
to its head. Archives are not read: they may have been moved off the table PC.

Its state is part of the published status: ``running``, ``ok`` (with the time and the count),
``failed`` with the reason, or ``waiting`` while the check cannot even start (no process or
file descriptor to be had: it tries again every ``RETRY_S``, and the table deals on, since a
check that was not made is no verdict on the journal). A failure is logged at ERROR, shown in
``status`` and in systemd's STATUS= line, and handed to ``on_failed``: the daemon pauses the
table with the ``journal_check_failed`` fault, so no round is dealt on a journal whose past
does not hold until a supervisor has looked at it (``pokdeng-table journal verify``).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from controller.durability.chain import ChainHash
from controller.durability.chain_check import Mark, store_mark, verify_in_steps
from controller.durability.idle_child import ChildFailed, IdleChild
from controller.durability.journal import (
    JournalError,
    VerifyResult,
    connect,
    open_read_only,
    read_chain,
)
from controller.table.events import iso_time

log = structlog.get_logger("pokdeng.journal_check")

#: The walk works a tenth of the time (a month's journal, 1.36 M records: ~8 s of work spread
#: over ~1.5 minutes). At idle priority it still takes a whole core for its whole walk, which
#: a table PC also running a kiosk browser feels; paced, it never does.
CHECK_DUTY = 0.1
#: Steps of ~1.5 ms of work, shorter than a card's way through the daemon: with steps of
#: 2,000 records (~12 ms) about one card in a hundred dealt during the walk came 1-2 ms late
#: (docs/benchmarks.md, "Dealing right after a start"); the walk costs the same either way.
CHECK_STEP_RECORDS = 250
#: a check that could not start (no process, no descriptor) is tried again this much later
RETRY_S = 30.0


def sealed_reason(result: VerifyResult) -> str:
    """The failure in words that never carry a card: an invalid input's own message may quote
    what the record holds, so only the kind of fault is kept from it."""
    reason = result.reason
    if reason.startswith("input is not valid"):
        reason = "input is not valid"
    where = f"record {result.bad_record}" if result.bad_record is not None else "journal"
    return f"{where}: {reason}"


class CheckNotRun(Exception):
    """The check could not be made (no process could be started): no verdict on the journal;
    it is tried again."""


class ChildCheck:
    """The live journal's chain checked in a child process at idle priority; ``stop()`` (any
    thread) ends a check in progress."""

    def __init__(self, key: bytes | None = None):
        self._key = key
        self._child: IdleChild | None = None

    def __call__(self, path: Path) -> VerifyResult:
        self._child = IdleChild("controller.service.trust.journal_check", str(path))
        try:
            fields = self._child.run(self._key or b"")
        except OSError as exc:  # no process, no pipe: the PC is short of something, not the journal
            raise CheckNotRun(f"the check process could not start: {exc}") from None
        except ChildFailed as exc:
            raise JournalError(f"the check process {exc}") from None
        try:
            return VerifyResult(bool(fields["ok"]), int(fields["records"]),
                                int(fields["events"]), fields["bad_record"],
                                str(fields["reason"]))
        except (KeyError, TypeError, ValueError):
            raise JournalError(f"the check process answered {fields!r:.300}") from None

    def stop(self) -> None:
        if self._child is not None:
            self._child.stop()


class JournalCheck:
    """Runs the check once on a daemon thread; ``status()`` may be read from any thread.

    ``on_change`` is called (on the check's thread; it must not block) when the state moves.
    """

    def __init__(self, journal_path: str | Path, on_change: Callable[[], None] | None = None,
                 key: bytes | None = None,
                 verify: Callable[[Path], VerifyResult] | None = None,
                 finished: threading.Event | None = None,
                 on_failed: Callable[[str], None] | None = None,
                 retry_s: float = RETRY_S):
        self._path = Path(journal_path)
        self._on_change = on_change
        self._on_failed = on_failed
        self._verify: Callable[[Path], VerifyResult] = verify or ChildCheck(key)
        self._lock = threading.Lock()
        self._status: dict[str, Any] = {"state": "not started"}
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._retry_s = retry_s
        #: set once the check has ended, whatever its verdict (retention waits for it)
        self.finished = finished or threading.Event()

    def start(self) -> None:
        self._set({"state": "running", "since": iso_time(time.time())})
        self._thread = threading.Thread(target=self._run, name="journal-check", daemon=True)
        self._thread.start()

    def status(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._status)

    def failure(self) -> str | None:
        """Why the chain does not hold, once the check found it so; else None (not yet, or
        no verdict). Retention asks before each run: none archives or moves the verified
        mark on a journal this check refused."""
        with self._lock:
            return str(self._status["reason"]) if self._status["state"] == "failed" else None

    def stop(self) -> None:
        """End a check still running (the daemon is stopping): no verdict is given."""
        self._stopped.set()
        if isinstance(self._verify, ChildCheck):
            self._verify.stop()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            self._check()
        finally:
            self.finished.set()

    def _check(self) -> None:
        started = time.monotonic()
        try:
            result = self._verify_when_it_can()
        except JournalError as exc:
            result = VerifyResult(False, 0, 0, None, str(exc))
        except Exception as exc:  # a check that breaks must say so, never kill the daemon
            result = VerifyResult(False, 0, 0, None, f"the check itself failed: "
                                                     f"{type(exc).__name__}: {exc}")
        if self._stopped.is_set() or result is None:
            return  # killed on the way down: not a verdict on the journal
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
            if self._on_failed is not None:
                self._on_failed(reason)

    def _verify_when_it_can(self) -> VerifyResult | None:
        """The check's verdict; while it cannot be made at all (a PC out of processes or file
        descriptors) it waits and tries again, the table dealing on: a missing verdict is not a
        chain that failed. None when stopped meanwhile."""
        while True:
            try:
                return self._verify(self._path)
            except CheckNotRun as exc:
                log.warning("journal check could not run; trying again", reason=str(exc),
                            in_s=self._retry_s)
                self._set({"state": "waiting", "reason": str(exc),
                           "since": iso_time(time.time())})
                if self._stopped.wait(self._retry_s):
                    return None

    def _set(self, status: dict[str, Any]) -> None:
        with self._lock:
            self._status = status
        if self._on_change is not None:
            try:
                self._on_change()
            except Exception:
                log.exception("journal check: status update failed")


def _leave_mark(path: str, mark: Mark, chain: ChainHash) -> None:
    """Store the verified mark where the check ended, so retention checks only what comes
    after it. Best effort: without it retention walks from the archive cut."""
    try:
        conn = connect(path, synchronous="NORMAL")
        try:
            store_mark(conn, mark, chain)
        finally:
            conn.close()
    except (JournalError, sqlite3.Error) as exc:
        print(f"the verified mark was not stored: {exc}", file=sys.stderr)


def main(argv: list[str]) -> int:
    """The child's side: check one journal file (its key, if any, on stdin), print the result
    as JSON."""
    key = sys.stdin.buffer.read() or None
    try:
        conn = open_read_only(argv[0])
        try:
            chain = read_chain(conn, key, argv[0])
            result, mark = verify_in_steps(conn, chain, step=CHECK_STEP_RECORDS,
                                           duty=CHECK_DUTY)
        finally:
            conn.close()
        if mark is not None:
            _leave_mark(argv[0], mark, chain)
    except JournalError as exc:
        result = VerifyResult(False, 0, 0, None, str(exc))
    except sqlite3.DatabaseError as exc:
        result = VerifyResult(False, 0, 0, None, f"database unreadable: {exc}")
    print(json.dumps({"ok": result.ok, "records": result.records, "events": result.events,
                      "bad_record": result.bad_record, "reason": result.reason}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
