"""Rebuild the table from its journal: replay every input through a fresh table machine.

The machine is pure and deterministic, so replaying the journaled inputs must give exactly
the journaled events (same seq, same id, same body). Each recomputed event is checked against
the stored one; any difference means the journal and the rules in this build disagree, and
the table must not carry on as if nothing happened. Once older shoes are archived
(controller/durability/archive.py) the replay starts from the checkpoint stored at the archive cut.
Nothing is appended here: the caller decides what happens next (for example a tick at the
current time, which closes a betting window that ran out while the process was down).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from controller.durability.journal import (
    Entry,
    Journal,
    JournalCorrupt,
    JournalError,
    canonical_json,
)


class RecoveryError(JournalError):
    """Replaying the journal did not reproduce it; the message says where and how."""


def _first_difference(expected: Any, got: Any, path: str = "") -> str:
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in sorted(set(expected) | set(got)):
            if key not in got:
                return f"{path}{key}: journaled, not recomputed"
            if key not in expected:
                return f"{path}{key}: recomputed, not in the journal"
            if canonical_json(expected[key]) != canonical_json(got[key]):
                return _first_difference(expected[key], got[key], f"{path}{key}.")
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        for i, (a, b) in enumerate(zip(expected, got)):
            if canonical_json(a) != canonical_json(b):
                return _first_difference(a, b, f"{path}{i}.")
    return f"{path.rstrip('.') or 'value'}: journal has {canonical_json(expected)[:120]}, " \
           f"replay gives {canonical_json(got)[:120]}"


#: the first differing field of two events (also `journal verify --against`)
first_difference = _first_difference


def recover(journal: Journal, settings: Any, *, verify: bool = True,
            machine_factory: Callable[[Any], Any] | None = None) -> Any:
    """A table machine in the state the journal leaves it in.

    ``verify`` checks the whole hash chain first (JournalCorrupt names the bad record).
    Raises RecoveryError at the first input whose recomputed events differ from the journal.
    """
    if machine_factory is None:
        from controller.table.machine import TableMachine
        machine_factory = TableMachine
    if verify:
        result = journal.verify()
        if not result.ok:
            raise JournalCorrupt(str(journal.path), result)
    base = journal.base()
    if base is None:
        machine = machine_factory(settings)
    else:
        # Older shoes were archived: start from the checkpoint taken at the archive cut.
        from_checkpoint = getattr(machine_factory, "from_checkpoint", None)
        if from_checkpoint is None:
            raise RecoveryError(f"{journal.path}: records 1..{base.records} are archived and "
                                f"{machine_factory!r} cannot start from a checkpoint")
        try:
            machine = from_checkpoint(settings, base.checkpoint)
        except (ValueError, KeyError, TypeError) as exc:
            raise RecoveryError(f"{journal.path}: the checkpoint at archived record "
                                f"{base.records} does not load: {exc}") from None
    replay(machine, journal.entries())
    return machine


def replay(machine: Any, entries: Iterable[Entry]) -> None:
    """Feed each journaled input to ``machine`` and compare what it gives with the journal.

    Raises RecoveryError at the first input that fails or whose recomputed events differ from
    the journaled ones; the message names the record and kinds, never a card value.
    """
    for entry in entries:
        try:
            events = machine.handle(entry.input)
        except Exception as exc:
            # The input and the exception's text may name a card of a round whose betting is
            # open: this message reaches the log at ERROR, so it names the record and kinds.
            raise RecoveryError(
                f"record {entry.record}: replaying its {entry.input.kind} input (at "
                f"{entry.input.at}) failed with {type(exc).__name__}; `pokdeng-table journal "
                f"export` shows the record"
            ) from exc
        if canonical_json(events) == canonical_json(entry.events):
            continue
        journaled = [e.get("seq") for e in entry.events]
        recomputed = [e.get("seq") if isinstance(e, dict) else None for e in events]
        if len(events) != len(entry.events):
            detail = (f"the journal has {len(entry.events)} event(s) (seq {journaled}), "
                      f"replay gives {len(events)} "
                      f"({', '.join(str(e.get('type')) for e in events) or 'none'})")
        else:
            index = next(i for i, (a, b) in enumerate(zip(entry.events, events))
                         if canonical_json(a) != canonical_json(b))
            detail = f"event seq {journaled[index]}: " + \
                _first_difference(entry.events[index], events[index])
        raise RecoveryError(
            f"record {entry.record} ({entry.input.kind} at {entry.input.at}): the journal and "
            f"the rules disagree: {detail}; recomputed seqs {recomputed}")
