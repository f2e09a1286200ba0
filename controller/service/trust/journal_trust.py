"""Opening the table's journal only when it can be trusted, and marking where it reached.

Start-up opens the journal with the configured chain key (a keyed journal needs its own key;
a plain one refuses a key) and holds it to what is known outside it: the outbox's delivered
positions and the head file written at every shoe end (``durability/head_file.py``). A journal
that lost delivered records or is behind its head file must not run: it would issue the lost
event ids again with other content, and a backend that de-duplicates by id would drop them.
"""

from __future__ import annotations

import time

import structlog

from controller.durability.head_file import (
    HeadFileError,
    head_path,
    mark_of,
    tail_problem,
    write_head,
)
from controller.durability.journal import Journal, JournalKeyError
from controller.service.config.errors import EX_CONFIG
from controller.service.config.settings import Config
from controller.service.trust.journal_key import load_journal_key
from controller.transports import TransportConfigError

log = structlog.get_logger("pokdeng.journal")

EX_DATAERR = 65  # sysexits.h: the journal disagrees with what was delivered or marked


class JournalUntrusted(Exception):
    """The journal must not be run on; ``exit_status`` is 78 (key configuration) or 65."""

    def __init__(self, message: str, exit_status: int):
        super().__init__(message)
        self.exit_status = exit_status


def open_trusted_journal(config: Config) -> Journal:
    """The table's journal, opened with its key and checked against its head file and the
    delivered positions; JournalUntrusted when it must not run. Other JournalErrors pass."""
    try:
        key = load_journal_key(config)
    except TransportConfigError as exc:
        raise JournalUntrusted(f"configuration: {exc}", EX_CONFIG) from None
    try:
        journal = Journal(config.journal_path, key)
    except JournalKeyError as exc:
        raise JournalUntrusted(str(exc), EX_CONFIG) from None
    try:
        problem = tail_problem(journal.path, journal.chain)
    except HeadFileError as exc:
        problem = str(exc)
    except Exception:
        journal.close()
        raise
    if problem is not None:
        journal.close()
        raise JournalUntrusted(f"it is not the journal this table wrote: {problem}",
                               EX_DATAERR)
    return journal


def mark_head(journal: Journal) -> None:
    """Write the head file at where the journal stands now; a failure is logged, the table
    plays on (the journal itself is intact; only the check at the next start is weaker)."""
    path = head_path(journal.path)
    try:
        write_head(path, mark_of(journal, time.time()), journal.chain)
    except OSError as exc:
        log.error("cannot write the journal head file", file=str(path), error=str(exc))
