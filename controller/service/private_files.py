"""The table's files are not for everyone: the journal and the events hold every card dealt.

The commands that create the journal (and its WAL/SHM), archives, the events file and state
files (``run``, ``demo``, ``journal …``) run under a umask that masks group write and every
access by others, so those files come out 0640 or tighter and directories 0750, whoever
starts the command and whatever umask their shell has.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable

PRIVATE_UMASK = 0o027

Command = Callable[[argparse.Namespace], int]


def creates_private_files(command: Command) -> Command:
    """``command`` run with ``PRIVATE_UMASK`` added to the process umask (never loosened)."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        current = os.umask(PRIVATE_UMASK)
        os.umask(current | PRIVATE_UMASK)
        return command(args)

    return run
