"""Opening a file that someone else may have replaced: only a regular file is read.

A FIFO planted at a file's name would hang the reader for ever (an open for reading waits
for a writer), a device would be opened with the reader's rights, a link would lead the
reader to another user's file. The file is looked at first (``lstat``: nothing that is not a
regular file is opened at all), then opened non-blocking, without following a last link
when asked, and looked at again through the descriptor (it may have been swapped between)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotARegularFile(OSError):
    """The name holds something other than a regular file (``filename``: that name)."""


def open_regular(path: str | Path, *, follow: bool = True) -> int:
    """A read-only descriptor of the regular file at ``path``. FileNotFoundError when there
    is nothing there; NotARegularFile naming it for a FIFO, device, socket or directory (or,
    ``follow`` False, a link); other OSErrors as the kernel says."""
    info = os.stat(path) if follow else os.lstat(path)
    _refuse_unless_regular(info, path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link planted since the lstat
            raise NotARegularFile(errno.ELOOP, "a link, not a regular file: not followed",
                                  str(path)) from None
        raise
    return _still_regular(fd, path)


def open_regular_for_append(path: str | Path, mode: int = 0o640) -> int:
    """A read-write, appending descriptor of the regular file at ``path``, created (``mode``)
    when nothing is there. NotARegularFile naming it for a FIFO, device, socket or directory:
    what is written there would never be a file anyone can read back."""
    try:
        _refuse_unless_regular(os.stat(path), path)
    except FileNotFoundError:
        pass  # created below
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags, mode)
    return _still_regular(fd, path)


def open_regular_in_place(path: str | Path) -> int:
    """A write-only descriptor of the regular file at ``path``, to write inside it: never
    created (FileNotFoundError when nothing is there), its last link never followed, and
    refused (NotARegularFile naming it) unless it is a plain file with a single name: a write
    through a second name would change another file, and an open of a FIFO for writing would
    wait for a reader."""
    _refuse_unless_regular(os.lstat(path), path)
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a link or a FIFO planted since the lstat
            raise NotARegularFile(exc.errno, "not a regular file: not opened",
                                  str(path)) from None
        raise
    fd = _still_regular(fd, path)
    links = os.fstat(fd).st_nlink
    if links != 1:
        os.close(fd)
        raise NotARegularFile(errno.EMLINK, f"a file with {links} names, not one of its own: "
                              "not opened", str(path))
    return fd


def _still_regular(fd: int, path: str | Path) -> int:
    """``fd``, opened non-blocking, made blocking once it is seen through the descriptor to
    be a regular file still (it may have been swapped since the name was looked at); closed
    and NotARegularFile otherwise."""
    try:
        _refuse_unless_regular(os.fstat(fd), path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | Path, *, follow: bool = True) -> bytes:
    """The whole regular file at ``path`` (open_regular's errors)."""
    fd = open_regular(path, follow=follow)
    with os.fdopen(fd, "rb") as file:
        return file.read()


def refuse_unless_regular_or_absent(path: str | Path) -> None:
    """NotARegularFile naming ``path`` when something other than a regular file (a link
    included) is at it; nothing there is fine (the caller may create it)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    _refuse_unless_regular(info, path)


def _refuse_unless_regular(info: os.stat_result, path: str | Path) -> None:
    if stat.S_ISREG(info.st_mode):
        return
    kind = ("a link" if stat.S_ISLNK(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode)
            else "a directory" if stat.S_ISDIR(info.st_mode)
            else "a socket" if stat.S_ISSOCK(info.st_mode) else "a device")
    raise NotARegularFile(errno.EINVAL, f"{kind}, not a regular file: not opened", str(path))
