"""The table's history held against where its backends stand, before and while it deals.

Each transport that can (``tells_held``) hands over what its backend says about where it
stands (docs/backend.md, "Where the backend stands"): an HTTP backend in its answers (asked at
start with a batch of no events), an MQTT backend as a retained message on every connect.
``durability/delivery/held.py`` compares that with the journal. The daemon waits for the first
answers before it journals anything at start (``wait_first``): a fork then stops the start
(exit 65) before a single id is issued again. Answers that come later are compared on this
guard's own thread, off the transports' and the owner's way; a fork found then stops the table
the same way (``on_fork``). No answer within the wait: the table deals on (an outage must not
stop the floor) and compares when one comes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import structlog

from controller.durability.delivery.held import Held, fork_problem, parse_held
from controller.durability.journal import last_seq_of, open_read_only
from controller.rate_limited_log import RateLimitedLog

if TYPE_CHECKING:
    from controller.transports import Transport

log = structlog.get_logger("pokdeng.history")

#: a position that is not checked again sooner than this after the last check of it
RECHECK_S = 1.0


class HistoryGuard:
    def __init__(self, journal_path: str, on_fork: Callable[[str], None]):
        self.journal_path = journal_path
        self._on_fork = on_fork
        self._changed = threading.Condition()
        self._expected: set[str] = set()
        self._answered: set[str] = set()
        self._pending: dict[str, Held] = {}
        self._checked: dict[str, Held] = {}
        self.fork: str | None = None
        self._stop = False
        self._problems = RateLimitedLog(logging.getLogger("pokdeng.history"))
        self._thread = threading.Thread(target=self._main, name="history-guard", daemon=True)

    # -- the transports' side (any thread) ------------------------------------------------------
    def watch(self, transports: Iterable[Transport]) -> None:
        for transport in transports:
            if transport.tells_held:
                self._expected.add(transport.name)
                transport.held_listener = self._report

    def _report(self, transport: Transport, value: Any) -> None:
        name = transport.name
        held = None
        if value is not None:
            try:
                held = parse_held(value, name)
            except ValueError as exc:
                self._problems.warning(name, "backend %s: where it stands is unreadable (%s); "
                                       "ignored", name, exc)
        with self._changed:
            self._answered.add(name)
            if held is not None:
                self._pending[name] = held
            self._changed.notify_all()

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
            log.warning("no word from these backends on where they stand; dealing on: what "
                        "they hold is compared with the journal when they answer",
                        transports=silent, waited_s=timeout)
        for name, held in pending.items():
            log.info("backend holds this table's history", transport=name, seq=held.seq)
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

    def _main(self) -> None:
        while True:
            with self._changed:
                while not self._pending and not self._stop:
                    self._changed.wait()
                if self._stop:
                    return
                pending, self._pending = self._pending, {}
            for held in pending.values():
                if self._checked.get(held.source) == held:
                    continue  # the same answer again (every HTTP reply carries it)
                problem = self._compare(held)
                if problem and self.fork is None:
                    self.fork = problem
                    self._on_fork(problem)
                    return
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

