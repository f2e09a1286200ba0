"""Who is on the other end of the control socket, and whether they may act.

The kernel names the caller of a Unix socket (``SO_PEERCRED``: pid, uid, gid); it cannot be
forged by the caller. Two roles follow from it:

* reading (``status``, ``watch``): whoever can open the socket at all (its file mode and group);
* acting (``supervisor …``): root, the daemon's own user (the demo's scripted supervisor runs
  as the daemon), or a member of the supervisor group, as its primary group or as a
  supplementary group in the user database.

The user database is asked once per caller and cached briefly: a flood of connections from one
account must not turn into a flood of NSS lookups on the control socket's only thread.
"""

from __future__ import annotations

import grp
import os
import pwd
import socket
import struct
import time
from dataclasses import dataclass

from controller.table.inputs import Actor

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
LOOKUP_CACHE_S = 10.0            # how long a caller's role is remembered
LOOKUP_CACHE_MAX = 256           # distinct (uid, gid) pairs remembered at most


@dataclass(frozen=True)
class Peer:
    """The process at the other end of a control connection."""

    pid: int
    uid: int
    gid: int
    user: str          # the account name, or the uid as text when it has none
    may_act: bool

    @property
    def actor(self) -> Actor:
        return Actor(self.user, self.uid)

    def describe(self) -> str:
        return f"{self.user} (uid {self.uid})"


def group_id(name: str) -> int | None:
    """The id of the group called ``name`` on this system, or None when there is none."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def missing_group(key: str, name: str) -> str:
    """What a config key naming a group this system lacks is told (run and config check)."""
    return f"{key}: no group named {name!r} on this system (create it, e.g. with systemd-sysusers)"


def own_group() -> str:
    """This process's primary group: a supervisor group that exists wherever the daemon runs
    for itself (demo, benchmarks, tests), where its own user is the one acting."""
    return grp.getgrgid(os.getegid()).gr_name


def peer_credentials(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the connected process, from the kernel."""
    return _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                            _PEERCRED.size))


class AccessPolicy:
    """Decides each caller's role; ``supervisor_gid`` is the supervisor group's id."""

    def __init__(self, supervisor_gid: int, *, own_uid: int | None = None):
        self.supervisor_gid = supervisor_gid
        self.own_uid = os.geteuid() if own_uid is None else own_uid
        self._known: dict[tuple[int, int], tuple[float, str, bool]] = {}

    def peer(self, conn: socket.socket) -> Peer:
        pid, uid, gid = peer_credentials(conn)
        now = time.monotonic()
        known = self._known.get((uid, gid))
        if known is None or known[0] <= now:
            if len(self._known) >= LOOKUP_CACHE_MAX:
                self._known.clear()
            user, may_act = self._look_up(uid, gid)
            known = (now + LOOKUP_CACHE_S, user, may_act)
            self._known[(uid, gid)] = known
        return Peer(pid, uid, gid, known[1], known[2])

    def _look_up(self, uid: int, gid: int) -> tuple[str, bool]:
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:
            user = None
        if uid in (0, self.own_uid) or gid == self.supervisor_gid:
            return user or str(uid), True
        groups = os.getgrouplist(user, gid) if user is not None else []
        return user or str(uid), self.supervisor_gid in groups
