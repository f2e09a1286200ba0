"""Whether the installed unit lets the daemon write its metrics file (``metrics.textfile``).

The daemon only logs a WARNING when it cannot write the file, and keeps dealing: a table that
Prometheus never hears of. Two things decide it, both read here as systemd and the kernel
would: the unit's file-system sandbox (``ProtectSystem=``: with ``strict`` only
``ReadWritePaths=`` and the unit's own ``StateDirectory=``/``RuntimeDirectory=``/
``CacheDirectory=``/``LogsDirectory=`` are writable) and the directory's owner and mode for the
unit's ``User=``/``Group=``/``SupplementaryGroups=`` (read from the system's /etc/passwd and
/etc/group, so a ``--root`` image is judged by its own users).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from controller.service.config.unit_credentials import service_settings

#: the directories each kind of unit directory lives under (systemd.exec(5))
_UNIT_DIRECTORIES = {"StateDirectory": "/var/lib", "RuntimeDirectory": "/run",
                     "CacheDirectory": "/var/cache", "LogsDirectory": "/var/log"}
#: what ProtectSystem= makes read-only, short of strict (everything)
_READ_ONLY = {"yes": ("/usr", "/boot", "/efi"), "true": ("/usr", "/boot", "/efi"),
              "full": ("/usr", "/boot", "/efi", "/etc")}


def metrics_problem(textfile: str, unit: str, root: str = "/") -> str | None:
    """Why the daemon run by ``unit`` could not write ``textfile`` (as the config names it), or
    None when it could (or no such unit is installed: nothing to judge)."""
    settings = service_settings(unit, root)
    if settings is None:
        return None
    directory = os.path.dirname(textfile)
    sandbox = _sandboxed(directory, settings)
    if sandbox is not None:
        return (f"metrics.textfile: {unit} cannot write in {directory} ({sandbox}): no metrics "
                f"would reach Prometheus; write it in /var/lib/pokdeng-table-metrics and link it "
                "into node_exporter's textfile directory (docs/install.md §9)")
    inside = Path(root) / directory.lstrip("/")
    try:
        info = inside.stat()
    except FileNotFoundError:
        return (f"metrics.textfile: {directory} does not exist: {unit} could not write "
                f"{os.path.basename(textfile)} there (docs/install.md §9)")
    except OSError:
        return None  # not for this user to see: not judged
    if not stat.S_ISDIR(info.st_mode):
        return f"metrics.textfile: {directory} is not a directory"
    denied = _denied(info, settings, root)
    if denied is not None:
        return (f"metrics.textfile: {directory} is not writable by {denied}: no metrics would "
                "reach Prometheus; write it in /var/lib/pokdeng-table-metrics and link it into "
                "node_exporter's textfile directory (docs/install.md §9)")
    return None


def _last(settings: list[tuple[str, str, str]], key: str, default: str = "") -> str:
    values = [value for _, name, value in settings if name == key]
    return values[-1] if values else default


def _listed(settings: list[tuple[str, str, str]], key: str) -> list[str]:
    """A list setting: its words across lines, an empty value resetting it."""
    found: list[str] = []
    for _, name, value in settings:
        if name == key:
            found = found + value.split() if value else []
    return found


def _under(path: str, top: str) -> bool:
    top = top.rstrip("/") or "/"
    return path == top or path.startswith(top + "/") or top == "/"


def _sandboxed(directory: str, settings: list[tuple[str, str, str]]) -> str | None:
    """What in the unit's sandbox keeps ``directory`` read-only, or None."""
    protect = _last(settings, "ProtectSystem", "no").lower()
    writable = [path.lstrip("-+") for path in _listed(settings, "ReadWritePaths")]
    for key, base in _UNIT_DIRECTORIES.items():
        writable += [f"{base}/{name.split(':')[0]}" for name in _listed(settings, key)]
    if any(_under(directory, path) for path in writable):
        return None
    if protect == "strict":
        return "ProtectSystem=strict, and it is in none of its ReadWritePaths= or directories"
    for top in _READ_ONLY.get(protect, ()):
        if _under(directory, top):
            return f"ProtectSystem={protect} makes {top} read-only"
    return None


def _denied(info: os.stat_result, settings: list[tuple[str, str, str]],
            root: str) -> str | None:
    """The unit's user, when the directory's owner and mode do not let it create files there."""
    user = _last(settings, "User", "root")
    users = _table(root, "passwd")
    groups = _table(root, "group")
    if user not in users:
        return None  # a user not on this system yet (or DynamicUser=): not judged here
    uid, primary = int(users[user][2]), int(users[user][3])
    if uid == 0:
        return None
    group_names = [_last(settings, "Group")] + _listed(settings, "SupplementaryGroups")
    gids = {primary} | {int(groups[name][2]) for name in group_names if name in groups}
    gids |= {int(entry[2]) for entry in groups.values() if user in entry[3].split(",")}
    mode = info.st_mode
    if info.st_uid == uid:
        allowed = mode & stat.S_IWUSR and mode & stat.S_IXUSR
    elif info.st_gid in gids:
        allowed = mode & stat.S_IWGRP and mode & stat.S_IXGRP
    else:
        allowed = mode & stat.S_IWOTH and mode & stat.S_IXOTH
    if allowed:
        return None
    owner = next((name for name, entry in users.items() if int(entry[2]) == info.st_uid),
                 str(info.st_uid))
    group = next((name for name, entry in groups.items() if int(entry[2]) == info.st_gid),
                 str(info.st_gid))
    return (f"the unit's user {user} (it is {owner}:{group}, mode "
            f"{stat.S_IMODE(mode):04o})")


def _table(root: str, name: str) -> dict[str, list[str]]:
    """/etc/passwd or /etc/group of the system at ``root``: name -> its fields."""
    try:
        text = (Path(root) / "etc" / name).read_text(errors="replace")
    except OSError:
        return {}
    rows = [line.split(":") for line in text.splitlines() if line and not line.startswith("#")]
    return {row[0]: row for row in rows if len(row) >= 4}
