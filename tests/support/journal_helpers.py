"""Helpers shared by the journal/outbox/transport tests: envelope-shaped events, sample inputs."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from controller.rules.cards import parse_card
from controller.table.inputs import Button, CardScan, Input, Tick

TABLE = "T7"


def event(seq: int, type_: str = "card_dealt", **data: Any) -> dict[str, Any]:
    """An event in the event envelope (docs/contracts.md); the journal does not check contents."""
    return {"v": 1, "id": f"{TABLE}:{seq}", "table": TABLE, "seq": seq,
            "time": f"2026-11-29T18:00:{seq % 60:02d}.000Z", "type": type_,
            "shoe": 1, "round": 1 + seq // 20, "data": data or {"index": seq % 13,
                                                                "target": "P1"}}


def sample_inputs(count: int) -> list[Input]:
    """A varied run of inputs: buttons, cards, ticks."""
    cards = ["AS", "7H", "TD", "KC", "2S", "9H"]
    out: list[Input] = []
    for i in range(count):
        at = float(i)
        if i % 5 == 0:
            out.append(Button(at, "start_round"))
        elif i % 5 == 4:
            out.append(Tick(at))
        else:
            out.append(CardScan(at, parse_card(cards[i % len(cards)])))
    return out


def fill(journal, count: int, events_per_input: int = 2) -> list[dict[str, Any]]:
    """Append ``count`` inputs with events; return all events written."""
    written = []
    seq = journal.last_event_seq()
    for i, inp in enumerate(sample_inputs(count)):
        evs = []
        for _ in range(events_per_input if i % 3 else 0):  # some inputs produce no events
            seq += 1
            evs.append(event(seq))
        journal.append(inp, evs)
        written.extend(evs)
    return written


def wal_frames_end(wal: Path) -> int:
    """Where the WAL's frames of its current cycle end: the daemon keeps the file allocated
    past them (zeros; wal_checkpoints.py), so its size is no measure of what it holds. A frame
    of this cycle carries the header's two salts (SQLite's WAL format)."""
    data = wal.read_bytes()
    if len(data) < 32:
        return 0
    page_size = struct.unpack(">I", data[8:12])[0]
    salts = data[16:24]
    end, frame = 32, 24 + page_size
    while end + frame <= len(data) and data[end + 8:end + 16] == salts:
        end += frame
    return end
