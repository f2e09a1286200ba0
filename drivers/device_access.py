"""Why a device node could not be opened, in words an engineer at the table can act on.

A shoe that is NOT CONNECTED can be unplugged, or plugged in and still out of the daemon's
reach: its node exists but the kernel refuses the open. The errno says which, and each has
its own way out, so the status names the path, the node behind it and the errno
(docs/install.md §3, "A device that is there but will not open"):

- EPERM: the service's sandbox refuses the device (the unit's DeviceAllow= list has not got
  the node's major number);
- EACCES: the node's owner, group or mode keep the daemon's user out (the udev rule);
- ENXIO, ENODEV: the node is there with no device or driver behind it.

Only paths and numbers: nothing a device sent, so nothing here can name a card. Never raises:
the node can vanish between two looks at it, and the retry loop depends on the line.
"""

from __future__ import annotations

import errno
import os
import stat
import termios

#: what to do about an errno, after "exists but cannot be opened: <ERRNO> (<strerror>)"
_WAY_OUT = {
    errno.EPERM: "the service's sandbox does not allow this device: the unit's DeviceAllow= "
                 "must name its major number (docs/install.md §3)",
    errno.EACCES: "the daemon's user may not open it: the udev rule must give it GROUP=pokdeng "
                  "and MODE=0660 (docs/install.md §3)",
    errno.ENXIO: "no device answers behind the node (unplugged, or its kernel driver is not "
                 "loaded)",
    errno.ENODEV: "no device answers behind the node (unplugged, or its kernel driver is not "
                  "loaded)",
    errno.EBUSY: "another program holds it open",
}


def local_path(url: str) -> str | None:
    """The file system path a serial URL opens, or None for socket://, loop:// and the like."""
    if "://" in url:
        return None
    return url


def open_failure(url: str, exc: BaseException) -> str:
    """One line: what could not be opened and why. For a local path whose node exists, the node
    (symlink target, char major:minor, owner, group, mode), the errno's name and the way out."""
    code = _errno(exc)
    reason = os.strerror(code) if code else (str(exc) or type(exc).__name__)
    path = local_path(url)
    if path is None:
        return f"cannot open {url}: {reason}"
    try:
        return _describe(path, code, reason)
    except OSError:
        # udev removes or replaces the node and its links at unplug, between any two looks
        # at them: the driver's retry loop must get its line all the same
        return (f"{path} changed while it was being looked at (the device is being plugged "
                f"or unplugged): {reason}")


def _describe(path: str, code: int | None, reason: str) -> str:
    """open_failure's line for a local path; raises OSError if the node changes meanwhile."""
    if code == errno.ELOOP:  # a dangling-looking link whose chain comes back to itself
        return (f"{path} is a loop of symbolic links, which leads to no device (a udev rule "
                f"or a link made by hand points back at itself)")
    if os.path.islink(path) and not os.path.exists(path):
        return (f"{path} points at {os.readlink(path)}, which does not exist (the device is "
                f"unplugged)")
    if code == errno.ENOENT or not os.path.lexists(path):
        return f"{path} does not exist (the device is unplugged, or no udev rule matches it)"
    if not code:  # opened, then refused as a serial port (not a tty, settings it refuses)
        return f"{path}{_node(path)} exists but cannot be used as a serial port: {reason}"
    way_out = _WAY_OUT.get(code)
    return (f"{path}{_node(path)} exists but cannot be opened: "
            f"{errno.errorcode.get(code, 'error')} ({reason})"
            + (f": {way_out}" if way_out else ""))


def _errno(exc: BaseException) -> int | None:
    """The OS error number behind ``exc`` (pyserial passes it on, or chains the OSError)."""
    for candidate in (exc, exc.__cause__, exc.__context__):
        if isinstance(candidate, OSError) and candidate.errno:
            return candidate.errno
        if isinstance(candidate, termios.error) and candidate.args \
                and isinstance(candidate.args[0], int):
            return candidate.args[0]  # (errno, strerror), though no OSError
    return None


def _node(path: str) -> str:
    """`` (-> /dev/ttyUSB0, char 188:0, root:pokdeng 0660)``: what the path is on disk."""
    parts = []
    real = os.path.realpath(path)
    if real != os.path.abspath(path):
        parts.append(f"-> {real}")
    try:
        info = os.stat(path)
    except OSError:
        return f" ({', '.join(parts)})" if parts else ""
    if stat.S_ISCHR(info.st_mode):
        parts.append(f"char {os.major(info.st_rdev)}:{os.minor(info.st_rdev)}")
    parts.append(f"{_owner(info.st_uid, info.st_gid)} {stat.S_IMODE(info.st_mode):04o}")
    return f" ({', '.join(parts)})"


def _owner(uid: int, gid: int) -> str:
    import grp
    import pwd

    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return f"{user}:{group}"
