"""Is the system clock synchronised? The kernel's NTP state, read with ``adjtimex(2)``.

chrony and systemd-timesyncd tell the kernel when they have synchronised the clock: the kernel
clears ``STA_UNSYNC`` and keeps ``maxerror``, the largest error it allows the clock now (it
grows by 500 ppm while nobody disciplines the clock; at 16 s the kernel sets ``STA_UNSYNC``
again). Reading (``modes`` = 0) needs no privilege. Where the call is not there (not Linux, no
libc, a sandbox that refuses it) the answer is ``unknown``, never a guess.

The table reports the real system clock, also when the demo runs table time faster.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass

SYNCHRONISED = "synchronised"
NOT_SYNCHRONISED = "not_synchronised"
UNKNOWN = "unknown"
SYNC_STATES = (SYNCHRONISED, NOT_SYNCHRONISED, UNKNOWN)

STA_UNSYNC = 0x0040  # <sys/timex.h>: the clock is not synchronised
TIME_ERROR = 5       # adjtimex's return value when the clock is not synchronised


class _Timeval(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


class Timex(ctypes.Structure):
    """``struct timex`` of <sys/timex.h> (Linux, glibc and musl); ctypes adds C's padding."""

    _fields_ = [
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),   # microseconds
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("time", _Timeval),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("_reserved", ctypes.c_int * 11),
    ]


@dataclass(frozen=True, slots=True)
class SyncReading:
    """The kernel's word on the clock: one of SYNC_STATES, its error bound, and why unknown."""
    state: str
    max_error_s: float | None = None
    detail: str | None = None

    def words(self) -> str:
        """For a status line: ``synchronised``, ``NOT synchronised`` or ``unknown``."""
        return {SYNCHRONISED: "synchronised", NOT_SYNCHRONISED: "NOT synchronised"}.get(
            self.state, "unknown")


@functools.cache
def _adjtimex_function() -> Callable[..., int] | None:
    """libc's adjtimex, looked up once (the process already has libc loaded: CDLL(None))."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if getattr(libc, "adjtimex", None) is None:
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    except OSError:
        return None
    function = getattr(libc, "adjtimex", None) or getattr(libc, "ntp_adjtime", None)
    if function is None:
        return None
    function.argtypes = [ctypes.POINTER(Timex)]
    function.restype = ctypes.c_int
    return function  # type: ignore[no-any-return]


def read_kernel_sync() -> SyncReading:
    """Read the kernel's clock state now (a cheap system call; changes nothing)."""
    adjtimex = _adjtimex_function()
    if adjtimex is None:
        return SyncReading(UNKNOWN, detail="adjtimex is not available here")
    timex = Timex()  # modes = 0: read only
    result = adjtimex(ctypes.byref(timex))
    if result < 0:
        errno = ctypes.get_errno()
        return SyncReading(UNKNOWN, detail=f"adjtimex failed: {os.strerror(errno)}")
    return interpret(result, timex.status, timex.maxerror)


def interpret(result: int, status: int, max_error_us: int) -> SyncReading:
    """The reading for adjtimex's return value, ``status`` flags and ``maxerror``."""
    synchronised = result != TIME_ERROR and not status & STA_UNSYNC
    return SyncReading(SYNCHRONISED if synchronised else NOT_SYNCHRONISED,
                       round(max_error_us / 1e6, 3))
