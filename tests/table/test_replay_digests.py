"""The machine's output, pinned: many whole shoes replay to the very events (and status views)
recorded in tests/table/data/replay_digests.json.

The digests were recorded once with the machine as it was, before its speed work; any change
to the machine must reproduce them byte for byte. The scripts are whole shoes from
``scriptgen`` in several table settings, the same shoes with disturbances mixed in (key
switch, supervisor actions, misreads, devices, backends, clock, faults, stray buttons and
cards), and the checked-in scripts of tests/scripts.

The disturbed scripts come from ``disturbed_script`` below: it is part of the recorded data,
so it must not change (a change means re-recording, which proves nothing). To record again,
on code whose events are known good: ``python tests/table/test_replay_digests.py --record``.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.rules.cards import new_shoe_cards
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import (
    Actor,
    BackendStatus,
    Button,
    CardScan,
    ClockReport,
    ControllerFault,
    CutCard,
    DeviceStatus,
    Input,
    Misread,
    Software,
    Supervisor,
    Switch,
    Tick,
    read_script,
)
from controller.table.machine import MachineSettings, TableMachine

ROOT = Path(__file__).resolve().parents[2]
DIGESTS = Path(__file__).with_name("data") / "replay_digests.json"
SCRIPTS = ROOT / "tests" / "scripts"
START = 1767225600.0  # 2026-01-01 UTC: event times as a live table writes them


def _canonical(obj: object) -> str:
    # Spelled out here, not the product's encoder: the encoder is part of what is checked.
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def disturbed_script(seed: int, settings: MachineSettings) -> list[Input]:
    """A whole shoe with about one disturbance in sixteen inputs (fixed by ``seed``).

    The supervisor clears what a disturbance left: before the shoe's next input, a paused
    table gets a resume, then a cancel_round, then the key turned back to RUN (a machine
    follows the script as it is written to know)."""
    rng = random.Random(seed * 7919 + 13)
    machine = TableMachine(settings)
    base = shoe_script(seed, settings.decks, settings.betting_seconds, settings.reveal,
                       start_at=START)
    cards = new_shoe_cards(settings.decks)
    alice = Actor("alice", 1001)
    out: list[Input] = []

    def machine_feed(inputs: list[Input]) -> None:
        for step in inputs:
            machine.handle(step)
            out.append(step)

    cut_seen = False
    for inp in base:
        cut_seen = cut_seen or isinstance(inp, CutCard)
        if rng.random() < 1 / 16:
            t = inp.at
            choice = rng.randrange(20)
            extra: list[Input]
            if choice < 3:
                extra = [Switch(t, "pause", True), Switch(t + 0.1, "pause", False)]
            elif choice < 5:
                extra = [Supervisor(t, "pause", by=alice if rng.random() < 0.5 else None),
                         Supervisor(t + 0.2, "resume", by=alice)]
            elif choice == 5 and isinstance(inp, CardScan):  # the shoe misreads this card
                machine_feed([Misread(t, "E12", "RFID tag not in registry",
                                      {"tag": "04A1B2C3"} if rng.random() < 0.5 else None),
                              Supervisor(t + 0.2, "enter_card", inp.card, alice)])
                continue
            elif choice == 5:
                extra = [Misread(t, "E12", "RFID tag not in registry"),
                         Supervisor(t + 0.3, "resume")]
            elif choice == 6:
                extra = [Misread(t), Supervisor(t + 0.2, "cancel_round", by=alice),
                         Supervisor(t + 0.3, "resume")]
            elif choice == 7:
                extra = [DeviceStatus(t, "shoe", False), Button(t + 0.1, "start_round"),
                         DeviceStatus(t + 0.2, "shoe", True), Supervisor(t + 0.3, "resume")]
            elif choice == 8:
                extra = [DeviceStatus(t, "panel", False), DeviceStatus(t + 0.1, "panel", True)]
            elif choice == 9:
                extra = [Switch(t, "pause", True), CardScan(t, rng.choice(cards)),
                         Switch(t + 0.1, "pause", False), Supervisor(t + 0.2, "resume")]
            elif choice == 10:
                extra = [Button(t, rng.choice(("new_shoe", "start_round", "reveal")))]
            elif choice == 11:
                extra = [BackendStatus(t, "http", False, "HTTP 503"),
                         BackendStatus(t + 0.1, "http", True, "delivered")]
            elif choice == 12:
                extra = [ClockReport(t, rng.choice(("synchronised", "not_synchronised")),
                                     16.0, rng.choice((None, -3600.0)))]
            elif choice == 13:
                extra = [ControllerFault(t, rng.choice(("journal_unwritable", "E99")),
                                         "disk full"),
                         Supervisor(t + 0.2, "resume", by=alice)]
            elif choice == 14:
                extra = [Supervisor(t, "drain", by=alice), Supervisor(t + 0.1, "resume")]
            elif choice == 15:
                extra = [Misread(t, "unknown_shoe_frame", "frame not known",
                                 {"frame": "W0x2C"}),
                         Supervisor(t + 0.2, "resume")]
            elif choice == 16:
                extra = [Supervisor(t, "reveal"), Supervisor(t, "enter_card", rng.choice(cards))]
            elif choice == 17:
                extra = [Tick(t + rng.uniform(0.0, 20.0))]
            elif choice == 18:
                extra = [Software(t, "0.1.0", "sha256:" + "ab" * 32, "record"),
                         Software(t, "0.2.0", "sha256:" + "cd" * 32, "sources")]
            elif cut_seen:  # a second cut card
                extra = [CutCard(t), Supervisor(t + 0.2, "resume")]
            else:
                extra = [Supervisor(t, "pause"), Supervisor(t + 0.2, "resume")]
            machine_feed(extra)
        for way_out in (Supervisor(inp.at, "resume"), Supervisor(inp.at, "cancel_round"),
                        Switch(inp.at, "pause", False)):
            if machine.hold == "paused":
                machine_feed([way_out])
        machine_feed([inp])
    return out


def cases() -> Iterator[tuple[str, MachineSettings, list[Input]]]:
    """Every recorded case: (name, settings, script)."""
    for seed in range(12):
        yield f"shoe-{seed}", MachineSettings(), shoe_script(seed, start_at=START)
    for seed in range(4):
        settings = MachineSettings(reveal="button", table_id="T7", betting_seconds=5.0)
        yield f"button-{seed}", settings, shoe_script(seed, 8, 5.0, "button", start_at=START)
    for decks in (1, 2, 6):
        settings = MachineSettings(decks=decks, betting_seconds=30.0)
        yield f"decks{decks}", settings, shoe_script(decks, decks, 30.0, cut_depth=0.5,
                                                      start_at=START, late_cards=False)
    for seed in range(16):
        settings = MachineSettings(reveal="button" if seed % 3 == 0 else "auto",
                                   betting_seconds=(5.0, 15.0, 40.0)[seed % 3])
        yield f"disturbed-{seed}", settings, disturbed_script(seed, settings)
    for path in sorted(SCRIPTS.glob("*.jsonl")):
        settings = MachineSettings()
        if path.with_suffix(".yaml").exists():  # shoe_seed2_button's table: section
            settings = MachineSettings(table_id="table-7", reveal="button")
        with path.open(encoding="utf-8") as handle:
            yield f"script-{path.stem}", settings, list(read_script(handle, str(path)))


def digest_of(settings: MachineSettings, script: list[Input]) -> dict[str, object]:
    """Digests of the event stream and of the status view after every input."""
    machine = TableMachine(settings)
    events = hashlib.sha256()
    views = hashlib.sha256()
    count = 0
    types: dict[str, int] = {}
    for inp in script:
        for event in machine.handle(inp):
            events.update(_canonical(event).encode("utf-8") + b"\n")
            count += 1
            types[event["type"]] = types.get(event["type"], 0) + 1
        views.update(_canonical([machine.status(), machine.next_deadline(), machine.hold])
                     .encode("utf-8") + b"\n")
    return {"inputs": len(script), "events": count, "types": dict(sorted(types.items())),
            "events_sha256": events.hexdigest(), "status_sha256": views.hexdigest()}


RECORDED: dict[str, dict[str, object]] = (
    json.loads(DIGESTS.read_text(encoding="utf-8")) if DIGESTS.exists() else {})
CASES = list(cases())


def test_every_case_is_recorded() -> None:
    assert sorted(RECORDED) == sorted(name for name, _, _ in CASES)


@pytest.mark.parametrize("name,settings,script", CASES, ids=[name for name, _, _ in CASES])
def test_replay_reproduces_the_recorded_events(name: str, settings: MachineSettings,
                                               script: list[Input]) -> None:
    assert digest_of(settings, script) == RECORDED[name]


def test_the_disturbed_shoes_reach_the_fault_paths() -> None:
    """The recorded cases are worth something only if they take the machine's side roads."""
    seen: set[str] = set()
    for figures in RECORDED.values():
        seen.update(figures["types"])  # type: ignore[arg-type]
    assert {"paused", "resumed", "input_rejected", "fault_detail", "round_cancelled",
            "device_status", "backend_unreachable", "clock_status", "software_changed",
            "drain_started", "drain_ended", "cut_card_drawn", "hand_revealed"} <= seen


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    DIGESTS.parent.mkdir(exist_ok=True)
    recorded = {name: digest_of(settings, script) for name, settings, script in cases()}
    DIGESTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"recorded {len(recorded)} cases in {DIGESTS}")
