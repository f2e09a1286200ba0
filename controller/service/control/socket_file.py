"""Which socket a control client connects to: the daemon's, never one a link points at.

The package's preinst and prerm run ``status`` and ``supervisor drain`` as root, and the
socket lives in the runtime directory the service user owns (systemd ``RuntimeDirectory=``):
that user could put a link there named ``control.sock``, pointing at a root-only socket of
another program, and root would connect to it and send it our requests. So the client opens
the socket file itself, not following a link (``O_PATH | O_NOFOLLOW``), checks what it opened
(a socket; for root, owned by the user who controls its directory, as the daemon's is), then
connects to that very file through ``/proc/self/fd``: a link planted meanwhile changes nothing.
It still connects as who it is, so the daemon journals root's actions as root's.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: where a process reaches a file it holds open; without it (no /proc) the path is connected
#: to after the same checks
_OWN_FDS = Path("/proc/self/fd")


class SocketFileError(Exception):
    """The path is not the daemon's socket; the message names it and says why."""


class SocketFileMissing(SocketFileError):
    """Nothing at the path."""


class SocketFileDenied(SocketFileError):
    """The caller may not reach the path."""


def open_socket_file(path: str) -> tuple[int, str]:
    """An ``O_PATH`` descriptor of the socket file at ``path`` and the address to connect to
    that file by (close the descriptor after the connect); SocketFileError when ``path`` is a
    link, not a socket, or (for root) not owned by the user who controls its directory."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SocketFileMissing(f"no control socket at {path}: is the daemon running?") from None
    except PermissionError:
        raise SocketFileDenied(f"permission denied on {path}") from None
    except OSError as exc:
        raise SocketFileError(f"cannot reach {path}: {exc.strerror or exc}") from None
    try:
        _check(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    address = str(_OWN_FDS / str(fd)) if _OWN_FDS.is_dir() else path
    return fd, address


def _check(path: str, info: os.stat_result) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise SocketFileError(
            f"{path} is a symbolic link, not the daemon's socket: refused (whoever can write "
            "its directory could point it at another program's socket)")
    if not stat.S_ISSOCK(info.st_mode):
        raise SocketFileError(f"{path} is not a socket: not the daemon's control socket")
    if os.geteuid() != 0:
        return  # the kernel already holds the caller to its own rights
    # here, not at the top: only root needs it, and status starts without it
    from controller.durability.as_owner import UnsafeStateDirectory, controller_of

    directory = os.path.dirname(os.path.abspath(path))
    try:
        owner = controller_of(directory)
    except UnsafeStateDirectory as exc:
        raise SocketFileError(f"{path}: its directory {exc.filename} is {exc.strerror}") from None
    if owner is not None and info.st_uid != owner.uid:
        raise SocketFileError(
            f"{path} belongs to uid {info.st_uid}, not to uid {owner.uid} who controls "
            f"{owner.where} (the daemon's user): refused, it is not the daemon's socket")
