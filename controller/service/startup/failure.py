"""Why the daemon cannot start, and the exit status that tells systemd and the supervisor."""

from __future__ import annotations

EX_DATAERR = 65               # sysexits.h: the journal is corrupt or disagrees with the rules
#: what the stop on a forked history tells the supervisor (docs/install.md has the whole of it)
FORK_ADVICE = ("Do not deal on this state directory: restore the newest copy of it; if no copy "
               "is as new as the backend, continue after the backend's last event with "
               "`pokdeng-table journal continue` (docs/install.md, \"A table whose history "
               "forked\")")


class StartupError(Exception):
    """The daemon cannot start; ``exit_status`` says how (78 = configuration)."""

    def __init__(self, message: str, exit_status: int = 1):
        super().__init__(message)
        self.exit_status = exit_status
