"""Journal retention in the daemon: archive closed, delivered shoes, away from the table.

Each run is ``archive_closed_shoes`` in a child process at idle priority (``idle_child.py``,
``retention_run.py``): the chain is checked from the verified mark on (only what is new), the
shoes are cut in short write transactions and the freed pages go back to the file system. Not
a thread: even that much Python would hold the interpreter lock the owner loop and the senders
need (a thread re-walking the whole chain took 20–28 s of it on 30 days of records). One thread
starts the runs and waits for them:

* when a shoe ends (``shoe_ended(seq)``, called by the owner loop; it only sets a flag), after
  waiting a while for the backends to take that shoe's events, since archiving only ever cuts
  behind what every transport delivered;
* once when the daemon starts (after ``start_after`` is set: the daemon's full journal check
  has finished, so two walks of the whole journal never run at once, and the check has left
  the verified mark at the head for this run to start from), and then every ``interval_s``
  (a day), for shoes that aged past the retention age while the table was idle.

Once the full check has failed (``check_failure`` names why), no run goes ahead: a run checks
only from the verified mark on, so it would pass over an edit behind the mark and move the mark
past it. Being one thread, two runs never overlap. Any error is logged (ERROR) and kept for
``status``; the daemon plays on and the next run tries again. ``stop`` kills a run in
progress: every step of a run is crash-safe, and the next run carries on where it stopped.
"""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.durability.idle_child import ChildFailed, IdleChild

if TYPE_CHECKING:
    from controller.durability.archives.archive import ArchiveResult
    from controller.table.records import MachineSettings

DAY_S = 86400.0
DELIVERY_WAIT_S = 30.0   # how long a shoe's end waits for the backends before archiving
DELIVERY_POLL_S = 0.1
STOP_WAIT_S = 5.0        # how long a stop waits for the thread once its run is killed


@dataclass(frozen=True)
class RetentionSettings:
    """The ``journal:`` section: archive shoes whose end is older than ``retention_days``."""

    archive: bool = True
    retention_days: float = 30.0
    archive_dir: str | None = None  # default: <journal>.archive/ next to the journal


class JournalRetention:
    """The archiving thread.

    ``wait_delivered(seq, timeout) -> bool`` waits until every transport has delivered ``seq``;
    by default it reads the journal's ``delivery`` table, the positions archiving itself checks
    (the outbox publishes a position in memory a moment before it records it there).
    """

    def __init__(self, journal_path: str | Path, settings: RetentionSettings,
                 machine_settings: MachineSettings | None, *,
                 wait_delivered: Callable[[int, float], bool] | None = None,
                 interval_s: float = DAY_S, key: bytes | None = None,
                 start_after: threading.Event | None = None,
                 check_failure: Callable[[], str | None] | None = None):
        # structlog (and asyncio under it) here, not at the top: the config reader imports
        # RetentionSettings, and `config check` or `status --config` log nothing
        import structlog

        self._log = structlog.get_logger("pokdeng.retention")
        self.journal_path = Path(journal_path)
        self.key = key  # a keyed journal's chain key (archiving checks the chain first)
        self.settings = settings
        self.machine_settings = machine_settings
        self.interval_s = interval_s
        self._wait_delivered = wait_delivered or self._delivery_recorded
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ended_seq = 0          # newest shoe_ended seq not yet handled by a run
        self._status: dict[str, Any] = {
            "retention_days": settings.retention_days, "running": False, "runs": 0,
            "last_run_at": None, "last_result": None, "last_error": None,
            "archived_records": 0}
        self._thread = threading.Thread(target=self._main, name="journal-retention",
                                        daemon=True)
        self._child: IdleChild | None = None
        self._start_after = start_after
        self._check_failure = check_failure

    # -- called by the daemon -----------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def shoe_ended(self, seq: int) -> None:
        """A shoe's end was journaled: archive soon. Never blocks (the owner loop calls it)."""
        with self._lock:
            self._ended_seq = max(self._ended_seq, seq)
        self._wake.set()

    def status(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._status)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        with self._lock:
            child = self._child
        if child is not None:
            child.stop()
        if self._thread.is_alive():
            self._thread.join(STOP_WAIT_S)
            if self._thread.is_alive():
                self._log.warning("stopping while a journal archive run is still going; an "
                                  "interrupted run leaves the journal whole and is redone "
                                  "next time")

    # -- the thread ---------------------------------------------------------------------------
    def _main(self) -> None:
        if self._start_after is not None:
            while not self._stop.is_set() and not self._start_after.wait(0.5):
                pass
        next_daily = time.monotonic()  # first run right after start-up
        while not self._stop.is_set():
            self._wake.wait(max(0.0, next_daily - time.monotonic()))
            if self._stop.is_set():
                return
            self._wake.clear()
            with self._lock:
                ended, self._ended_seq = self._ended_seq, 0
            if ended:
                self._wait_for_delivery(ended)
                if self._stop.is_set():
                    return
            elif time.monotonic() < next_daily:
                continue
            self.run_once()
            next_daily = time.monotonic() + self.interval_s

    def _wait_for_delivery(self, seq: int) -> None:
        """Give the backends up to DELIVERY_WAIT_S to take ``seq``; stop cuts the wait short."""
        deadline = time.monotonic() + DELIVERY_WAIT_S
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                if self._wait_delivered(seq, min(1.0, deadline - time.monotonic())):
                    return
            except Exception as exc:  # the archive run that follows reports what is wrong
                self._log.warning("cannot read the delivery positions", error=str(exc))
                return

    def _delivery_recorded(self, seq: int, timeout: float) -> bool:
        """True once every transport's recorded position is at or past ``seq``."""
        from controller.durability.journal import connect

        deadline = time.monotonic() + timeout
        conn = connect(self.journal_path)
        try:
            while True:
                lowest = conn.execute("SELECT MIN(last_seq) FROM delivery").fetchone()[0]
                if lowest is None or lowest >= seq:
                    return True
                if time.monotonic() >= deadline:
                    return False
                time.sleep(DELIVERY_POLL_S)
        finally:
            conn.close()

    def run_once(self) -> None:
        """One archive run; logs and records its outcome, never raises."""
        with self._lock:
            self._status["running"] = True
        started = time.monotonic()
        error = None
        result = None
        try:
            self._refuse_after_a_failed_check()
            result = self._run_child()
        except Exception as exc:  # the table plays on; the next run tries again
            if self._stop.is_set():
                self._log.info("journal archive run stopped with the daemon; the next run "
                               "carries on from where it was")
                with self._lock:
                    self._status["running"] = False
                return
            error = f"{type(exc).__name__}: {exc}"
            self._log.error("journal archive failed; what it had not cut is still in the "
                            "journal", error=error)
        seconds = round(time.monotonic() - started, 3)
        if result is not None and result.archived:
            self._log.info("journal archived", records=result.records,
                           first_record=result.first_record, last_record=result.last_record,
                           events=f"{result.first_seq}-{result.last_seq}",
                           shoes=list(result.shoes),
                           file=str(result.file), seconds=seconds)
        elif result is not None:
            self._log.info("journal archive: nothing archived", reason=result.reason,
                           seconds=seconds)
        with self._lock:
            self._status.update(running=False, runs=self._status["runs"] + 1,
                                last_run_at=time.time(), last_error=error,
                                last_result=result.describe() if result is not None else None)
            if result is not None and result.archived:
                self._status["archived_records"] += result.records

    def _refuse_after_a_failed_check(self) -> None:
        """ArchiveError when the full check found the chain broken. A run checks the chain
        only from the verified mark on, so an edit behind the mark would not stop it, and it
        would move the mark over the edit to the head: the next runs, and the next start's
        first one, would then trust a chain that does not hold."""
        from controller.durability.archives.archive import ArchiveError

        failure = self._check_failure() if self._check_failure is not None else None
        if failure is not None:
            raise ArchiveError(f"not run: the full journal check failed ({failure}); nothing "
                               "is archived and the verified mark stays where it was")

    def _run_child(self) -> ArchiveResult:
        """One run in an idle child; ArchiveError with the child's words when it fails."""
        from controller.durability.archives.archive import ArchiveError

        child = IdleChild("controller.durability.archives.retention_run")
        with self._lock:
            if self._stop.is_set():
                raise ArchiveError("the daemon is stopping")
            self._child = child
        try:
            answer = child.run(pickle.dumps({
                "journal": str(self.journal_path),
                "older_than_s": self.settings.retention_days * DAY_S,
                "settings": self.machine_settings, "archive_dir": self.settings.archive_dir,
                "key": self.key}))
        except ChildFailed as exc:
            raise ArchiveError(f"the archive process ended without an answer: {exc}") from None
        finally:
            with self._lock:
                self._child = None
        if "error" in answer:
            raise ArchiveError(str(answer["error"]))
        return result_from(answer)


def result_from(answer: dict[str, Any]) -> ArchiveResult:
    """The child's JSON answer back into an ArchiveResult."""
    from controller.durability.archives.archive import ArchiveResult

    return ArchiveResult(bool(answer["archived"]), str(answer["reason"]),
                         None if answer["file"] is None else Path(answer["file"]),
                         int(answer["first_record"]), int(answer["last_record"]),
                         int(answer["first_seq"]), int(answer["last_seq"]),
                         tuple(answer["shoes"]), int(answer["files"]))
