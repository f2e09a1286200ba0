"""Root works in a state directory only as the user who controls it.

Operators run ``pokdeng-table journal continue|archive|compact|export|verify`` (and
``roadmap``) as root on a state directory that the daemon's service user owns. That user can
put a link at any name in it (``journal.sqlite``, its ``-wal`` and ``-shm``, the head file,
``forked-*``, the archives, a temporary name): root following one would create, write, chown
or read a file anywhere on the machine. So root, before it touches the directory, takes the
identity of whoever controls the directory (effective uid and gid, and that one group), and
the kernel refuses what that user could not do; the files it makes belong to that user, as
the daemon's own do (SQLite's ``-wal``/``-shm``, the archives, ``forked-*``). What only root
may read (the config, the chain key, the backend secret, files the operator names on the
command line) is read before, as root. A directory that only root controls is worked on as
root; a caller that is not root is left as it is (the kernel already holds it to its rights).

Who controls a directory: the first owner other than root on its path, from ``/`` down (the
path as given, then the path its links lead to): that user can replace everything below it.
A directory on that path owned by root but writable by a group or by everyone (without the
sticky bit) is refused: anyone in that group could plant links in it.
"""

from __future__ import annotations

import ctypes
import errno
import importlib
import os
import pwd
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = 0
#: the process's own groups, before any block changed them (a block run as root gets them back)
_OWN_GROUPS = os.getgroups()


class UnsafeStateDirectory(PermissionError):
    """Root would work in a directory that others than its owner can change (``filename``:
    that directory; ``strerror``: why)."""


def refused(exc: Exception) -> str:
    """An error for the operator: a file the kernel refused (to the directory's owner, or to
    root) is named with why (``<file>: Permission denied``); others as they say."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


@dataclass(frozen=True)
class Owner:
    uid: int
    gid: int
    where: Path   # the directory (or link) that makes them its controller


def controller_of(directory: str | Path) -> Owner | None:
    """The user who controls ``directory`` (None: root alone). UnsafeStateDirectory when a
    root-owned directory on its path is writable by a group or everyone."""
    given = Path(os.path.abspath(directory))
    for path in (given, Path(os.path.realpath(given))):
        owner = _first_other_owner(path)
        if owner is not None:
            return owner
    return None


def _first_other_owner(path: Path) -> Owner | None:
    for step in (*reversed(path.parents), path):
        try:
            info = os.lstat(step)
        except FileNotFoundError:
            return None  # nothing below it yet: the command says what is missing
        if info.st_uid != ROOT:
            return Owner(info.st_uid, _group_to_act_with(info.st_uid, info.st_gid, step),
                         step)
        if stat.S_ISDIR(info.st_mode) and _others_may_plant(info):
            raise UnsafeStateDirectory(
                errno.EACCES, f"owned by root but writable by group {info.st_gid} or by "
                "everyone: whoever can write it could make root follow a link; a state "
                "directory is owned by the table's user (or by root alone, mode 0755 or "
                "tighter)", str(step))
    return None


def _group_to_act_with(uid: int, directory_gid: int, where: Path) -> int:
    """The group root acts with as ``uid``: its own primary group (passwd), or for a user
    passwd does not know the directory's group; never root's group, whose files would open
    to it (a state directory chgrp'ed to root by hand): UnsafeStateDirectory then."""
    try:
        gid = pwd.getpwuid(uid).pw_gid
    except KeyError:
        gid = directory_gid
    if gid == ROOT:
        raise UnsafeStateDirectory(
            errno.EACCES, f"its owner (uid {uid}) would be acted as with group 0 (root's "
            "group), which may read root's files: give the state directory's user a primary "
            "group of its own (and the directory that group)", str(where))
    return gid


def _others_may_plant(info: os.stat_result) -> bool:
    group_writes = info.st_mode & stat.S_IWGRP and info.st_gid != ROOT
    others_write = info.st_mode & stat.S_IWOTH
    return bool(group_writes or others_write) and not info.st_mode & stat.S_ISVTX


@contextmanager
def as_owner_of(directory: str | Path, needs: Iterable[str] = ()) -> Iterator[Owner | None]:
    """Run the block as the user who controls ``directory`` when the process is root (or
    is acting as another user in an outer block), and as before after it; yields that user,
    or None when the block runs as root or the process cannot change who it is.

    ``needs``: the modules the block imports, imported first (as who the process is): the
    owner may not be able to read Python's own files (an interpreter installed under /root),
    and a module imported inside the block would then fail to load."""
    for module in needs:
        importlib.import_module(module)
    if ROOT not in (os.getuid(), os.geteuid()):
        yield None
        return
    before = os.geteuid(), os.getegid(), os.getgroups()
    _become(ROOT, os.getgid(), _OWN_GROUPS)
    try:
        owner = controller_of(directory)
    except BaseException:
        _become(*before)
        raise
    if owner is not None:
        _become(owner.uid, owner.gid, [owner.gid])
    try:
        yield owner
    finally:
        _become(*before)


def _become(uid: int, gid: int, groups: list[int]) -> None:
    """Effective ids only (the real and saved uid stay root, so the block can end); the
    kernel checks every file access against them."""
    if os.geteuid() != ROOT:
        os.seteuid(ROOT)  # only root may set the groups
    os.setgroups(groups)
    os.setegid(gid)
    if uid != ROOT:
        os.seteuid(uid)
        _keep_sys_nice()


#: capability.h: CAP_SYS_NICE, and the capget/capset interface version that has 64 bits
CAP_SYS_NICE = 23
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _keep_sys_nice() -> None:
    """Taking another euid clears the effective capabilities; CAP_SYS_NICE alone comes back
    (it gives no right on any file): a journal command at idle priority still goes back to the
    normal priority while it holds the journal's write lock (idle_child.py), so the table's
    next append does not wait on it. Where the kernel refuses, it writes at idle priority."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
        if libc.capget(ctypes.byref(header), data) != 0:
            return
        if data[0].permitted & (1 << CAP_SYS_NICE):
            data[0].effective |= 1 << CAP_SYS_NICE
            libc.capset(ctypes.byref(header), data)
    except (OSError, AttributeError):
        pass
