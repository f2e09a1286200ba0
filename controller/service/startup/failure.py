"""Why the daemon cannot start, and the exit status that tells systemd and the supervisor."""

from __future__ import annotations

from controller.durability.delivery.held import DIGEST_DIFFERS

EX_DATAERR = 65               # sysexits.h: the journal is corrupt or disagrees with the rules
#: what the stop on a forked history tells the supervisor (docs/install.md has the whole of it)
FORK_ADVICE = ("Do not deal on this state directory: restore the newest copy of it; if no copy "
               "is as new as the backend, continue after the backend's last event with "
               "`pokdeng-table journal continue` (docs/install.md, \"A table whose history "
               "forked\")")
#: a backend's digest of an event this journal holds differs: the likelier cause is how it hashes
DIGEST_ADVICE = ("Restore nothing yet: check first how the backend hashes events "
                 "(docs/backend.md, \"Where the backend stands\"). Only if that is right: "
                 + FORK_ADVICE)


def fork_stop_message(problem: str) -> str:
    """What the stop on a backend's disagreeing position says, with the advice that fits."""
    if problem.startswith(DIGEST_DIFFERS):
        return f"a backend's position does not match this journal: {problem}. {DIGEST_ADVICE}"
    return f"this table's history has forked: {problem}. {FORK_ADVICE}"


class StartupError(Exception):
    """The daemon cannot start; ``exit_status`` says how (78 = configuration)."""

    def __init__(self, message: str, exit_status: int = 1):
        super().__init__(message)
        self.exit_status = exit_status
