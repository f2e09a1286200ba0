"""Real-time priorities for the daemon, when the config asks: the card path, then the rest.

On a busy table PC (a kiosk browser, an operator's commands, status polls, a broker catching
up) a card waits behind whatever else holds a core. ``Nice=-10`` is a weight, not a promise:
the stress bench measured a card's p99 at 4.1-4.6 times a quiet PC's with it, with cards up to
35 ms (docs/benchmarks.md, "Under load at the table PC"). So with ``realtime_priority: N`` in
its config (config/example.yaml: 10) the daemon runs, from READY on, the threads on a card's
way ``SCHED_RR`` at priority N: the owner loop (the thread that starts the daemon), the device
readers, and each transport's delivery thread with its network thread. Start-up and recovery
stay at the normal priority: replaying a long journal is seconds of work that must not take a
core from the rest of the PC. The card path's priority is never handed down
(``SCHED_RESET_ON_FORK``): what these threads start begins at the normal priority.

The dealer display's pages are not among them: they run in a screen process of their own,
started at the normal policy (controller/service/screens/link.py). The rest of the daemon
(the screens' feed, the control socket, health and metrics, the housekeeping threads) goes
to ``SCHED_RR`` priority 1 (``REST_PRIORITY``) at the same moment: below the card path,
above the PC's other work. Not for its own sake: all of the daemon's
threads share one interpreter lock, and a card thread that needs it waits for whichever
thread holds it. At the normal priority that holder could be preempted by a browser or a
broker while holding it, and the card waited with it (a stress trace: both senders stalled
12 ms at once, docs/benchmarks.md). These threads do hand their priority down, so a
control connection that starts later runs at 1 too (the journal check's thread,
which the owner loop starts after READY, begins at the normal priority: it only waits for its
child); the housekeeping children (the journal check, retention) lower themselves to idle
priority before they run (``durability/idle_child.py``). The lock bounds the daemon's Python
work to one core whatever its priority, and the control socket admits callers as before:
those it takes are served at 1, a flood beyond its limits is refused.

An unprivileged daemon needs the unit's permission, ``LimitRTPRIO=`` (systemd/
pokdeng-table.service). The kernel's real-time throttling (``sched_rt_runtime_us``, 95 % by
default) keeps a thread that went wrong from taking a core whole, and the watchdog restarts a
daemon whose loop stops. A priority the kernel refuses (no permission, a container without a
real-time budget) is logged once, and those threads keep the normal priority.

A priority does not reach the interpreter lock: a card thread that wakes while the display's
feed or a status reader holds it waits until the holder is asked to let go, every
``sys.getswitchinterval()`` (5 ms by default). A stress trace showed exactly that: the owner
woken by the shoe's reader, then asleep 4.3 ms behind the display feed. So from READY on the
daemon asks for the lock back after ``SWITCH_INTERVAL_S`` (1 ms), whatever its priority. Not
shorter: at 0.5 ms a flood of 200 control clients took 20-30 % longer to serve (more forced
hand-overs between its threads); at 1 ms no longer than at 5 ms, and under the stress bench's
load as good as 0.5 ms (docs/benchmarks.md).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from controller.durability.delivery.outbox import Outbox
    from drivers.base import Driver

log = structlog.get_logger("pokdeng.realtime")

#: the rest of the daemon's threads when the card path is raised: above the PC's other work
REST_PRIORITY = 1

#: how long a thread waiting for the interpreter lock lets its holder run before asking for it
#: (Python's default: 5 ms); a thread that does nothing else gives it up sooner anyway
SWITCH_INTERVAL_S = 0.001


@dataclass(frozen=True)
class CardPathThread:
    """A thread a card passes through, by its role (for the log) and its kernel id."""
    role: str
    native_id: int | None


def card_path_threads(drivers: Iterable[Driver], outbox: Outbox | None) -> list[CardPathThread]:
    """The owner loop (the calling thread), each driver's reader and the outbox's threads."""
    threads = [CardPathThread("owner loop", threading.get_native_id())]
    threads += [CardPathThread(f"driver {driver.name}", driver.thread.native_id)
                for driver in drivers if driver.thread is not None]
    if outbox is not None:
        threads += [CardPathThread(role, thread.native_id)
                    for role, thread in outbox.card_path_threads()]
    return threads


def threads_of_this_process() -> list[int]:
    """The kernel ids of this process's threads, now."""
    return [int(task) for task in os.listdir("/proc/self/task")]


def raise_the_rest(others: Iterable[int]) -> tuple[int, str | None]:
    """``others`` to SCHED_RR at ``REST_PRIORITY``, handed down to the threads they start;
    returns how many, and what was refused (once, with the count) or None."""
    raised, failures = 0, []
    for tid in others:
        try:
            os.sched_setscheduler(tid, os.SCHED_RR, os.sched_param(REST_PRIORITY))
            raised += 1
        except ProcessLookupError:
            continue  # ended meanwhile
        except OSError as exc:
            failures.append(exc.strerror or str(exc))
    if failures:
        return raised, f"{len(failures)} other thread(s): {failures[0]}"
    return raised, None


def shorten_lock_handover() -> float:
    """From here on a waiting card thread gets the interpreter lock within ~1 ms of asking
    (``SWITCH_INTERVAL_S``); returns the interval set, in seconds."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    return sys.getswitchinterval()


def raise_card_path(threads: list[CardPathThread], priority: int,
                    others: Iterable[int] | None = None) -> list[str]:
    """Put ``threads`` in SCHED_RR at ``priority`` and ``others`` (default: every other
    thread of this process) at ``REST_PRIORITY``; returns the roles raised. Refusals are
    logged (once, together) and leave those threads as they were."""
    if priority <= 0:
        return []
    raised: list[str] = []
    refused: list[str] = []
    for thread in threads:
        if thread.native_id is None:  # not started: nothing to raise
            continue
        try:
            # never handed down: a thread or child process one of these starts (the journal
            # check's thread, its idle child) begins at the normal priority
            os.sched_setscheduler(thread.native_id, os.SCHED_RR | os.SCHED_RESET_ON_FORK,
                                  os.sched_param(priority))
            raised.append(thread.role)
        except OSError as exc:
            refused.append(f"{thread.role}: {exc.strerror or exc}")
    if others is None:
        card_path = {thread.native_id for thread in threads}
        others = [tid for tid in threads_of_this_process() if tid not in card_path]
    rest, rest_refused = raise_the_rest(others)
    if rest_refused is not None:
        refused.append(rest_refused)
    if raised:
        log.info("card path at real-time priority", policy="SCHED_RR", priority=priority,
                 threads=raised, rest_of_daemon=rest, rest_priority=REST_PRIORITY)
    if refused:
        log.warning("real-time priority refused; these threads keep the normal priority "
                    "(docs/install.md, \"Other work on the table PC\")",
                    priority=priority, refused=refused)
    return raised
