"""What Landlock leaves open to the screen process, closed by a seccomp filter: new sockets
and new processes.

Landlock (sandbox.py) shuts files, ``/proc``, TCP and signals, but not a Unix socket reached by
its path: a screen process taken over could connect to the daemon's control socket, where the
daemon's own user acts as supervisor (pause, cancel the round), or send UDP out. And a child
it forked would outlive the daemon (``PR_SET_PDEATHSIG`` is not handed down) holding the
display's port. The screen process needs none of that: it serves the listening socket it was
handed (``accept`` makes its connections) and runs threads. So, for good and for every
thread: ``socket``, ``socketpair`` and ``connect`` fail with EACCES; ``fork``, ``vfork``,
``execve``, ``execveat`` and a ``clone`` that is not a thread's fail with EPERM; ``clone3``
says ENOSYS, whose flags a filter cannot read, and the C library then starts its threads with
``clone``. System calls of another architecture than the process's own (i386's ``socketcall``
on x86-64, x32) all fail.

The numbers are the kernel's, per architecture (arch/x86/entry/syscalls/syscall_64.tbl,
include/uapi/asm-generic/unistd.h for arm64); another architecture goes without the filter,
and the log says so.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
CLONE_THREAD = 0x00010000
X32_SYSCALL_BIT = 0x40000000

# classic BPF, as seccomp reads it (linux/filter.h, linux/seccomp.h)
LD_W_ABS, JEQ_K, JSET_K, JGE_K, RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
DATA_NR, DATA_ARCH, DATA_ARG0_LOW = 0, 4, 16  # struct seccomp_data (little-endian)

#: per machine: (AUDIT_ARCH_*, sockets, processes, clone, clone3)
SYSCALLS = {
    "x86_64": (0xC000003E, {"socket": 41, "connect": 42, "socketpair": 53},
               {"fork": 57, "vfork": 58, "execve": 59, "execveat": 322}, 56, 435),
    "aarch64": (0xC00000B7, {"socket": 198, "socketpair": 199, "connect": 203},
                {"execve": 221, "execveat": 281}, 220, 435),
}


class FilterUnavailable(OSError):
    """No filter for this machine's architecture."""


def program(machine: str) -> bytes:
    """The filter for ``machine`` (``platform.machine()``), as the kernel reads it."""
    try:
        arch, sockets, processes, clone, clone3 = SYSCALLS[machine]
    except KeyError:
        raise FilterUnavailable(errno.ENOSYS, f"no system call filter for {machine}") from None
    ops: list[tuple[int, int, str | None, str | None]] = []  # code, k, jump if true / false
    labels: dict[str, int] = {}

    def op(code: int, k: int, if_true: str | None = None, if_false: str | None = None) -> None:
        ops.append((code, k, if_true, if_false))

    op(LD_W_ABS, DATA_ARCH)
    op(JEQ_K, arch, if_false="process")  # another ABI's numbers name other calls: refused
    op(LD_W_ABS, DATA_NR)
    if machine == "x86_64":
        op(JGE_K, X32_SYSCALL_BIT, if_true="process")  # x32's calls: another ABI
    for number in sockets.values():
        op(JEQ_K, number, if_true="socket")
    for number in processes.values():
        op(JEQ_K, number, if_true="process")
    op(JEQ_K, clone3, if_true="nosys")
    op(JEQ_K, clone, if_false="allow")
    op(LD_W_ABS, DATA_ARG0_LOW)  # clone's flags: a thread, or a process
    op(JSET_K, CLONE_THREAD, if_true="allow", if_false="process")
    for name, verdict in (("allow", RET_ALLOW), ("socket", RET_ERRNO | errno.EACCES),
                          ("process", RET_ERRNO | errno.EPERM),
                          ("nosys", RET_ERRNO | errno.ENOSYS)):
        labels[name] = len(ops)
        op(RET_K, verdict)

    def offset(index: int, target: str | None) -> int:
        return 0 if target is None else labels[target] - index - 1

    return b"".join(struct.pack("=HBBI", code, offset(i, t), offset(i, f), k)
                    for i, (code, k, t, f) in enumerate(ops))


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def refuse_sockets_and_processes() -> None:
    """Installs the filter on this thread and what it starts (call it before any thread,
    after ``PR_SET_NO_NEW_PRIVS``); FilterUnavailable on another architecture, OSError if
    the kernel refused it."""
    code = program(platform.machine())
    buffer = ctypes.create_string_buffer(code, len(code))
    prog = _Program(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
