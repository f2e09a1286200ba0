"""Housekeeping in a child process at idle priority, so it never competes with the table.

A thread walking a journal of a million records holds the interpreter lock the owner loop
needs; a child process does not. The child also runs at the lowest CPU priority
(``SCHED_IDLE``: it gets a core only when nothing else wants it, plus ``nice`` 19 where
SCHED_IDLE is refused) and in the idle I/O class (``ionice -c 3``, where an I/O scheduler
honours it), so on a two-core table PC the owner loop and the senders always go first.

Anything secret (a keyed chain's key) goes to the child on its stdin, never on its command
line or in its environment (both are readable by other local users through /proc). The
child answers with one JSON object on stdout.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

from controller.python_child import python_module

IONICE = shutil.which("ionice")


def _lower_priority() -> None:
    """In the child, before it runs Python: the lowest CPU priority the kernel allows."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    try:
        os.nice(19)
    except OSError:
        pass


def lower_own_priority() -> None:
    """This process to idle priority, CPU and I/O: a command that walks a whole journal
    (``journal verify``, ``export``, ``archive``, ``compact``) on the table PC must not take
    the cores or the disk from the table. On a quiet PC it runs as fast as ever."""
    _lower_priority()
    if IONICE:
        subprocess.run([IONICE, "-c", "3", "-p", str(os.getpid())], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@contextlib.contextmanager
def writing_at_normal_priority() -> Iterator[None]:
    """Around a write transaction on the journal: a thread at idle priority (a housekeeping
    child, a ``journal`` command) goes back to the normal priority while it holds the
    journal's write lock, and down again after.

    At idle priority the PC's other work can keep it off the CPU for as long as it likes, and
    the table's next append would wait that long for the lock. The kernel allows it to root
    and, for the daemon's children, to the units' ``LimitNICE=+0``. Where it refuses, the
    write goes ahead at idle priority. Anywhere else (the daemon's own threads) this does
    nothing."""
    try:
        lowered = os.sched_getscheduler(0) == os.SCHED_IDLE
    except OSError:
        lowered = False
    raised, nice = False, 0
    if lowered:
        nice = os.getpriority(os.PRIO_PROCESS, 0)
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            raised = True
            os.setpriority(os.PRIO_PROCESS, 0, 0)
        except OSError:
            pass  # not allowed (no LimitNICE=): as low as it is, or SCHED_OTHER at its nice
    try:
        yield
    finally:
        if raised:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, 0, nice)
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


class IdleChild:
    """One run of ``python -m <module>`` at idle priority; ``stop()`` ends it from any thread.

    ``run(payload)`` writes ``payload`` (bytes) to its stdin and returns its JSON answer;
    ChildFailed when it exits without one (killed, crashed)."""

    def __init__(self, module: str, *args: str):
        command = python_module(module, *args)
        self._command = [IONICE, "-c", "3", *command] if IONICE else command
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopped = False

    def run(self, payload: bytes = b"") -> dict[str, Any]:
        with self._lock:
            if self._stopped:
                raise ChildFailed("stopped before it started")
            self._proc = subprocess.Popen(
                self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, preexec_fn=_lower_priority)
        out, err = self._proc.communicate(payload)
        try:
            answer = json.loads(out)
            if not isinstance(answer, dict):
                raise ValueError("not an object")
            return answer
        except ValueError:
            raise ChildFailed(f"the child exited with {self._proc.returncode}: "
                              f"{err.decode(errors='replace').strip()[-300:]}") from None

    def stop(self) -> None:
        """End the child now (SIGKILL: what it does is crash-safe, and it may be stopped)."""
        with self._lock:
            self._stopped = True
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()


class ChildFailed(Exception):
    """The child gave no answer; the message says how it ended."""
