"""The RFID tags the open shoe has given, from the journal: a restarted daemon hands them to the
shoe driver, so a physical card that comes back after the restart is still a duplicate.

The tags ride on the journaled ``card`` and ``cut_card`` inputs (``tag``); the driver forgets
its tags when a shoe starts, so the set is every tag read since the newest ``shoe_started``.
Separate from recovery (``recovery.py``): it reads only that shoe's records, whatever
recovery starts from. The tags are as sealed as the cards: callers never log them.
"""

from __future__ import annotations

from controller.durability.journal import Journal


def open_shoe_tags(journal: Journal) -> list[str]:
    """Tags read since the newest ``shoe_started`` event, in the order they were read."""
    tags = []
    for entry in journal.entries_after_event("shoe_started"):
        tag = getattr(entry.input, "tag", None)
        if tag:
            tags.append(tag)
    return tags
