"""What the table machine knows of the software that runs it: the last ``software`` input.

The daemon journals a ``software`` input when it starts with a version or digest other than
the journal's last one; the machine keeps it (in checkpoints too), names it in every
``shoe_started`` and announces a change with ``software_changed`` (from, to). So the events
of a replay are the ones the table sent: they come from the journal, not from the code that
replays it.
"""

from __future__ import annotations

from typing import Any

from controller.table.inputs import Software


def identity(inp: Software) -> dict[str, str]:
    """The software as events and checkpoints carry it."""
    return inp.data()


def changed(previous: dict[str, str] | None, current: dict[str, str]) -> bool:
    """A change worth an event: there was a previous one, and it differs."""
    return previous is not None and previous != current


def shoe_started_data(software: dict[str, str] | None) -> dict[str, Any]:
    """``shoe_started``'s data: the software when the journal has said which, else nothing
    (tables journaled before software inputs existed replay as they did)."""
    return {"software": dict(software)} if software else {}
