"""The table's history held against where its backends stand, before and while it deals.

Each transport that can (``tells_held``) hands over what its backend says about where it
stands (docs/backend.md, "Where the backend stands"): an HTTP backend in its answers (asked at
start with a batch of no events), an MQTT backend as a retained message on every connect, the
file sink from its own file's last event. ``durability/delivery/held.py`` compares that with
the journal. The daemon waits for the first answers before it journals anything at start
(``wait_first``): a fork then stops the start (exit 65) before a single id is issued again.
Answers that come later are compared on this guard's own thread, off the transports' and the
owner's way; a fork found then stops the table the same way (``on_fork``).

Ask before you deliver: no event leaves for a backend until what it said has been compared
(``waiting_for``, the outbox's hold on each transport). A backend that says nothing by the
end of the wait does not stop the floor: the table deals on into its journal and those events
wait there, visibly, until the backend answers and the comparison passes. A backend that
answers without saying where it stands (it keeps no such position) is delivered to as before.

A backend's word is weighed against the journal's own proof first: a backend that says it holds
less than this table delivered to it (its floor: the journal's ``delivery`` row at start,
raised by every position that passed the check since) is not believed, whether it names
a lower seq, "nothing" (seq 0, an empty events file) or, on MQTT, has no retained position at
all. A backend restored or reset, a flip between replicas, or a state directory restored from a
copy all look so; sending on would hand ids it may hold to it with other bodies. Its events
wait, visibly, until a position at or past the floor comes (docs/backend.md).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from controller.durability.delivery.held import Held, fork_problem, held_at, parse_held
from controller.durability.delivery.outbox import HOLDS_LESS, WAITING_FOR_WORD
from controller.durability.journal import last_seq_of, open_read_only
from controller.rate_limited_log import RateLimitedLog
from controller.transports import NO_POSITION, LastEvent

if TYPE_CHECKING:
    from controller.transports import Transport

log = structlog.get_logger("pokdeng.history")

#: a position that is not checked again sooner than this after the last check of it
RECHECK_S = 1.0


def delivered_positions(journal_path: str) -> dict[str, int]:
    """How far the journal records delivering to each transport (its ``delivery`` rows);
    empty for a journal that has none yet."""
    try:
        conn = open_read_only(journal_path)
        try:
            rows = conn.execute("SELECT transport, last_seq FROM delivery").fetchall()
        finally:
            conn.close()
    except Exception as exc:  # a new state directory: nothing delivered to anyone
        log.info("no delivered positions to weigh the backends' word against",
                 journal=journal_path, reason=str(exc))
        return {}
    return {str(name): int(seq) for name, seq in rows}


def behind_delivered(name: str, says: str, floor: int) -> str:
    """Why a backend that holds less than was delivered to it is not believed."""
    return (f"{name} says it {says} {HOLDS_LESS} {floor} to it: a "
            f"backend restored or reset, or a state directory restored from a copy; see "
            f"docs/install.md, \"A backend that holds less than was delivered to it\"")


class HistoryGuard:
    def __init__(self, journal_path: str, on_fork: Callable[[str], None], *,
                 notes_who_told: bool = True):
        self.journal_path = journal_path
        # the daemon notes beside its journal which backends said where they stand; a
        # command that only listens (journal continue, run as root) writes nothing there
        self._notes_who_told = notes_who_told
        self._on_fork = on_fork
        self._changed = threading.Condition()
        self._expected: set[str] = set()
        self._answered: set[str] = set()
        self._pending: dict[str, Held] = {}
        self._checked: dict[str, Held] = {}
        # Ask before you deliver: the transports whose backend's word has passed the check
        # (or who answered without a position), and why the others' events still wait.
        self._transports: dict[str, Transport] = {}
        self._cleared: set[str] = set()
        self._told_nothing: set[str] = set()
        self._refused: dict[str, str] = {}
        # The journal's proof of what each backend already had (see the module doc), and
        # the backends whose latest word fell short of it.
        self._floor: dict[str, int] = {}
        self._told_before: set[str] = set()  # backends that have said where they stand
        self._behind: dict[str, str] = {}
        self.fork: str | None = None
        self._stop = False
        self._problems = RateLimitedLog(logging.getLogger("pokdeng.history"))
        self._thread = threading.Thread(target=self._main, name="history-guard", daemon=True)

    # -- the transports' side (any thread) ------------------------------------------------------
    def watch(self, transports: Iterable[Transport]) -> None:
        delivered = delivered_positions(self.journal_path)
        self._told_before = backends_that_told(self.journal_path)
        for transport in transports:
            if transport.tells_held:
                self._expected.add(transport.name)
                self._transports[transport.name] = transport
                self._floor[transport.name] = delivered.get(transport.name, 0)
                transport.held_listener = self._report

    def _report(self, transport: Transport, value: Any) -> None:
        name = transport.name
        held = refused = None
        if value is NO_POSITION or value is None:
            # No position (MQTT: none retained on the broker; HTTP: an answer without
            # `held`). From a backend that never said where it stands that is "it does not
            # tell" (it is not protected, docs/backend.md); from one that did before, it is
            # a backend that lost its word: it holds nothing as far as the table can know.
            if name in self._told_before and self._fell_short(
                    name, "has no position now, though it said where it stood before (a "
                    "backend reset, or a broker that lost the retained position): it holds "
                    "nothing as far as this table can tell", 0):
                return
            value = None
        try:
            if isinstance(value, LastEvent):  # the file sink: its copy of its last event
                value = held_at(value.event)
            if value is not None:
                held = parse_held(value, name)
        except (ValueError, KeyError, TypeError) as exc:
            refused = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) \
                else str(exc)
            self._problems.warning(name, "backend %s: what it says of where it stands is "
                                   "refused (%s); its events wait until it says it readably",
                                   name, refused)
        if held is not None and name not in self._told_before:
            self._told_before.add(name)
            if self._notes_who_told:
                remember_backend_told(self.journal_path, self._told_before)
        if held is not None and self._fell_short(name, _holds(held), held.seq):
            return
        with self._changed:
            self._answered.add(name)
            if held is not None:
                self._pending[name] = held
            elif refused is not None:
                self._refused[name] = refused
            else:
                self._told_nothing.add(name)
            self._changed.notify_all()

    def _fell_short(self, name: str, says: str, seq: int) -> bool:
        """Whether backend ``name`` now says it holds less (``seq``) than this table delivered
        to it: then it is not believed, and its events wait (again) until it says more."""
        with self._changed:
            floor = self._floor.get(name, 0)
            self._answered.add(name)
            self._pending.pop(name, None)  # an earlier answer is not the latest any more
            if seq >= floor:
                self._behind.pop(name, None)
                return False
            why = behind_delivered(name, says, floor)
            self._behind[name] = why
            self._cleared.discard(name)
            self._changed.notify_all()
        self._problems.warning(name, "backend %s; its events wait", why)
        return True

    def waiting_for(self, name: str) -> str | None:
        """Why transport ``name`` must not send yet (the outbox asks before each batch), or
        None once its backend's word has passed the check (or it cannot tell at all)."""
        with self._changed:
            if name not in self._expected or name in self._cleared:
                return None
            refused = self._refused.get(name)
            behind = self._behind.get(name)
        if behind is not None:
            return f"{WAITING_FOR_WORD}: {behind}"
        if refused is not None:
            return f"{WAITING_FOR_WORD}: its last answer was refused ({refused})"
        return WAITING_FOR_WORD

    def _clear(self, names: Iterable[str], held: Held | None = None) -> None:
        """These backends' word passed the check: their events may go (their outbox wakes).
        ``held``, the position that passed: no later word below it is believed."""
        with self._changed:
            # one whose word fell short since this one was taken stays held back
            fresh = [name for name in names
                     if name not in self._cleared and name not in self._behind]
            self._cleared.update(fresh)
            for name in fresh:
                self._refused.pop(name, None)
            if held is not None and held.source not in self._behind:
                self._floor[held.source] = max(self._floor.get(held.source, 0), held.seq)
        for name in fresh:
            wake = self._transports[name].wake_outbox
            if wake is not None:
                wake()

    # -- the daemon's side ----------------------------------------------------------------------
    def wait_first(self, transports: Iterable[Transport], timeout: float) -> str | None:
        """Ask, and wait up to ``timeout`` for every backend that can say where it stands;
        compare what came. The fork found, or None (also when some did not answer)."""
        pending, silent = self.hear(transports, timeout)
        for held in pending.values():
            problem = self._compare(held)
            if problem:
                self.fork = problem
                return problem
        if silent:
            log.warning("no word from these backends on where they stand; dealing on: their "
                        "events wait in the journal until they answer and what they hold is "
                        "compared with it", transports=silent, waited_s=timeout)
        for name, held in pending.items():
            log.info("backend holds this table's history", transport=name, seq=held.seq)
        for name, held in pending.items():
            if self._checked.get(name) == held:
                self._clear([name], held)
        self._clear_the_silent_ones()
        return None

    def hear(self, transports: Iterable[Transport],
             timeout: float) -> tuple[dict[str, Held], list[str]]:
        """Ask every watched backend where it stands and wait up to ``timeout`` for them all
        to answer: the readable positions heard (taken: this guard's thread will not compare
        them again) and the names of the backends that said nothing."""
        for transport in transports:
            if transport.tells_held:
                threading.Thread(target=self._ask, args=(transport,), daemon=True,
                                 name=f"ask-held-{transport.name}").start()
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._answered < self._expected and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
            silent = sorted(self._expected - self._answered)
            pending, self._pending = self._pending, {}
        return pending, silent

    def start(self) -> None:
        """Compare the answers that come from now on, on this guard's thread."""
        self._thread.start()

    def stop(self) -> None:
        with self._changed:
            self._stop = True
            self._changed.notify_all()
        if self._thread.is_alive():
            self._thread.join(5)

    # -- inside ---------------------------------------------------------------------------------
    @staticmethod
    def _ask(transport: Transport) -> None:
        try:
            transport.ask_held()
        except Exception as exc:  # unreachable: it tells when it comes back, or never
            log.info("backend not asked where it stands", transport=transport.name,
                     reason=str(exc))

    def _clear_the_silent_ones(self) -> None:
        """Backends that answered without saying where they stand: nothing to compare, so
        nothing to wait for."""
        with self._changed:
            told_nothing, self._told_nothing = self._told_nothing, set()
        self._clear(told_nothing)

    def _main(self) -> None:
        while True:
            with self._changed:
                while not self._pending and not self._told_nothing and not self._stop:
                    self._changed.wait()
                if self._stop:
                    return
                pending, self._pending = self._pending, {}
            self._clear_the_silent_ones()
            for name, held in pending.items():
                if self._checked.get(held.source) == held:
                    self._clear([name], held)
                    continue  # the same answer again (every HTTP reply carries it)
                problem = self._compare(held)
                if problem and self.fork is None:
                    self.fork = problem
                    self._on_fork(problem)
                    return
                if problem is None and self._checked.get(name) == held:
                    self._clear([name], held)  # compared, and it holds: its events may go
            time.sleep(RECHECK_S)  # a burst of answers is one comparison a second

    def _compare(self, held: Held) -> str | None:
        """The journal as it is now against ``held``; a problem reading it is logged (the next
        answer compares again)."""
        try:
            conn = open_read_only(self.journal_path)
            try:
                problem = fork_problem(conn, last_seq_of(conn), held)
            finally:
                conn.close()
        except Exception as exc:
            log.warning("cannot compare the journal with what a backend holds",
                        transport=held.source, error=str(exc))
            return None
        self._checked[held.source] = held
        return problem


def _holds(held: Held) -> str:
    """What ``held`` says, in a sentence about the backend."""
    return "holds nothing of this table" if held.seq == 0 else f"holds up to seq {held.seq}"


def _told_path(journal_path: str) -> Path:
    return Path(journal_path + ".backends-told")


def backends_that_told(journal_path: str) -> set[str]:
    """The transports whose backend has said where it stands, on this table, ever (one name a
    line beside the journal; none when the file is missing or unreadable)."""
    try:
        text = _told_path(journal_path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return set()
    return {line.strip() for line in text.splitlines() if line.strip()}


def remember_backend_told(journal_path: str, names: set[str]) -> None:
    """Write the names down, whole or not at all (a new file renamed over the old); a
    failure is logged and the table deals on (the mark only makes later silence suspect)."""
    path = _told_path(journal_path)
    temporary = path.with_name(path.name + ".new")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o640)
        try:
            os.write(fd, "".join(f"{name}\n" for name in sorted(names)).encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError as exc:
        log.warning("cannot note which backends say where they stand", path=str(path),
                    error=str(exc))
