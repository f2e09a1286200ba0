"""The screen process shuts itself in before it answers anyone: Linux's Landlock.

The screen process answers the network, so it is the part of the table an attacker reaches
first. It runs as the daemon's user, and that user may read the journal, its key and, through
``/proc/<daemon>/fd``, whatever the daemon holds open: a screen process taken over could read
the cards of a round whose betting is open straight from the journal. The feed's sealing
(``wire.py``) cannot help with that, so the process gives the rights up itself, before it reads
its feed or accepts a connection, for good and for every thread (``landlock_restrict_self``,
after ``PR_SET_NO_NEW_PRIVS``; no privilege needed, root included):

* files: reading only, and only beneath Python's own folders, the package's, the catalogues'
  and the two system files a late import needs; writing nowhere. The state folder, the
  configuration, the credentials and the devices are out of reach;
* other processes: the kernel refuses it ``/proc/<pid>/fd``, ``environ`` and ``mem`` of any
  process outside its sandbox, the daemon included (Landlock's ptrace rule);
* TCP: no new connection and no new port (ABI 4): it serves the socket the daemon handed it;
* signals and abstract sockets outside its sandbox (ABI 6): it cannot stop or kill the table;
* no new socket and no new process (a seccomp filter, syscall_filter.py): neither the daemon's
  control socket, which Landlock does not shut, nor a child that would outlive the daemon.

What the running kernel does not know is left out and said in the log line (``abi``). A kernel
without Landlock (older than 5.13, or not in its ``lsm=`` list) leaves the process as it was,
with one warning: the screens go on, and sealing is then as strong as the process's good
behaviour (docs/install.md, "The screen process's sandbox").

The system calls, from the kernel's documentation (Documentation/userspace-api/landlock.rst):
their numbers are the same on every architecture.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from controller.service.screens.syscall_filter import refuse_sockets_and_processes

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
PR_SET_NO_NEW_PRIVS = 38
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1

# file system rights (ABI 1, then REFER in 2, TRUNCATE in 3, IOCTL_DEV in 5)
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
ABI1_FS = (1 << 13) - 1
FS_BY_ABI = {1: ABI1_FS, 2: ABI1_FS | 1 << 13, 3: ABI1_FS | 1 << 13 | 1 << 14,
             5: ABI1_FS | 1 << 13 | 1 << 14 | 1 << 15}
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1                  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1       # ABI 6

#: files read after the process started: the dynamic loader's cache (an extension module's
#: libraries) and the local time zone
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime")
#: folders whose files any program may read: libraries, zone data, locales
SYSTEM_FOLDERS = ("/usr", "/lib", "/lib64")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64),
                ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # packed in the kernel's header
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class SandboxUnavailable(OSError):
    """This kernel cannot shut the process in (no Landlock)."""


@dataclass(frozen=True)
class Sandbox:
    """What the process was shut in with."""
    abi: int
    readable: tuple[str, ...]
    network: bool   # new TCP connections and ports refused
    scoped: bool    # signals and abstract sockets outside refused
    filtered: bool  # no new socket, no new process (syscall_filter.py)
    filter_missing: str = ""  # why not, when not

    def describe(self) -> dict[str, object]:
        return {"abi": self.abi, "readable": list(self.readable),
                "tcp_refused": self.network, "signals_refused": self.scoped,
                "sockets_and_processes_refused": self.filtered,
                **({"filter_missing": self.filter_missing} if self.filter_missing else {})}


_libc = ctypes.CDLL(None, use_errno=True)


def _call(number: int, *args: object) -> int:
    result = int(_libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return result


def abi_version() -> int:
    """The Landlock ABI the kernel offers; SandboxUnavailable when none."""
    try:
        return _call(SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                     ctypes.c_uint32(CREATE_RULESET_VERSION))
    except OSError as exc:  # ENOSYS: not built in; EOPNOTSUPP: not enabled at boot
        why = ("its calls are refused by a system call filter (the unit's SystemCallFilter=)"
               if exc.errno == errno.EPERM else f"no Landlock in this kernel: {exc.strerror}")
        raise SandboxUnavailable(exc.errno, why) from None


def _fs_rights(abi: int) -> int:
    return FS_BY_ABI[max(level for level in FS_BY_ABI if level <= abi)]


def _allow_reading(ruleset: int, path: str, handled: int, files: bool = True) -> bool:
    """Reading (and listing, for a folder) beneath ``path``, or only listing (``files``
    False); False when it does not exist."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        folder = os.path.isdir(f"/proc/self/fd/{fd}")
        allowed = (READ_FILE | READ_DIR) if folder else READ_FILE
        if not files:
            allowed = READ_DIR if folder else 0
        if not allowed & handled:
            return False
        rule = _PathBeneathAttr(allowed & handled, fd)
        _call(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
              ctypes.byref(rule), ctypes.c_uint32(0))
    finally:
        os.close(fd)
    return True


def shut_in(readable: Iterable[str], listable: Iterable[str] = ()) -> Sandbox:
    """From now on this process (its only thread, and every thread and process it starts)
    reads only beneath ``readable`` and the system's own folders (and lists the folders
    beneath ``listable``, reading none of their files), writes no file, opens no
    TCP connection or port and, where the kernel can, signals nothing outside; then the
    system call filter (syscall_filter.py): no new socket, no new process.
    SandboxUnavailable on a kernel without Landlock; another OSError if the kernel refused
    the rules or a thread is running already (the process is then as it was)."""
    if threading.active_count() > 1:
        # Landlock shuts in the calling thread and what it starts, never a thread running
        raise OSError(errno.EBUSY, "threads are running already: they would stay outside")
    abi = abi_version()
    handled = _fs_rights(abi)
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    # fields this kernel does not know stay zero, which every kernel accepts
    ruleset = _call(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                    ctypes.c_uint32(0))
    try:
        wanted = dict.fromkeys([*SYSTEM_FOLDERS, *SYSTEM_FILES, *readable])
        allowed = tuple(path for path in wanted if _allow_reading(ruleset, path, handled))
        for path in listable:
            _allow_reading(ruleset, path, handled, files=False)
        _call_prctl_no_new_privs()
        _call(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    try:
        refuse_sockets_and_processes()
    except OSError as exc:  # another architecture, or a kernel without seccomp
        return Sandbox(abi, allowed, abi >= 4, abi >= 6, filtered=False,
                       filter_missing=exc.strerror or str(exc))
    return Sandbox(abi, allowed, network=abi >= 4, scoped=abi >= 6, filtered=True)


def _call_prctl_no_new_privs() -> None:
    """No privilege can be gained from here on (a set-user-id program): what Landlock asks
    of a process that is not CAP_SYS_ADMIN."""
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
