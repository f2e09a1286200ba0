"""What Landlock leaves open to the screen process, closed by a seccomp filter.

Landlock (sandbox.py) shuts files, ``/proc``, TCP and signals, but not a Unix socket reached by
its path: a screen process taken over could connect to the daemon's control socket, where the
daemon's own user acts as supervisor (pause, cancel the round), or send UDP out. Nor does it
shut what the kernel leaves to a file's owner, which the screen process is: the journal's mode
(made readable to every user), its owner, times and extended attributes. A child it forked
would outlive the daemon (``PR_SET_PDEATHSIG`` is not handed down) holding the display's port,
and so would the process itself with its parent-death signal turned off or cleared by a change
of identity. An option set on the listening socket the daemon shares (a packet filter locked
on it, a receive low-water mark no request reaches) would leave every later screen process a
socket that takes no connection. The screen process needs none of that:
it serves the listening socket it was handed (``accept`` makes its connections) and runs
threads. So, for good and for every thread:

* ``socket``, ``socketpair``, ``connect`` and io_uring (whose requests make sockets and
  connections seccomp never sees) fail with EACCES;
* ``fork``, ``vfork``, ``execve``, ``execveat`` and a ``clone`` that is not a thread's fail
  with EPERM; ``clone3`` says ENOSYS, whose flags a filter cannot read, and the C library then
  starts its threads with ``clone``;
* a file's mode, owner, times, extended attributes and inode flags (``chattr``'s ioctls), a
  lease on a file (``F_SETLEASE``: it holds other processes' opens back), the user and group
  ids and supplementary groups, and ``prctl(PR_SET_PDEATHSIG)`` fail with EPERM;
* ``setsockopt`` fails with EPERM, whatever the option: the screen process sets none, and
  any option set on the listening socket the daemon shares (a packet filter, ``SO_RCVLOWAT``,
  ``IP_MINTTL``, an MD5 signature, a device binding) would stay on it for every later screen
  process, which would then serve no page;
* system calls of another architecture than the process's own (i386's ``socketcall`` on
  x86-64, x32) all fail.

The numbers are the kernel's, per architecture (arch/x86/entry/syscalls/syscall_64.tbl,
include/uapi/asm-generic/unistd.h for arm64); another architecture goes without the filter,
and the log says so. The filter names what it refuses: a call it does not name is let
through, so a new kernel's call that makes a socket or a process must be added here.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from dataclasses import dataclass

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
PR_SET_PDEATHSIG = 1
CLONE_THREAD = 0x00010000
X32_SYSCALL_BIT = 0x40000000
#: ioctl requests that change a file's inode flags (chattr: append-only, no-dump, …)
INODE_FLAG_IOCTLS = {"FS_IOC_SETFLAGS": 0x40086602, "FS_IOC32_SETFLAGS": 0x40046602,
                     "FS_IOC_FSSETXATTR": 0x401C5820}
F_SETLEASE = 1024  # fcntl: a lease that holds other processes' opens of the file back

# classic BPF, as seccomp reads it (linux/filter.h, linux/seccomp.h)
LD_W_ABS, JEQ_K, JSET_K, JGE_K, RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
DATA_NR, DATA_ARCH = 0, 4  # struct seccomp_data (little-endian)


def _data_arg(index: int) -> int:
    """Where the low 32 bits of argument ``index`` are in struct seccomp_data."""
    return 16 + 8 * index


@dataclass(frozen=True)
class Machine:
    """One architecture's AUDIT_ARCH_* value and the numbers of the calls the filter reads."""
    arch: int
    #: fail with EACCES: a new socket, or one made by io_uring, whose requests seccomp never sees
    sockets: dict[str, int]
    #: fail with EPERM: a new process, a file's mode, owner, times or extended attributes
    #: (Landlock leaves those to the owner, and the screen process runs as the journal's
    #: owner), a change of identity or groups (which would clear the parent-death signal),
    #: and any socket option (it would stay on the listening socket the daemon shares)
    refused: dict[str, int]
    clone: int
    clone3: int
    prctl: int
    ioctl: int
    fcntl: int


_IO_URING = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
_NEWER = {"fchmodat2": 452, "setxattrat": 463, "removexattrat": 466}  # one number everywhere

MACHINES = {
    "x86_64": Machine(
        0xC000003E, {"socket": 41, "connect": 42, "socketpair": 53, **_IO_URING},
        {"fork": 57, "vfork": 58, "execve": 59, "execveat": 322,
         "chmod": 90, "fchmod": 91, "fchmodat": 268, "chown": 92, "fchown": 93, "lchown": 94,
         "fchownat": 260, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
         "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "utime": 132,
         "utimes": 235, "futimesat": 261, "utimensat": 280, "setuid": 105, "setgid": 106,
         "setreuid": 113, "setregid": 114, "setresuid": 117, "setresgid": 119,
         "setfsuid": 122, "setfsgid": 123, "setgroups": 116, "setsockopt": 54, **_NEWER},
        clone=56, clone3=435, prctl=157, ioctl=16, fcntl=72),
    "aarch64": Machine(
        0xC00000B7, {"socket": 198, "socketpair": 199, "connect": 203, **_IO_URING},
        {"execve": 221, "execveat": 281, "fchmod": 52, "fchmodat": 53, "fchownat": 54,
         "fchown": 55, "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14,
         "lremovexattr": 15, "fremovexattr": 16, "utimensat": 88, "setregid": 143,
         "setgid": 144, "setreuid": 145, "setuid": 146, "setresuid": 147, "setresgid": 149,
         "setfsuid": 151, "setfsgid": 152, "setgroups": 159, "setsockopt": 208, **_NEWER},
        clone=220, clone3=435, prctl=167, ioctl=29, fcntl=25),
}


class FilterUnavailable(OSError):
    """No filter for this machine's architecture."""


def program(machine: str) -> bytes:
    """The filter for ``machine`` (``platform.machine()``), as the kernel reads it."""
    try:
        calls = MACHINES[machine]
    except KeyError:
        raise FilterUnavailable(errno.ENOSYS, f"no system call filter for {machine}") from None
    ops: list[tuple[int, int, str | None, str | None]] = []  # code, k, jump if true / false
    labels: dict[str, int] = {}

    def op(code: int, k: int, if_true: str | None = None, if_false: str | None = None) -> None:
        ops.append((code, k, if_true, if_false))

    def label(name: str) -> None:
        labels[name] = len(ops)

    op(LD_W_ABS, DATA_ARCH)
    op(JEQ_K, calls.arch, if_false="refuse")  # another ABI's numbers name other calls
    op(LD_W_ABS, DATA_NR)
    if machine == "x86_64":
        op(JGE_K, X32_SYSCALL_BIT, if_true="refuse")  # x32's calls: another ABI
    for number in calls.sockets.values():
        op(JEQ_K, number, if_true="no_socket")
    for number in calls.refused.values():
        op(JEQ_K, number, if_true="refuse")
    op(JEQ_K, calls.clone3, if_true="nosys")
    op(JEQ_K, calls.clone, if_true="clone")
    op(JEQ_K, calls.prctl, if_true="prctl")
    op(JEQ_K, calls.fcntl, if_true="fcntl")
    op(JEQ_K, calls.ioctl, if_false="allow")
    op(LD_W_ABS, _data_arg(1))  # ioctl's request
    for request in INODE_FLAG_IOCTLS.values():
        op(JEQ_K, request, if_true="refuse")
    op(JEQ_K, 0, if_true="allow", if_false="allow")  # any other request: allowed
    label("fcntl")
    op(LD_W_ABS, _data_arg(1))  # fcntl's command
    op(JEQ_K, F_SETLEASE, if_true="refuse", if_false="allow")
    label("clone")
    op(LD_W_ABS, _data_arg(0))  # clone's flags: a thread, or a process
    op(JSET_K, CLONE_THREAD, if_true="allow", if_false="refuse")
    label("prctl")
    op(LD_W_ABS, _data_arg(0))  # the parent-death signal stays as set before the filter
    op(JEQ_K, PR_SET_PDEATHSIG, if_true="refuse", if_false="allow")
    for name, verdict in (("allow", RET_ALLOW), ("no_socket", RET_ERRNO | errno.EACCES),
                          ("refuse", RET_ERRNO | errno.EPERM),
                          ("nosys", RET_ERRNO | errno.ENOSYS)):
        label(name)
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
